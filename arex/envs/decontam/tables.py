"""Labelled rows of an evaluation set found in a training table, whatever the column order, the
columns added or left out, and the number format.

An evaluation table is kept as a sketch: up to `SAMPLE_ROWS` rows spread evenly over it, each cell
as a digest of its normalised value (`leak_scan.norm_str`: `1` == `1.0` == `1.000`, `True` == `1`,
case and surrounding space ignored). A training table is compared to it in three steps:

1. key columns: an evaluation column whose sampled values are mostly distinct is paired with the
   training column sharing most values with it (at least half of the smaller one's: either table
   may hold a part of the other); each column is paired once;
2. rows: an evaluation row whose key cells all occur together in a training row is a candidate;
3. the other columns: paired with the training column that agrees with them on the candidates far
   beyond chance (Cohen's kappa of at least `KAPPA`; a column with one value carries no evidence).

A match needs a key column and at least one column confirmed in step 3 (a shared id range alone
is no evidence), and `MIN_ROWS` rows agreeing on every paired column. Its share is of the
evaluation rows found in the training table, or of the training rows that come from the evaluation
set, whichever is larger.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass

from arex.envs.decontam.text import digest64
from arex.envs.leak_scan import norm_str

SAMPLE_ROWS = 2000
KEY_DISTINCT = 0.3
"""An evaluation column is a key when this share of its sampled values are distinct."""
KEY_CONTAINMENT = 0.5
KAPPA = 0.8
MIN_ROWS = 20
ALIGN_ROWS = 300
"""Candidate rows used to pair the non-key columns (all candidates are checked afterwards)."""

csv.field_size_limit(1 << 30)


@dataclass
class TableSketch:
    name: str
    columns: list[str]
    rows: list[list[int]]
    """The sampled rows, each cell a digest of its normalised value."""
    total: int
    """Rows in the whole table."""
    label: str | None = None

    def to_json(self) -> dict:
        return self.__dict__

    @classmethod
    def from_json(cls, data: dict) -> "TableSketch":
        return cls(**data)


@dataclass
class TableMatch:
    table: str
    rows: int
    """Evaluation rows (of the sample) found whole in the training table."""
    share: float
    columns: list[str]
    """The evaluation columns paired with a training column."""

    def describe(self) -> str:
        shown = ", ".join(self.columns[:6]) + (" ..." if len(self.columns) > 6 else "")
        return f"{self.rows} labelled rows of {self.table} ({self.share:.0%}; columns {shown})"


def cell(value: str) -> int:
    return digest64(norm_str(value).encode())


def read_csv(text: str) -> tuple[list[str], list[list[str]]]:
    """A CSV text's header and rows (rows of another width than the header are left out)."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))
    header = next(reader, None) or []
    return header, [r for r in reader if len(r) == len(header)]


def sketch(name: str, columns: list[str], rows: list[list[str]], label: str | None = None) -> TableSketch:
    step = max(1, -(-len(rows) // SAMPLE_ROWS))
    sample = [[cell(v) for v in row] for row in rows[::step]]
    return TableSketch(name, list(columns), sample, len(rows), label)


def digest_rows(rows: list[list[str]]) -> list[list[int]]:
    """A training table's cells as `compare` takes them (done once per table, not per comparison)."""
    return [[cell(v) for v in row] for row in rows]


def compare(evaluation: TableSketch, train: list[list[int]]) -> TableMatch | None:
    """The evaluation table's rows found in the training table (its rows, `digest_rows`), or None."""
    if len(evaluation.rows) < MIN_ROWS or len(train) < MIN_ROWS:
        return None
    values = [{r[k] for r in train} for k in range(len(train[0]))]
    keys = _key_pairs(evaluation, values)
    if not keys:
        return None
    first: dict[tuple, int] = {}
    for t, row in enumerate(train):
        first.setdefault(tuple(row[k] for _, k in keys), t)
    found = ((i, first.get(tuple(r[j] for j, _ in keys))) for i, r in enumerate(evaluation.rows))
    candidates = [(i, t) for i, t in found if t is not None]
    if len(candidates) < MIN_ROWS:
        return None
    others = _confirmed_pairs(evaluation, train, candidates, {k for _, k in keys}, {j for j, _ in keys})
    if not others:
        return None
    pairs = keys + others
    whole = sum(all(evaluation.rows[i][j] == train[t][k] for j, k in pairs) for i, t in candidates)
    if whole < MIN_ROWS:
        return None
    of_eval = whole / len(evaluation.rows)
    of_train = min(1.0, of_eval * evaluation.total / len(train))
    named = [evaluation.columns[j] for j, _ in sorted(pairs)]
    return TableMatch(evaluation.name, whole, max(of_eval, of_train), named)


def _key_pairs(evaluation: TableSketch, values: list[set[int]]) -> list[tuple[int, int]]:
    """(evaluation column, training column) for each key column found, best containment first."""
    scored = []
    for j in range(len(evaluation.columns)):
        seen = {r[j] for r in evaluation.rows}
        if len(seen) < MIN_ROWS or len(seen) < KEY_DISTINCT * len(evaluation.rows):
            continue
        for k, present in enumerate(values):
            share = len(seen & present) / max(1, min(len(seen), len(present)))  # either may hold a part of the other
            if share >= KEY_CONTAINMENT:
                scored.append((share, j, k))
    return _one_to_one(scored)


def _confirmed_pairs(
    evaluation: TableSketch, train: list[list[int]], candidates: list[tuple[int, int]], used: set[int], keys: set[int]
) -> list[tuple[int, int]]:
    """The non-key columns paired, each with the training column agreeing with it beyond chance."""
    probe = candidates[:ALIGN_ROWS]
    scored = []
    for j in range(len(evaluation.columns)):
        if j in keys:
            continue
        left = [evaluation.rows[i][j] for i, _ in probe]
        for k in range(len(train[0]) if train else 0):
            if k in used:
                continue
            kappa = _kappa(left, [train[t][k] for _, t in probe])
            if kappa >= KAPPA:
                scored.append((kappa, j, k))
    return _one_to_one(scored)


def _kappa(left: list[int], right: list[int]) -> float:
    """Cohen's kappa of two columns' agreement; 0 when one side holds a single value (no evidence)."""
    a, b = Counter(left), Counter(right)
    if len(a) < 2 or len(b) < 2:
        return 0.0
    n = len(left)
    agree = sum(x == y for x, y in zip(left, right)) / n
    chance = sum(a[v] * b.get(v, 0) for v in a) / (n * n)
    return (agree - chance) / (1 - chance) if chance < 1 else 0.0


def _one_to_one(scored: list[tuple[float, int, int]]) -> list[tuple[int, int]]:
    pairs, left, right = [], set(), set()
    for _, j, k in sorted(scored, key=lambda s: (-s[0], s[1], s[2])):
        if j not in left and k not in right:
            pairs.append((j, k))
            left.add(j)
            right.add(k)
    return pairs
