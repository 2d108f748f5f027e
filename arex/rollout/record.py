"""The trajectory record: one JSONL file per rollout, the schema versioned here and only here.

Lines, in order: a `header`; per round a `round_start` (the context the round began with), one
`step` per teacher call while acting, a `round_end` (submission, the sha256 of the workspace
archive it was read from in `snapshot` — null if the workspace could not be kept —, grade,
reflection, best so far);
finally an `end`. Each line is flushed when written, so a killed process loses at most the step in
flight; `load` drops an unfinished round so a resumed rollout replays it whole.

Every call's exact messages are reconstructable: a step's request is the round's context followed
by the earlier steps' (assistant reply, user observation) pairs; the reflection's request adds the
last reply (if any) and the reflect prompt. `call_messages` does this, and a test checks it
byte-for-byte against what the server received.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


class RecordWriter:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


@dataclass
class Loaded:
    """What a record file holds, cut back to its last complete round."""

    header: dict | None = None
    rounds: list[dict] = field(default_factory=list)
    """Complete rounds: {'start': round_start, 'steps': [...], 'end': round_end}."""
    end: dict | None = None


def load(path: Path, truncate: bool = False, keep_end: bool = True) -> Loaded:
    """Read a record. With truncate=True, rewrite the file without any unfinished round (and
    without its `end` line if keep_end is False: a rollout to be redone)."""
    loaded = Loaded()
    if not path.is_file():
        return loaded
    keep: list[str] = []
    pending: dict | None = None
    pending_lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break  # a line cut by a kill: everything after it is unusable
        kind = record.get("type")
        if kind == "header":
            loaded.header = record
            keep.append(line)
        elif kind == "round_start":
            pending, pending_lines = {"start": record, "steps": []}, [line]
        elif kind == "step" and pending is not None:
            pending["steps"].append(record)
            pending_lines.append(line)
        elif kind == "round_end" and pending is not None:
            pending["end"] = record
            loaded.rounds.append(pending)
            keep += pending_lines + [line]
            pending, pending_lines = None, []
        elif kind == "end":
            loaded.end = record
            if keep_end:
                keep.append(line)
    if truncate:
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
        os.replace(tmp, path)
    return loaded


def call_messages(round_: dict, step_index: int | None = None) -> list[dict]:
    """The exact request messages of step `step_index` of a round, or of its reflection (None)."""
    messages = list(round_["start"]["context"])
    steps = round_["steps"] if step_index is None else round_["steps"][:step_index]
    for step in steps:
        messages.append({"role": "assistant", "content": step["call"]["content"]})
        if step.get("observation") is not None:
            messages.append({"role": "user", "content": step["observation"]})
    if step_index is None:
        messages.append({"role": "user", "content": round_["end"]["reflect_prompt"]})
    return messages
