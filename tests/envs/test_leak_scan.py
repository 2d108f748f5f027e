"""The ML leak gate reads content, not names: the scanner finds held-out labels in any format,
encoding or name (host files), stays quiet on arex's own train and test files, and the gate rejects
real repositories that keep a copy of the labels (Docker, through build_envs)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import math
import pickle
import random
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from repo_paths import REPO

from arex.envs import leak_scan
from arex.envs.leak_probe import FoundLeak, LeakReport, build_probe, describe
from arex.envs.ml_data import csv_bytes, split_table
from arex.hashing import text_sha256
from arex.specs import MLSpec


# -- a labelled table, split as arex splits it -----------------------------------------------------
def make_table(rows: int = 200, ids: bool = False, hint: bool = False, duplicates: int = 0) -> pd.DataFrame:
    """Distinct floats, a low-cardinality int, accented text and a 3-class label; `ids` gives the table
    its own string ids, `hint` a feature equal to the label 95% of the time, `duplicates` copies of
    the first rows' features and labels at the end (real data has them)."""
    data = {
        "f1": [round(math.sin(i * 1.7) * 100 + i / 7, 6) for i in range(rows)],
        "f2": [round(math.cos(i * 0.37) * 10 + i / 1000, 5) for i in range(rows)],
        "n": [i % 5 for i in range(rows)],
        "txt": [f"Señal nº {i} crème brûlée" for i in range(rows)],
        "label": [(i * 7) % 3 for i in range(rows)],
    }
    frame = pd.DataFrame(data)
    if hint:
        frame.insert(3, "hint", [lab if i % 20 else (lab + 1) % 3 for i, lab in enumerate(frame["label"])])
    if duplicates:
        frame = pd.concat([frame, frame.iloc[:duplicates]], ignore_index=True)
    if ids:
        frame.insert(0, "id", [f"p{i:05d}" for i in range(len(frame))])
    return frame


class Split:
    """The table as arex sees it: columns, train rows, held-out rows, and the probe the gate sends."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        spec = MLSpec.model_validate(
            {
                "id": "t",
                "title": "t",
                "run": "true",
                "metric": {"name": "accuracy", "direction": "maximize"},
                "data": {"table": "data/full.csv", "target": "label", "split": {"seed": 4, "stratify": True}},
            }
        )
        self.columns, self.train, public, private = split_table(spec, frame.to_csv(index=False))
        self.held_out = public + private
        self.probe = build_probe(spec.data, self.columns, self.train, self.held_out)
        self.held_ids = {r["id"] for r in self.held_out}

    def arex_files(self, folder: Path, train_name: str = "train.csv") -> None:
        """The train and test files exactly as arex writes them into the workspace."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / train_name).write_bytes(csv_bytes(self.columns, self.train))
        test = sorted(self.held_out, key=lambda r: text_sha256(r["id"]))
        (folder / "test.csv").write_bytes(csv_bytes([c for c in self.columns if c != "label"], test))

    def scan(self, root: Path) -> dict:
        return leak_scan.scan(json.loads(self.probe.model_dump_json()), [str(root)])


def leaking(report: dict) -> dict[str, int]:
    return {Path(leak["path"].split(":")[0]).name: leak["recovered"] for leak in report["leaks"]}


@pytest.fixture(scope="module")
def split() -> Split:
    return Split(make_table())


# -- every format, any name ------------------------------------------------------------------------
def _xlsx(frame: pd.DataFrame) -> bytes:
    """A minimal workbook as Excel writes it (shared strings for the header, numbers inline)."""

    def col(i: int) -> str:
        return chr(65 + i) if i < 26 else chr(64 + i // 26) + chr(65 + i % 26)

    header = list(frame.columns)
    strings = "".join(f"<si><t>{h}</t></si>" for h in header)
    rows = ['<row r="1">' + "".join(f'<c r="{col(j)}1" t="s"><v>{j}</v></c>' for j in range(len(header))) + "</row>"]
    for i, values in enumerate(frame.itertuples(index=False), start=2):
        cells = "".join(
            f'<c r="{col(j)}{i}" t="inlineStr"><is><t>{v}</t></is></c>'
            if isinstance(v, str)
            else f'<c r="{col(j)}{i}"><v>{v}</v></c>'
            for j, v in enumerate(values)
        )
        rows.append(f'<row r="{i}">{cells}</row>')
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", f"<workbook {ns}><sheets><sheet name='a' sheetId='1'/></sheets></workbook>")
        z.writestr("xl/sharedStrings.xml", f"<sst {ns}>{strings}</sst>")
        z.writestr("xl/worksheets/sheet1.xml", f"<worksheet {ns}><sheetData>{''.join(rows)}</sheetData></worksheet>")
    return out.getvalue()


def _zip(name: str, blob: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, blob)
    return out.getvalue()


def _table(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


WRITERS = {
    "backup": lambda f: f.to_csv(index=False).encode(),  # no extension
    "copy.tsv": lambda f: f.to_csv(sep="\t", index=False).encode(),
    "rows.json": lambda f: f.to_json(orient="records").encode(),
    "columns.json": lambda f: f.to_json(orient="columns").encode(),
    "rows.jsonl": lambda f: f.to_json(orient="records", lines=True).encode(),
    "t.parquet": lambda f: (lambda b: (pq.write_table(_table(f), b), b.getvalue())[1])(io.BytesIO()),
    "t.feather": lambda f: (lambda b: (feather.write_feather(_table(f), b), b.getvalue())[1])(io.BytesIO()),
    "sheet.xlsx": _xlsx,
    "frame.pkl": lambda f: pickle.dumps(f),
    "bundle.pickle": lambda f: pickle.dumps({"data": f[["f1", "f2", "n"]].to_numpy(), "target": f["label"].to_numpy()}),
    "arr.npy": lambda f: (
        lambda b: (np.save(b, f[["f1", "f2", "n", "label"]].to_numpy(dtype=np.float32)), b.getvalue())[1]
    )(io.BytesIO()),
    "xy.npz": lambda f: (
        lambda b: (np.savez(b, X=f[["f1", "f2"]].to_numpy(), y=f["label"].to_numpy()), b.getvalue())[1]
    )(io.BytesIO()),
    "t.csv.gz": lambda f: gzip.compress(f.to_csv(index=False).encode()),
    "t.bz2": lambda f: bz2.compress(f.to_csv(sep=";", index=False).encode()),
    "t.xz": lambda f: lzma.compress(pickle.dumps(f)),
    "archive.zip": lambda f: _zip("inner/table.txt", f.to_csv(index=False).encode()),
    "latin1.csv": lambda f: f[["txt", "label"]].to_csv(index=False).encode("latin-1"),
    "utf16.txt": lambda f: f[["txt", "label"]].to_csv(sep="\t", index=False).encode("utf-16"),
    "notes.md": lambda f: (
        "# results\n\n" + "".join(f"- row {r.f1}: class {r.label}\n" for r in f.itertuples())
    ).encode(),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_copy_of_the_labels_is_found_in_any_format_and_name(tmp_path, split, name):
    split.arex_files(tmp_path / "data")
    (tmp_path / name).write_bytes(WRITERS[name](split.frame))
    report = split.scan(tmp_path)
    assert report["unreadable"] == []
    assert leaking(report) == {name: len(split.probe.rows)}, report["leaks"]


def test_partial_copies_and_id_label_files(tmp_path):
    """Labels with the table's own ids and nothing else; labels listed in table order (arex's ids are
    row numbers); a copy of a quarter of the held-out rows."""
    split = Split(make_table(ids=True))
    held = [r for r in split.held_out]
    (tmp_path / "answers").write_text("key\tclass\n" + "".join(f"{r['id']}\t{r['label']}\n" for r in held))
    plain = Split(make_table())
    (tmp_path / "y.txt").write_text("".join(f"{y}\n" for y in plain.frame["label"]))
    quarter = split.frame[split.frame["id"].isin([r["id"] for r in held[: len(held) // 4 + 1]])]
    (tmp_path / "sample.csv").write_text(quarter.drop(columns=["id"]).to_csv(index=False))
    with_ids = split.scan(tmp_path)
    assert leaking(with_ids) == {"answers": len(split.probe.rows), "sample.csv": len(held) // 4 + 1}, with_ids["leaks"]
    assert "by their id" in next(leak for leak in with_ids["leaks"] if leak["path"].endswith("answers"))["how"]
    by_position = plain.scan(tmp_path)
    assert leaking(by_position)["y.txt"] == len(plain.probe.rows)


# -- no false positives ----------------------------------------------------------------------------
def test_arex_files_and_legitimate_data_are_not_flagged(tmp_path):
    """The train file (also under the table's name), the test file, a feature that mostly equals the
    label, duplicate rows whose labels the training file holds legitimately, a constant submission."""
    split = Split(make_table(hint=True, duplicates=12))
    assert split.probe.duplicates > 0 and len(split.probe.rows) == len(split.held_out) - split.probe.duplicates
    split.arex_files(tmp_path / "data")
    split.arex_files(tmp_path / "other", train_name="full.csv")
    (tmp_path / "sample_submission.csv").write_text(
        "id,prediction\n" + "".join(f"{r['id']},0\n" for r in split.held_out)
    )
    train = pd.DataFrame(split.train)
    (tmp_path / "train.pkl").write_bytes(pickle.dumps(train))
    (tmp_path / "train.parquet").write_bytes(WRITERS["t.parquet"](train))
    report = split.scan(tmp_path)
    assert report["leaks"] == [] and report["unreadable"] == []
    assert report["files"] == 7 and report["records"] > 2 * len(split.train)


def lookup_table_text(seed: int) -> str:
    """A Python module holding a frequency table: rows of the numbers 0-5, mostly 0 and 3, some
    rows nearly all 0 (the shape of chardet's tables, vendored in pip in every image)."""
    rng = random.Random(seed)
    lines = [
        "#" * 24 + " BEGIN LICENSE BLOCK " + "#" * 24,
        "# a character-frequency table, under its license",
        "#" * 25 + " END LICENSE BLOCK " + "#" * 25,
        "",
        "context = (",
    ]
    for i in range(83):
        if i % 8 == 0:
            values = [rng.choice([0] * 40 + [1, 2]) for _ in range(83)]
        else:
            values = [
                0 if (j < 10 and j % 2 == 0) else rng.choice([0] * 7 + [3] * 5 + [4] * 3 + [1] * 2 + [2] * 2 + [5])
                for j in range(83)
            ]
        lines.append("    (" + ", ".join(map(str, values)) + "),")
    return "\n".join(lines + [")"]) + "\n"


@pytest.mark.parametrize("seed", [0, 1])
def test_small_numbers_in_unrelated_data_are_not_a_leak(tmp_path, seed):
    """Found when the gate scanned a real image: a table of small integers whose label is a function
    of its features (`x1 + x2 > 11`). Pairs of small numbers occur in a frequency table by chance,
    nearly always pairs of rows labelled 0, and the table is full of 0s; measured against the
    majority-label rate, that agreement read as 11 of 44 held-out labels recovered. The null rate
    is now each column's own (P(label) x P(column = label) over the matched records)."""
    rows = [((i * 37) % 11, (i * 53) % 13) for i in range(160)]
    text = "x1,x2,label\n" + "".join(
        f"{a},{b},{int(a + b > 11) if i % 17 else int(a + b <= 11)}\n" for i, (a, b) in enumerate(rows)
    )
    spec = MLSpec.model_validate(
        {
            "id": "t",
            "title": "t",
            "run": "true",
            "metric": {"name": "accuracy", "direction": "maximize"},
            "data": {
                "table": "data/table.csv",
                "target": "label",
                "split": {"seed": 3, "test_fraction": 0.3, "stratify": True},
            },
        }
    )
    columns, train, public, private = split_table(spec, text)
    probe = json.loads(build_probe(spec.data, columns, train, public + private).model_dump_json())
    (tmp_path / "freq.py").write_text(lookup_table_text(seed))
    assert leak_scan.scan(probe, [str(tmp_path)])["leaks"] == []
    (tmp_path / "copy.csv").write_bytes(csv_bytes(columns, public + private))  # a real copy is still found
    assert [leak["recovered"] for leak in leak_scan.scan(probe, [str(tmp_path)])["leaks"]] == [len(probe["rows"])]


def test_the_probe_excludes_duplicates_and_keys_are_unique(split):
    table = [
        [leak_scan.norm(r[c]) for c in split.columns if c not in ("id", "label")] for r in split.train + split.held_out
    ]
    for row in split.probe.rows:
        # arex made the ids: they are positions
        assert row.keys and row.pos is not None and row.id in (str(row.pos), None)
        for key in row.keys:
            holders = [t for t in table if any(t[j : j + len(key)] == key for j in range(len(t)))]
            assert holders == [row.features]


def test_normalisation_compares_numbers_and_text_as_a_reader_would():
    n = leak_scan.norm
    assert n(1) == n(1.0) == n("1") == n(" 1.00 ") == n(np.int64(1)) == n(True) == "1"
    assert n(0.1) == n(float(np.float32(0.1))) == n("1e-1") == n(np.float32(0.1))
    assert n("  Crème  Brûlée ") == n("crème brûlée") and n(None) == n(float("nan")) == n("NaN") == ""


# -- unreadable files fail the gate, named ---------------------------------------------------------
def test_a_file_this_image_cannot_read_is_reported(tmp_path, split, monkeypatch):
    module = tmp_path / "mods" / "privmod.py"
    module.parent.mkdir()
    module.write_text("class Holder:\n    def __init__(self, frame):\n        self.frame = frame\n")
    monkeypatch.syspath_prepend(str(module.parent))
    import privmod

    (tmp_path / "scan").mkdir()
    (tmp_path / "scan" / "model.bin").write_bytes(pickle.dumps(privmod.Holder(split.frame)))
    (tmp_path / "scan" / "t.parquet").write_bytes(WRITERS["t.parquet"](split.frame))
    monkeypatch.delitem(sys.modules, "privmod")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(module.parent)])
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an image without a parquet reader
    report = split.scan(tmp_path / "scan")
    reasons = {Path(u["path"]).name: u["reason"] for u in report["unreadable"]}
    assert set(reasons) == {"model.bin", "t.parquet"}, report
    assert "privmod.Holder" in reasons["model.bin"] and "pyarrow is not installed" in reasons["t.parquet"]
    problems, _ = describe(LeakReport.model_validate(report), split.probe)
    assert all(
        "remove it with the source YAML's `remove:` list, or add a reader such as pyarrow to the requirements" in p
        for p in problems
    )


def test_the_scanner_skips_its_own_probe_and_describes_leaks(tmp_path, split):
    root = tmp_path / "root"
    (root / ".arex-leak").mkdir(parents=True)
    probe_file = root / ".arex-leak" / "probe.json"
    probe_file.write_text(split.probe.model_dump_json())
    (root / "keep.tsv").write_bytes(WRITERS["copy.tsv"](split.frame))
    assert leak_scan.main([str(probe_file), str(root / ".arex-leak" / "report.json"), str(root)]) == 0
    report = LeakReport.model_validate_json((root / ".arex-leak" / "report.json").read_text())
    assert [Path(leak.path).name for leak in report.leaks] == ["keep.tsv"]
    problems, scanned = describe(report, split.probe)
    m = len(split.probe.rows)
    assert problems == [
        f"{root / 'keep.tsv'} recovers {m} of {m} held-out labels"
        " (column 5 ('label'); rows found by their feature values)"
    ]
    assert f"for {m} held-out rows" in scanned
    assert FoundLeak.model_fields.keys() >= {"path", "recovered", "of"}


def test_scanner_needs_only_the_standard_library(tmp_path):
    """It is copied into images that may lack pandas and numpy: importing it must not need them."""
    script = textwrap.dedent(f"""
        import sys
        sys.modules.update({{m: None for m in ("numpy", "pandas", "pyarrow", "joblib", "pydantic")}})
        sys.path.insert(0, {str(Path(leak_scan.__file__).parent)!r})
        import leak_scan
        print(leak_scan.norm("1.0"))
    """)
    import subprocess

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr


# -- real repositories through build_envs (Docker) ---------------------------------------------------
TRAIN = """
import csv
rows = list(csv.DictReader(open("{train}")))
mean = sum(float(r["y"]) for r in rows) / len(rows)
slope = sum((float(r["x"]) - 50) * (float(r["y"]) - mean) for r in rows) / sum((float(r["x"]) - 50) ** 2 for r in rows)
with open("submission.csv", "w") as f:
    f.write("id,prediction\\n")
    for r in csv.DictReader(open("data/test.csv")):
        f.write(f"{{r['id']}},{{mean + slope * (float(r['x']) - 50) + float(r['w'])}}\\n")
"""
TABLE = "x,w,y\n" + "".join(
    f"{x},{(x * 37) % 11 / 10},{3 * x + (x * 7919) % 13 + (x * 37) % 11 / 10}\n" for x in range(120)
)


def leak_repo(path: Path, files: dict[str, bytes], spec: dict | None = None) -> str:
    """A real git repository: the labelled table, a training script, the spec, and `files`; → its commit."""
    import git
    import yaml

    path.mkdir(parents=True)
    repo = git.Repo.init(path, initial_branch="main")
    repo.config_writer().set_value("user", "name", "t").set_value("user", "email", "t@t").release()
    spec = {
        "id": path.name,
        "title": "t",
        "run": "python3 train.py",
        "metric": {"name": "rmse", "direction": "minimize"},
        "time_limit_s": 30,
        "data": {"table": "data/full.csv", "target": "y"},
        "mutation": {"file": "train.py", "find": "mean + slope", "replace": "0 * slope"},
        **(spec or {}),
    }
    train_file = spec["data"].get("train_file", "data/train.csv")
    contents = {
        "data/full.csv": TABLE.encode(),
        "README.md": b"Predict y.\n",
        "arex.yaml": yaml.safe_dump(spec).encode(),
        "train.py": TRAIN.format(train=train_file).encode(),
        **files,
    }
    for rel, blob in contents.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(blob)
    repo.index.add(list(contents))
    return repo.index.commit("task").hexsha


def _made_in_image(image: str, script: str) -> dict[str, bytes]:
    """Files written by `script` inside `image` (so a pickle matches the image's own pandas)."""
    from arex.sandbox import SandboxConfig, make_sandbox

    with make_sandbox(SandboxConfig(image=image), "leak-fixture") as box:
        box.write_file("make.py", script)
        result = box.exec("python3 make.py", timeout=120)
        assert result.ok, result.output
        return {rel: box.read_file(rel) for rel in result.stdout.split()}


@pytest.mark.docker
def test_repositories_keeping_labels_are_rejected_and_a_clean_one_accepted(tmp_path, monkeypatch):
    import yaml

    from arex.envs.build import build_envs
    from arex.envs.ml_images import deps_image
    from arex.sandbox import SandboxConfig

    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    requirements = yaml.safe_load((REPO / "envs" / "ml-digits" / "arex.yaml").read_text())["requirements"]
    spec = MLSpec.model_validate(
        {
            "id": "p",
            "title": "t",
            "run": "true",
            "metric": {"name": "rmse", "direction": "minimize"},
            "data": {"table": "t", "target": "y"},
            "requirements": requirements,
        }
    )
    deps = deps_image(spec, tmp_path, SandboxConfig().image)
    pickled = _made_in_image(
        deps,
        textwrap.dedent(f"""
        import io, joblib, pandas as pd
        frame = pd.read_csv(io.StringIO({TABLE!r}))
        frame.to_pickle("frame_cache")
        joblib.dump((frame[["x", "w"]].to_numpy(), frame["y"].to_numpy()), "xy.joblib")
        print("frame_cache xy.joblib")
    """),
    )
    snapshot = gzip.compress(TABLE.replace(",", "\t").encode())
    repos = {
        "second-copy": ({"notes/snapshot": snapshot}, None),
        "pickled": (
            {"models/frame_cache": pickled["frame_cache"], "models/xy.joblib": pickled["xy.joblib"]},
            {"requirements": requirements},
        ),
        "named-like-table": ({}, {"data": {"table": "data/full.csv", "target": "y", "train_file": "train/full.csv"}}),
    }
    sources = []
    for name, (files, overrides) in repos.items():
        commit = leak_repo(tmp_path / name, files, overrides)
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"repo": f"file://{tmp_path / name}", "commit": commit}))
        sources.append(tmp_path / f"{name}.yaml")
    reports = {Path(r.source).stem: r for r in build_envs(sources, tmp_path / "out", SandboxConfig(), concurrency=2)}
    status = {name: (r.status, r.reason) for name, r in reports.items()}
    assert reports["named-like-table"].status == "accepted", status
    assert reports["second-copy"].status == reports["pickled"].status == "rejected", status
    copy_reason = reports["second-copy"].reason
    assert (
        "gate 'private labels unreachable' failed" in copy_reason
        and "/workspace/notes/snapshot recovers 36 of 36 held-out labels" in copy_reason
    ), copy_reason
    pickle_reason = reports["pickled"].reason
    assert (
        "/workspace/models/frame_cache recovers 36 of 36 held-out labels" in pickle_reason
        and "/workspace/models/xy.joblib recovers 36 of 36" in pickle_reason
    ), pickle_reason
    gate = next(g for g in reports["named-like-table"].gates if g.name == "private labels unreachable")
    assert gate.passed and "no file recovers their labels" in gate.detail and "36 held-out rows" in gate.detail, (
        gate.detail
    )
