"""CodeContests at its real size: the dataset's own parquet shards (deepmind/code_contests data/*.parquet,
its schema written here with pyarrow) are read directly and streamed, a few rows at a time, and a
problem in two splits is built once and its duplicate named once. Once, a shard had to be converted to
JSONL first, and a 13k-problem file was loaded whole (every test of every problem in memory)."""

from __future__ import annotations

import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arex.envs.build import _plan, _reject_duplicates, _units
from arex.envs.sources import SourceError, detect, stream

TESTS = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
SOLUTIONS = pa.struct([("language", pa.list_(pa.int64())), ("solution", pa.list_(pa.string()))])
# deepmind/code_contests' columns and types, in its order.
SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("description", pa.string()),
        ("public_tests", TESTS),
        ("private_tests", TESTS),
        ("generated_tests", TESTS),
        ("source", pa.int64()),
        ("difficulty", pa.int64()),
        ("solutions", SOLUTIONS),
        ("incorrect_solutions", SOLUTIONS),
        ("cf_contest_id", pa.int64()),
        ("cf_index", pa.string()),
        ("cf_points", pa.float32()),
        ("cf_rating", pa.int64()),
        ("cf_tags", pa.list_(pa.string())),
        ("is_description_translated", pa.bool_()),
        ("untranslated_description", pa.string()),
        ("time_limit", pa.struct([("seconds", pa.int64()), ("nanos", pa.int64())])),
        ("memory_limit_bytes", pa.int64()),
        ("input_file", pa.string()),
        ("output_file", pa.string()),
    ]
)
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def _row(name: str, generated: str = "5 6\n", description: str | None = "Print a + b.") -> dict:
    return {
        "name": name,
        "description": description,
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["3 4\n"], "output": ["7\n"]},
        "generated_tests": {"input": [generated], "output": ["11\n"]},
        "source": 2,
        "difficulty": 7,
        "solutions": {"language": [3, 1], "solution": [SUM, "print 1"]},
        "incorrect_solutions": {"language": [], "solution": []},
        "cf_contest_id": 1,
        "cf_index": "A",
        "cf_points": 500.0,
        "cf_rating": 800,
        "cf_tags": ["math"],
        "is_description_translated": False,
        "untranslated_description": "",
        "time_limit": {"seconds": 2, "nanos": 500_000_000},
        "memory_limit_bytes": 256_000_000,
        "input_file": "",
        "output_file": "",
    }


def _shard(path, rows):
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path


def test_a_shard_is_read_directly(tmp_path):
    shard = _shard(tmp_path / "train-00000-of-00001.parquet", [_row("1000_A. Sum"), _row("1001_B. Other")])
    assert detect(shard) == "codecontests"
    (where, first), (_, second) = stream(shard)
    assert where == f"{shard} row 0" and first.spec.id == "cc-1000-a-sum" and second.spec.id == "cc-1001-b-other"
    assert first.spec.time_limit_s == 2.5 and first.spec.memory_mb == 256
    assert [t.name for t in first.spec.tests] == ["public-001", "private-001", "generated-001"]
    assert [s.path for s in first.spec.solutions] == ["solutions/accepted-0.py"]  # Python 2 skipped, with why
    assert first.files["private/tests/generated-001.in"] == b"5 6\n"


def test_duplicates_across_splits_are_named_once(tmp_path):
    train = _shard(tmp_path / "train-00000-of-00001.parquet", [_row("1000_A. Sum"), _row("1001_B. Other")])
    valid = _shard(
        tmp_path / "valid-00000-of-00001.parquet",
        [_row("1001_B. Other"), _row("1002_C. Broken", description=None), _row("1003_D. Last")],
    )
    work = _plan(train, tmp_path / "out") + _plan(valid, tmp_path / "out")
    listed: list = []
    built = [w.env_id for w in _units(work, _reject_duplicates(work), listed)]
    assert built == ["cc-1000-a-sum", "cc-1001-b-other", "cc-1003-d-last"]  # a bad row does not end the shard
    rejected = [w.report for w in listed if w.report is not None]
    assert [(r.env_id, r.reason) for r in rejected] == [
        ("cc-1001-b-other", f"duplicate id 'cc-1001-b-other': also produced by {train} row 1"),
        (None, f"{valid} row 1: field 'description' is missing or not text"),
    ]


def test_not_a_codecontests_shard_is_one_sentence(tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"title": ["x"]}), other)
    with pytest.raises(SourceError, match=r"column\(s\) name, description missing.*deepmind/code_contests"):
        list(stream(other))
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(SourceError, match="not a parquet file arex can read"):
        list(stream(broken))


@pytest.mark.heavy  # seconds of CPU: 200 MB decoded
def test_a_shard_streams_in_bounded_memory(tmp_path):
    """1,000 problems of 200 KB of tests each (200 MB decoded; the file compresses them): read one
    at a time, neither Arrow nor Python ever holds more than a few rows of them."""
    rows, generated = 1000, "7 8\n" * 50_000
    path = tmp_path / "train-00000-of-00001.parquet"
    with pq.ParquetWriter(path, SCHEMA, compression="zstd") as writer:
        for start in range(0, rows, 50):
            batch = [_row(f"{n}_A. P{n}", generated=generated) for n in range(start, start + 50)]
            writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA))
    del batch
    arrow_peak, seen = 0, 0
    tracemalloc.start()
    try:
        for _, problem in stream(path):
            assert len(problem.files["private/tests/generated-001.in"]) == len(generated)
            arrow_peak = max(arrow_peak, pa.total_allocated_bytes())
            seen += 1
        _, python_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == rows
    decoded = rows * len(generated)
    assert arrow_peak < decoded / 20 and python_peak < decoded / 20, (arrow_peak, python_peak, decoded)
