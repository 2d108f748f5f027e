"""YAML configuration → pydantic models.

`-c file.yaml` stacks files (later wins, dicts merge deeply) and `-c a.b=value` overrides one
key (the value is parsed as YAML, so `3`, `true`, `[1, 2]` get their types). Every error is a
`ConfigError` whose message names the key, where it was set and what was expected.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arex.export_config import ExportConfig
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import SandboxConfig
from arex.select_config import SelectConfig
from arex.teacher.config import TeacherConfig

_OVERRIDE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)$", re.S)


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says what and where."""


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
    problems = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        dotted = ".".join(loc) or "(top level)"
        source = _source_of(loc, origin)
        if err["type"] == "extra_forbidden":
            parent_model = _model_at(model, loc[:-1])
            known = sorted(parent_model.model_fields) if parent_model else []
            guess = difflib.get_close_matches(loc[-1], known, n=1)
            hint = f" Did you mean '{'.'.join(loc[:-1] + (guess[0],))}'?" if guess else ""
            where = "under '" + ".".join(loc[:-1]) + "'" if loc[:-1] else "at the top level"
            problems.append(f"unknown key '{dotted}' (set by {source}).{hint} Known keys {where}: {', '.join(known)}.")
        elif err["type"] == "value_error" and _model_at(model, loc) is not None:
            # A rule across a section's keys (e.g. a model with no price): the message says which.
            problems.append(f"section '{dotted}': {err['msg'].removeprefix('Value error, ')}.")
        else:
            expected = _expected_type(model, loc)
            got = err.get("input")
            got_text = f", got {got!r}" if err["type"] != "missing" else ""
            problems.append(f"'{dotted}' (set by {source}) expects {expected}{got_text}: {err['msg']}.")
    return "Config error: " + " Also: ".join(problems)


def _source_of(loc: tuple[str, ...], origin: dict) -> str:
    for end in range(len(loc), 0, -1):
        if loc[:end] in origin:
            return origin[loc[:end]]
    return "the defaults"


def _model_at(model: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    current: Any = model
    for part in loc:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return None
        current = _find_model(field.annotation)
        if current is None:
            return None
    return current


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _expected_type(model: type[BaseModel], loc: tuple[str, ...]) -> str:
    parent = _model_at(model, loc[:-1]) if loc else None
    field = parent.model_fields.get(loc[-1]) if parent else None
    if field is None:
        return "a valid value"
    return _type_name(field.annotation)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple, set):
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"a '{annotation.__name__}' mapping"
        return {"int": "an integer", "float": "a number", "str": "a string", "bool": "true/false"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)
