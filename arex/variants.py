"""Runs as variants: one `arex rollout --variants FILE` runs the same envs and samples under named
configuration variants, each into its own ordinary store `<out>/<variant>/`.

The variants file maps names to config overrides in `-c` syntax (YAML files or `section.key=value`;
a relative file path is read from the variants file's folder):

    variants:
      no-skills: [rollout.general_skills=false, rollout.task_skills=false]
      task-skills: []

A variant's configuration is the base (`-c`, then `--rounds`) with its overrides applied last, so
a variant that sets `rollout.rounds` keeps its own. `<out>/variants.json` records every variant
that ran in `out` (`{"variants": [{"name", "overrides", "config_hash"}]}`), written before any
rollout starts. Re-running resumes each variant's store by the usual rules (a finished variant is
skipped); a variant whose overrides or resolved configuration changed since it ran is refused
(its store would mix two configurations): give it a new name, or use another `--out`. Variants
missing from the file stay on record (their stores stay). All variants run in one event loop
under one `--concurrency` limit and share the teacher endpoint's `teacher.concurrency` limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console
from rich.table import Table

from arex.config import _OVERRIDE, ArexConfig, ConfigError, load_config
from arex.envs.runtime import Env
from arex.errors import UserInputError
from arex.record.storage import LOCK_NAME, StoreLock, write_error
from arex.rollout.batch import Progress, StoreLabel, config_hash, gather, remove_leftovers, run_batch

RECORD = "variants.json"
"""The file in `<out>` that lists the variants run there."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
RESERVED = frozenset({RECORD, LOCK_NAME, "summary.json"})
"""Names a variant folder cannot take: files of `<out>` itself."""


class VariantEntry(BaseModel):
    """One variant as recorded in `<out>/variants.json`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The variant's name: its store is `<out>/<name>/`."""
    overrides: list[str]
    """Its config overrides, as written in the variants file."""
    config_hash: str
    """The hash its rollout keys are made from (teacher sampling + rollout config, arex.rollout.batch.config_hash)."""


class VariantsRecord(BaseModel):
    """`<out>/variants.json`."""

    model_config = ConfigDict(extra="forbid")

    variants: list[VariantEntry]


@dataclass
class Variant:
    """A variant to run: its name, overrides and resolved configuration."""

    name: str
    overrides: list[str]
    config: ArexConfig

    @property
    def config_hash(self) -> str:
        return config_hash(self.config.teacher, self.config.rollout)

    def entry(self) -> VariantEntry:
        return VariantEntry(name=self.name, overrides=self.overrides, config_hash=self.config_hash)


class _UniqueKeys(yaml.SafeLoader):
    """A YAML loader that refuses a mapping with the same key twice (two variants of one name)."""


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode) -> dict:
    keys = [loader.construct_object(k, deep=True) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(
            f"the key '{twice[0]}' appears twice (line {node.start_mark.line + 1}); every variant needs its own name"
        )
    return loader.construct_mapping(node, deep=True)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def read_variants_file(path: Path) -> dict[str, list[str]]:
    """Variant name → its overrides, in file order. ConfigError naming the file and the problem."""
    where = f"variants file {path}"
    if not path.is_file():
        raise ConfigError(
            f"{where} not found; pass a YAML file with a 'variants:' mapping of names to overrides "
            "(see configs/variants/ablation.yaml)"
        )
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where} cannot be read as YAML ({str(exc).splitlines()[0]}); fix it and re-run") from None
    if (
        not isinstance(data, dict)
        or set(data) != {"variants"}
        or not isinstance(data["variants"], dict)
        or not data["variants"]
    ):
        raise ConfigError(
            f"{where} must hold one key, 'variants:', mapping each variant's name to a list of overrides "
            "(e.g. 'no-skills: [rollout.task_skills=false]')"
        )
    variants: dict[str, list[str]] = {}
    for name, items in data["variants"].items():
        _check_name(name, where, variants)
        items = [] if items is None else items
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(
                f"{where}: variant '{name}' must list its overrides as text, files or section.key=value "
                f"(e.g. [rollout.rounds=20]), not {items!r}"
            )
        variants[str(name)] = items
    return variants


def _check_name(name: Any, where: str, seen: dict) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise ConfigError(
            f"{where}: the variant name {name!r} cannot name a folder; "
            "use letters, digits and . _ + - (at most 64, starting with a letter or digit)"
        )
    if name.lower() in RESERVED:
        raise ConfigError(f"{where}: the variant name '{name}' is reserved (a file of the store); choose another")
    clash = [other for other in seen if other.lower() == name.lower()]
    if clash:
        raise ConfigError(
            f"{where}: the variants '{clash[0]}' and '{name}' differ only in case, "
            "so they would share a folder on some disks; rename one"
        )


def load_variants(path: Path, base: list[str], rounds: int | None = None) -> list[Variant]:
    """Every variant of the file with its configuration: `base` (-c items), `--rounds`, then its
    overrides. ConfigError naming the variant for an unknown key or a wrong value."""
    variants = []
    for name, overrides in read_variants_file(path).items():
        items = [
            *base,
            *([f"rollout.rounds={rounds}"] if rounds is not None else []),
            *(_resolve(item, path) for item in overrides),
        ]
        try:
            config = load_config(items)
        except ConfigError as exc:
            raise ConfigError(f"variant '{name}' in {path}: {exc}") from None
        variants.append(Variant(name, overrides, config))
    return variants


def _resolve(item: str, variants_file: Path) -> str:
    """An override as it is; a relative config file path from the variants file's folder."""
    if _OVERRIDE.match(item) or Path(item).is_absolute():
        return item
    return str(variants_file.parent / item)


def guard_store(out: Path, with_variants: bool) -> None:
    """UserInputError if `out` is the other kind of store: an ordinary store given --variants, or a
    variants store given none."""
    if (
        with_variants
        and not (out / RECORD).exists()
        and ((out / "summary.json").exists() or any(out.glob("*/*.jsonl")))
    ):
        raise UserInputError(f"{out} is an ordinary trajectory store (it has no {RECORD}); give --variants a new --out")
    if not with_variants and (out / RECORD).exists():
        raise UserInputError(
            f"{out} holds variants ({out / RECORD}); re-run with --variants FILE, or choose another --out"
        )


def read_record(out: Path) -> list[VariantEntry]:
    """The variants recorded in `<out>/variants.json` (none if there is no such file)."""
    path = out / RECORD
    if not path.exists():
        return []
    try:
        return VariantsRecord.model_validate_json(path.read_bytes()).variants
    except (OSError, ValidationError, ValueError) as exc:
        raise UserInputError(
            f"{path} cannot be read ({str(exc).splitlines()[0]}); restore it, or use another --out"
        ) from None


def check_unchanged(out: Path, variants: list[Variant], file: Path) -> dict[str, VariantEntry]:
    """UserInputError naming the first variant that ran in `out` under other overrides or another
    configuration; returns the variants on record, by name."""
    recorded = {e.name: e for e in read_record(out)}
    for v in variants:
        before = recorded.get(v.name)
        if before is None:
            continue
        if before.overrides != v.overrides:
            raise UserInputError(
                f"variant '{v.name}' in {file} changed since it ran in {out / v.name} "
                f"(overrides {before.overrides} then, {v.overrides} now); "
                "give the changed variant a new name, or restore its overrides"
            )
        if before.config_hash != v.config_hash:
            raise UserInputError(
                f"variant '{v.name}' has the overrides it ran with in {out / v.name}, "
                "but its configuration differs (a -c file, --rounds, or a file it names changed); "
                "restore them, or use another --out"
            )
    return recorded


def check_and_record(out: Path, variants: list[Variant], file: Path) -> None:
    """`check_unchanged`, then write `<out>/variants.json`: the variants on record, updated, and the new
    ones after them."""
    recorded = check_unchanged(out, variants, file)
    for v in variants:
        recorded[v.name] = v.entry()
    path = out / RECORD
    try:
        out.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".json.tmp").write_text(
            VariantsRecord(variants=list(recorded.values())).model_dump_json(indent=2) + "\n"
        )
        os.replace(path.with_suffix(".json.tmp"), path)
    except OSError as exc:
        raise write_error(exc, path) from None


@dataclass
class _Board:
    """The live progress of every variant, one row each."""

    progress: dict[str, Progress]

    def table(self) -> Table:
        table = Table("variant", "rollouts done", "rounds", "tokens", "cost $", "best held-out by env")
        for name, p in self.progress.items():
            best = ", ".join(f"{k} {v:.4g}" for k, v in sorted(p.best.items())) or "-"
            table.add_row(name, f"{p.done}/{p.total}", str(p.rounds), str(p.tokens), f"{p.cost:.4f}", best)
        return table


async def run_variants(
    envs: list[Env],
    variants: list[Variant],
    out: Path,
    samples: int,
    concurrency: int,
    base_url: str | None,
    console: Console | None,
    file: Path,
) -> dict[str, dict]:
    """Run every variant's batch into `<out>/<name>/`, `concurrency` rollouts at once in all;
    returns each variant's run summary (as `run_batch`), by name. Holds `out`'s lock throughout;
    sandboxes carry `out` as their store label, and the leftovers of killed runs on it are removed first."""

    def notify(line: str) -> None:
        if console is not None:
            console.print(f"arex: {line}", soft_wrap=True, markup=False)

    with StoreLock(out, notify), StoreLabel(out):
        check_and_record(out, variants, file)
        for backend in sorted({v.config.sandbox.backend for v in variants}):
            remove_leftovers(out, backend, notify)
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * concurrency + 4))
        limit = asyncio.Semaphore(concurrency)
        board = _Board({v.name: Progress(total=len(envs) * samples) for v in variants})
        batches = [
            run_batch(
                envs,
                v.config.teacher,
                v.config.rollout,
                v.config.sandbox,
                out / v.name,
                samples,
                concurrency,
                v.config.teacher.base_url or base_url,
                None,
                limit,
                board.progress[v.name],
            )
            for v in variants
        ]
        summaries = await gather(batches, board, console)
    return {v.name: s for v, s in zip(variants, summaries)}


def variants_json(out: Path) -> dict:
    """`<out>/variants.json` as a dict (for reports); a store without it is one variant named after its folder."""
    entries = read_record(out)
    if not entries:
        return {"variants": [{"name": out.resolve().name, "overrides": [], "config_hash": None}]}
    return json.loads(VariantsRecord(variants=entries).model_dump_json())
