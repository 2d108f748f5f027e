"""The report's numbers, as typed models (`report.json` is `Report.model_dump_json()`).

Definitions (the page says them too):
- a rollout's *best so far* at round r is the highest held-out score of its rounds 1..r; a curve
  point is the mean and the spread (population standard deviation) of best-so-far over the
  rollouts that reached round r (`n` of them);
- a rollout is *still improving* at round r if a round r' >= r beats every earlier round (for
  r = 1: the env's baseline score, when the record has one); the fraction is over every rollout
  of the env and variant with at least one complete round;
- a round's *spend* is every call made in it: the steps', the reflection's, and `spent` lines
  (calls paid for in a round that was cut and re-played, or failed) of that round number;
- a rollout's *final score* is its best held-out score over all rounds.
"""

from __future__ import annotations

from collections import Counter
from itertools import accumulate
from statistics import fmean, pstdev

from pydantic import BaseModel

from arex.record.trajectory import Call, Round, Trajectory

UNFINISHED = "unfinished"
"""The status shown for a record with no `end` line (still running, or stopped and resumable)."""


class Score(BaseModel):
    n: int = 0
    mean: float | None = None
    spread: float | None = None
    """Population standard deviation; 0 for one value."""


class Point(BaseModel):
    round: int
    n: int
    mean: float
    spread: float


class EnvStats(BaseModel):
    env: str
    rollouts: int
    best_curve: list[Point]
    """Best held-out score so far, per round."""
    improving: list[float]
    """Fraction of rollouts still improving at rounds 1, 2, ..."""
    final: Score
    """Each rollout's best held-out score."""


class RoundSpend(BaseModel):
    round: int
    calls: int
    tokens: int
    cost_usd: float


class EndingCount(BaseModel):
    status: str
    reason: str
    count: int


class TrajectoryRow(BaseModel):
    env: str
    key: str
    sample: int
    rounds: int
    held_out: list[float]
    best: float | None
    status: str
    page: str
    """The viewer page, relative to report.html."""


class Unreadable(BaseModel):
    path: str
    reason: str


class VariantStats(BaseModel):
    name: str
    overrides: list
    store: str
    rollouts: int
    envs: list[EnvStats]
    overall: Score
    """Each rollout's best held-out score, over every env (pooled)."""
    spend: list[RoundSpend]
    endings: list[EndingCount]
    trajectories: list[TrajectoryRow]
    unreadable: list[Unreadable] = []


class Drop(BaseModel):
    variant: str | None
    reason: str
    count: int
    ids: list[str]


class SelectionStats(BaseModel):
    path: str
    variant: str | None
    total: int
    kept: int
    drops: list[Drop]


class Report(BaseModel):
    arex_version: str
    store: str
    variants: list[VariantStats]
    envs: list[str]
    selections: list[SelectionStats] | None = None


def score_of(values: list[float]) -> Score:
    return Score(n=len(values), mean=fmean(values), spread=pstdev(values)) if values else Score()


def best_so_far(trajectory: Trajectory) -> list[float]:
    return list(accumulate(trajectory.held_out, max))


def best_curve(trajectories: list[Trajectory]) -> list[Point]:
    runs = [best_so_far(t) for t in trajectories]
    points = []
    for r in range(1, max(map(len, runs), default=0) + 1):
        values = [run[r - 1] for run in runs if len(run) >= r]
        points.append(Point(round=r, n=len(values), mean=fmean(values), spread=pstdev(values)))
    return points


def still_improving(trajectory: Trajectory, r: int) -> bool:
    """Does a round r' >= r beat every round before r (round 1: the baseline, if recorded)?"""
    held = trajectory.held_out
    baseline = trajectory.header.baseline_score if trajectory.header else None
    before = max(held[: r - 1]) if r > 1 else (baseline if baseline is not None else float("-inf"))
    return any(h > before for h in held[r - 1 :])


def improving(trajectories: list[Trajectory]) -> list[float]:
    ran = [t for t in trajectories if t.rounds]
    rounds = max((len(t.rounds) for t in ran), default=0)
    return [sum(still_improving(t, r) for t in ran) / len(ran) for r in range(1, rounds + 1)]


def env_stats(env: str, trajectories: list[Trajectory]) -> EnvStats:
    ran = [t for t in trajectories if t.rounds]
    return EnvStats(
        env=env,
        rollouts=len(trajectories),
        best_curve=best_curve(ran),
        improving=improving(ran),
        final=score_of([max(t.held_out) for t in ran]),
    )


def calls_of(round_: Round) -> list[Call]:
    return [s.call for s in round_.steps] + [round_.end.reflection.call]


def spend(trajectories: list[Trajectory]) -> list[RoundSpend]:
    """Calls, tokens and cost per round number, summed over the rollouts."""
    table: dict[int, list] = {}
    for t in trajectories:
        for round_ in t.rounds:
            row = table.setdefault(round_.number, [0, 0, 0.0])
            for call in calls_of(round_):
                row[0], row[1], row[2] = row[0] + 1, row[1] + call.tokens, row[2] + call.cost_usd
        for spent in t.spent:
            row = table.setdefault(spent.round, [0, 0, 0.0])
            row[0], row[1], row[2] = row[0] + spent.calls, row[1] + spent.tokens, row[2] + spent.cost_usd
    return [
        RoundSpend(round=r, calls=c, tokens=n, cost_usd=round(cost, 9)) for r, (c, n, cost) in sorted(table.items())
    ]


def ending_of(trajectory: Trajectory) -> tuple[str, str]:
    if trajectory.end is None:
        return UNFINISHED, "no end line: still running, or stopped (re-run arex rollout to resume)"
    return trajectory.end.status, trajectory.end.reason


def endings(trajectories: list[Trajectory]) -> list[EndingCount]:
    counts = Counter(ending_of(t) for t in trajectories)
    return [EndingCount(status=s, reason=r, count=n) for (s, r), n in sorted(counts.items())]
