"""Drafting ML sources from repositories (`arex draft-env`): drafters by short name.

A drafter is made from the arex configuration; `make_drafter(name, config)` picks it by name.
"""

from __future__ import annotations

from typing import Callable

from arex.drafting.base import Attempt, Draft, Drafter, DraftError, DraftSettings, Guess
from arex.errors import UserInputError


def _heuristic(config: DraftSettings) -> Drafter:
    from arex.drafting.heuristic import HeuristicDrafter

    return HeuristicDrafter(config.sandbox, package_sources=config.build.package_sources)


def _model(config: DraftSettings) -> Drafter:
    from arex.drafting.model import ModelDrafter

    return ModelDrafter.from_config(config)


DRAFTERS: dict[str, Callable[[DraftSettings], Drafter]] = {
    "heuristic": _heuristic,
    "model": _model,
    # More drafters: one line each, "name": factory taking the DraftSettings.
}


def make_drafter(name: str, config: DraftSettings) -> Drafter:
    """The drafter called `name`, made from `config`."""
    if name not in DRAFTERS:
        raise UserInputError(f"Unknown drafter '{name}': choose one of {', '.join(sorted(DRAFTERS))}.")
    return DRAFTERS[name](config)


__all__ = ["DRAFTERS", "Attempt", "Draft", "DraftError", "Drafter", "Guess", "make_drafter"]
