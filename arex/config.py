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

from arex.dataset.config import ExportConfig
from arex.envs.build_config import BuildConfig, DecontamConfig
from arex.errors import ConfigError, UserInputError, explain_validation  # noqa: F401 (ConfigError: re-exported)
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import SandboxConfig
from arex.selection.config import SelectConfig
from arex.teacher.config import TeacherConfig

_OVERRIDE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)$", re.S)


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
    build: BuildConfig = Field(default_factory=BuildConfig)
    """What `build-envs` and `draft-env` let a source decide (package indexes and URLs)."""
    decontamination: DecontamConfig = Field(default_factory=DecontamConfig)
    """Evaluation sets no training env may overlap (`build-envs`, `export`), and what to do about one."""


def load_config(
    items: Sequence[str] = (), model: type[BaseModel] = ArexConfig, options: Sequence[tuple[str, Any, str]] = ()
) -> Any:
    """Build `model` from `-c` items: YAML file paths and `dotted.key=value` overrides, in order;
    then `options`: (dotted key, value, the option that set it, e.g. "--rounds"), which win."""
    merged: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    for item in items:
        match = _OVERRIDE.match(item)
        if match and not _is_file(Path(item)):
            key, raw = match.groups()
            try:
                value = yaml.safe_load(raw) if raw.strip() else ""
            except Exception:  # noqa: BLE001 - not YAML (e.g. '2024-13-45'): the text as it is
                value = raw
            layer, source = _layer(key, value), f"-c {item}"
        else:
            layer, source = _read_yaml(Path(item)), str(item)
        _check_acyclic(layer, source)
        _merge(merged, layer, origin, source, ())
    for key, value, source in options:
        _merge(merged, _layer(key, value), origin, source, ())
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, model, origin)) from None
    except RecursionError:
        raise ConfigError(
            "Config error: a value refers to itself (a YAML alias inside its own anchor); write it out."
        ) from None


def _check_acyclic(value: Any, source: str) -> None:
    """ConfigError if `value` contains itself (a YAML alias inside its own anchor: `&x [*x]`)."""
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if not isinstance(node, (dict, list)):
            return
        if id(node) in seen:
            raise ConfigError(
                f"Config error: a value in {source} contains itself (a YAML alias inside its own anchor, "
                "like '&x [*x]'); write it out in full."
            )
        seen.add(id(node))
        for child in node.values() if isinstance(node, dict) else node:
            walk(child)
        seen.discard(id(node))

    try:
        walk(value)
    except RecursionError:
        raise ConfigError(f"Config error: {source} is nested too deeply to be a configuration.") from None


def _layer(key: str, value: Any) -> dict[str, Any]:
    layer: dict[str, Any] = value
    for part in reversed(key.split(".")):
        layer = {part: layer}
    return layer


def _is_file(path: Path) -> bool:
    """Is there a file at `path`? A name the OS refuses (too long, a NUL byte) names none."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _read_yaml(path: Path) -> dict[str, Any]:
    if not _is_file(path):
        hint = "" if path.suffix in (".yaml", ".yml") else " (an override must look like section.key=value)"
        shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:100]}...{str(path)[-60:]}"
        raise ConfigError(
            f"Config file '{shown}' not found{hint}. Pass an existing YAML file with -c, e.g. -c configs/default.yaml."
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"Config file '{path}' is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line}). "
            "Save it as UTF-8 and re-run."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"Config file '{path}' cannot be read ({exc.strerror or exc}). Pass a readable UTF-8 YAML file with -c."
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"Config file '{path}' is not valid YAML{where}: {problem}. Fix the syntax and re-run."
        ) from None
    except Exception as exc:  # noqa: BLE001 - a value YAML cannot build, e.g. the date 2024-13-45
        raise ConfigError(
            f"Config file '{path}' holds a value YAML cannot read ({exc}). Quote it or fix it, and re-run."
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"Config file '{path}' must hold a mapping of sections (e.g. 'sandbox:'), not a {type(data).__name__}."
        )
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
