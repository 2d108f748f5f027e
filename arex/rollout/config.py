"""Rollout settings and the prompts file they point to."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from arex import yamltext
from arex.envs.skills import bundled_skills
from arex.errors import UserInputError
from arex.hashing import files_sha256, json_sha256

# Package data, so a wheel install has them too (the prompts; the skills catalogue is found by
# arex.envs.skills.bundled_skills).
BUNDLED = Path(str(resources.files("arex").joinpath("data")))


PROMPTS = frozenset(
    {
        "system",
        "round",
        "state",
        "no_state",
        "best",
        "no_best",
        "feedback",
        "no_feedback",
        "observation",
        "format_error",
        "reflect",
    }
)
"""The prompts a prompts file must define."""
TOOL_PROMPTS = frozenset(
    {
        "system_tools",
        "format_error_tools",
        "tool_not_run",
        "tool_submitted",
        "tool_bash",
        "tool_submit",
        "tool_read_skill",
    }
)
"""The prompts the `tools` action format needs as well (tool descriptions and tool messages)."""
FEEDBACK_PROMPTS = {
    "score-only": frozenset({"system_score_only", "feedback_score_only", "reflect_score_only"}),
    "none": frozenset({"system_none", "feedback_none", "reflect_none", "best_none"}),
}
"""The prompts each `rollout.feedback` mode other than `full` needs as well."""


@dataclass(frozen=True)
class Slot:
    """Which rollout of a batch this is: its record, sample number, rollout key and config hash."""

    path: Path
    sample: int
    key: str
    config_hash: str


class RolloutConfig(BaseModel):
    """The reflective loop: budgets, context policy, prompts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    rounds: int = Field(default=10, ge=1)
    """Rounds per rollout (act → submit → feedback → reflect)."""
    steps_per_round: int = Field(default=12, ge=1)
    """Commands per round; the round is submitted as it is when they run out."""
    format_error_streak: int = Field(default=3, ge=1)
    """Unparseable replies in a row that end the round."""
    command_timeout_s: float = Field(default=120.0, gt=0)
    """Wall-clock limit of one agent command."""
    observation_chars: int = Field(default=3000, ge=0)
    """Command output shown to the teacher (head and tail, with a marker)."""
    feedback_chars: int = Field(default=3000, ge=0)
    """Grading feedback shown to the teacher."""
    state_chars: int = Field(default=1500, ge=0)
    """State update carried to the next round."""
    action_format: Literal["text", "tools"] = "text"
    """text: the agent acts with one fenced ```bash block per reply; tools: through OpenAI tool
    calls (`bash`, `submit`, `read_skill`), each answered by a `tool` message. Only the first tool
    call of a reply runs; any others are answered as not run."""
    feedback: Literal["full", "score-only", "none"] = "full"
    """What the agent learns of each graded submission. full: the public score and the grader's
    feedback (test verdicts, checker messages, run logs); score-only: the public score alone, and
    the best public score so far; none: only that the round ended, so the agent must test its own
    work (round scaling without feedback). The record keeps the whole grade in every mode;
    `round_end.feedback` holds what the agent was shown."""
    context: Literal["bounded", "full-history"] = "bounded"
    """bounded: each round's context is rebuilt from task, state, best and last feedback;
    full-history: every earlier message stays (for comparison)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Token budget per rollout (prompt + completion), unset for none."""
    reflection_words: int = Field(default=150, ge=1)
    """The reflection's length budget, as the prompt states it ("keep it under N words"): a
    reflection is output, the dearest tokens, paid every round."""
    reflection_tokens: int | None = Field(default=None, ge=1)
    """`max_tokens` of reflection calls; unset: teacher.max_tokens. A hard cap: a reflection cut at
    it is a 'truncated' reply (retried as teacher.retry_truncated says), so leave room above
    reflection_words (a word is one to two tokens)."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Dollar budget per rollout."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-clock budget per rollout."""
    prompts: str | None = None
    """Prompts file; unset: the bundled one (arex/data/prompts/default.yaml)."""
    skills_dir: str | None = None
    """Skill folders (Agent Skills format), mounted read-only in the sandbox; unset: the bundled
    ones (the checkout's top-level skills/, or the copy a wheel ships)."""
    skills_target: str = "/skills"
    """Where the skills appear inside the sandbox."""
    docs: bool = True
    """Tell the agent about the offline `docs` command (`docs search`, `docs read`: the docstrings and
    bundled docs of the standard library and the image's installed packages, indexed when the image
    is built). Off: the system prompt does not mention it (the command stays in the image)."""
    general_skills: bool = True
    """Carry the general skills (skills_dir): mounted, in the catalogue, readable with `read_skill`.
    Off (an ablation): none of that."""
    task_skills: bool = True
    """Carry the env's own skills (the built env's `skills/`, written for this task): mounted
    read-only beside the general ones (`/skills` → `/task-skills`), listed in the catalogue as
    written for this task, readable with `read_skill`. Off (an ablation): none of that. Both off:
    nothing is mounted and the system prompt says there are no skills."""
    grading_containers: int | None = Field(default=None, ge=1)
    """Most grading containers per env alive at once in a batch (each is reused, cleaned between
    gradings); unset: one per two rollouts in flight (`--concurrency`, rounded up). Lower it on a
    memory-tight node; it changes no trajectory, so it is not part of the rollout key. The local
    executor's setting: under Ray each rollout keeps its own one."""

    def spent(self, tokens: int, cost_usd: float, wall_s: float) -> str | None:
        """The whole-rollout budget that is used up, said in one phrase naming its key; None while
        all hold. The one check of these budgets: the rollout and the model drafter both ask it."""
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget {self.max_tokens} (rollout.max_tokens) was reached ({tokens} tokens used)"
        if self.max_cost_usd is not None and cost_usd >= self.max_cost_usd:
            return f"cost budget ${self.max_cost_usd:g} (rollout.max_cost_usd) was reached (${cost_usd:.4f} spent)"
        if self.max_wall_s is not None and wall_s >= self.max_wall_s:
            return f"wall-time budget {self.max_wall_s:g}s (rollout.max_wall_s) was reached"
        return None

    def load_prompts(self) -> dict[str, str]:
        path = Path(self.prompts) if self.prompts else BUNDLED / "prompts" / "default.yaml"
        if not path.is_file():
            raise UserInputError(
                f"rollout.prompts: no file {path}; point it at a prompts file, or unset it for the bundled one"
            )
        try:
            data = yamltext.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise UserInputError(
                f"rollout.prompts: prompts file {path} cannot be read ({exc}); give a readable UTF-8 YAML file"
            ) from None
        except (yaml.YAMLError, ValueError) as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise UserInputError(
                f"rollout.prompts: prompts file {path} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
            ) from None
        if not isinstance(data, dict):
            raise UserInputError(
                f"rollout.prompts: prompts file {path} must be a mapping of prompt names to texts "
                "(system: ..., round: ...)"
            )
        modal = FEEDBACK_PROMPTS.get(self.feedback, frozenset())
        needed = PROMPTS | (TOOL_PROMPTS if self.action_format == "tools" else frozenset()) | modal
        missing = needed - set(data)
        if missing:
            why = (
                " (rollout.action_format: tools needs the tool prompts of the bundled file)"
                if missing & TOOL_PROMPTS
                else ""
            )
            why += (
                f" (rollout.feedback: {self.feedback} needs its prompts from the bundled file)"
                if missing & modal
                else ""
            )
            raise UserInputError(f"prompts file {path} lacks: {', '.join(sorted(missing))}{why}")
        not_text = sorted(name for name in needed if not isinstance(data[name], str))
        if not_text:
            raise UserInputError(
                f"prompts file {path}: {', '.join(not_text)} must be text, not {type(data[not_text[0]]).__name__}"
            )
        return data

    def skills_path(self) -> Path:
        path = Path(self.skills_dir) if self.skills_dir else bundled_skills()
        if not path.is_dir():
            raise UserInputError(
                f"rollout.skills_dir: no folder {path}; point it at a skills folder, or unset it for the bundled ones"
            )
        return path

    def content(self) -> dict[str, str]:
        """What the agent is given beyond these settings, by content: the prompts' and (when carried)
        the general skills' sha256 (16 hex digits each). Part of the rollout key, so editing a prompt
        or a skill in place starts new rollouts instead of resuming old ones with another text."""
        out = {"prompts": json_sha256(self.load_prompts(), sort_keys=True)[:16]}
        if self.general_skills:
            root = self.skills_path()
            # bytecode left by running a skill's script on the host is not the skill
            files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            files = [p for p in files if p.suffix != ".pyc"]
            out["skills"] = files_sha256((p.relative_to(root).as_posix(), p) for p in files)[:16]
        return out
