"""The trajectory record: one JSONL file per rollout, its schema as types, versioned here and only here.

Lines, in order (docs/record.md describes each field): a `Header`; per round a `RoundStart` (the
context the round began with), one `Step` per teacher call while acting, a `RoundEnd` (submission,
the sha256 of the workspace archive it was read from, grade, reflection, best so far); finally an
`End`; `Spent` lines wherever calls were paid for outside a complete round. Each line is flushed
when written, so a killed process loses at most the line in flight; `load` drops an unfinished
round (its calls become a `Spent` line) so a resumed rollout replays it whole.

Every call's exact messages are reconstructable (`Round.messages`): a step's request is the round's
context followed by the earlier steps' turns (`Step.turns`: the assistant reply, then the user
observation, or in the `tools` action format one `tool` message per tool call); the reflection's
request adds the reflect prompt. A test checks this byte for byte against what the server received.

Version 2 is version 1 validated: the same lines and fields, with the endings and statuses below
as closed vocabularies, and one more line type (`Spent`: paid calls outside any complete round).
Version-1 files are read as they are (a field added during version 1, such
as `snapshot`, takes its default); a file of a newer version is refused. The fields of the `tools`
action format (`Header.action_format`/`tools`, `Call.tool_calls`, `Message.tool_calls`/
`tool_call_id`, `Step.tool_results`) were added during version 2: they default, and a line leaves
them out while they hold their default, so a `text` record is written as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from arex.errors import UserInputError
from arex.specs import Attempt, GradeResult, TeacherIdentity

SCHEMA_VERSION = 2
TOOLS_SCHEMA_VERSION = 3
"""Version of records in the `tools` action format: version 2 plus tool calls, so an arex that
predates them says "upgrade arex" instead of failing on unknown fields. Text records stay 2, unless
their requests carried prompt-cache marks (`Header.cache_breakpoints`, also added in version 3)."""
READS = (1, 2, 3)
"""Schema versions `load` reads."""

Ending = Literal["submitted", "step_limit", "format_errors", "budget"]
"""How a round's acting ended: the agent said `submit`, it used every step, it sent too many
unusable replies in a row, or a token/cost/time budget ran out mid-round."""

EndStatus = Literal["done", "budget", "infra_failed", "teacher_error", "context_overflow", "interrupted"]
"""How a rollout ended. `infra_failed` and `interrupted` rollouts are redone or resumed by re-running."""

ActionKind = Literal["command", "submit", "invalid"]

ActionFormat = Literal["text", "tools"]
"""How the agent acts: one fenced bash block per reply, or OpenAI tool calls."""


class RecordError(UserInputError):
    """A trajectory file holds a line that is not a record of a known version (raised by `load`)."""


class _Optional(BaseModel):
    """Leaves the fields named in `_OPTIONAL` out of a dump while they hold their default: fields
    added during version 2 then change no byte of records that do not use them."""

    _OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_defaults(self, handler):
        data = handler(self)
        for name in self._OPTIONAL:
            if name in data and data[name] == type(self).model_fields[name].get_default(call_default_factory=True):
                del data[name]
        return data


class _Part(_Optional):
    """A nested value. Unknown keys are ignored: they are data, not structure."""

    model_config = ConfigDict(frozen=True)


class _Line(_Optional):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolFunction(_Part):
    name: str = ""
    arguments: str = ""
    """As the server sent them: JSON text, which may be malformed."""


class ToolCall(_Part):
    """One tool call of a reply, in OpenAI's format."""

    id: str = ""
    type: str = "function"
    function: ToolFunction = Field(default_factory=ToolFunction)

    def sent(self, index: int) -> dict[str, Any]:
        """The call as the next request repeats it: an id (`call_<index>` if the server gave none)
        and arguments that are a JSON object (`{}` if they were not): servers parse the arguments
        of earlier turns, and one malformed call must not make every later request fail."""
        arguments = self.function.arguments if json_object(self.function.arguments) is not None else "{}"
        return {
            "id": self.id or f"call_{index}",
            "type": "function",
            "function": {"name": self.function.name, "arguments": arguments},
        }


def json_object(text: str) -> dict | None:
    """`text` parsed, if it is a JSON object; else None."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class Message(_Part):
    _OPTIONAL = ("tool_calls", "tool_call_id")

    role: str
    content: str
    tool_calls: list[ToolCall] | None = None
    """An assistant turn's tool calls (`tools` action format), as they were sent back."""
    tool_call_id: str | None = None
    """A `tool` message: the call it answers."""

    def as_dict(self) -> dict[str, Any]:
        """The message as it was sent."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls is not None:
            out["tool_calls"] = [c.model_dump() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class Call(_Part):
    """One teacher call as recorded: a `TeacherCall` without its messages (they are reconstructable)."""

    _OPTIONAL = ("tool_calls",)

    sampling: dict[str, Any]
    content: str
    tool_calls: list[ToolCall] | None = None
    """The reply's tool calls as the server sent them (`tools` action format); null when it made none."""
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

    def turn(self) -> dict[str, Any]:
        """The reply as the next request repeats it (an assistant message)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.sent(i) for i, c in enumerate(self.tool_calls)]
        return out


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
    public: float | None
    """None when the env has nothing public to score (no sample tests)."""


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
    _OPTIONAL = ("action_format", "tools", "cache_breakpoints")

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
    action_format: ActionFormat = "text"
    """How the agent acted: `text` (one fenced bash block per reply) or `tools` (OpenAI tool calls)."""
    tools: list[dict[str, Any]] | None = None
    """The tool definitions sent with every call (`tools` format), as OpenAI JSON schemas."""
    cache_breakpoints: bool = False
    """Requests carried prompt-cache marks (teacher.cache_breakpoints): each was sent as
    `arex.teacher.cache.marked` of the messages the record rebuilds. Such a record is version 3."""


class RoundStart(_Line):
    type: Literal["round_start"] = "round_start"
    round: int
    context: list[Message]


class Step(_Line):
    _OPTIONAL = ("tool_results",)

    type: Literal["step"] = "step"
    round: int
    step: int
    call: Call
    action: Action
    observation: str | None = None
    """What the agent was shown next as a user message (command output, or the format-error
    prompt); none after `submit`, and none when the reply made tool calls (see `tool_results`)."""
    exec: Exec | None = None
    tool_results: list[str] | None = None
    """`tools` format: the `tool` message answering each of the reply's tool calls, in order."""

    @property
    def usable(self) -> bool:
        return self.call.status == "ok" and self.action.usable

    @property
    def shown(self) -> str | None:
        """What the agent was shown after this reply: the observation, or the first tool result."""
        return self.observation if self.observation is not None else (self.tool_results or [None])[0]

    def turns(self) -> list[dict[str, Any]]:
        """The messages this step adds to the next request: the reply, then a `tool` message per
        tool call (with its call's id) and/or the user observation."""
        reply = self.call.turn()
        out = [reply]
        ids = [c["id"] for c in reply.get("tool_calls", [])]
        # key order as Message.as_dict
        out += [{"role": "tool", "content": text, "tool_call_id": i} for i, text in zip(ids, self.tool_results or [])]
        if self.observation is not None:
            out.append({"role": "user", "content": self.observation})
        return out


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


class Spent(_Line):
    """Teacher calls paid for that no complete round holds: the steps of a round a stop cut short
    (written when the rollout resumes, in place of that round's lines) or a call that failed for
    good. Totals and budgets count them."""

    type: Literal["spent"] = "spent"
    round: int
    """The round the calls were made in."""
    calls: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    reason: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class End(_Line):
    type: Literal["end"] = "end"
    status: EndStatus
    reason: str
    rounds: int
    best: Best | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


Line = Annotated[Union[Header, RoundStart, Step, RoundEnd, Spent, End], Field(discriminator="type")]


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

    def messages(self, step_index: int | None = None) -> list[dict[str, Any]]:
        """The exact request messages of step `step_index`, or of the reflection call (None)."""
        messages = [m.as_dict() for m in self.start.context]
        for step in self.steps if step_index is None else self.steps[:step_index]:
            messages += step.turns()
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
    spent: list[Spent] = Field(default_factory=list)
    end: End | None = None

    @property
    def held_out(self) -> list[float]:
        """The held-out score of each complete round, in order."""
        return [r.held_out for r in self.rounds]


class RecordWriter:
    """Appends lines to a record file, each flushed as written. `on_commit(path)` is called once a
    `round_end` or the `end` line is on disk: the file then ends with a complete round (a store at a
    URL uploads it then, arex.record.url_store)."""

    def __init__(self, path: Path, on_commit: Callable[[Path], None] | None = None):
        self.path, self.on_commit = path, on_commit
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, line: Header | RoundStart | Step | RoundEnd | Spent | End) -> None:
        self._file.write(json.dumps(line.model_dump(), ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()
        if self.on_commit is not None and isinstance(line, (RoundEnd, End)):
            self.on_commit(self.path)

    def close(self) -> None:
        self._file.close()


_LINE = {cls.model_fields["type"].default: cls for cls in (Header, RoundStart, Step, RoundEnd, Spent, End)}


def parse_line(raw: dict, path: Path, number: int, version: int) -> BaseModel:
    """One decoded line as its model. RecordError names the file and line if it is not one."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    cls = _LINE.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RecordError(
            f"{path}, line {number}: not a trajectory record line (type "
            f"{raw.get('type') if isinstance(raw, dict) else raw!r}); is this file a trajectory?"
        )
    if version == 1:  # version 1 had no fixed field set: keep what the model knows
        raw = {k: v for k, v in raw.items() if k in cls.model_fields}
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise RecordError(
            f"{path}, line {number}: a {cls.__name__} line does not match schema version {version} ({problems})"
        ) from None


def _version(raw: dict, path: Path) -> int:
    version = raw.get("schema_version")
    if version not in READS:
        raise RecordError(
            f"{path}: schema version {version!r} is not one this arex reads ({', '.join(map(str, READS))}); "
            "upgrade arex to read it"
        )
    return version


def _decoded(path: Path) -> tuple[list[tuple[int, str, dict]], bool]:
    """The record's lines as (number, text, JSON value), and whether a cut last line was left out.

    Only the last line can be cut (a kill mid-write: no newline at its end, maybe not even whole
    UTF-8); damage anywhere else is a RecordError naming the line, so nothing is discarded silently."""
    chunks = path.read_bytes().split(b"\n")
    tail = chunks.pop()  # empty when the file ends with a newline
    lines = []
    for number, chunk in enumerate(chunks + ([tail] if tail else []), 1):
        try:
            text = chunk.decode("utf-8")
            lines.append((number, text, json.loads(text)))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: bad JSON, a 5,000-digit number
            if chunk is tail:
                return lines, True
            raise RecordError(
                f"{path}, line {number}: damaged ({type(exc).__name__}: {exc}); only a cut last line is repaired. "
                "Restore the file, or move it away to run that rollout again."
            ) from None
    return lines, False


def load(path: Path, truncate: bool = False, keep_end: bool = True) -> Trajectory:
    """Read a record. With truncate=True, rewrite the file without a cut last line, with any
    unfinished round replaced by a `Spent` line for its calls (and without the `end` line if
    keep_end is False: a rollout to be redone). RecordError if it is not a readable record."""
    path = Path(path)
    if not path.is_file():
        return Trajectory(path=path)
    decoded, _ = _decoded(path)
    version = next(
        (_version(raw, path) for _, _, raw in decoded[:1] if isinstance(raw, dict) and raw.get("type") == "header"),
        SCHEMA_VERSION,
    )
    header, rounds, spent, end = None, [], [], None
    keep: list[str] = []  # the lines a rewrite keeps
    pending: list = []  # the open round: [(RoundStart, text), (Step, text), ...]
    for number, text, raw in decoded:
        line = parse_line(raw, path, number, version)
        if isinstance(line, RoundStart):
            pending = [(line, text)]
        elif isinstance(line, Step):
            pending += [(line, text)] if pending else []  # a step outside a round is ignored
        elif isinstance(line, RoundEnd):
            if pending:
                rounds.append(Round(start=pending[0][0], steps=[m for m, _ in pending[1:]], end=line))
                keep += [t for _, t in pending] + [text]
            pending = []
        elif isinstance(line, End):
            end = line
            keep += [text] if keep_end else []
        else:
            header, spent = (line, spent) if isinstance(line, Header) else (header, spent + [line])
            keep.append(text)
    if truncate:
        cut = _spent_of(pending)
        if cut is not None:
            spent.append(cut)
            keep.append(json.dumps(cut.model_dump(), ensure_ascii=False, separators=(",", ":")))
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
        os.replace(tmp, path)
    return Trajectory(path=path, header=header, rounds=rounds, spent=spent, end=end)


def _spent_of(pending: list) -> Spent | None:
    """What the steps of an unfinished round cost, or None if it made no call."""
    steps = [m for m, _ in pending if isinstance(m, Step)]
    if not steps:
        return None
    calls = [s.call for s in steps]
    return Spent(
        round=steps[0].round,
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        completion_tokens=sum(c.completion_tokens for c in calls),
        cached_tokens=sum(c.cached_tokens for c in calls),
        cost_usd=sum(c.cost_usd for c in calls),
        reason=f"round {steps[0].round} was cut short by a stop and is played again",
    )
