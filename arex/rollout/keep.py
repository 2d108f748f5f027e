"""Which workspace archives a rollout keeps: the first, the best and the last round's (what
selection re-checks). A snapshot counts only once its round_end is written."""

from __future__ import annotations

from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import RoundEnd


class Keeper:
    def __init__(self, store: SnapshotStore):
        self.store = store
        self.kept: dict[str, str | None] = {"first": None, "best": None, "last": None}

    def note(self, end: RoundEnd, improved: bool) -> None:
        """Remember a written round's snapshot under the names it now has."""
        if end.round == 1:
            self.kept["first"] = end.snapshot
        if improved:
            self.kept["best"] = end.snapshot
        if end.snapshot is not None:
            self.kept["last"] = end.snapshot

    def prune(self) -> None:
        """Delete every archive no name points to (the rounds in between)."""
        self.store.prune({sha for sha in self.kept.values() if sha})

    def last(self) -> str | None:
        """The archive a resumed rollout starts from, if it is still there."""
        sha = self.kept["last"]
        return sha if sha and self.store.has(sha) else None
