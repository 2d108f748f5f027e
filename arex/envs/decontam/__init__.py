"""Decontamination: no evaluation problem among the training envs (`build-envs`, `export`).

An evaluation set (a benchmark folder, built envs, a list of ids; `evalsets.py`) is indexed once
and cached (`index.py`). Each training task is fingerprinted (`fingerprint.py`) and compared with
every set: the same id or source URL, statement n-grams (`text.py`), identical tests or reference
solutions, the same labelled rows whatever the column order or number format (`tables.py`).
`action: refuse` keeps an overlapping env out (build-envs does not build it, export drops its
trajectories); `flag` keeps it and lists it. Either way the build report and the dataset card say
which env, which evaluation item, and on what evidence (docs/decontamination.md).

`Decontaminator` is what build-envs and export hold: the loaded sets and the configuration.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from arex.envs.build_config import DecontamConfig
from arex.envs.decontam.evalsets import load_eval_set
from arex.envs.decontam.fingerprint import Fingerprint, of_env, of_ml_table, of_problem
from arex.envs.decontam.index import EvalSet, Overlap
from arex.envs.decontam.text import id_key
from arex.envs.layout import STAMP
from arex.envs.sources.common import Problem

__all__ = ["Decontaminator", "EvalSet", "Overlap", "load_decontaminator"]


class Decontaminator:
    """The evaluation sets a batch is checked against, and what to do about an overlap."""

    def __init__(self, sets: list[EvalSet], config: DecontamConfig):
        self.sets, self.config = sets, config

    @property
    def action(self) -> str:
        return "refused" if self.config.action == "refuse" else "flagged"

    def check(self, fp: Fingerprint) -> list[Overlap]:
        found = [o for s in self.sets for o in s.overlaps(fp, self.config)]
        for overlap in found:
            overlap.action = self.action
        return found

    def check_problem(self, problem: Problem, where: str) -> list[Overlap]:
        return self.check(of_problem(problem, where))

    def before_build(self, problem: Problem | None, source: Path) -> list[Overlap] | None:
        """What a build unit overlaps, told from its source: a judge problem, or an ML source whose
        table is in the repository; None when only the built env can tell (another kind's source, or
        one that cannot be read: its builder reports that)."""
        from arex.envs.ml_source import is_ml_source

        if problem is not None:
            return self.check_problem(problem, str(source))
        if not is_ml_source(source):
            return None
        try:
            return self.check_ml_source(source)
        except Exception:  # noqa: BLE001 - an unreadable source is its builder's to report, with its reason
            return None

    def check_env(self, folder: Path) -> list[Overlap]:
        """A built env (any kind: the kinds it does not know are compared by id and statement)."""
        return self.check(of_env(folder))

    def check_named(self, env_id: str) -> list[Overlap]:
        """An env known only by its id (its folder is not at hand)."""
        return self.check(Fingerprint(env_id, env_id, ids={id_key(env_id)}))

    def check_ml_source(self, path: Path) -> list[Overlap] | None:
        """An ML source before it is built; None when its table is made in a sandbox (`data.prepare`):
        then only the built env tells, and `check_env` is asked after the build."""
        from arex.envs.ml_data import decode_table, decode_text
        from arex.envs.ml_source import open_source

        checkout = open_source(path)
        spec = checkout.spec
        if spec.data.prepare:
            return None
        text, _ = decode_table(spec.data, (checkout.folder / spec.data.table).read_bytes())
        statement = decode_text((checkout.folder / spec.statement).read_bytes())
        url = checkout.source.url if checkout.source.local_tree is None else ""
        return self.check(of_ml_table(spec.id, str(path), url, statement, spec.data.table, text, spec.data.target))

    def describe(self) -> list[str]:
        """A line per evaluation set: its items, and what of it could not be read."""
        lines = []
        for s in self.sets:
            noted = f"; {len(s.notes)} note(s), e.g. {s.notes[0]}" if s.notes else ""
            lines.append(f"evaluation set {s.name}: {len(s.items)} item(s){noted}")
        return lines


def load_decontaminator(paths: list[str | Path], config: DecontamConfig) -> Decontaminator | None:
    """The sets `config.eval_sets` and `paths` name, indexed (from the cache if unchanged); None if none."""
    named = list(dict.fromkeys([*config.eval_sets, *map(str, paths)]))
    if not named:
        return None
    return Decontaminator([load_eval_set(Path(p), config.ngram) for p in named], config)


def remove_build(out: Path, env_id: str | None) -> bool:
    """Delete the env `env_id` under `out` if arex built it (it carries the build stamp): an env refused
    as contaminated must not stay where rollouts look for envs. Whether one was removed."""
    if not env_id:
        return False
    folder = out / env_id
    if folder.is_dir() and not folder.is_symlink() and (folder / STAMP).is_file():
        shutil.rmtree(folder)
        return True
    return False
