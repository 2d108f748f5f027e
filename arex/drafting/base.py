"""What a drafter makes: an ML source spec for a repository, as the overlay YAML form takes it.

`arex draft-env SOURCE` fetches the repository, asks a drafter for a `Draft`, writes it as an
overlay source (`<out>/<id>.yaml` naming the repository and commit, the spec, the files to add and
the files to remove; added files under `<out>/<id>/`), builds it with `build-envs`, and, when a
gate fails, asks the same drafter again with the gate's reason, up to a budget of attempts.
Drafters are chosen by short name (`DRAFTERS` in `arex.drafting`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class DraftSettings(Protocol):
    """What a drafter is made from: the user's arex configuration (arex.config.ArexConfig), read
    through these sections only (the drafters live below the config that composes them)."""

    sandbox: Any
    teacher: Any
    rollout: Any
    build: Any


class Guess(BaseModel):
    """One field the drafter chose, how sure it is, and why (shown in the draft report)."""

    model_config = ConfigDict(frozen=True)

    field: str
    """Dotted spec key, e.g. 'data.target' or 'metric.name'."""
    value: str
    """The chosen value, as text."""
    confidence: Literal["high", "medium", "low"]
    """high: read from the repository (a name, a file the code opens); medium: inferred from types
    or conventions; low: a default or a template."""
    why: str
    """One sentence: what in the repository led to the choice."""


class Draft(BaseModel):
    """A complete, editable ML source for one repository."""

    model_config = ConfigDict(frozen=True)

    spec: dict
    """The arex.yaml mapping (validated by the build as `MLSpec`)."""
    add: dict[str, str] = Field(default_factory=dict)
    """Files to add or replace in the repository: repository-relative path → text content
    (a wrapper script, a statement, a requirements file)."""
    remove: tuple[str, ...] = ()
    """Repository-relative paths or globs to leave out (duplicate data, pickled models)."""
    guesses: tuple[Guess, ...] = ()
    """How each guessed field was chosen, for the report."""


class Attempt(BaseModel):
    """A draft that was built, and why the build rejected it (None: accepted)."""

    model_config = ConfigDict(frozen=True)

    draft: Draft
    reason: str | None


class Drafter(Protocol):
    """Makes a draft for a checked-out repository; given the earlier attempts (with the build's
    reasons), makes a revised one. Raises `DraftError` when it cannot draft at all."""

    name: str

    def draft(self, repo: Path, attempts: list[Attempt]) -> Draft: ...


class DraftError(Exception):
    """The drafter cannot produce a draft for this repository; the message says why in one sentence."""


def clip(text: str | None, limit: int) -> str:
    """`text` on one line, at most about `limit` characters, cut at a word boundary with ' …'."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = limit if text[limit] == " " else cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + " …"
