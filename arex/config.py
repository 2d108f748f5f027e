"""YAML configuration → pydantic models.

`-c file.yaml` stacks files (later wins, dicts merge deeply) and `-c a.b=value` overrides one
key (the value is parsed as YAML, so `3`, `true`, `[1, 2]` get their types). Every error is a
`ConfigError` whose message names the key, where it was set and what was expected.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arex.errors import UserInputError, explain_validation
from arex.export_config import ExportConfig
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import SandboxConfig
from arex.select_config import SelectConfig
from arex.teacher.config import TeacherConfig

_OVERRIDE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)$", re.S)


class ConfigError(UserInputError, ValueError):
    """A configuration that cannot be used (a -c file missing or not YAML, an unknown key, a value
    of the wrong type); the message names every problem, its key and where it was set."""


class ArexConfig(BaseModel):
    """The root of every arex configuration."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Where agent and grading commands run: backend, image and resource limits."""
    teacher: TeacherConfig = Field(default_factory=TeacherConfig)
    """The model that generates trajectories: endpoint, sampling, retries, prices."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """The reflective loop: rounds, steps, budgets, context policy, prompts, skills."""
    select: SelectConfig = Field(default_factory=SelectConfig)
    """Which whole trajectories are kept: score, improvement, adherence, process quality."""
    export: ExportConfig = Field(default_factory=ExportConfig)
    """How kept trajectories become SFT rows: granularities, loss weights, shard size."""


def load_config(items: Sequence[str] = (), model: type[BaseModel] = ArexConfig) -> Any:
    """Build `model` from `-c` items: YAML file paths and `dotted.key=value` overrides, in order."""
    merged: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    for item in items:
        match = _OVERRIDE.match(item)
        if match and not Path(item).exists():
            key, raw = match.groups()
            source = f"-c {item}"
            try:
                value = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError:
                value = raw
            layer: dict[str, Any] = value
            for part in reversed(key.split(".")):
                layer = {part: layer}
        else:
            layer, source = _read_yaml(Path(item)), str(item)
        _merge(merged, layer, origin, source, ())
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, model, origin)) from None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        hint = "" if path.suffix in (".yaml", ".yml") else " (an override must look like section.key=value)"
        raise ConfigError(f"Config file '{path}' not found{hint}. Pass an existing YAML file with -c, e.g. -c configs/default.yaml.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Config file '{path}' cannot be read ({exc}). Pass a readable UTF-8 YAML file with -c.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"Config file '{path}' is not valid YAML{where}: {problem}. Fix the syntax and re-run.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"Config file '{path}' must hold a mapping of sections (e.g. 'sandbox:'), not a {type(data).__name__}.")
    return data


def _merge(into: dict, layer: dict, origin: dict, source: str, prefix: tuple[str, ...]) -> None:
    for key, value in layer.items():
        path = prefix + (str(key),)
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, origin, source, path)
            continue
        into[key] = value
        for known in [p for p in origin if p[: len(path)] == path]:
            del origin[known]
        origin[path] = source


def _explain(exc: ValidationError, model: type[BaseModel], origin: dict) -> str:
    return "Config error: " + " Also: ".join(explain_validation(exc, model, lambda loc: _source_of(loc, origin)))


def _source_of(loc: tuple[str, ...], origin: dict) -> str:
    for end in range(len(loc), 0, -1):
        if loc[:end] in origin:
            return origin[loc[:end]]
    return "the defaults"
