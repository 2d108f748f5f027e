"""What a rollout carries from one round to the next, and the context each round starts from.

Bounded context (the default): every round starts from the system prompt and one message with the
agent's own state, the best public score so far and the last feedback. Full history: the previous
round's whole conversation, then that message.

`rollout.feedback` decides what of a grade the agent is told, here and nowhere else: `full` the
public score and the grader's feedback, `score-only` the public score, `none` only that the round
ended (no score, no best score). Every text built from a grade comes from this module.
"""

from __future__ import annotations

from arex.record.trajectory import Best, BestPublic, Round
from arex.rollout.config import RolloutConfig
from arex.rollout.parse import clip
from arex.specs import GradeResult

_SUFFIX = {"full": "", "score-only": "_score_only", "none": "_none"}
"""Each feedback mode's prompts: `reflect`, `reflect_score_only`, ... (rollout.config.FEEDBACK_PROMPTS)."""


def system_prompt(prompts: dict[str, str], name: str, config: RolloutConfig, workdir: str, env, skills: str) -> str:
    """The system prompt `name` (the action format's) for `env`: the rules, the limits, the skills, the task.

    It is the part of every request that never changes within a rollout, so everything constant goes
    here (how to reflect, the feedback mode's rules), not in the messages after it: a prompt cache then
    serves it on every call. A prompts file without the {reflection} and {feedback_rules} placeholders
    (written before they existed) gives the requests it gave before: the mode's rules appended, how to
    reflect in its reflection request."""
    mode = _SUFFIX[config.feedback]
    docs = f"\n{prompts['docs'].strip()}\n" if config.docs and prompts.get("docs") else ""  # its own paragraph
    template = prompts[name]
    rules = f"\n{prompts['system' + mode].strip()}\n" if mode else ""
    text = template.format(
        workdir=workdir,
        timeout=f"{config.command_timeout_s:g}",
        steps=config.steps_per_round,
        skills_dir=config.skills_target,
        skills=skills,
        title=env.title,
        statement=env.statement.strip(),
        docs=docs,
        reflection=prompts.get("reflection" + mode, "").format(words=config.reflection_words),
        feedback_rules=rules,
    )
    if rules and "{feedback_rules}" not in template:
        text = f"{text.rstrip()}\n\n{prompts['system' + mode]}"
    return text


class Memory:
    def __init__(self, prompts: dict[str, str], config: RolloutConfig, system: str):
        self.prompts, self.config, self.mode = prompts, config, config.feedback
        self.system = system
        self.state = ""
        self.best: Best | None = None  # by held-out score: what selection reads
        self.best_public: BestPublic | None = None  # what the agent is told
        self.last_feedback: tuple[int, str] | None = None
        self.history: list[dict] = []  # full-history mode only

    def context(self, number: int) -> list[dict]:
        p = self.prompts
        state = p["state"].format(state=self.state) if self.state else p["no_state"]
        best = self._best_line()
        feedback = (
            p["feedback"].format(round=self.last_feedback[0], feedback=self.last_feedback[1])
            if self.last_feedback
            else p["no_feedback"]
        )
        header = {
            "role": "user",
            "content": p["round"].format(
                round=number,
                rounds=self.config.rounds,
                state=state.strip(),
                best=best.strip(),
                feedback=feedback.strip(),
            ),
        }
        if self.config.context == "full-history" and self.history:
            return self.history + [header]
        return [{"role": "system", "content": self.system}, header]

    def _best_line(self) -> str:
        p = self.prompts
        if self.mode == "none":  # no score, and no round picked by one
            return p["best_none"]
        return (
            p["best"].format(best=f"public score {self.best_public.public:.6g} in round {self.best_public.round}")
            if self.best_public
            else p["no_best"]
        )

    def feedback(self, number: int, grade: GradeResult) -> str:
        """What the agent is told of round `number`'s grade (recorded as `round_end.feedback`)."""
        public = "none (no sample tests)" if grade.public_score is None else f"{grade.public_score:.6g}"
        if self.mode == "full":
            text = f"Public score: {public}\n{grade.feedback}"
        else:
            text = self.prompts["feedback" + _SUFFIX[self.mode]].format(
                round=number, public="" if self.mode == "none" else public
            )
        return clip(text, self.config.feedback_chars)

    def reflect_prompt(self, number: int, feedback: str) -> str:
        return self.prompts["reflect" + _SUFFIX[self.mode]].format(round=number, feedback=feedback)

    def improves(self, grade: GradeResult) -> bool:
        return self.best is None or grade.held_out_score > self.best.held_out

    def note(self, number: int, grade: GradeResult, feedback: str, state: str, messages: list[dict]) -> None:
        """Remember a finished round: the agent's new state (if it wrote one), the best scores, the
        feedback and, in full-history mode, the whole conversation."""
        if state:
            self.state = clip(state, self.config.state_chars)
        if self.improves(grade):
            self.best = Best(round=number, held_out=grade.held_out_score, public=grade.public_score)
        # No public score (a problem without sample tests), or none shown: nothing to tell the agent about.
        if (
            self.mode != "none"
            and grade.public_score is not None
            and (self.best_public is None or grade.public_score > self.best_public.public)
        ):
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
