"""What a benchmark adapter is: the one interface `arex eval` calls (arex.eval.run does the rest).

An adapter subclasses `Benchmark` and is registered by one line in `arex.eval.BENCHMARKS`. It does
two things, both the benchmark's own:

1. `problems(source)`: turn the benchmark folder (`source.folder`, plus `source.data` where the
   benchmark needs a second folder, e.g. MLE-bench's prepared data) into arex env folders written
   under `source.envs` (reusing arex's importers and env writers: no second importer), one `Item`
   per problem. A problem that cannot be evaluated (its test data absent, a layout arex does not
   run) is an `Item` with `env=None` and `absent` saying why: it is listed in the results, never
   silently dropped. Writing the same env twice must give the same folder (same spec hash), so a
   re-run resumes the rollouts already made. Raise `UserInputError` (one sentence naming the
   folder) when the folder is not the benchmark at all.
2. `score(env, rounds)`: the benchmark's per-problem score of one rollout, from its `round_end`
   lines in order (`rounds[:k]` for the score after k rounds: the run calls it once per k for the
   test-time scaling curve, so it must only look at the rounds it is given). `Score.value` is the
   number the benchmark averages over problems (Frontier-CS: 0-100; MLE-bench: 100 for any medal,
   else 0); `Score.columns` are extra per-problem columns (unbounded score, metric, medal), shown
   in the per-problem table (numbers are averaged over samples, text shown from the first).

`aggregate(values)` makes the benchmark's headline from per-problem values (default: the mean),
`score_name` says what it is ("score (0-100)", "any medal %").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from arex.envs.runtime import Env
from arex.record.trajectory import RoundEnd
from arex.sandbox import SandboxConfig


@dataclass(frozen=True)
class Source:
    """What `arex eval` was given: the benchmark folder and where the adapter writes envs."""

    folder: Path
    envs: Path
    """Where the adapter writes its env folders (one per problem, `envs/<env id>/`)."""
    data: Path | None = None
    """A second folder the benchmark needs (`--data`: MLE-bench's prepared data), else None."""
    only: tuple[str, ...] = ()
    """The problem ids asked for (`--problems`), in the benchmark's own naming; empty: all."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    notify: Callable[[str], None] = lambda line: None
    """Where a progress or warning line goes (the CLI prints it on stderr)."""


@dataclass(frozen=True)
class Item:
    """One problem of the benchmark: its env folder, or why it cannot be evaluated."""

    id: str
    """The problem's id as the benchmark names it (Frontier-CS: "0"; MLE-bench: the competition id)."""
    env: Path | None
    absent: str | None = None
    """Why the problem is not evaluated (None when `env` is set): listed in the results."""


@dataclass(frozen=True)
class Score:
    """One rollout's score on one problem, as the benchmark computes it."""

    value: float
    """The number the benchmark averages over problems."""
    columns: dict[str, float | str | None] = field(default_factory=dict)
    """Extra per-problem columns (e.g. {"unbounded": 112.5} or {"metric": 0.91, "medal": "silver"})."""


class Benchmark(ABC):
    """A benchmark adapter (see the module docstring)."""

    name: ClassVar[str]
    """Its short name, as registered in arex.eval.BENCHMARKS."""
    score_name: ClassVar[str] = "score"
    """What `Score.value` and the headline are, for the table and eval.md."""

    @abstractmethod
    def problems(self, source: Source) -> list[Item]:
        """Every problem of the benchmark folder (those in `source.only`, if any), as env folders."""

    @abstractmethod
    def score(self, env: Env, rounds: list[RoundEnd]) -> Score:
        """The benchmark's score of a rollout that played `rounds` (may be empty: nothing graded)."""

    def aggregate(self, values: list[float]) -> float:
        """The benchmark's headline from its per-problem values (one sample)."""
        return sum(values) / len(values) if values else 0.0
