"""What every judge-source loader shares: the error, the normalised `Problem`, file readers, test
pairs, the duplicate-sample rule and the testlib header lookup."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from arex.hashing import files_sha256
from arex.specs import JudgeSpec, SpecError, TestCase, is_inside, validate_spec

TESTLIB_HEADER = "testlib.h"
PROVISIONAL_TIME_LIMIT_S = 10.0


class SourceError(SpecError):
    """A problem source that cannot be read or built (a spec or test file missing or malformed, a
    repository that cannot be fetched); the message names the file and the field. A SpecError, so
    a ValueError too; `SourceError.from_validation(path, exc, JudgeSpec)` lists every problem."""


@dataclass
class Problem:
    spec: JudgeSpec
    statement: str
    files: dict[str, Path | bytes] = field(default_factory=dict)
    """Destination (relative to the env folder) → source file or contents."""
    time_multiplier: float | None = None
    """Set when the time limit must be derived from the accepted submissions (a Kattis package
    without `limits.time_limit`); spec.time_limit_s is then provisional. See `time_resolution`."""
    time_resolution: float = 1.0
    """problem.yaml `limits.time_resolution` (default 1.0, as in problemtools). The derived limit is
    problemtools' rule (verifyproblem `_compute_time_limit`): `max(1, ceil(slowest accepted CPU time
    × time_multiplier / time_resolution)) × time_resolution`, i.e. rounded UP to a whole number of
    resolution steps, never below one step."""
    samples_published: bool = True
    """The package publishes its samples (Kattis data/sample, CodeContests public tests). False when
    arex picked a test to show as a sample (Frontier-CS): such a sample that equals a hidden test is
    not public data, so the sample goes, not the hidden test."""
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    """Submissions of the source left out: (path in the package, expected category, reason), the
    reason e.g. "python2", "language .kt", "multi-file submission"."""
    generation: str = ""
    """How the tests were generated (a package's generators/generators.yaml run by arex), "" if shipped."""

    def skipped_summary(self, expected: str) -> str:
        """A sentence fragment on the `expected` submissions skipped, "" when none; e.g. "3 accepted
        submissions, all in skipped languages: python2" or "1 accepted submission skipped (language .kt)"."""
        reasons = [reason for _, category, reason in self.skipped if category == expected]
        if not reasons:
            return ""
        counts = Counter(reasons)
        listed = ", ".join(
            reason if n == 1 or len(counts) == 1 else f"{reason} ×{n}" for reason, n in sorted(counts.items())
        )
        noun = f"{len(reasons)} {expected} submission{'s' if len(reasons) > 1 else ''}"
        if any(s.expected == expected for s in self.spec.solutions):
            return f"{noun} skipped ({listed})"
        languages = all(reason == "python2" or reason.startswith("language ") for reason in counts)
        if len(reasons) == 1:
            return f"{noun}, in a skipped language: {listed}" if languages else f"{noun}, skipped: {listed}"
        return f"{noun}, all in skipped languages: {listed}" if languages else f"{noun}, all skipped: {listed}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "problem"


def content_hash(paths: list[Path], extra: bytes = b"") -> str:
    """Of `extra` and the files (by name, in path order): a source's build key."""
    return files_sha256(((path.name, path) for path in sorted(paths)), extra)[:20]


def read_text(path: Path) -> str:
    """A source file's text (a UTF-8 BOM dropped); SourceError naming it if it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except (yaml.YAMLError, RecursionError) as exc:
        raise SourceError(f"{path}: not valid YAML ({getattr(exc, 'problem', None) or type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{path}: must be a mapping of fields")
    return data


def number(value, path: Path, key: str, cast: Callable = float):
    """A field's value as a number (`cast` of it: text such as "2.5" too); SourceError naming the
    field if it is not one."""
    try:
        return cast(value)
    except (TypeError, ValueError, OverflowError):
        raise SourceError(f"{path}: field '{key}' must be a number, got {value!r}") from None


def make_spec(path: Path, **fields) -> JudgeSpec:
    return validate_spec(JudgeSpec, fields, path, SourceError)  # every problem, with its key


def pairs(folder: Path, answer_suffixes=(".ans",)) -> list[tuple[str, Path, Path | None]]:
    """(name, input, answer or None) for every .in file under folder, in name order."""
    found = []
    for inp in sorted(p for p in folder.rglob("*.in") if p.is_file()):
        answer = next((inp.with_suffix(s) for s in answer_suffixes if inp.with_suffix(s).is_file()), None)
        found.append((inp.relative_to(folder).with_suffix("").as_posix(), inp, answer))
    return found


def tests_from_pairs(
    path: Path, found, group_of: Callable[[str], str], sample_of: Callable[[str], bool], prefix: str = "tests"
) -> tuple[list[TestCase], dict]:
    tests, files = [], {}
    for name, inp, ans in found:
        if ans is None:
            raise SourceError(f"{inp}: test '{name}' has an input but no answer file")
        safe = name.replace("/", "__")
        files[f"private/{prefix}/{safe}.in"] = inp
        files[f"private/{prefix}/{safe}.ans"] = ans
        tests.append(
            TestCase(
                name=safe,
                input=f"{prefix}/{safe}.in",
                answer=f"{prefix}/{safe}.ans",
                group=group_of(name),
                sample=sample_of(name),
            )
        )
    if not any(not t.sample for t in tests):
        raise SourceError(f"{path}: no hidden tests found")
    return tests, files


def _bytes_of(source: Path | bytes) -> bytes:
    return source if isinstance(source, bytes) else source.read_bytes()


def drop_samples_equal_to_hidden(problem: Problem) -> Problem:
    """Every format: a hidden test whose input bytes equal a sample's is public data (the package
    shows its samples), so it leaves the hidden set and the sample stays: sample feedback keeps
    working, and the held-out score counts only tests the agent cannot have seen. (Many Kattis
    packages repeat their samples in data/secret.) SourceError if nothing hidden would be left."""
    if not problem.samples_published:
        return _drop_sample_twins(problem)
    tests = problem.spec.tests
    sample_inputs = {
        _bytes_of(problem.files[f"private/{t.input}"])
        for t in tests
        if t.sample and f"private/{t.input}" in problem.files
    }
    twins = [
        t
        for t in tests
        if not t.sample
        and f"private/{t.input}" in problem.files
        and _bytes_of(problem.files[f"private/{t.input}"]) in sample_inputs
    ]
    if not twins:
        return problem
    if len(twins) == sum(not t.sample for t in tests):
        raise SourceError(
            f"{problem.spec.id}: every hidden test is a copy of a sample test, so nothing would be held out; "
            "add hidden tests"
        )
    names = {t.name for t in twins}
    files = {
        k: v for k, v in problem.files.items() if k not in {f"private/{p}" for t in twins for p in (t.input, t.answer)}
    }
    spec = problem.spec.model_copy(update={"tests": tuple(t for t in tests if t.name not in names)})
    return dataclasses.replace(problem, spec=spec, files=files)


def _drop_sample_twins(problem: Problem) -> Problem:
    """A sample arex picked that equals a hidden test stops being shown: hidden data stays hidden."""
    tests = problem.spec.tests
    hidden_inputs = {
        _bytes_of(problem.files[f"private/{t.input}"])
        for t in tests
        if not t.sample and f"private/{t.input}" in problem.files
    }
    twins = {
        t.name
        for t in tests
        if t.sample
        and f"private/{t.input}" in problem.files
        and _bytes_of(problem.files[f"private/{t.input}"]) in hidden_inputs
    }
    if not twins:
        return problem
    spec = problem.spec.model_copy(update={"tests": tuple(t for t in tests if t.name not in twins)})
    files = {
        k: v
        for k, v in problem.files.items()
        if k not in {f"private/{p}" for t in tests if t.name in twins for p in (t.input, t.answer)}
    }
    return dataclasses.replace(problem, spec=spec, files=files)


def testlib_header(source: Path, start: Path) -> Path | None:
    """testlib.h for a checker or interactor that includes it: beside it, or in `start` or one of its
    parents, directly or in `judge/include/` or `include/` (Frontier-CS keeps it in
    algorithmic/judge/include/). None if the source does not include it."""
    if TESTLIB_HEADER not in source.read_text(encoding="utf-8", errors="replace"):
        return None
    for folder in (source.parent, start, *start.parents):
        for candidate in (
            folder / TESTLIB_HEADER,
            folder / "judge" / "include" / TESTLIB_HEADER,
            folder / "include" / TESTLIB_HEADER,
        ):
            # Found by its fixed name, maybe above the problem: a link leading out of the folder
            # it is found in could name any host file, so such a link is not taken.
            if candidate.is_file() and is_inside(candidate, candidate.parent):
                return candidate
    raise SourceError(
        f"{source}: includes {TESTLIB_HEADER}, which is neither beside it nor in a parent folder; put a copy there"
    )


def copy_program_folder(src: Path, files: dict) -> None:
    """A checker or interactor's folder into private/checker/, testlib.h added if it needs one."""
    for path in src.parent.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"private/checker/{path.relative_to(src.parent).as_posix()}"] = path
    header = testlib_header(src, src.parent)
    if header is not None and f"private/checker/{TESTLIB_HEADER}" not in files:
        files[f"private/checker/{TESTLIB_HEADER}"] = header


def json_rows(path: Path) -> list[tuple[str, object]]:
    """(where, row) for each row of a .json (one row or a list) or .jsonl file; `where` names the
    file and the row: "line N" (1-based, blank lines counted) in JSONL, "row N" (0-based) in JSON."""
    text = read_text(path)
    if path.suffix != ".jsonl":
        rows = _json(path, text, 0)
        return [(f"{path} row {r}", row) for r, row in enumerate(rows if isinstance(rows, list) else [rows])]
    return [
        (f"{path} line {n}", _json(path, line, n)) for n, line in enumerate(text.split("\n"), start=1) if line.strip()
    ]


def _json(path: Path, text: str, line: int):
    """`text` parsed; SourceError naming the file and line (`line` of a JSONL file, else the parser's)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: not valid JSON (line {line or exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise SourceError(f"{path}: JSON nested too deeply to be a CodeContests row (line {line or 1})") from None
