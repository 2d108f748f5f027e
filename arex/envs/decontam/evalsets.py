"""Evaluation sets read into indexes, each built once and cached by what its files are.

What a path given as an evaluation set can be:
- a text file: ids and source URLs, one a line (`#` starts a comment): a training env with that id
  or URL overlaps it;
- a CodeContests file (.json, .jsonl, .parquet): its problems;
- a folder: a built env or arex problem (task.yaml), an MLE-bench competition (config.yaml with
  `dataset` and `grader`), a problem arex's loaders read (Kattis, Frontier-CS), or a folder holding
  any of these (a Frontier-CS clone, its `algorithmic/problems/`, an MLE-bench competitions folder),
  looked into `MAX_DEPTH` folders deep.

A problem the strict loaders refuse (test data absent, an unsupported checker) is still indexed by
what can be read of it (its statement, any .in/.ans pairs), with a note; nothing is silently left
out. The index is cached under the arex cache, keyed by every file's path, size and modification
time, the n-gram size and the index version: a changed file rebuilds it.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from arex.envs.decontam.fingerprint import Fingerprint, add_solution, add_test, of_env, of_problem
from arex.envs.decontam.index import INDEX_VERSION, EvalSet, Item
from arex.envs.decontam.mlebench import is_competition, of_competition
from arex.envs.decontam.text import id_key, url_key
from arex.envs.sources import SourceError, detect, slug, stream
from arex.errors import UserInputError
from arex.hashing import cache_dir, json_sha256
from arex.specs import SpecError

MAX_DEPTH = 4
_SKIP = {".git", "__pycache__", "node_modules", ".venv"}
_STATEMENTS = ("statement.txt", "statement.md", "problem.md", "description.md", "README.md")
_STATEMENT_GLOBS = ("statement/problem.en.*", "problem_statement/problem.en.*", "statement/*.md", "problem_statement/*")


def load_eval_set(path: Path, n: int) -> EvalSet:
    """The index of one evaluation set (from the cache when its files are unchanged). UserInputError
    naming the path if it does not exist or holds nothing arex can read as an evaluation set."""
    if not path.exists():
        raise UserInputError(f"evaluation set {path} does not exist; pass a benchmark folder, built envs or an id list")
    key = _cache_key(path, n)
    cached = cache_dir() / "decontam" / f"{key}.json.gz"
    try:
        return EvalSet.from_json(json.loads(gzip.decompress(cached.read_bytes())))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or unreadable: rebuilt
    items, notes = [], []
    for found in _fingerprints(path):
        if isinstance(found, str):
            notes.append(found)
        else:
            items.append(Item.of(found, n))
            notes += [f"{found.where}: {note}" for note in found.notes]
    if not items:
        raise UserInputError(
            f"evaluation set {path} holds nothing arex reads as one (problems, MLE-bench competitions, built envs, "
            "or a text file of ids)" + (f": {notes[0]}" if notes else "")
        )
    index = EvalSet(str(path), items, notes, n)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(gzip.compress(json.dumps(index.to_json()).encode(), 5))
    tmp.replace(cached)
    return index


def _cache_key(path: Path, n: int) -> str:
    listing = []
    for file in _files(path):
        stat = file.stat()
        listing.append([file.relative_to(path).as_posix() if file != path else "", stat.st_size, stat.st_mtime_ns])
    return json_sha256([INDEX_VERSION, n, str(path.resolve()), listing])[:24]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        found += [Path(root) / f for f in sorted(files)]
    return found


def _fingerprints(path: Path, depth: int = 0) -> Iterator[Fingerprint | str]:
    """Every item of the evaluation set at `path`, or a note (a string) for what cannot be read."""
    if path.is_file():
        yield from _file_items(path)
        return
    if (path / "task.yaml").is_file():
        yield from _env_item(path)
        return
    if is_competition(path):
        yield of_competition(path)
        return
    try:
        detect(path)
    except SourceError:
        if depth >= MAX_DEPTH:
            return
        for child in sorted(p for p in path.iterdir() if p.is_dir() and p.name not in _SKIP):
            yield from _fingerprints(child, depth + 1)
        return
    yield from _problem_items(path)


def _file_items(path: Path) -> Iterator[Fingerprint | str]:
    if path.suffix in (".json", ".jsonl", ".parquet"):
        yield from _problem_items(path)
        return
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"evaluation set {path} cannot be read as a list of ids ({exc})") from None
    for number, line in enumerate(lines, start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        fp = Fingerprint(entry, f"{path} line {number}")
        if "://" in entry or entry.startswith("git@"):
            fp.urls.add(url_key(entry))
        else:
            fp.ids.add(id_key(entry))
        yield fp


def _env_item(folder: Path) -> Iterator[Fingerprint | str]:
    try:
        yield of_env(folder)
    except (SpecError, OSError, ValueError) as exc:
        yield from _problem_items(folder, f"task.yaml not read ({' '.join(str(exc).split())[:200]})")


def _problem_items(path: Path, why: str = "") -> Iterator[Fingerprint | str]:
    try:
        for where, problem in stream(path):
            if isinstance(problem, SourceError):
                yield f"{where}: left out ({problem})"
            else:
                yield of_problem(problem, where)
    except (SourceError, OSError, ValueError) as exc:
        if path.is_dir():
            yield _lenient(path, why or " ".join(str(exc).split())[:300])
        else:
            yield f"{path}: left out ({exc})"


def _statement_file(folder: Path) -> Path | None:
    """The statement of a problem folder in any layout arex reads (Kattis: statement/problem.en.md, ...)."""
    for name in _STATEMENTS:
        if (folder / name).is_file():
            return folder / name
    for pattern in _STATEMENT_GLOBS:
        found = sorted(p for p in folder.glob(pattern) if p.is_file())
        if found:
            return found[0]
    return None


def _lenient(folder: Path, why: str) -> Fingerprint:
    """A problem folder the loaders refuse, as far as it can be read: its statement, any test pairs
    (.in with .ans or .out beside it) and solutions/ files."""
    try:  # the id its loader would give it, so an import of the same problem matches by id
        name = f"frontier-{slug(folder.name)}" if detect(folder) == "frontier-cs" else folder.name
    except SourceError:
        name = folder.name
    fp = Fingerprint(name, str(folder), ids={id_key(name)}, notes=[f"read in part: {why}"])
    statement = _statement_file(folder)
    if statement is not None:
        fp.statement = statement.read_bytes().decode("utf-8", errors="replace")
    for given in sorted(folder.rglob("*.in")):
        answer = next((given.with_suffix(s) for s in (".ans", ".out") if given.with_suffix(s).is_file()), None)
        if answer is not None:
            add_test(fp, given.read_bytes(), answer.read_bytes())
    solutions = folder / "solutions"
    for code in sorted(solutions.rglob("*") if solutions.is_dir() else []):
        if code.is_file():
            add_solution(fp, code.relative_to(folder).as_posix(), code.read_bytes())
    return fp
