"""Planted leaks in the storage forms the gate once missed with every held-out label recoverable
(issue 28): a second table with its columns reordered and its numbers written another way, a base64
copy, a {row: label} JSON, a notebook's output cells printing the table or the label list. Each
form is planted next to arex's own train and test files, which stay unflagged."""

from __future__ import annotations

import base64
import json
import math
import re

import pandas as pd
import pytest
from test_leak_scan import Split, make_table


def leaking(report: dict, root) -> dict[str, int]:
    """{file under `root`: labels recovered} (a table inside a file is named after the file)."""
    return {re.split(r"[:\[]", leak["path"][len(str(root)) + 1 :])[0]: leak["recovered"] for leak in report["leaks"]}


def small_int_table(rows: int = 240) -> pd.DataFrame:
    """Eight features of small integers and a 4-class label (the shape of digits or survey data): no
    single value identifies a row, only runs of them in column order, or sets of them in any order."""
    data = {f"x{j}": [(i * (7 + 2 * j) + j * j + (i // (3 + j))) % (5 + j) for i in range(rows)] for j in range(8)}
    data["label"] = [(i * 5 + i // 7) % 4 for i in range(rows)]
    return pd.DataFrame(data)


@pytest.fixture(scope="module")
def ints() -> Split:
    return Split(small_int_table())


@pytest.fixture(scope="module")
def floats() -> Split:
    return Split(make_table())


def _notebook(outputs: list[dict]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "markdown", "metadata": {}, "source": ["# Exploration\n", "Load the data.\n"]},
                {
                    "cell_type": "code",
                    "execution_count": 3,
                    "metadata": {},
                    "outputs": outputs,
                    "source": ["import pandas as pd\n", "df = pd.read_csv('data.csv')\n", "df"],
                },
            ],
            "metadata": {"kernelspec": {"name": "python3"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


def _stream(text: str) -> dict:
    return {"name": "stdout", "output_type": "stream", "text": text.splitlines(keepends=True)}


def _result(plain: str, html: str | None = None) -> dict:
    data = {"text/plain": plain.splitlines(keepends=True)}
    if html is not None:
        data["text/html"] = html.splitlines(keepends=True)
    return {"data": data, "execution_count": 3, "metadata": {}, "output_type": "execute_result"}


def reordered(frame: pd.DataFrame) -> bytes:
    """Columns reversed (the label stays last), rows shuffled (their place no longer tells them)."""
    columns = list(frame.columns)
    shuffled = frame.sample(frac=1.0, random_state=3)
    return shuffled[columns[::-1][1:] + columns[-1:]].to_csv(index=False, float_format="%.4f").encode()


def decimal_comma(frame: pd.DataFrame) -> bytes:
    columns = list(frame.columns)
    shuffled = frame.sample(frac=1.0, random_state=5)
    order = columns[2:] + columns[:2]
    return shuffled[order].to_csv(index=False, sep=";", decimal=",", float_format="%.6f").encode()


FORMS = {
    "reordered.csv": reordered,
    "european.csv": decimal_comma,
    "table.b64": lambda f: base64.b64encode(f.to_csv(index=False).encode()),
    "wrapped.txt": lambda f: base64.encodebytes(f.to_csv(sep="\t", index=False).encode()),
    "embedded.py": lambda f: f"DATA = {base64.b64encode(f.to_csv(index=False).encode()).decode()!r}\n".encode(),
    "labels.json": lambda f: json.dumps({str(i): int(y) for i, y in enumerate(f["label"])}).encode(),
    "printed.ipynb": lambda f: _notebook([_stream(f.to_string())]).encode(),
    "label_list.ipynb": lambda f: _notebook([_stream(str([int(y) for y in f["label"]]) + "\n")]).encode(),
    "numpy_list.ipynb": lambda f: _notebook(
        [_stream(" ".join(str(int(y)) for y in f["label"]).join("[]") + "\n")]
    ).encode(),
    "html.ipynb": lambda f: _notebook([_result("<frame>", f.to_html())]).encode(),
}


@pytest.mark.parametrize("table", ["ints", "floats"])
@pytest.mark.parametrize("name", list(FORMS))
def test_every_storage_form_of_the_labels_is_found(tmp_path, request, table, name):
    split = request.getfixturevalue(table)
    split.arex_files(tmp_path / "data")
    (tmp_path / name).write_bytes(FORMS[name](split.frame))
    report = split.scan(tmp_path)
    assert report["unreadable"] == []
    assert leaking(report, tmp_path) == {name: len(split.probe.rows)}, report["leaks"]


def test_keys_in_any_column_order_are_unique_among_the_table_rows(ints):
    table = [[leak_value for leak_value in map(str, row)] for row in ints.frame.drop(columns=["label"]).to_numpy()]
    with_sets = [row for row in ints.probe.rows if row.sets]
    assert len(with_sets) == len(ints.probe.rows)
    for row in with_sets:
        need = pd.Series(row.sets[0]).value_counts().to_dict()
        holders = [t for t in table if all(t.count(v) >= n for v, n in need.items())]
        assert holders == [row.features], row


def test_a_reordered_copy_of_training_rows_only_is_no_leak(tmp_path, ints):
    """Keys in any order are still keys of held-out rows: the training rows reordered match none."""
    train = pd.DataFrame(ints.train).drop(columns=["id"])
    (tmp_path / "train_reordered.csv").write_bytes(reordered(train))
    (tmp_path / "notes.ipynb").write_text(_notebook([_stream(train.head(30).to_string())]))
    report = ints.scan(tmp_path)
    assert report["leaks"] == [] and report["unreadable"] == [], report


def test_base64_that_is_no_table_is_passed_over(tmp_path, floats):
    """A PNG in a notebook, a certificate, a hex digest: decoded, nothing to read, no finding."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode()
    (tmp_path / "plot.ipynb").write_text(_notebook([{"data": {"image/png": png}, "output_type": "display_data"}]))
    (tmp_path / "cert.pem").write_text(
        "-----BEGIN CERTIFICATE-----\n"
        + base64.encodebytes(bytes(range(200)) * 3).decode()
        + "-----END CERTIFICATE-----\n"
    )
    (tmp_path / "digest.txt").write_text("%x\n" % math.factorial(60))
    report = floats.scan(tmp_path)
    assert report["leaks"] == [] and report["unreadable"] == [], report
