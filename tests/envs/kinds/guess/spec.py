"""A guess env's task.yaml."""

from typing import Literal

from pydantic import BaseModel, ConfigDict


class GuessSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["guess"] = "guess"
    id: str
    title: str
    domain: str = "guessing"
    target: int
    """The number to guess (kept in task.yaml, which the agent's sandbox never sees)."""
