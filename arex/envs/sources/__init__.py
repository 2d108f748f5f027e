"""Judge problem sources → one normalised form (`Problem`): a JudgeSpec plus the files to copy.

Formats (detected from the folder's contents), one module each:
- arex_folder:   task.yaml, statement.md, private/tests/*.in|*.ans, private/checker/, solutions/
- kattis:        problem.yaml, statement/ or problem_statement/, data/{sample,secret}/, output_validator(s)/,
                 submissions/ (+ submissions.yaml); legacy and 2023-07/2025-09 layouts
- frontier:      statement.txt, config.yaml, testdata/, a testlib checker or interactor
- codecontests:  a .json / .jsonl file of rows, or a parquet shard of the dataset (streamed)

What they share (`common`): every bad input is a SourceError naming the file and the field, and a
sample whose input equals a hidden test's stops being a sample (hidden data never shows in sample
feedback). `arex.envs.judge_sources` keeps these names importable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from arex.envs.sources.arex_folder import load_arex
from arex.envs.sources.codecontests import load_codecontests, stream_codecontests
from arex.envs.sources.common import (
    PROVISIONAL_TIME_LIMIT_S,
    TESTLIB_HEADER,
    Problem,
    SourceError,
    content_hash,
    drop_samples_equal_to_hidden,
    slug,
)
from arex.envs.sources.frontier import load_frontier
from arex.envs.sources.kattis import load_kattis
from arex.specs import is_inside, refuse_links_leaving

__all__ = [
    "PROVISIONAL_TIME_LIMIT_S",
    "TESTLIB_HEADER",
    "Problem",
    "SourceError",
    "content_hash",
    "detect",
    "load",
    "load_arex",
    "load_codecontests",
    "load_frontier",
    "load_kattis",
    "slug",
    "source_files",
    "stream",
]


def detect(path: Path) -> str:
    if path.is_file() and path.suffix in (".json", ".jsonl", ".parquet"):
        return "codecontests"
    if (path / "task.yaml").is_file():
        return "arex"
    if (path / "problem.yaml").is_file():
        return "kattis"
    if (path / "config.yaml").is_file() and (path / "statement.txt").is_file():
        return "frontier-cs"
    raise SourceError(
        f"{path}: not a problem source arex knows "
        "(expected task.yaml, problem.yaml, config.yaml + statement.txt, or a .json/.jsonl/.parquet file)"
    )


def load(path: Path, generated: Path | None = None, generation: str = "") -> list[Problem]:
    """All problems in one source (a folder is one problem; a CodeContests file may hold many).
    `generated`: a Kattis package's data/ as its generators made it (`generation` says how).
    SourceError, naming the source, for anything in it arex cannot read."""
    fmt = detect(path)
    if path.is_dir():  # the loaders read files by name; a link out of the folder would read the host's
        refuse_links_leaving(path, SourceError)
    try:
        if fmt == "codecontests":
            problems = load_codecontests(path)
        elif fmt == "kattis":
            problems = [load_kattis(path, generated, generation)]
        else:
            problems = [{"arex": load_arex, "kattis": load_kattis, "frontier-cs": load_frontier}[fmt](path)]
        return [drop_samples_equal_to_hidden(problem) for problem in problems]
    except SourceError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OSError, RecursionError) as exc:
        # A value of another shape than the format's (a list where a mapping belongs, a word
        # where a number does) fails wherever the loader first touches it; name the source.
        raise SourceError(
            f"{path}: a field does not have the shape the {fmt} format gives it ({type(exc).__name__}: {exc})"
        ) from exc


def stream(path: Path) -> Iterator[tuple[str, Problem | SourceError]]:
    """The problems of a source one at a time, each with where it is (a CodeContests row), as `load`
    gives them: a row that cannot be read comes as its SourceError and the rows after it still come.
    A CodeContests file is read as it is consumed (a parquet shard is never all in memory); any other
    source is loaded whole. SourceError at once for a source that cannot be read at all."""
    if detect(path) != "codecontests":
        for problem in load(path):
            yield str(path), problem
        return
    for where, problem in stream_codecontests(path):
        yield where, problem if isinstance(problem, SourceError) else drop_samples_equal_to_hidden(problem)


def source_files(path: Path) -> list[Path]:
    """Every file a source's build depends on (for the content hash)."""
    if path.is_file():
        return [path]
    # A link out of the folder is not the source's (load refuses it): hashing it would read a host file.
    return [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and is_inside(p, path)]
