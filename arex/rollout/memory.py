"""What a rollout carries from one round to the next, and the context each round starts from.

Bounded context (the default): every round starts from the system prompt and one message with the
agent's own state, the best public score so far and the last feedback. Full history: the previous
round's whole conversation, then that message.
"""

from __future__ import annotations

from arex.rollout.config import RolloutConfig
from arex.rollout.parse import clip
from arex.specs import GradeResult
from arex.trajectory import Best, BestPublic, Round


class Memory:
    def __init__(self, prompts: dict[str, str], config: RolloutConfig, system: str):
        self.prompts, self.config, self.system = prompts, config, system
        self.state = ""
        self.best: Best | None = None  # by held-out score: what selection reads
        self.best_public: BestPublic | None = None  # what the agent is told
        self.last_feedback: tuple[int, str] | None = None
        self.history: list[dict] = []  # full-history mode only

    def context(self, number: int) -> list[dict]:
        p = self.prompts
        state = p["state"].format(state=self.state) if self.state else p["no_state"]
        best = p["best"].format(best=f"public score {self.best_public.public:.6g} in round {self.best_public.round}") if self.best_public else p["no_best"]
        feedback = p["feedback"].format(round=self.last_feedback[0], feedback=self.last_feedback[1]) if self.last_feedback else p["no_feedback"]
        header = {"role": "user", "content": p["round"].format(round=number, rounds=self.config.rounds, state=state.strip(), best=best.strip(), feedback=feedback.strip())}
        if self.config.context == "full-history" and self.history:
            return self.history + [header]
        return [{"role": "system", "content": self.system}, header]

    def improves(self, grade: GradeResult) -> bool:
        return self.best is None or grade.held_out_score > self.best.held_out

    def note(self, number: int, grade: GradeResult, feedback: str, state: str, messages: list[dict]) -> None:
        """Remember a finished round: the agent's new state (if it wrote one), the best scores, the
        feedback and, in full-history mode, the whole conversation."""
        if state:
            self.state = clip(state, self.config.state_chars)
        if self.improves(grade):
            self.best = Best(round=number, held_out=grade.held_out_score, public=grade.public_score)
        # No public score (a problem without sample tests): nothing to tell the agent about.
        if grade.public_score is not None and (self.best_public is None or grade.public_score > self.best_public.public):
            self.best_public = BestPublic(round=number, public=grade.public_score)
        self.last_feedback = (number, feedback)
        if self.config.context == "full-history":
            self.history = messages

    def restore(self, round_: Round) -> None:
        """Remember a round read back from the record (resuming)."""
        end = round_.end
        self.state, self.best, self.best_public = end.state, end.best, end.best_public
        self.last_feedback = (end.round, end.feedback)
        if self.config.context == "full-history":
            self.history = round_.messages(None) + [{"role": "assistant", "content": end.reflection.call.content}]
