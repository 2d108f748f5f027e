"""Labelled rows of an evaluation set found in a training table, whatever the column order, the
columns added or left out, and the number format.

An evaluation table is kept as a sketch: up to `SAMPLE_ROWS` rows spread evenly over it, each cell
as a digest of its normalised value (`leak_scan.norm_str`: `1` == `1.0` == `1.000`, `True` == `1`,
case and surrounding space ignored). A training table is compared to it in three steps:

1. key columns: an evaluation column whose sampled values are mostly distinct is paired with a
   training column sharing many of its values (at least half of the smaller one's: either table may
   hold a part of the other);
2. rows: for one key pairing at a time (the best few are tried), an evaluation row whose key cell
   occurs in the training column is a candidate, with the first training row holding it;
3. the other columns: each paired with the training column that agrees with it on the candidates
   far beyond chance (Cohen's kappa of at least `KAPPA`; a column with one value carries none).

A match needs at least one column confirmed in step 3 besides the key (a shared id range alone is
no evidence) and `MIN_ROWS` rows agreeing on every paired column. Its share is of the
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
KEY_DISTINCT = 0.8
"""An evaluation column is a key when this share of its sampled values are distinct (ids, real numbers, text)."""
KEY_TRIES = 3
SAME_KEY_ROWS = 8
"""Training rows kept per key value (a value repeated more often is compared in its first rows only)."""
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
    """The evaluation table's rows found in the training table (its rows, `digest_rows`), or None.
    Each of the best `KEY_TRIES` key pairings is tried on its own (a wrong pairing finds no rows)."""
    if len(evaluation.rows) < MIN_ROWS or len(train) < MIN_ROWS:
        return None
    values = [{r[k] for r in train} for k in range(len(train[0]))]
    best = None
    for j, k in _key_pairs(evaluation, values)[:KEY_TRIES]:
        match = _match_on(evaluation, train, j, k)
        if match is not None and (best is None or match.rows > best.rows):
            best = match
    return best


def _match_on(evaluation: TableSketch, train: list[list[int]], j: int, k: int) -> TableMatch | None:
    """The rows found when evaluation column `j` is training column `k`, the other columns confirmed."""
    holding: dict[int, list[int]] = {}
    for t, row in enumerate(train):
        rows = holding.setdefault(row[k], [])
        if len(rows) < SAME_KEY_ROWS:
            rows.append(t)
    found = {i: holding[r[j]] for i, r in enumerate(evaluation.rows) if r[j] in holding}
    if len(found) < MIN_ROWS:
        return None
    others = _confirmed_pairs(evaluation, train, [(i, ts[0]) for i, ts in found.items()], {k}, {j})
    if not others:
        return None
    pairs = [(j, k)] + others
    row = evaluation.rows
    whole = sum(any(all(row[i][a] == train[t][b] for a, b in pairs) for t in ts) for i, ts in found.items())
    if whole < MIN_ROWS:
        return None
    of_eval = whole / len(evaluation.rows)
    of_train = min(1.0, of_eval * evaluation.total / len(train))
    named = [evaluation.columns[a] for a, _ in sorted(pairs)]
    return TableMatch(evaluation.name, whole, max(of_eval, of_train), named)


def _key_pairs(evaluation: TableSketch, values: list[set[int]]) -> list[tuple[int, int]]:
    """(evaluation column, training column) for each key column found, best first: an evaluation
    column of mostly distinct values, and the training column sharing at least `MIN_ROWS` of them
    and `KEY_CONTAINMENT` of the smaller column's (either table may hold a part of the other)."""
    scored = []
    for j in range(len(evaluation.columns)):
        seen = {r[j] for r in evaluation.rows}
        if len(seen) < MIN_ROWS or len(seen) < KEY_DISTINCT * len(evaluation.rows):
            continue
        for k, present in enumerate(values):
            shared = len(seen & present)
            if shared >= MIN_ROWS and shared >= KEY_CONTAINMENT * min(len(seen), len(present)):
                scored.append((shared / min(len(seen), len(present)), j, k))
    return [(j, k) for _, j, k in sorted(scored, key=lambda s: (-s[0], s[1], s[2]))]


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
