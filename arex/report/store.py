"""What `arex report` reads: the variants of a store, their records (through `arex.record.trajectory.load`
only) and, optionally, what `arex select` wrote.

A store with `variants.json` (`{"variants": [{"name", "overrides", ...}]}`) holds one ordinary
store per variant in `<store>/<variant>/`, reported in the file's order (the stage-wise order); a
store without it is one variant named after its folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from arex.errors import UserInputError
from arex.record.trajectory import RecordError, Trajectory, load
from arex.selection.files import read_selection

VARIANTS_FILE = "variants.json"


class Variant(BaseModel):
    """One entry of variants.json; keys this arex does not know are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    overrides: list[Any] = []
    """The config overrides that make this variant (shown, not interpreted)."""


class VariantsFile(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    variants: list[Variant]


@dataclass
class Loaded:
    """One variant's store: its readable records and the files that could not be read."""

    variant: Variant
    store: Path
    trajectories: list[Trajectory] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)


def variants_of(store: Path) -> list[tuple[Variant, Path]]:
    """The store's variants, each with the folder of its ordinary store."""
    if not store.is_dir():
        raise UserInputError(f"trajectory store {store} does not exist; run `arex rollout --out {store}` first")
    path = store / VARIANTS_FILE
    if not path.is_file():
        return [(Variant(name=store.resolve().name), store)]
    try:
        parsed = VariantsFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise UserInputError(
            f'{path} is not a variants file ({first}); it must be {{"variants": [{{"name": ..., "overrides": [...]}}]}}'
        ) from None
    names = [v.name for v in parsed.variants]
    bad = [n for n in names if not n or "/" in n or n in (".", "..")]
    if bad or len(set(names)) != len(names):
        raise UserInputError(
            f"{path}: variant names must be distinct folder names, got {names}; "
            "fix the file or re-run `arex rollout --variants`"
        )
    return [(v, store / v.name) for v in parsed.variants]


def read_evaluation(store: Path) -> dict | None:
    """`<store>/eval.json` as `arex eval` wrote it; {"error": why} if it cannot be read; None if absent."""
    path = store / "eval.json"
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"{path} cannot be read ({exc}); re-run the same `arex eval` to write it again"}
    if not isinstance(found, dict) or not isinstance(found.get("variants"), list):
        return {"error": f"{path} is not an eval.json written by `arex eval`; re-run it to write it again"}
    return found


def load_variant(variant: Variant, folder: Path) -> Loaded:
    """Every `<folder>/<env>/<key>.jsonl` that has a header; a damaged one is listed, not fatal."""
    loaded = Loaded(variant=variant, store=folder)
    for path in sorted(folder.glob("*/*.jsonl")) if folder.is_dir() else []:
        try:
            trajectory = load(path)
        except RecordError as exc:
            loaded.unreadable.append((path, str(exc)))
            continue
        if trajectory.header is not None:
            loaded.trajectories.append(trajectory)
    loaded.trajectories.sort(key=lambda t: (t.header.env_id, t.header.sample, t.header.key))
    return loaded


class SelectionRead(BaseModel):
    """One `selection.json` as the report uses it."""

    model_config = ConfigDict(frozen=True)

    path: str
    variant: str | None
    """The variant whose store was selected; None when it is not one of the report's variants."""
    total: int
    kept: int
    drops: dict[str, dict[str, Any]]
    """reason -> {count, ids}, as `arex select` writes it."""


def read_selections(selection: Path, variants: list[tuple[Variant, Path]]) -> list[SelectionRead]:
    """`<selection>/selection.json`, or `<selection>/<variant>/selection.json` for each variant selected."""
    files = (
        [selection / "selection.json"]
        if (selection / "selection.json").is_file()
        else sorted(selection.glob("*/selection.json"))
    )
    if not files:
        raise UserInputError(
            f"--selection {selection} holds no selection.json (nor <variant>/selection.json); "
            f"run `arex select --out {selection}` first"
        )
    stores = {folder.resolve(): v.name for v, folder in variants}
    out = []
    for path in files:
        raw = read_selection(path)  # checked: a malformed one is one sentence naming it
        store = raw.get("store")
        variant = stores.get(Path(store).resolve()) if isinstance(store, str) else None
        if variant is None and path.parent != selection and path.parent.name in stores.values():
            variant = path.parent.name
        out.append(
            SelectionRead(path=str(path), variant=variant, total=raw["total"], kept=raw["kept"], drops=raw["drops"])
        )
    return out
