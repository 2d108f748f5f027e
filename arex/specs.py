"""Records that cross module lines, defined once. Trajectories embed these as they are."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CallStatus = Literal["ok", "empty", "truncated"]


class TeacherIdentity(BaseModel):
    """Which model produced a trajectory: what we asked for and what the server says it is."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    server_models: list[dict[str, Any]] = Field(default_factory=list)
    """The endpoint's own /models listing (id, owned_by, ...), as reported."""
    system_fingerprint: str | None = None
    client: str = ""
    """Client library and version, e.g. 'openai-python 1.52.0'."""


class Attempt(BaseModel):
    """One HTTP attempt of a call: a failure that was retried, or the final response."""

    error: str | None = None
    status: CallStatus | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0


class TeacherCall(BaseModel):
    """One chat call, everything needed to train on it and to account for it."""

    messages: list[dict[str, Any]]
    """The exact request messages."""
    sampling: dict[str, Any]
    """The exact sampling parameters sent."""
    content: str
    reasoning_content: str | None = None
    finish_reason: str | None = None
    status: CallStatus
    """'ok'; 'empty' (no content) or 'truncated' (finish_reason 'length') after retries ran out."""
    model: str
    system_fingerprint: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Totals over every attempt that returned usage: retried responses cost tokens too."""
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retries: int = 0
    attempts: list[Attempt] = Field(default_factory=list)


class Usage(BaseModel):
    """Running totals of a client."""

    calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0


# -- online-judge environments -------------------------------------------------------------
Verdict = Literal["AC", "WA", "TLE", "MLE", "RE", "OLE", "CE", "JE"]
"""JE: judge error, the env's own checker failed. Never the submission's fault."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class CheckerSpec(_Frozen):
    """How an output is compared with the answer."""

    kind: Literal["exact", "token", "float", "kattis", "testlib"] = "token"
    """exact: lines (trailing spaces ignored); token: whitespace-separated tokens; float: tokens with
    numeric tolerance; kattis: output validator (42/43); testlib: `checker input output answer`."""
    abs_tol: float = 1e-6
    """Absolute tolerance for the float checker."""
    rel_tol: float = 1e-6
    """Relative tolerance for the float checker."""
    case_sensitive: bool = True
    """Compare tokens case-sensitively."""
    source: str | None = None
    """Custom checker source, relative to the env's private/ folder (kattis, testlib)."""
    flags: tuple[str, ...] = ()
    """Extra arguments passed to a custom checker (Kattis validator flags)."""


class TestCase(_Frozen):
    name: str
    input: str
    """Path relative to the env's private/ folder."""
    answer: str
    group: str = "main"
    sample: bool = False
    """Samples: the agent sees full detail. Hidden tests: only counts by verdict."""


class TestGroup(_Frozen):
    name: str
    points: float = 1.0
    """Scored only if every test of the group passes (subtask scoring)."""


class SolutionRef(_Frozen):
    path: str
    """Relative to the env folder."""
    language: str
    expected: Literal["accepted", "wrong_answer", "time_limit_exceeded", "run_time_error", "partially_accepted"]


class JudgeSpec(_Frozen):
    """A built online-judge environment (task.yaml of a judge env)."""

    id: str
    kind: Literal["judge"] = "judge"
    domain: Literal["algorithmic"] = "algorithmic"
    title: str
    statement: str = "statement.md"
    time_limit_s: float
    memory_mb: int = 256
    output_limit_mb: int = 16
    checker: CheckerSpec = Field(default_factory=CheckerSpec)
    scoring: Literal["fraction", "groups", "ratio"] = "fraction"
    """fraction: share of hidden tests passed; groups: subtask points; ratio: mean checker ratio."""
    groups: tuple[TestGroup, ...] = ()
    tests: tuple[TestCase, ...]
    languages: tuple[str, ...] = ("cpp17", "python3")
    starter: str = "solution.cpp"
    """The submission file in the agent's workspace."""
    solutions: tuple[SolutionRef, ...] = ()
    source_format: str = "arex"
    source_hash: str = ""


class TestResult(BaseModel):
    name: str
    group: str
    sample: bool
    verdict: Verdict
    ratio: float
    raw: float
    time_s: float | None = None
    """CPU time (user + system)."""
    wall_s: float | None = None
    memory_kb: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    message: str = ""


class GradeResult(BaseModel):
    """What grading one submission produced. Both env kinds return this."""

    public_score: float
    """Score on what the agent may see (samples / public split), in [0, 1]."""
    held_out_score: float
    """Score used for selection (hidden tests / private split), in [0, 1]."""
    held_out_raw: float
    """Unbounded held-out score (points, unbounded ratio, raw metric)."""
    feedback: str
    """Text the agent is shown."""
    details: dict[str, Any] = Field(default_factory=dict)
    infra_error: str | None = None
    """Set when grading could not be done (env broken, engine down): not the submission's fault."""
