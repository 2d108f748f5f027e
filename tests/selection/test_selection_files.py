"""The files `arex select` writes, read back damaged (issue 31, "Malformed input, one sentence"):
verdicts.jsonl (select's own cache), selection.json and kept.jsonl (export's and report's input).

Property-based (hypothesis): valid files with fields replaced by values of any shape or removed,
whole lines of any JSON, arbitrary bytes, nesting too deep for Python's parser. Whatever they
hold, every reader (and what uses them: select, export's KeptRecords, the report) returns what
arex wrote or raises an ArexError naming the file; anything else is a traceback for the user.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from arex.dataset.export import kept_records
from arex.errors import ArexError
from arex.report.store import read_selections
from arex.selection.files import SelectionFileError, read_kept, read_selection, read_verdicts
from arex.selection.selector import Verdict

SETTINGS = dict(
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
VERDICT = {
    "key": "k1", "env_id": "e", "path": "/s/e/k1.jsonl", "kept": True, "reasons": [], "details": {},
    "scores": {"final": 0.5, "first": None}, "record_sha": "ab" * 32, "criteria": "c0ffee",
}  # fmt: skip
REPORT = {
    "criteria": {"regrade": True}, "criteria_hash": "c0ffee", "total": 2, "kept": 1, "dropped": 1,
    "drops": {"not_finished": {"count": 1, "ids": ["k2"]}}, "kept_ids": ["k1"], "store": "/s", "envs": "/envs",
}  # fmt: skip
KEPT = {"key": "k1", "env_id": "e", "path": "/s/e/k1.jsonl", "scores": {"final": 0.5}, "record_sha": "ab" * 32}
DEEP = "[" * 5000 + "]" * 5000

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["", "1e400", "a\x00b", "é✓"]),
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _mutated(base: dict) -> st.SearchStrategy:
    """`base` with some keys replaced by values of any shape, or removed."""
    keys = st.lists(st.sampled_from(sorted(base)), max_size=3, unique=True)
    return st.tuples(keys, st.lists(json_values, min_size=3, max_size=3), st.booleans()).map(
        lambda t: {k: v for k, v in base.items() if not (t[2] and k in t[0])} | ({} if t[2] else dict(zip(t[0], t[1])))
    )


def _lines(base: dict) -> st.SearchStrategy:
    """File contents: lines that are mutated rows, any JSON, raw text, or nested too deeply."""
    line = st.one_of(
        _mutated(base).map(json.dumps),
        json_values.map(json.dumps),
        st.text(max_size=40),
        st.just(DEEP),
    )
    return st.lists(line, min_size=1, max_size=3).map(lambda ls: ("\n".join(ls) + "\n").encode())


def contents(base: dict) -> st.SearchStrategy:
    return st.one_of(st.binary(max_size=200), _lines(base))


@contextmanager
def scratch():
    folder = Path(tempfile.mkdtemp(prefix="arex-selfiles-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _only_arex_errors(fn, *args):
    try:
        return fn(*args)
    except ArexError as exc:
        text = str(exc)
        assert "\n" not in text.strip() and ("verdicts.jsonl" in text or ".json" in text), text
        return exc


@pytest.mark.suite  # hypothesis: about 2 s; run by `make test`, not `make test-fast`
@settings(max_examples=120, **SETTINGS)
@given(contents(VERDICT))
@example(b"[1]\n")  # a JSON line that is not an object: TypeError before
@example(json.dumps({k: v for k, v in VERDICT.items() if k != "criteria"}).encode() + b"\n")  # KeyError before
@example(json.dumps({**VERDICT, "unknown": 1}).encode() + b"\n")  # Verdict(**row): TypeError before
@example(DEEP.encode() + b"\n")  # RecursionError before
def test_the_verdict_cache_is_read_or_refused_in_one_sentence(data):
    with scratch() as folder:
        path = folder / "verdicts.jsonl"
        path.write_bytes(data)
        got = _only_arex_errors(read_verdicts, path)
        if not isinstance(got, ArexError):
            for row in got.values():
                Verdict(**row)  # what select builds from a cached row


@pytest.mark.suite  # hypothesis: about 2 s; run by `make test`, not `make test-fast`
@settings(max_examples=120, **SETTINGS)
@given(st.one_of(contents(REPORT), _mutated(REPORT).map(lambda d: json.dumps(d).encode())))
@example(b"[]")  # AttributeError in `arex export` (`.get`) before
@example(json.dumps({**REPORT, "drops": {"x": {"count": "1"}}}).encode())  # a count that is not a number
@example(DEEP.encode())
@example(json.dumps({"kept": 1}).encode())  # KeyError in export's dataset card before
@example(json.dumps({**REPORT, "drops": []}).encode())  # AttributeError in export's dataset card before
def test_selection_json_is_read_or_refused_in_one_sentence(data):
    with scratch() as folder:
        (folder / "selection.json").write_bytes(data)
        (folder / "kept.jsonl").write_text(json.dumps(KEPT) + "\n")
        got = _only_arex_errors(read_selection, folder / "selection.json")
        if not isinstance(got, ArexError):
            assert isinstance(got["total"], int) and all(isinstance(r["count"], int) for r in got["drops"].values())
        _only_arex_errors(kept_records, folder)
        _only_arex_errors(read_selections, folder, [])


@pytest.mark.suite  # hypothesis: about 2 s; run by `make test`, not `make test-fast`
@settings(max_examples=120, **SETTINGS)
@given(contents(KEPT))
@example(json.dumps({**KEPT, "path": ["x"]}).encode() + b"\n")
@example(json.dumps({**KEPT, "path": "a\x00b"}).encode() + b"\n")  # ValueError (embedded null byte) in export before
@example(DEEP.encode() + b"\n")  # RecursionError before
def test_kept_jsonl_is_read_or_refused_in_one_sentence(data):
    with scratch() as folder:
        (folder / "kept.jsonl").write_bytes(data)
        got = _only_arex_errors(read_kept, folder / "kept.jsonl")
        if not isinstance(got, ArexError):
            assert all(isinstance(r.path, str) and "\0" not in r.path for r in got)
        _only_arex_errors(kept_records, folder)


def test_a_wrong_field_is_named(tmp_path):
    path = tmp_path / "selection.json"
    path.write_text(json.dumps({**REPORT, "drops": {"not_finished": {"count": "one", "ids": []}}}))
    with pytest.raises(SelectionFileError, match=r"field 'drops\.not_finished\.count'"):
        read_selection(path)


def test_a_line_cut_by_a_kill_is_judged_again_not_refused(tmp_path):
    path = tmp_path / "verdicts.jsonl"
    path.write_text(json.dumps(VERDICT) + "\n" + json.dumps(VERDICT)[:40])
    assert list(read_verdicts(path)) == [(VERDICT["record_sha"], VERDICT["criteria"])]
