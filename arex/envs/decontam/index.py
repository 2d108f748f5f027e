"""An evaluation set's index, and what a training task shares with it.

The index holds, per evaluation item (a problem, a competition, a built env, a listed id), its ids,
source URLs, statement n-grams, test and solution digests and table sketches; `EvalSet` inverts
them once so a training task is checked in time linear in its own size. An n-gram found in more
than `BOILERPLATE_SHARE` of the set's items (and in at least three) is the benchmark's boilerplate
(an interactive protocol, an input-format sentence) and is never evidence.

A training task overlaps an item on any one of:
- the same id or source URL;
- its statement: at least `statement_min_shared` distinctive n-grams of the item's statement found
  in it, and they are at least `statement_overlap` of the item's n-grams (the evaluation problem's
  text is what must not be in the training data: a short text that repeats a sentence or two of it,
  even if it is little else, does not reveal the problem);
- identical tests: at least two of its long-enough tests (one, if it has only one) are an item's;
- an identical solution (long enough to tell problems apart);
- labelled rows: a table holding at least `rows_overlap` of an item's rows (`tables.compare`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from arex.envs.build_config import DecontamConfig
from arex.envs.decontam.fingerprint import Fingerprint
from arex.envs.decontam.tables import TableSketch, compare, digest_rows, sketch
from arex.envs.decontam.text import grams

INDEX_VERSION = 1
BOILERPLATE_SHARE = 0.05


@dataclass
class Item:
    """One evaluation item as its set's index keeps it."""

    name: str
    where: str
    ids: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    grams: list[int] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    solutions: list[str] = field(default_factory=list)
    tables: list[TableSketch] = field(default_factory=list)

    @classmethod
    def of(cls, fp: Fingerprint, n: int) -> "Item":
        return cls(
            fp.name,
            fp.where,
            sorted(fp.ids),
            sorted(fp.urls),
            sorted(grams(fp.statement, n)),
            sorted(fp.tests),
            sorted(fp.solutions),
            [sketch(name, header, rows, label) for name, header, rows, label in fp.tables],
        )

    def to_json(self) -> dict:
        return {**self.__dict__, "tables": [t.to_json() for t in self.tables]}

    @classmethod
    def from_json(cls, data: dict) -> "Item":
        return cls(**{**data, "tables": [TableSketch.from_json(t) for t in data["tables"]]})


@dataclass
class Overlap:
    """A training task found in an evaluation set: which item, and the evidence."""

    eval_set: str
    item: str
    where: str
    signals: list[str]
    action: str = ""
    """refused or flagged: what build-envs or export did about it."""

    def describe(self) -> str:
        return f"{self.item} of evaluation set {self.eval_set}: {'; '.join(self.signals)}"

    def to_json(self) -> dict:
        return dict(self.__dict__)


class EvalSet:
    """An evaluation set's items, inverted for lookups."""

    def __init__(self, name: str, items: list[Item], notes: list[str], n: int):
        self.name, self.items, self.notes, self.n = name, items, notes, n
        self.by_id = _invert((i, item.ids) for i, item in enumerate(items))
        self.by_url = _invert((i, item.urls) for i, item in enumerate(items))
        self.by_test = _invert((i, item.tests) for i, item in enumerate(items))
        self.by_solution = _invert((i, item.solutions) for i, item in enumerate(items))
        frequency = Counter(g for item in items for g in set(item.grams))
        common = max(2, int(BOILERPLATE_SHARE * len(items)))
        self.by_gram = _invert((i, [g for g in item.grams if frequency[g] <= common]) for i, item in enumerate(items))

    def overlaps(self, fp: Fingerprint, config: DecontamConfig) -> list[Overlap]:
        """Every item `fp` overlaps, each with its evidence."""
        signals: dict[int, list[str]] = {}
        for key in fp.ids:
            for i in self.by_id.get(key, ()):
                signals.setdefault(i, []).append(f"same id '{key}'")
        for key in fp.urls:
            for i in self.by_url.get(key, ()):
                signals.setdefault(i, []).append(f"same source URL '{key}'")
        self._statement(fp, config, signals)
        self._tests(fp, signals)
        for digest, rel in fp.solutions.items():
            for i in self.by_solution.get(digest, ()):
                signals.setdefault(i, []).append(f"identical reference solution ({rel})")
        self._tables(fp, config, signals)
        return [
            Overlap(self.name, self.items[i].name, self.items[i].where, found) for i, found in sorted(signals.items())
        ]

    def _statement(self, fp: Fingerprint, config: DecontamConfig, signals: dict[int, list[str]]) -> None:
        mine = grams(fp.statement, self.n)
        shared = Counter(i for g in mine for i in self.by_gram.get(g, ()))
        for i, count in shared.items():
            theirs = len(self.items[i].grams)
            if count >= config.statement_min_shared and count >= config.statement_overlap * theirs:
                signals.setdefault(i, []).append(
                    f"statement: {count} of its {theirs} {self.n}-grams found ({count / theirs:.0%})"
                )

    def _tests(self, fp: Fingerprint, signals: dict[int, list[str]]) -> None:
        shared = Counter(i for digest in fp.tests for i in self.by_test.get(digest, ()))
        for i, count in shared.items():
            if count >= min(2, len(fp.tests)):
                signals.setdefault(i, []).append(f"{count} of {len(fp.tests)} tests identical")

    def _tables(self, fp: Fingerprint, config: DecontamConfig, signals: dict[int, list[str]]) -> None:
        for _, _, rows, _ in fp.tables:
            digested = digest_rows(rows) if any(item.tables for item in self.items) else []
            for i, item in enumerate(self.items):
                for table in item.tables:
                    match = compare(table, digested)
                    if match is not None and match.share >= config.rows_overlap:
                        signals.setdefault(i, []).append(match.describe())

    def to_json(self) -> dict:
        return {
            "version": INDEX_VERSION,
            "name": self.name,
            "n": self.n,
            "notes": self.notes,
            "items": [item.to_json() for item in self.items],
        }

    @classmethod
    def from_json(cls, data: dict) -> "EvalSet":
        return cls(data["name"], [Item.from_json(i) for i in data["items"]], data["notes"], data["n"])


def _invert(pairs) -> dict:
    found: dict = {}
    for i, keys in pairs:
        for key in keys:
            bucket = found.setdefault(key, [])
            if not bucket or bucket[-1] != i:
                bucket.append(i)
    return found
