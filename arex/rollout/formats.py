"""How the agent acts, behind one interface: `text` (one fenced bash block per reply) or `tools`
(OpenAI tool calls). The loop asks the format to call the teacher, read the reply's action and
answer it; it never asks which format is in use. `FORMATS` maps `rollout.action_format` to the class.
"""

from __future__ import annotations

from typing import Any

from arex.record.trajectory import SCHEMA_VERSION, TOOLS_SCHEMA_VERSION, Call, Step
from arex.rollout.parse import Action, parse_action
from arex.rollout.tools import parse_tool_calls, tool_schema
from arex.teacher.client import Reply, TeacherClient


class TextFormat:
    """One fenced ```bash block per reply; an action is read from the reply's text."""

    schema_version = SCHEMA_VERSION
    system_prompt = "system"
    schema: list[dict[str, Any]] | None = None

    def __init__(self, prompts: dict[str, str], skills_target: str, skills: dict[str, str], workdir: str, timeout: str):
        self.prompts, self.skills_target, self.skills = prompts, skills_target, skills

    async def act(self, teacher: TeacherClient, messages: list[dict]) -> Reply:
        return await teacher.chat(messages)

    async def reflect(self, teacher: TeacherClient, messages: list[dict], **sampling: Any) -> Reply:
        return await teacher.chat(messages, **sampling)

    def record(self, reply: Reply) -> Call:
        """The call as recorded: tool calls are no action in this format, and are not kept."""
        return Call.model_validate(reply.model_dump(exclude={"messages", "tool_calls"}))

    def action(self, call: Call) -> Action:
        """What the reply asks for (a reply the teacher did not finish is read as empty)."""
        return parse_action(call.content if call.status == "ok" else "")

    def invalid(self, action: Action) -> str:
        return self.prompts["format_error"]

    def step(self, fields: dict, action: Action, shown: str | None) -> Step:
        """The step line: what the agent is shown next is a user message."""
        return Step(**fields, observation=shown)


class ToolsFormat(TextFormat):
    """OpenAI tool calls (`bash`, `submit`, `read_skill`), each answered by a `tool` message; only
    the first tool call of a reply runs."""

    schema_version = TOOLS_SCHEMA_VERSION
    system_prompt = "system_tools"

    def __init__(self, prompts: dict[str, str], skills_target: str, skills: dict[str, str], workdir: str, timeout: str):
        super().__init__(prompts, skills_target, skills, workdir, timeout)
        self.schema = tool_schema(prompts, workdir, timeout, skills_target, list(skills))

    async def act(self, teacher: TeacherClient, messages: list[dict]) -> Reply:
        return await teacher.chat(messages, tools=self.schema)

    async def reflect(self, teacher: TeacherClient, messages: list[dict], **sampling: Any) -> Reply:
        # The tools stay offered (the conversation holds tool calls) but may not be called.
        return await teacher.chat(messages, tools=self.schema, tool_choice="none", **sampling)

    def record(self, reply: Reply) -> Call:
        return Call.model_validate(reply.model_dump(exclude={"messages"}))

    def action(self, call: Call) -> Action:
        if call.status != "ok":
            return Action("invalid", error=f"the reply was {call.status}")
        return parse_tool_calls(call.tool_calls, self.skills_target, self.skills)

    def invalid(self, action: Action) -> str:
        return self.prompts["format_error_tools"].format(error=action.error)

    def step(self, fields: dict, action: Action, shown: str | None) -> Step:
        """Every tool call is answered (OpenAI-format conversations require it); only the first ran.
        A reply with no tool call to answer gets a user message, as in the text format."""
        calls = fields["call"].tool_calls or []
        if not calls:
            return Step(**fields, observation=shown)
        first = self.prompts["tool_submitted"] if action.kind == "submit" else shown
        return Step(**fields, tool_results=[first] + [self.prompts["tool_not_run"]] * (len(calls) - 1))


FORMATS = {"text": TextFormat, "tools": ToolsFormat}
