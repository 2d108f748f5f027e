"""What teacher calls a record paid for, summed: tokens (prompt, of them cached, and output split into
acting replies and reflections), calls and dollars. `arex report` and the dataset card both count
through it, so the two say the same thing about the same records.

Every paid call counts: the steps' and reflections' calls of complete rounds, and `spent` lines
(calls of a round a stop cut short and that was played again, or of a call that failed for good).
A `spent` line's output is neither acting nor reflection: it is counted in `output_tokens` only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from arex.record.trajectory import Call, Round, Spent, Trajectory


@dataclass
class Usage:
    rounds: int = 0
    """Complete rounds."""
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens the server reported as served from its prompt cache."""
    output_tokens: int = 0
    acting_output: int = 0
    """Completion tokens of acting replies (the steps of complete rounds)."""
    reflection_output: int = 0
    """Completion tokens of reflections."""
    cost_usd: float = 0.0

    def add_call(self, call: Call | Spent, calls: int = 1) -> None:
        self.calls += calls
        self.prompt_tokens += call.prompt_tokens
        self.cached_tokens += call.cached_tokens
        self.output_tokens += call.completion_tokens
        self.cost_usd += call.cost_usd

    def add_round(self, round_: Round) -> None:
        self.rounds += 1
        for step in round_.steps:
            self.add_call(step.call)
            self.acting_output += step.call.completion_tokens
        reflection = round_.end.reflection.call
        self.add_call(reflection)
        self.reflection_output += reflection.completion_tokens

    def add_spent(self, spent: Spent) -> None:
        self.add_call(spent, spent.calls)

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def cached_share(self) -> float | None:
        """Cached prompt tokens / prompt tokens; None with no prompt token."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


def usage_of(trajectory: Trajectory) -> Usage:
    """Every call the record paid for."""
    usage = Usage()
    for round_ in trajectory.rounds:
        usage.add_round(round_)
    for spent in trajectory.spent:
        usage.add_spent(spent)
    return usage


def reflection_budget(trajectory: Trajectory) -> tuple[int | None, int | None]:
    """(words asked for in the prompt, max_tokens of the reflection calls) as the record shows them:
    `rollout.reflection_words` from the header's config (None before it existed), and the max_tokens
    the reflection requests were sent with (None with no complete round)."""
    words = trajectory.header.config.get("reflection_words") if trajectory.header else None
    caps = [r.end.reflection.call.sampling.get("max_tokens") for r in trajectory.rounds]
    return words, max((c for c in caps if c is not None), default=None)
