"""CodeContests-style rows (deepmind/code_contests): a .json file (one row or a list), a .jsonl file,
or one of the dataset's own parquet shards (`data/train-00000-of-00039-....parquet`), read a few
rows at a time (`stream_codecontests`): a shard's 13k problems are never all in memory, and only
the columns arex reads are decoded.

A row: `name`, `description`, `public_tests` / `private_tests` / `generated_tests` ({input: [...],
output: [...]}), `solutions` / `incorrect_solutions` ({language: [ids], solution: [code]}),
`time_limit` ({seconds, nanos}), `memory_limit_bytes`. Public tests are the samples (also written
to workspace/samples/). Every solution in a language arex runs is kept; language ids are
CodeContests' (1 PYTHON = Python 2, 2 CPP, 3 PYTHON3, 4 JAVA), looked up in arex's language
table by file suffix, others skipped with the reason. Answers that are all numbers, some with a
decimal point, are compared with a float tolerance of 1e-6.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from arex.envs.sources.common import Problem, SourceError, json_rows, make_spec, slug
from arex.envs.sources.programs import PYTHON2, classify
from arex.envs.sources.statement import Sample, workspace_samples
from arex.specs import CheckerSpec, SolutionRef, TestCase

# CodeContests language id → the file name suffix arex's language table knows it by (None: Python 2).
_ID_SUFFIX: dict[int, str | None] = {1: None, 2: ".cpp", 3: ".py", 4: ".java"}
_ID_NAME = {0: "unknown", 1: "python2", 2: "cpp", 3: "python3", 4: "java"}
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_DEFAULT_MEMORY_BYTES = 256 << 20


# The columns of a shard arex reads (the others, cf_tags, untranslated_description, ..., are not decoded).
COLUMNS = (
    "name",
    "description",
    "public_tests",
    "private_tests",
    "generated_tests",
    "solutions",
    "incorrect_solutions",
    "time_limit",
    "memory_limit_bytes",
)
REQUIRED_COLUMNS = ("name", "description")
PARQUET_BATCH_ROWS = 4
"""Rows decoded at once: a row's generated tests can take megabytes."""
_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)


def load_codecontests(path: Path) -> list[Problem]:
    problems = []
    for _, problem in stream_codecontests(path):
        if isinstance(problem, SourceError):
            raise problem
        problems.append(problem)
    return problems


def stream_codecontests(path: Path) -> Iterator[tuple[str, Problem | SourceError]]:
    """(where, problem) for each row, in order, read as it is reached; a row that cannot be read
    gives its SourceError in place of a problem and the rows after it still come. A file that is
    not readable as rows at all raises SourceError at once."""
    rows = parquet_rows(path) if path.suffix == ".parquet" else iter(json_rows(path))
    for where, row in rows:
        if not isinstance(row, dict):
            yield where, SourceError(f"{where}: must be a JSON object (a CodeContests row), got {type(row).__name__}")
            continue
        try:
            yield where, _row_problem(path, where, row)
        except SourceError as exc:
            yield where, exc
        except _SHAPE_ERRORS as exc:
            why = f"{type(exc).__name__}: {exc}"
            yield where, SourceError(f"{where}: a field does not have CodeContests' shape ({why})")


def parquet_rows(path: Path) -> Iterator[tuple[str, dict]]:
    """(where, row) for each row of a CodeContests parquet shard, PARQUET_BATCH_ROWS at a time
    (pyarrow's iter_batches), only COLUMNS decoded. SourceError if it is no parquet file or lacks a
    column every row needs; a shard damaged further on ends with a SourceError there."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        shard = pq.ParquetFile(path)
    except (OSError, pyarrow.ArrowException) as exc:
        raise SourceError(f"{path}: not a parquet file arex can read ({exc})") from None
    names = shard.schema_arrow.names
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise SourceError(
            f"{path}: not a CodeContests shard: column(s) {', '.join(missing)} missing "
            f"(it has: {', '.join(names[:12])}); give the dataset's own parquet files (deepmind/code_contests data/)"
        )
    index = 0
    try:
        for batch in shard.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=[c for c in COLUMNS if c in names]):
            for row in batch.to_pylist():
                yield f"{path} row {index}", row
                index += 1
    except (OSError, pyarrow.ArrowException) as exc:
        raise SourceError(f"{path} row {index}: the shard cannot be read from here on ({exc})") from None


def _row_problem(path: Path, where: str, row: dict) -> Problem:
    for key in ("name", "description"):
        if not isinstance(row.get(key), str):
            raise SourceError(f"{where}: field '{key}' is missing or not text")
    files: dict[str, Path | bytes] = {}
    tests, answers = _tests(where, row, files)
    samples = [
        Sample(download_input=files[f"private/{t.input}"], download_answer=files[f"private/{t.answer}"])
        for t in tests
        if t.sample
    ]
    files.update(workspace_samples(samples))
    solutions, skipped = _solutions(where, row, files)
    spec = make_spec(
        path,
        id=f"cc-{slug(row['name'])}",
        title=row["name"][:120],
        time_limit_s=_seconds(where, row.get("time_limit")) or 2.0,
        memory_mb=_memory_mb(where, row.get("memory_limit_bytes")),
        checker=CheckerSpec(kind="float", abs_tol=1e-6, rel_tol=1e-6)
        if _float_answers(answers)
        else CheckerSpec(kind="token"),
        scoring="fraction",
        tests=tests,
        solutions=solutions,
        source_format="codecontests",
    )
    return Problem(spec=spec, statement=row["description"], files=files, skipped=skipped)


def _tests(where: str, row: dict, files: dict) -> tuple[list[TestCase], list[str]]:
    tests, answers = [], []
    for kind in ("public_tests", "private_tests", "generated_tests"):
        block = row.get(kind) or {"input": [], "output": []}
        if not isinstance(block, dict):
            raise SourceError(f"{where}: field '{kind}' must be an object with 'input' and 'output' lists")
        inputs, outputs = block.get("input") or [], block.get("output") or []
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise SourceError(f"{where}: field '{kind}': {_count(inputs)} inputs but {_count(outputs)} outputs")
        for i, (inp, out) in enumerate(zip(inputs, outputs)):
            if not isinstance(inp, str) or not isinstance(out, str):
                raise SourceError(f"{where}: field '{kind}.input.{i}' / '{kind}.output.{i}' must be text")
            name = f"{kind.split('_')[0]}-{i + 1:03d}"
            files[f"private/tests/{name}.in"], files[f"private/tests/{name}.ans"] = inp.encode(), out.encode()
            tests.append(
                TestCase(
                    name=name,
                    input=f"tests/{name}.in",
                    answer=f"tests/{name}.ans",
                    group=kind.split("_")[0],
                    sample=kind == "public_tests",
                )
            )
            answers.append(out)
    if not any(not t.sample for t in tests):
        raise SourceError(f"{where}: no hidden tests (private_tests and generated_tests are empty)")
    return tests, answers


def _count(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else "no list of"


def _float_answers(answers: list[str]) -> bool:
    """Every answer token a number and some written with a decimal point: compare with a tolerance."""
    tokens = [token for answer in answers for token in answer.split()]
    return bool(tokens) and all(_NUMBER.match(t) for t in tokens) and any("." in t for t in tokens)


def _seconds(where: str, limit: Any) -> float:
    if limit is None:
        return 0.0
    if not isinstance(limit, dict):
        raise SourceError(f"{where}: field 'time_limit' must be an object {{seconds, nanos}}, got {limit!r}")
    try:
        return float(limit.get("seconds", 0) or 0) + float(limit.get("nanos", 0) or 0) / 1e9
    except (TypeError, ValueError):
        raise SourceError(f"{where}: field 'time_limit': seconds and nanos must be numbers, got {limit!r}") from None


def _memory_mb(where: str, value: Any) -> int:
    """`memory_limit_bytes` in MB as the judge counts them (MiB). CodeContests writes Codeforces'
    "256 megabytes" as 256000000 bytes: a whole number of decimal megabytes is read as that many MB,
    as the contest meant; otherwise bytes are rounded up to MiB."""
    if value is None or value == 0:
        value = _DEFAULT_MEMORY_BYTES
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise SourceError(f"{where}: field 'memory_limit_bytes' must be a number of bytes, got {value!r}")
    value = int(value)
    if value % 1_000_000 == 0:
        return max(16, value // 1_000_000)
    return max(16, -(-value // (1 << 20)))


def _language(lang_id: Any, stem: str, code: str) -> tuple[str, str | None, str]:
    """(file path, arex language or None, reason) of a solution with CodeContests language id `lang_id`."""
    suffix = _ID_SUFFIX.get(lang_id, "") if isinstance(lang_id, int) and not isinstance(lang_id, bool) else ""
    if suffix is None:
        return stem, None, PYTHON2
    if not suffix:
        name = _ID_NAME.get(lang_id, lang_id) if isinstance(lang_id, int) else repr(lang_id)
        return stem, None, f"language {name}"
    language, reason = classify(stem + suffix, code)
    return stem + suffix, language, reason


def _solutions(where: str, row: dict, files: dict) -> tuple[list[SolutionRef], list[tuple[str, str, str]]]:
    """Every solution in a language arex runs (accepted from `solutions`, wrong_answer from
    `incorrect_solutions`), and the skipped ones with why."""
    solutions, skipped = [], []
    for bucket, expected in (("solutions", "accepted"), ("incorrect_solutions", "wrong_answer")):
        block = row.get(bucket) or {}
        if not isinstance(block, dict):
            raise SourceError(f"{where}: field '{bucket}' must be an object with 'language' and 'solution' lists")
        languages, codes = block.get("language") or [], block.get("solution") or []
        if not isinstance(languages, list) or not isinstance(codes, list):
            raise SourceError(f"{where}: field '{bucket}': 'language' and 'solution' must be lists")
        for i, (lang_id, code) in enumerate(zip(languages, codes)):
            rel = f"{bucket}.solution.{i}"
            if not isinstance(code, str):
                raise SourceError(f"{where}: field '{bucket}.solution.{i}' must be text")
            dest, language, reason = _language(lang_id, f"solutions/{expected}-{i}", code)
            if language is None:
                skipped.append((rel, expected, reason))
                continue
            files[dest] = code.encode()
            solutions.append(SolutionRef(path=dest, language=language, expected=expected))
    return solutions, skipped
