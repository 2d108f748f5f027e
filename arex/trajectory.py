"""The trajectory record: one JSONL file per rollout, its schema as types, versioned here and only here.

Lines, in order (docs/record.md describes each field): a `Header`; per round a `RoundStart` (the
context the round began with), one `Step` per teacher call while acting, a `RoundEnd` (submission,
the sha256 of the workspace archive it was read from, grade, reflection, best so far); finally an
`End`. Each line is flushed when written, so a killed process loses at most the line in flight;
`load` drops an unfinished round so a resumed rollout replays it whole.

Every call's exact messages are reconstructable (`Round.messages`): a step's request is the round's
context followed by the earlier steps' (assistant reply, user observation) pairs; the reflection's
request adds the reflect prompt. A test checks this byte for byte against what the server received.

Version 2 is version 1 validated: the same lines and fields, with the endings and statuses below
as closed vocabularies. Version-1 files are read as they are (a field added during version 1, such
as `snapshot`, takes its default); a file of a newer version is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arex.errors import UserInputError
from arex.specs import Attempt, GradeResult, TeacherIdentity

SCHEMA_VERSION = 2
READS = (1, 2)
"""Schema versions `load` reads."""

Ending = Literal["submitted", "step_limit", "format_errors", "budget"]
"""How a round's acting ended: the agent said `submit`, it used every step, it sent too many
unusable replies in a row, or a token/cost/time budget ran out mid-round."""

EndStatus = Literal["done", "budget", "infra_failed", "teacher_error", "context_overflow", "interrupted"]
"""How a rollout ended. `infra_failed` and `interrupted` rollouts are redone or resumed by re-running."""

ActionKind = Literal["command", "submit", "invalid"]


class RecordError(UserInputError):
    """A trajectory file holds a line that is not a record of a known version (raised by `load`)."""


class _Part(BaseModel):
    """A nested value. Unknown keys are ignored: they are data, not structure."""

    model_config = ConfigDict(frozen=True)


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Message(_Part):
    role: str
    content: str


class Call(_Part):
    """One teacher call as recorded: a `TeacherCall` without its messages (they are reconstructable)."""

    sampling: dict[str, Any]
    content: str
    reasoning_content: str | None = None
    finish_reason: str | None = None
    status: str
    """'ok', or why the reply is unusable ('empty', 'truncated', ...)."""
    model: str
    system_fingerprint: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retries: int = 0
    attempts: list[Attempt] = Field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Action(_Part):
    kind: ActionKind
    command: str = ""
    error: str = ""

    @property
    def usable(self) -> bool:
        return self.kind != "invalid"


class Exec(_Part):
    status: str
    exit_code: int
    seconds: float


class Best(_Part):
    round: int
    held_out: float
    public: float


class BestPublic(_Part):
    round: int
    public: float


class Reflection(_Part):
    call: Call
    review: str = ""
    diagnose: str = ""
    plan: str = ""
    state: str = ""
    complete: bool = False
    """All four headings (REVIEW, DIAGNOSE, PLAN, STATE) were present and non-empty."""


class Header(_Line):
    type: Literal["header"] = "header"
    schema_version: int
    key: str
    env_id: str
    env_kind: str
    domain: str | None = None
    spec_hash: str
    sample: int
    teacher: TeacherIdentity
    sampling: dict[str, Any]
    config_hash: str
    config: dict[str, Any]
    """The rollout config, as `RolloutConfig.model_dump()`."""
    arex_version: str
    baseline_score: float | None = None
    protected: list[str] = Field(default_factory=list)
    started_at: float


class RoundStart(_Line):
    type: Literal["round_start"] = "round_start"
    round: int
    context: list[Message]


class Step(_Line):
    type: Literal["step"] = "step"
    round: int
    step: int
    call: Call
    action: Action
    observation: str | None = None
    """What the agent was shown next (command output, or the format-error prompt); none after `submit`."""
    exec: Exec | None = None

    @property
    def usable(self) -> bool:
        return self.call.status == "ok" and self.action.usable


class RoundEnd(_Line):
    type: Literal["round_end"] = "round_end"
    round: int
    ending: Ending
    submission: str
    snapshot: str | None = None
    """sha256 of the workspace archive the submission was read from; null if it could not be kept."""
    grade: GradeResult
    feedback: str
    reflect_prompt: str
    reflection: Reflection
    state: str
    best: Best | None = None
    best_public: BestPublic | None = None


class End(_Line):
    type: Literal["end"] = "end"
    status: EndStatus
    reason: str
    rounds: int
    best: Best | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


Line = Annotated[Union[Header, RoundStart, Step, RoundEnd, End], Field(discriminator="type")]


class Round(BaseModel):
    """One complete round: its start, its steps and its end."""

    model_config = ConfigDict(frozen=True)

    start: RoundStart
    steps: list[Step]
    end: RoundEnd

    @property
    def number(self) -> int:
        return self.end.round

    @property
    def held_out(self) -> float:
        return self.end.grade.held_out_score

    def messages(self, step_index: int | None = None) -> list[dict[str, str]]:
        """The exact request messages of step `step_index`, or of the reflection call (None)."""
        messages = [{"role": m.role, "content": m.content} for m in self.start.context]
        for step in self.steps if step_index is None else self.steps[:step_index]:
            messages.append({"role": "assistant", "content": step.call.content})
            if step.observation is not None:
                messages.append({"role": "user", "content": step.observation})
        if step_index is None:
            messages.append({"role": "user", "content": self.end.reflect_prompt})
        return messages


class Trajectory(BaseModel):
    """What a record file holds, cut back to its last complete round."""

    model_config = ConfigDict(frozen=True)

    path: Path | None = None
    header: Header | None = None
    rounds: list[Round] = Field(default_factory=list)
    """Complete rounds only."""
    end: End | None = None

    @property
    def held_out(self) -> list[float]:
        """The held-out score of each complete round, in order."""
        return [r.held_out for r in self.rounds]


class RecordWriter:
    """Appends lines to a record file, each flushed as written."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, line: Header | RoundStart | Step | RoundEnd | End) -> None:
        self._file.write(json.dumps(line.model_dump(), ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


_LINE = {cls.model_fields["type"].default: cls for cls in (Header, RoundStart, Step, RoundEnd, End)}


def parse_line(raw: dict, path: Path, number: int, version: int) -> BaseModel:
    """One decoded line as its model. RecordError names the file and line if it is not one."""
    cls = _LINE.get(raw.get("type")) if isinstance(raw, dict) else None
    if cls is None:
        raise RecordError(f"{path}, line {number}: not a trajectory record line (type {raw.get('type') if isinstance(raw, dict) else raw!r}); is this file a trajectory?")
    if version == 1:  # version 1 had no fixed field set: keep what the model knows
        raw = {k: v for k, v in raw.items() if k in cls.model_fields}
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise RecordError(f"{path}, line {number}: a {cls.__name__} line does not match schema version {version} ({problems})") from None


def _version(raw: dict, path: Path) -> int:
    version = raw.get("schema_version")
    if version not in READS:
        raise RecordError(f"{path}: schema version {version!r} is not one this arex reads ({', '.join(map(str, READS))}); upgrade arex to read it")
    return version


def load(path: Path, truncate: bool = False, keep_end: bool = True) -> Trajectory:
    """Read a record. With truncate=True, rewrite the file without any unfinished round (and
    without its `end` line if keep_end is False: a rollout to be redone)."""
    path = Path(path)
    if not path.is_file():
        return Trajectory(path=path)
    header, rounds, end = None, [], None
    version = SCHEMA_VERSION
    keep: list[str] = []
    pending: tuple[RoundStart, list[Step], list[str]] | None = None
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            break  # a line cut by a kill: everything after it is unusable
        if isinstance(raw, dict) and raw.get("type") == "header":
            version = _version(raw, path)
        line = parse_line(raw, path, number, version)
        if isinstance(line, Header):
            header = line
            keep.append(text)
        elif isinstance(line, RoundStart):
            pending = (line, [], [text])
        elif isinstance(line, Step) and pending is not None:
            pending[1].append(line)
            pending[2].append(text)
        elif isinstance(line, RoundEnd) and pending is not None:
            rounds.append(Round(start=pending[0], steps=pending[1], end=line))
            keep += pending[2] + [text]
            pending = None
        elif isinstance(line, End):
            end = line
            if keep_end:
                keep.append(text)
    if truncate:
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
        os.replace(tmp, path)
    return Trajectory(path=path, header=header, rounds=rounds, end=end)
