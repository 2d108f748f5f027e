"""The files `arex select` writes, read back with their shapes checked: the verdict cache
(`verdicts.jsonl`), the selection report (`selection.json`) and the kept records (`kept.jsonl`).

They are the user's files by the time they are read (copied, edited, damaged): whatever they
hold, a reader returns what arex wrote or raises one `SelectionFileError` naming the file (and
line, and field) and what to do, never a traceback. The one exception is the verdict cache's cut
line: a kill mid-append leaves a line that is not JSON (a re-run appends after it, on the same
line), which is skipped, so its trajectory is judged again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from arex.errors import UserInputError


class SelectionFileError(UserInputError):
    """A file `arex select` wrote does not hold what it wrote; the message names it and what to do."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class CachedVerdict(_Strict):
    """One line of verdicts.jsonl (arex.selection.selector.Verdict, as written)."""

    key: StrictStr
    env_id: StrictStr
    path: StrictStr
    kept: StrictBool
    reasons: list[StrictStr] = []
    details: dict[str, StrictStr] = {}
    scores: dict[str, StrictFloat | StrictInt | None] = {}
    record_sha: StrictStr
    criteria: StrictStr


class DropRow(_Strict):
    count: StrictInt
    ids: list[StrictStr]


class SelectionReport(_Strict):
    """selection.json (arex.selection.selector.Selection.report, with the store and envs folders)."""

    criteria: dict[str, Any]
    criteria_hash: StrictStr
    total: StrictInt
    kept: StrictInt
    dropped: StrictInt
    drops: dict[str, DropRow]
    kept_ids: list[StrictStr]
    store: str | None = Field(default=None, pattern=r"^[^\x00]*$", strict=True)
    envs: str | None = Field(default=None, pattern=r"^[^\x00]*$", strict=True)
    """The folders select read (absolute paths; no NUL: no folder could have such a name)."""


class KeptRow(_Strict):
    """One line of kept.jsonl."""

    key: StrictStr
    env_id: StrictStr
    path: StrictStr = Field(min_length=1, pattern=r"^[^\x00]*$")
    """The record's absolute path (no NUL: no file could have such a name)."""
    scores: dict[str, StrictFloat | StrictInt | None] = {}
    record_sha: StrictStr | None = None
    """None: written by an arex from before kept records carried it (export refuses such a row)."""


def _problem(exc: ValidationError) -> str:
    """The first thing wrong, naming the field: "field 'drops.x.count': Input should be a valid integer"."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"field '{where}': {error['msg']}" if where else error["msg"]


def _json(text: str) -> Any:
    """json.loads, with nesting too deep for Python's parser as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SelectionFileError(f"{path} is not UTF-8 text, so it is not {what}; {_redo(path)}") from None
    except OSError as exc:
        raise SelectionFileError(f"{path} cannot be read ({exc.strerror or exc}); {_redo(path)}") from None


def _redo(path: Path) -> str:
    return f"move it away and re-run `arex select --out {path.parent}` (cached verdicts make it quick)"


def read_verdicts(path: Path) -> dict[tuple[str, str], dict]:
    """The cached verdicts by (record checksum, criteria hash); {} if there is no cache yet."""
    if not path.is_file():
        return {}
    cached: dict[tuple[str, str], dict] = {}
    data = path.read_bytes().decode("utf-8", errors="replace")  # a cut multibyte character is a cut line
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill: its trajectory is judged again
        except RecursionError:
            raw = None
        try:
            row = CachedVerdict.model_validate(raw).model_dump()
        except ValidationError as exc:
            raise SelectionFileError(
                f"{path}, line {number}: not a verdict arex wrote ({_problem(exc)}); it is select's cache: "
                "delete that line, or the whole file, and re-run (those trajectories are judged again)"
            ) from None
        cached[(row["record_sha"], row["criteria"])] = row
    return cached


def read_selection(path: Path) -> dict:
    """selection.json, checked, as the dict select wrote."""
    try:
        return SelectionReport.model_validate(_json(_text(path, "a selection report"))).model_dump()
    except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
        problem = _problem(exc) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
        raise SelectionFileError(
            f"{path} is not a selection report written by `arex select` ({problem}); {_redo(path)}"
        ) from None


def read_kept(path: Path) -> list[KeptRow]:
    """kept.jsonl, checked: one row per kept record."""
    rows = []
    for number, line in enumerate(_text(path, "a list of kept records").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(KeptRow.model_validate(_json(line)))
        except ValueError as exc:
            problem = _problem(exc) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
            raise SelectionFileError(
                f"{path}, line {number}: not a kept record written by `arex select` ({problem}); {_redo(path)}"
            ) from None
    return rows
