"""arex's own problem folder: task.yaml, statement.md, private/tests/*.in|*.ans, private/checker/,
solutions/, workspace/."""

from __future__ import annotations

from pathlib import Path

from arex.envs.sources.common import Problem, SourceError, make_spec, pairs, read_text, read_yaml, tests_from_pairs
from arex.grading.languages import language_for
from arex.specs import resolve_inside


def load_arex(folder: Path) -> Problem:
    task_path = folder / "task.yaml"
    task = read_yaml(task_path)
    # Every path task.yaml names stays inside the folder: a statement is the agent's system prompt,
    # a checker folder is copied whole, so a path out of it would carry host files into the env.
    statement_path = resolve_inside(folder, task.get("statement", "statement.md"), task_path, "statement", SourceError)
    if not statement_path.is_file():
        raise SourceError(f"{task_path}: field 'statement': file {statement_path.name} is missing")
    tests_dir = folder / "private" / "tests"
    if not tests_dir.is_dir():
        raise SourceError(f"{folder}: private/tests/ is missing (test files <group>-<n>.in and .ans)")
    tests, files = tests_from_pairs(
        folder, pairs(tests_dir), group_of=lambda n: n.split("-")[0], sample_of=lambda n: n.startswith("sample")
    )
    solutions = []
    for i, entry in enumerate(_mappings(task.get("solutions"), task_path, "solutions")):
        if not resolve_inside(folder, entry.get("path", ""), task_path, f"solutions.{i}.path", SourceError).is_file():
            raise SourceError(f"{task_path}: field 'solutions.{i}.path': file '{entry.get('path')}' does not exist")
        entry = {"language": language_for(entry["path"]).name, **entry}
        solutions.append(entry)
        files[entry["path"]] = folder / entry["path"]
    checker = task.get("checker", {}) or {}
    if not isinstance(checker, dict):
        raise SourceError(f"{task_path}: field 'checker' must be a mapping (source, ...), got {checker!r}")
    if checker.get("source"):
        src = resolve_inside(folder / "private", checker["source"], task_path, "checker.source", SourceError)
        if not src.is_file():
            raise SourceError(f"{task_path}: field 'checker.source': private/{checker['source']} does not exist")
        for path in src.parent.rglob("*"):
            if path.is_file():
                files[f"private/{path.relative_to(folder / 'private').as_posix()}"] = path
    for path in (folder / "workspace").rglob("*") if (folder / "workspace").is_dir() else []:
        if path.is_file():
            files[path.relative_to(folder).as_posix()] = path
    if (folder / "private" / "canary.txt").is_file():
        files["private/canary.txt"] = folder / "private" / "canary.txt"
    known = {k: v for k, v in task.items() if k not in ("solutions", "statement")}
    spec = make_spec(task_path, **{**known, "tests": tests, "solutions": solutions, "source_format": "arex"})
    return Problem(spec=spec, statement=read_text(statement_path), files=files)


def _mappings(value, path: Path, key: str) -> list[dict]:
    """A field that holds a list of mappings (none if absent); SourceError naming the field if not."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SourceError(f"{path}: field '{key}' must be a list of mappings (path, expected), got {value!r}")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise SourceError(f"{path}: field '{key}.{i}' must be a mapping (path, expected), got {entry!r}")
    return value
