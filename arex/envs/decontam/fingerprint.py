"""What a task is compared by, read from wherever it is: a judge problem as a source loader gives
it, an ML source as build-envs opens it, a built env folder, or an MLE-bench competition.

A `Fingerprint` holds the task's ids, source URLs, statement text, test digests, solution digests
and labelled tables (header and rows, as text). The training side is compared as it is; an
evaluation set keeps a sketch of each table (`tables.sketch`) in its index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arex.envs.decontam.tables import read_csv
from arex.envs.decontam.text import bytes_of, id_key, solution_digest, test_digest, url_key
from arex.envs.sources.common import Problem
from arex.specs import JudgeSpec, MLSpec, read_spec_yaml, spec_model, validate_spec

Table = tuple[str, list[str], list[list[str]], "str | None"]
"""(name, header, rows, label column or None)."""


@dataclass
class Fingerprint:
    name: str
    where: str
    ids: set[str] = field(default_factory=set)
    urls: set[str] = field(default_factory=set)
    statement: str = ""
    tests: set[str] = field(default_factory=set)
    tested: int = 0
    """Tests long enough to count (those in `tests`, duplicates included)."""
    solutions: dict[str, str] = field(default_factory=dict)
    """Solution digest → its path in the task."""
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What could not be read (the task is compared by the rest)."""


def of_problem(problem: Problem, where: str) -> Fingerprint:
    """A judge problem as a source loader gives it (its files by path or by bytes)."""
    spec = problem.spec
    fp = Fingerprint(spec.id, where, ids={id_key(spec.id)}, statement=problem.statement)
    for test in spec.tests:
        given, answer = problem.files.get(f"private/{test.input}"), problem.files.get(f"private/{test.answer}")
        if given is not None and answer is not None:
            add_test(fp, bytes_of(given), bytes_of(answer))
    for ref in spec.solutions:
        if ref.path in problem.files:
            add_solution(fp, ref.path, bytes_of(problem.files[ref.path]))
    return fp


def add_test(fp: Fingerprint, given: bytes, answer: bytes) -> None:
    digest = test_digest(given, answer)
    if digest is not None:
        fp.tests.add(digest)
        fp.tested += 1


def add_solution(fp: Fingerprint, rel: str, code: bytes) -> None:
    digest = solution_digest(code)
    if digest is not None:
        fp.solutions.setdefault(digest, rel)


def of_env(folder: Path) -> Fingerprint:
    """A built env (or an arex problem folder, the same layout): its task.yaml says which kind."""
    raw = read_spec_yaml(folder / "task.yaml")
    spec = validate_spec(spec_model(raw, folder / "task.yaml"), raw, folder / "task.yaml")
    fp = Fingerprint(spec.id, str(folder), ids={id_key(spec.id)}, statement=_text(folder / "statement.md"))
    if isinstance(spec, JudgeSpec):
        private = folder / "private"
        for test in spec.tests:
            given, answer = private / test.input, private / test.answer
            if given.is_file() and answer.is_file():
                add_test(fp, given.read_bytes(), answer.read_bytes())
        for ref in spec.solutions:
            if (folder / ref.path).is_file():
                add_solution(fp, ref.path, (folder / ref.path).read_bytes())
    elif isinstance(spec, MLSpec):
        if spec.source_url:
            fp.urls.add(url_key(spec.source_url))
        fp.tables += _env_tables(folder, spec)
    return fp


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _env_tables(folder: Path, spec: MLSpec) -> list[Table]:
    """A built ML env's labelled rows: its training file, and its test file with the held-out labels."""
    data, workspace = spec.data, folder / "workspace"
    tables: list[Table] = []
    train = workspace / data.train_file
    if train.is_file():
        header, rows = read_csv(_text(train))
        tables.append((data.train_file, header, rows, data.target))
    test, labels = workspace / data.test_file, folder / "private" / "labels.csv"
    if test.is_file() and labels.is_file():
        joined = join_labels(read_csv(_text(test)), read_csv(_text(labels)), data.id_column, data.target)
        if joined is not None:
            tables.append((f"{data.test_file} + labels", *joined, data.target))
    return tables


def join_labels(
    features: tuple[list[str], list[list[str]]], answers: tuple[list[str], list[list[str]]], id_column: str, label: str
) -> tuple[list[str], list[list[str]]] | None:
    """Test rows with their label, joined on `id_column` (rows without an answer left out); None
    if either side lacks the column."""
    (head, rows), (answer_head, answer_rows) = features, answers
    if id_column not in head or id_column not in answer_head or label not in answer_head:
        return None
    at, key, value = head.index(id_column), answer_head.index(id_column), answer_head.index(label)
    by_id = {r[key]: r[value] for r in answer_rows}
    return head + [label], [r + [by_id[r[at]]] for r in rows if r[at] in by_id]


def of_ml_table(env_id: str, where: str, url: str, statement: str, table: str, text: str, label: str) -> Fingerprint:
    """An ML source before it is built: its labelled table as the repository has it."""
    header, rows = read_csv(text)
    fp = Fingerprint(env_id, where, ids={id_key(env_id)}, statement=statement)
    if url:
        fp.urls.add(url_key(url))
    fp.tables.append((table, header, rows, label))
    return fp
