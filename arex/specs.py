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
