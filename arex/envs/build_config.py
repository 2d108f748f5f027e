"""The `build:` and `decontamination:` sections of the arex configuration (kept light: the CLI
imports it for every command)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class BuildConfig(BaseModel):
    """How `build-envs` and `draft-env` treat what a source asks for."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    package_sources: bool = False
    """Let a source's requirement lines choose where packages come from (`--index-url`,
    `--extra-index-url`, `--trusted-host`, `--find-links`, `-r <URL>`, `pkg @ <URL>`, `git+...`,
    `-e git+...`). Off: such a line is refused, naming its file and line, since whoever picks the
    index picks the code the build installs; turn it on for a source you trust."""


class DecontamConfig(BaseModel):
    """Evaluation sets kept out of the training data (`build-envs` and `export`; docs/decontamination.md)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    eval_sets: tuple[str, ...] = ()
    """Evaluation sets, each a path: a benchmark folder (a Frontier-CS clone or its algorithmic track,
    MLE-bench competitions, any folder of problems arex reads), a folder of built envs, a problem
    file (CodeContests .json/.jsonl/.parquet), or a text file of ids and source URLs, one a line.
    `--eval-set` adds to these."""
    action: Literal["refuse", "flag"] = "refuse"
    """refuse: an overlapping env is not built (build-envs; an earlier build of it is removed) and its
    trajectories are not exported (export). flag: it is kept, and listed with its evidence."""
    ngram: int = Field(13, ge=5, le=50)
    """Words per statement n-gram (after normalisation)."""
    statement_overlap: float = Field(0.35, gt=0, le=1)
    """Share of an evaluation statement's n-grams a training statement must hold to overlap it."""
    statement_min_shared: int = Field(20, ge=1)
    """Distinctive n-grams a training statement must share with an evaluation statement at least."""
    rows_overlap: float = Field(0.3, gt=0, le=1)
    """Share of a benchmark table's labelled rows (or of the training table's rows) found in the other."""
