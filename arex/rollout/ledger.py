"""What a rollout has spent: tokens, dollars and time, counted from every paid call (those of a
resumed record too), and checked against the rollout's budgets."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from arex.record.trajectory import Call, Spent, Trajectory
from arex.rollout.config import RolloutConfig
from arex.teacher.client import Reply, TeacherClient, TeacherError


@dataclass
class Ledger:
    config: RolloutConfig
    tokens: int = 0
    cost: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def over_budget(self) -> str | None:
        return self.config.spent(self.tokens, self.cost, self.seconds)

    def count(self, call: Reply | Call | Spent) -> None:
        self.tokens += call.prompt_tokens + call.completion_tokens
        self.cost += call.cost_usd

    def count_record(self, previous: Trajectory) -> None:
        """Every call a record paid for: its complete rounds' calls and its spent lines."""
        for round_ in previous.rounds:
            for call in [step.call for step in round_.steps] + [round_.end.reflection.call]:
                self.count(call)
        for spent in previous.spent:
            self.count(spent)

    def failed_call(self, exc: TeacherError, round_: int, teacher: TeacherClient) -> Spent:
        """The paid attempts of a call that failed for good (they belong to no round), counted."""
        a = exc.attempts
        prompt, completion = sum(x.prompt_tokens for x in a), sum(x.completion_tokens for x in a)
        cached = sum(x.cached_tokens for x in a)
        spent = Spent(
            round=round_,
            calls=1,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            cost_usd=teacher.cost(prompt, cached, completion),
            reason=f"a call failed after {len(a)} attempt(s): {exc}"[:500],
        )
        self.count(spent)
        return spent

    def stepless(self, call: Reply, round_: int, exc: BaseException) -> Spent:
        """A step's paid call (already counted) whose step line was never written: its command could
        not run to an end (the sandbox died under it, a stop)."""
        return Spent(
            round=round_,
            calls=1,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            cached_tokens=call.cached_tokens,
            cost_usd=call.cost_usd,
            reason=f"a step's command did not finish ({type(exc).__name__}: {exc})"[:500],
        )
