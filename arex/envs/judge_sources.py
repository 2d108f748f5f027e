"""Judge problem sources → one normalised form (`Problem`): a JudgeSpec plus the files to copy.

Formats (detected from the folder's contents):
- arex:         task.yaml, statement.md, private/tests/*.in|*.ans, private/checker/, solutions/
- kattis:       problem.yaml, problem_statement/ or statement/, data/{sample,secret}/ (nested groups),
                output_validators/ or output_validator/, submissions/{accepted,wrong_answer,...}
- frontier-cs:  statement.txt, config.yaml (time, memory, checker, subtasks), testdata/, chk.cc
- codecontests: a .json / .jsonl file of rows (description, public/private/generated tests, solutions)

A source that cannot be read raises SourceError naming the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from arex.grading.languages import LANGUAGES, language_for
from arex.hashing import files_sha256
from arex.specs import CheckerSpec, JudgeSpec, SolutionRef, SpecError, TestCase, TestGroup, validate_spec

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
    """Set when the time limit must be derived from the accepted submissions (legacy Kattis):
    limit = max(1, round(slowest accepted × multiplier)); spec.time_limit_s is provisional."""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "problem"


def content_hash(paths: list[Path], extra: bytes = b"") -> str:
    """Of `extra` and the files (by name, in path order): a source's build key."""
    return files_sha256(((path.name, path) for path in sorted(paths)), extra)[:20]


def _text(path: Path) -> str:
    """A source file's text; SourceError naming it if it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(_text(path)) or {}
    except (yaml.YAMLError, RecursionError) as exc:
        raise SourceError(f"{path}: not valid YAML ({getattr(exc, 'problem', None) or type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{path}: must be a mapping of fields")
    return data


def _spec(path: Path, **fields) -> JudgeSpec:
    return validate_spec(JudgeSpec, fields, path, SourceError)  # every problem, with its key


def _pairs(folder: Path, answer_suffixes=(".ans",)) -> list[tuple[str, Path, Path | None]]:
    """(name, input, answer or None) for every .in file under folder, in name order."""
    found = []
    for inp in sorted(folder.rglob("*.in")):
        answer = next((inp.with_suffix(s) for s in answer_suffixes if inp.with_suffix(s).exists()), None)
        found.append((inp.relative_to(folder).with_suffix("").as_posix(), inp, answer))
    return found


def _tests_from_pairs(path: Path, pairs, group_of: Callable[[str], str], sample_of: Callable[[str], bool], prefix: str = "tests") -> tuple[list[TestCase], dict]:
    tests, files = [], {}
    for name, inp, ans in pairs:
        if ans is None:
            raise SourceError(f"{inp}: test '{name}' has an input but no answer file")
        safe = name.replace("/", "__")
        files[f"private/{prefix}/{safe}.in"] = inp
        files[f"private/{prefix}/{safe}.ans"] = ans
        tests.append(TestCase(name=safe, input=f"{prefix}/{safe}.in", answer=f"{prefix}/{safe}.ans", group=group_of(name), sample=sample_of(name)))
    if not any(not t.sample for t in tests):
        raise SourceError(f"{path}: no hidden tests found")
    return tests, files


# -- arex's own folder -----------------------------------------------------------------------
def load_arex(folder: Path) -> Problem:
    task_path = folder / "task.yaml"
    task = _yaml(task_path)
    statement_path = folder / task.get("statement", "statement.md")
    if not statement_path.is_file():
        raise SourceError(f"{task_path}: field 'statement': file {statement_path.name} is missing")
    tests_dir = folder / "private" / "tests"
    if not tests_dir.is_dir():
        raise SourceError(f"{folder}: private/tests/ is missing (test files <group>-<n>.in and .ans)")
    pairs = _pairs(tests_dir)
    tests, files = _tests_from_pairs(folder, pairs, group_of=lambda n: n.split("-")[0], sample_of=lambda n: n.startswith("sample"))
    solutions = []
    for i, entry in enumerate(task.get("solutions", [])):
        if not (folder / entry.get("path", "")).is_file():
            raise SourceError(f"{task_path}: field 'solutions.{i}.path': file '{entry.get('path')}' does not exist")
        entry = {"language": language_for(entry["path"]).name, **entry}
        solutions.append(entry)
        files[entry["path"]] = folder / entry["path"]
    checker = task.get("checker", {}) or {}
    if checker.get("source"):
        src = folder / "private" / checker["source"]
        if not src.is_file():
            raise SourceError(f"{task_path}: field 'checker.source': private/{checker['source']} does not exist")
        for path in src.parent.rglob("*"):
            if path.is_file():
                files[f"private/{path.relative_to(folder / 'private').as_posix()}"] = path
    if (folder / "workspace").is_dir():
        for path in (folder / "workspace").rglob("*"):
            if path.is_file():
                files[path.relative_to(folder).as_posix()] = path
    if (folder / "private" / "canary.txt").is_file():
        files["private/canary.txt"] = folder / "private" / "canary.txt"
    known = {k: v for k, v in task.items() if k not in ("solutions", "statement")}
    spec = _spec(task_path, **{**known, "tests": tests, "solutions": solutions, "source_format": "arex"})
    return Problem(spec=spec, statement=_text(statement_path), files=files)


# -- Kattis / ICPC problem package -------------------------------------------------------------
_KATTIS_EXPECT = {"accepted": "accepted", "wrong_answer": "wrong_answer", "time_limit_exceeded": "time_limit_exceeded", "run_time_error": "run_time_error", "partially_accepted": "partially_accepted"}


def load_kattis(folder: Path) -> Problem:
    meta_path = folder / "problem.yaml"
    meta = _yaml(meta_path)
    name = meta.get("name") or folder.name
    if isinstance(name, dict):
        name = name.get("en") or next(iter(name.values()))
    statement = _kattis_statement(folder)
    data = folder / "data"
    if not (data / "secret").is_dir():
        raise SourceError(f"{folder}: data/secret/ is missing")
    limits = meta.get("limits") or {}
    types = meta.get("type", "pass-fail")
    types = types if isinstance(types, list) else str(types).split()
    validation = str(meta.get("validation", "default")).split()
    if "interactive" in types or "interactive" in validation:
        raise SourceError(f"{meta_path}: field 'type': interactive problems are not supported yet")
    scoring_problem = "scoring" in types or "score" in validation
    pairs = [(n, i, a) for n, i, a in _pairs(data) if n.split("/")[0] in ("sample", "secret")]
    tests, files = _tests_from_pairs(folder, pairs, group_of=_kattis_group, sample_of=lambda n: n.startswith("sample/"))
    hidden_groups = sorted({t.group for t in tests if not t.sample})
    groups = [_kattis_group_spec(data / "secret" / g, g) for g in hidden_groups]
    checker = _kattis_checker(folder, meta_path, str(meta.get("validator_flags", "")).split(), validation, files)
    solutions = _kattis_solutions(folder, files)
    time_limit = limits.get("time_limit")  # 2023-07+; legacy derives it from the accepted submissions
    spec = _spec(
        meta_path,
        id=slug(str(meta.get("id") or folder.name)),
        title=str(name),
        time_limit_s=float(time_limit or PROVISIONAL_TIME_LIMIT_S),
        memory_mb=int(limits.get("memory", 1024)),
        output_limit_mb=int(limits.get("output", 8)),
        checker=checker,
        scoring="groups" if scoring_problem and len(hidden_groups) > 1 else ("ratio" if scoring_problem else "fraction"),
        groups=groups,
        tests=tests,
        solutions=solutions,
        source_format="kattis",
    )
    multiplier = None if time_limit is not None else float(limits.get("time_multiplier", 5))
    return Problem(spec=spec, statement=statement, files=files, time_multiplier=multiplier)


def _kattis_statement(folder: Path) -> str:
    for sdir in ("statement", "problem_statement"):
        for candidate in sorted((folder / sdir).glob("problem*.md")) + sorted((folder / sdir).glob("problem*.tex")):
            statement = candidate.read_text(encoding="utf-8", errors="replace")
            if statement:
                return statement
            break  # only the first candidate of a folder counts
    raise SourceError(f"{folder}: no statement found (problem_statement/problem.en.tex or statement/problem.en.md)")


def _kattis_group(name: str) -> str:
    """Each direct subfolder of data/secret is a group; loose files form the group "secret"."""
    parts = name.split("/")
    return parts[1] if parts[0] == "secret" and len(parts) > 2 else parts[0]


def _kattis_group_spec(folder: Path, name: str) -> TestGroup:
    cfg = {}
    for candidate in (folder / "testdata.yaml", folder / "test_group.yaml"):
        if candidate.is_file():
            cfg = _yaml(candidate)
    points = cfg.get("accept_score", cfg.get("max_score", 1.0))
    return TestGroup(name=name, points=float(points) if not isinstance(points, str) else 1.0)


def _kattis_checker(folder: Path, meta_path: Path, flags: list[str], validation: list[str], files: dict) -> CheckerSpec:
    """A custom output validator (its folder added to `files`), or the default validator's flags."""
    vdirs = [d for d in (folder / "output_validators", folder / "output_validator") if d.is_dir()]
    if "custom" not in validation and not vdirs:
        return _default_validator(flags)
    sources = sorted(p for d in vdirs for p in d.rglob("*") if p.suffix in (".cpp", ".cc", ".py"))
    if not sources:
        raise SourceError(f"{meta_path}: field 'validation': custom validation but no validator source in output_validators/")
    src = sources[0]
    for path in src.parent.rglob("*"):
        if path.is_file():
            files[f"private/checker/{path.relative_to(src.parent).as_posix()}"] = path
    return CheckerSpec(kind="kattis", source=f"checker/{src.name}", flags=tuple(flags))


def _kattis_solutions(folder: Path, files: dict) -> list[SolutionRef]:
    """The submissions of every known category, in a language arex runs (added to `files`)."""
    extensions = {e for lang in LANGUAGES.values() for e in lang.extensions}
    solutions = []
    for category, expected in _KATTIS_EXPECT.items():
        for path in sorted((folder / "submissions" / category).glob("*")):
            if path.is_file() and path.suffix in extensions:
                rel = f"solutions/{category}/{path.name}"
                files[rel] = path
                solutions.append(SolutionRef(path=rel, language=language_for(path.name).name, expected=expected))
    return solutions


def _default_validator(flags: list[str]) -> CheckerSpec:
    values: dict[str, Any] = {"kind": "token", "case_sensitive": "case_sensitive" in flags}
    for i, flag in enumerate(flags):
        if flag in ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance") and i + 1 < len(flags):
            tol = float(flags[i + 1])
            values["kind"] = "float"
            if flag != "float_relative_tolerance":
                values["abs_tol"] = tol
            if flag != "float_absolute_tolerance":
                values["rel_tol"] = tol
    if values["kind"] == "float":
        values.setdefault("abs_tol", 0.0)
        values.setdefault("rel_tol", 0.0)
    return CheckerSpec(**values)


# -- Frontier-CS algorithmic problem -----------------------------------------------------------
def _seconds(value: Any, path: Path, key: str) -> float:
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)?", text)
    if not match:
        raise SourceError(f"{path}: field '{key}': cannot read a time from {value!r} (use e.g. '2s' or '500ms')")
    number = float(match.group(1))
    return number / 1000 if match.group(2) == "ms" else number


def _megabytes(value: Any, path: Path, key: str) -> int:
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)b?", text)
    if not match:
        raise SourceError(f"{path}: field '{key}': cannot read a memory size from {value!r} (use e.g. '256m')")
    number, unit = float(match.group(1)), match.group(2)
    if not unit:  # Frontier-CS: a bare number is bytes
        return max(1, int(number / (1 << 20)))
    return int(number * {"k": 1 / 1024, "m": 1, "g": 1024}[unit])


def load_frontier(folder: Path) -> Problem:
    config_path = folder / "config.yaml"
    config = _yaml(config_path)
    if config.get("type", "default") != "default":
        raise SourceError(f"{config_path}: field 'type': only 'default' (non-interactive) problems are supported, got {config.get('type')!r}")
    statement = (folder / "statement.txt").read_text(encoding="utf-8", errors="replace")
    for key in ("time", "memory", "subtasks"):
        if key not in config and not (key == "time" and "time_limit" in config) and not (key == "memory" and "memory_limit" in config):
            raise SourceError(f"{config_path}: field '{key}' is missing")
    time_limit = _seconds(config.get("time", config.get("time_limit")), config_path, "time")
    memory = _megabytes(config.get("memory", config.get("memory_limit")), config_path, "memory")
    data = folder / "testdata"
    in_suffix, ans_suffix = config.get("input_suffix", ".in"), config.get("output_suffix", ".ans")
    in_prefix = config.get("input_prefix", "")
    tests, files, index = [], {}, 0
    for s, subtask in enumerate(config["subtasks"]):
        if "n_cases" not in subtask:
            raise SourceError(f"{config_path}: field 'subtasks.{s}.n_cases' is missing")
        for _ in range(int(subtask["n_cases"])):
            index += 1
            inp, ans = data / f"{in_prefix}{index}{in_suffix}", data / f"{in_prefix}{index}{ans_suffix}"
            for path, what in ((inp, "input"), (ans, "answer")):
                if not path.is_file():
                    raise SourceError(f"{config_path}: field 'subtasks.{s}.n_cases': {what} file testdata/{path.name} is missing")
            files[f"private/tests/{index}.in"], files[f"private/tests/{index}.ans"] = inp, ans
            # Frontier-CS ships public cases only as its tests; the first case doubles as the sample.
            tests.append(TestCase(name=str(index), input=f"tests/{index}.in", answer=f"tests/{index}.ans", group=f"subtask{s + 1}", sample=index == 1))
    if len(tests) == 1:
        tests.append(tests[0].model_copy(update={"name": "1-hidden", "sample": False}))
    checker_name = config.get("checker", "chk.cc")
    checker_path = folder / checker_name
    if not checker_path.is_file():
        raise SourceError(f"{config_path}: field 'checker': {checker_name} does not exist")
    files[f"private/checker/{checker_name}"] = checker_path
    if TESTLIB_HEADER in checker_path.read_text(errors="replace"):
        header = next((p / TESTLIB_HEADER for p in [folder, *folder.parents] if (p / TESTLIB_HEADER).is_file()), None)
        if header is None:
            raise SourceError(f"{checker_path}: includes {TESTLIB_HEADER}, which is neither beside it nor in a parent folder; put a copy there")
        files[f"private/checker/{TESTLIB_HEADER}"] = header
    solutions = []
    for path in sorted((folder / "solutions").glob("*")) if (folder / "solutions").is_dir() else []:
        expected = "partially_accepted" if "partial" in path.stem else ("wrong_answer" if "wrong" in path.stem else "accepted")
        files[f"solutions/{path.name}"] = path
        solutions.append(SolutionRef(path=f"solutions/{path.name}", language=language_for(path.name).name, expected=expected))
    title = next((line.lstrip("# ").strip() for line in statement.splitlines() if line.strip()), folder.name)
    spec = _spec(
        config_path,
        id=f"frontier-{slug(folder.name)}",
        title=title[:120],
        time_limit_s=time_limit,
        memory_mb=memory,
        checker=CheckerSpec(kind="testlib", source=f"checker/{checker_name}"),
        scoring="ratio",
        tests=tests,
        solutions=solutions,
        source_format="frontier-cs",
    )
    return Problem(spec=spec, statement=statement, files=files)


# -- CodeContests rows -------------------------------------------------------------------------
_CC_LANGUAGES = {2: "cpp17", 3: "python3"}


def load_codecontests(path: Path) -> list[Problem]:
    text = _text(path)
    try:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" else json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise SourceError(f"{path}: JSON nested too deeply to be a CodeContests row") from None
    if isinstance(rows, dict):
        rows = [rows]
    problems = []
    for r, row in enumerate(rows):
        where = f"{path} row {r}"
        for key in ("name", "description"):
            if not isinstance(row.get(key), str):
                raise SourceError(f"{where}: field '{key}' is missing or not text")
        files: dict[str, Path | bytes] = {}
        tests = []
        for kind in ("public_tests", "private_tests", "generated_tests"):
            block = row.get(kind) or {"input": [], "output": []}
            inputs, outputs = block.get("input", []), block.get("output", [])
            if len(inputs) != len(outputs):
                raise SourceError(f"{where}: field '{kind}': {len(inputs)} inputs but {len(outputs)} outputs")
            for i, (inp, out) in enumerate(zip(inputs, outputs)):
                name = f"{kind.split('_')[0]}-{i + 1:03d}"
                files[f"private/tests/{name}.in"], files[f"private/tests/{name}.ans"] = inp.encode(), out.encode()
                tests.append(TestCase(name=name, input=f"tests/{name}.in", answer=f"tests/{name}.ans", group=kind.split("_")[0], sample=kind == "public_tests"))
        solutions = []
        for bucket, expected in (("solutions", "accepted"), ("incorrect_solutions", "wrong_answer")):
            block = row.get(bucket) or {"language": [], "solution": []}
            for i, (lang, code) in enumerate(zip(block.get("language", []), block.get("solution", []))):
                if lang not in _CC_LANGUAGES or len([s for s in solutions if s.expected == expected]) >= 2:
                    continue
                language = LANGUAGES[_CC_LANGUAGES[lang]]
                rel = f"solutions/{expected}-{i}{language.extensions[0]}"
                files[rel] = code.encode()
                solutions.append(SolutionRef(path=rel, language=language.name, expected=expected))
        limit = row.get("time_limit") or {}
        seconds = float(limit.get("seconds", 0) or 0) + float(limit.get("nanos", 0) or 0) / 1e9
        spec = _spec(
            path,
            id=f"cc-{slug(row['name'])}",
            title=row["name"],
            time_limit_s=seconds or 2.0,
            memory_mb=max(16, int(row.get("memory_limit_bytes") or 256 << 20) >> 20),
            checker=CheckerSpec(kind="token"),
            scoring="fraction",
            tests=tests,
            solutions=solutions,
            source_format="codecontests",
        )
        problems.append(Problem(spec=spec, statement=row["description"], files=files))
    return problems


def detect(path: Path) -> str:
    if path.is_file() and path.suffix in (".json", ".jsonl"):
        return "codecontests"
    if (path / "task.yaml").is_file():
        return "arex"
    if (path / "problem.yaml").is_file():
        return "kattis"
    if (path / "config.yaml").is_file() and (path / "statement.txt").is_file():
        return "frontier-cs"
    raise SourceError(
        f"{path}: not a problem source arex knows (expected task.yaml, problem.yaml, config.yaml + statement.txt, or a .json/.jsonl file)"
    )


def load(path: Path) -> list[Problem]:
    """All problems in one source (a folder is one problem; a CodeContests file may hold many).
    SourceError, naming the source, for anything in it arex cannot read."""
    fmt = detect(path)
    try:
        if fmt == "codecontests":
            return load_codecontests(path)
        return [{"arex": load_arex, "kattis": load_kattis, "frontier-cs": load_frontier}[fmt](path)]
    except SourceError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OSError) as exc:
        # A value of another shape than the format's (a list where a mapping belongs, a word
        # where a number does) fails wherever the loader first touches it; name the source.
        raise SourceError(f"{path}: a field does not have the shape the {fmt} format gives it ({type(exc).__name__}: {exc})") from exc


def source_files(path: Path) -> list[Path]:
    """Every file a source's build depends on (for the content hash)."""
    if path.is_file():
        return [path]
    return [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
