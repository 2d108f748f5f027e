"""The report's numbers, as typed models (`report.json` is `Report.model_dump_json()`).

Definitions (the page says them too):
- a round's *score* is its held-out score, or none when its submission was invalid (an ML
  submission the grader could not score: the metric's worst value is recorded, e.g. -1e6) or
  grading failed;
- a rollout's *best so far* at round r is the highest score of its rounds 1..r; a rollout that
  stopped before round r carries its last best forward (no survivorship: the mean does not fall
  when weak rollouts keep going and strong ones stop); a curve point is the mean and the spread
  (population standard deviation) over the rollouts with a score by then (`n`; `ran`: how many
  played round r);
- *normalised*: per env, the share of the gap from the env's baseline (its recorded baseline
  score, else the lowest score any rollout reached) to its best-known score (the highest any
  rollout of any variant reached): 0 = baseline, 1 = best known. Envs with different metrics are
  only ever averaged normalised; an env with no gap (or no score) is left out of those means;
- the *test-time scaling curve* of a variant: the mean normalised best-so-far over every rollout
  of every env, by round (a rollout with no score yet counts as its baseline, 0), with a 95%
  confidence band (1.96 standard errors);
- a rollout is *still improving* at round r if a round r' >= r beats every earlier round (for
  r = 1: the env's baseline score, when the record has one); the fraction is over every rollout
  of the env and variant with at least one complete round;
- a round's *spend* is every call made in it: the steps', the reflection's, and `spent` lines
  (calls paid for in a round that was cut and re-played, or failed) of that round number;
- a rollout's *final score* is its best held-out score over all rounds (normalised for `overall`);
- a variant's *cost* (`Cost`): every paid call of every rollout (`arex.record.usage`); the *cached
  share* is the prompt tokens the server served from its prompt cache over all prompt tokens; *cost
  per round* is the cost over the complete rounds played; *cost per kept trajectory* is the whole
  variant's cost (dropped rollouts are paid for too) over the trajectories its selection kept.
"""

from __future__ import annotations

from collections import Counter
from math import sqrt
from statistics import fmean, pstdev

from pydantic import BaseModel

from arex.record.trajectory import Round, Trajectory
from arex.record.usage import Usage, reflection_budget, usage_of

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
    ran: int = 0
    """Rollouts that played this round (the others carry their best forward)."""
    ci: float = 0.0
    """Half-width of the 95% confidence interval of the mean (1.96 standard errors)."""


class Anchors(BaseModel):
    """What an env's scores are normalised by: 0 at `baseline`, 1 at `best_known`."""

    baseline: float | None = None
    baseline_from: str = "none"
    """'recorded' (the env's baseline score) or 'lowest' (the lowest score any rollout reached)."""
    best_known: float | None = None

    def normalise(self, value: float | None) -> float | None:
        if value is None or self.baseline is None or self.best_known is None or self.best_known <= self.baseline:
            return None
        return (value - self.baseline) / (self.best_known - self.baseline)


class EnvStats(BaseModel):
    env: str
    rollouts: int
    best_curve: list[Point]
    """Best held-out score so far, per round."""
    improving: list[float]
    """Fraction of rollouts still improving at rounds 1, 2, ..."""
    final: Score
    """Each rollout's best held-out score."""
    metric: str = ""
    """The held-out metric (an ML env's), or the env kind's score."""
    graded: int = 0
    """Rounds with a score (not invalid, grading not failed)."""
    invalid: int = 0
    """Rounds whose submission was invalid."""
    anchors: Anchors = Anchors()
    normalised: Score = Score()
    """Each rollout's best score, normalised."""


class RoundSpend(BaseModel):
    round: int
    calls: int
    tokens: int
    cost_usd: float
    prompt_tokens: int = 0
    cached_tokens: int = 0
    acting_output: int = 0
    """Completion tokens of acting replies."""
    reflection_output: int = 0
    """Completion tokens of reflections."""


class Cost(BaseModel):
    """What a variant's rollouts paid for, and per round and per kept trajectory."""

    rollouts: int = 0
    rounds: int = 0
    """Complete rounds played."""
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cached_share: float | None = None
    output_tokens: int = 0
    acting_output: int = 0
    reflection_output: int = 0
    cost_usd: float = 0.0
    cost_per_round: float | None = None
    kept: int | None = None
    """Trajectories its selection kept; None without a selection."""
    cost_per_kept: float | None = None
    reflection_words: list[int] = []
    """The reflection length budgets the prompts stated (rollout.reflection_words), as recorded."""
    reflection_tokens: list[int] = []
    """The max_tokens reflection calls were sent with (rollout.reflection_tokens, else teacher.max_tokens)."""


class EndingCount(BaseModel):
    status: str
    reason: str
    count: int


class TrajectoryRow(BaseModel):
    env: str
    key: str
    sample: int
    rounds: int
    held_out: list[float | None]
    """Each round's score; None: invalid submission or failed grading."""
    best: float | None
    status: str
    selection: str = ""
    """'kept', 'dropped' or '' (not in a selection given)."""
    drop_reasons: list[str] = []
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
    """Each rollout's best score normalised within its env (`Anchors`), over every env: never a mean of
    raw scores across envs with different metrics."""
    scaling: list[Point] = []
    """The test-time scaling curve: mean normalised best so far by round, over every rollout."""
    spend: list[RoundSpend]
    cost: Cost = Cost()
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
    kept_ids: list[str] = []
    drops: list[Drop]


class Report(BaseModel):
    arex_version: str
    store: str
    variants: list[VariantStats]
    envs: list[str]
    selections: list[SelectionStats] | None = None
    evaluation: dict | None = None
    """The store's eval.json (`arex eval`: the benchmark's score, per-problem table and curve), as
    written; {"error": ...} if it cannot be read; None if the store is no eval's."""


def score_of(values: list[float]) -> Score:
    return Score(n=len(values), mean=fmean(values), spread=pstdev(values)) if values else Score()


def round_score(round_: Round) -> float | None:
    """The round's held-out score, or None: an invalid submission or failed grading."""
    grade = round_.end.grade
    return None if grade.infra_error or (grade.details or {}).get("invalid") else grade.held_out_score


def scores(trajectory: Trajectory) -> list[float | None]:
    return [round_score(r) for r in trajectory.rounds]


def best_so_far(trajectory: Trajectory) -> list[float | None]:
    """Highest score of rounds 1..r (None until a round has one)."""
    out, best = [], None
    for value in scores(trajectory):
        best = value if best is None or (value is not None and value > best) else best
        out.append(best)
    return out


def _point(r: int, values: list[float], ran: int) -> Point:
    ci = 1.96 * pstdev(values) / sqrt(len(values)) if len(values) > 1 else 0.0
    return Point(round=r, n=len(values), mean=fmean(values), spread=pstdev(values), ran=ran, ci=ci)


def carried(runs: list[list[float | None]], lengths: list[int], rounds: int) -> list[Point]:
    """Per round 1..rounds: the mean over rollouts of their best so far, each rollout's last value
    carried past its end; rounds where no rollout has a value yet are left out."""
    points = []
    for r in range(1, rounds + 1):
        values = [run[min(r, len(run)) - 1] for run in runs if run]
        values = [v for v in values if v is not None]
        if values:
            points.append(_point(r, values, sum(n >= r for n in lengths)))
    return points


def best_curve(trajectories: list[Trajectory]) -> list[Point]:
    runs = [best_so_far(t) for t in trajectories]
    return carried(runs, [len(r) for r in runs], max(map(len, runs), default=0))


def anchors_of(trajectories: list[Trajectory]) -> Anchors:
    """An env's normalisation over every variant's rollouts of it."""
    valid = [v for t in trajectories for v in scores(t) if v is not None]
    recorded = next((t.header.baseline_score for t in trajectories if t.header.baseline_score is not None), None)
    if recorded is not None:
        return Anchors(baseline=recorded, baseline_from="recorded", best_known=max([recorded, *valid]))
    return Anchors(baseline=min(valid, default=None), baseline_from="lowest", best_known=max(valid, default=None))


def still_improving(trajectory: Trajectory, r: int) -> bool:
    """Does a round r' >= r beat every round before r (round 1: the baseline, if recorded)?"""
    held = [v if v is not None else float("-inf") for v in scores(trajectory)]
    baseline = trajectory.header.baseline_score if trajectory.header else None
    before = max(held[: r - 1]) if r > 1 else (baseline if baseline is not None else float("-inf"))
    return any(h > before for h in held[r - 1 :])


def improving(trajectories: list[Trajectory]) -> list[float]:
    ran = [t for t in trajectories if t.rounds]
    rounds = max((len(t.rounds) for t in ran), default=0)
    return [sum(still_improving(t, r) for t in ran) / len(ran) for r in range(1, rounds + 1)]


def _metric(trajectories: list[Trajectory]) -> str:
    for t in trajectories:
        for r in t.rounds:
            metric = (r.end.grade.details or {}).get("metric")
            if metric:
                return str(metric)
    return next((f"{t.header.env_kind} score" for t in trajectories), "")


def final(t: Trajectory) -> float | None:
    return max((v for v in scores(t) if v is not None), default=None)


def env_stats(env: str, trajectories: list[Trajectory], anchors: Anchors | None = None) -> EnvStats:
    ran = [t for t in trajectories if t.rounds]
    anchors = anchors or anchors_of(ran)
    finals = [final(t) for t in ran]
    every = [v for t in ran for v in scores(t)]
    return EnvStats(
        env=env,
        rollouts=len(trajectories),
        best_curve=best_curve(ran),
        improving=improving(ran),
        final=score_of([v for v in finals if v is not None]),
        metric=_metric(ran),
        graded=sum(v is not None for v in every),
        invalid=sum(bool((r.end.grade.details or {}).get("invalid")) for t in ran for r in t.rounds),
        anchors=anchors,
        normalised=score_of([n for n in map(anchors.normalise, finals) if n is not None]),
    )


def scaling(by_env: dict[str, list[Trajectory]], anchors: dict[str, Anchors]) -> list[Point]:
    """The test-time scaling curve over every env's rollouts, each normalised within its env."""
    runs, lengths = [], []
    for env, trajectories in by_env.items():
        for t in trajectories:
            if t.rounds and anchors[env].normalise(anchors[env].best_known) is not None:
                # no score yet (an invalid first submission) counts as the baseline: 0, never left out
                runs.append([anchors[env].normalise(v) if v is not None else 0.0 for v in best_so_far(t)])
                lengths.append(len(t.rounds))
    return carried(runs, lengths, max(lengths, default=0))


def spend(trajectories: list[Trajectory]) -> list[RoundSpend]:
    """Calls, tokens and cost per round number, summed over the rollouts."""
    table: dict[int, Usage] = {}
    for t in trajectories:
        for round_ in t.rounds:
            table.setdefault(round_.number, Usage()).add_round(round_)
        for spent in t.spent:
            table.setdefault(spent.round, Usage()).add_spent(spent)
    return [
        RoundSpend(
            round=r,
            calls=u.calls,
            tokens=u.prompt_tokens + u.output_tokens,
            cost_usd=round(u.cost_usd, 9),
            prompt_tokens=u.prompt_tokens,
            cached_tokens=u.cached_tokens,
            acting_output=u.acting_output,
            reflection_output=u.reflection_output,
        )
        for r, u in sorted(table.items())
    ]


def cost(trajectories: list[Trajectory], kept: int | None) -> Cost:
    """A variant's cost; `kept`: how many of its trajectories its selection kept (None: no selection)."""
    total = Usage()
    for t in trajectories:
        total.add(usage_of(t))
    budgets = [reflection_budget(t) for t in trajectories]
    return Cost(
        rollouts=len(trajectories),
        rounds=total.rounds,
        calls=total.calls,
        prompt_tokens=total.prompt_tokens,
        cached_tokens=total.cached_tokens,
        cached_share=total.cached_share,
        output_tokens=total.output_tokens,
        acting_output=total.acting_output,
        reflection_output=total.reflection_output,
        cost_usd=round(total.cost_usd, 9),
        cost_per_round=total.cost_usd / total.rounds if total.rounds else None,
        kept=kept,
        cost_per_kept=total.cost_usd / kept if kept else None,
        reflection_words=sorted({w for w, _ in budgets if w is not None}),
        reflection_tokens=sorted({n for _, n in budgets if n is not None}),
    )


def ending_of(trajectory: Trajectory) -> tuple[str, str]:
    if trajectory.end is None:
        return UNFINISHED, "no end line: still running, or stopped (re-run arex rollout to resume)"
    return trajectory.end.status, trajectory.end.reason


def endings(trajectories: list[Trajectory]) -> list[EndingCount]:
    counts = Counter(ending_of(t) for t in trajectories)
    return [EndingCount(status=s, reason=r, count=n) for (s, r), n in sorted(counts.items())]
