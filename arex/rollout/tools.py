"""The `tools` action format: the tool definitions the teacher is offered, and reading its calls.

The tools mirror the `text` format's actions: `bash` (one shell command), `submit`, and, when
skills are mounted, `read_skill` (what `cat <skills>/<name>/SKILL.md` does in text; an env's own
skills are read from their own mount, `cat <task skills>/<name>/SKILL.md`). Only the first
tool call of a reply is the action; every call is answered by a `tool` message (the agent loop
answers the others as not run), as OpenAI-format conversations require. A reply whose first call
cannot be run is a format error, like a text reply without one fenced block.
"""

from __future__ import annotations

import shlex
from typing import Any

from arex.record.trajectory import ToolCall, json_object
from arex.rollout.parse import Action


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def tool_schema(
    prompts: dict[str, str], workdir: str, timeout: str, skills_dir: str, skills: list[str]
) -> list[dict[str, Any]]:
    """The OpenAI tool definitions sent with every call; descriptions come from the prompts file."""
    tools = [
        _function(
            "bash",
            prompts["tool_bash"].format(workdir=workdir, timeout=timeout).strip(),
            {"command": {"type": "string", "description": "The shell command."}},
            ["command"],
        ),
        _function("submit", prompts["tool_submit"].strip(), {}, []),
    ]
    if skills:
        name = {"type": "string", "enum": list(skills), "description": "The skill's name."}
        tools.append(
            _function(
                "read_skill", prompts["tool_read_skill"].format(skills_dir=skills_dir).strip(), {"name": name}, ["name"]
            )
        )
    return tools


def parse_tool_calls(calls: list[ToolCall] | None, skills_dir: str, skills: list[str] | dict[str, str]) -> Action:
    """The action of a reply's tool calls: its first call, as a command, `submit` or `invalid`.
    `skills`: the names `read_skill` takes (each at `<skills_dir>/<name>/SKILL.md`), or a mapping
    of names to their SKILL.md in the sandbox (general and task skills, mounted apart)."""
    if not calls:
        return Action("invalid", error="no tool call")
    first = calls[0]
    text = first.function.arguments
    # some servers send "" for no arguments
    name, arguments = first.function.name, (json_object(text) if text.strip() else {})
    if arguments is None:
        return Action("invalid", error=f"the arguments of `{name}` are not a JSON object")
    if name == "submit":
        return Action("submit", "submit")
    if name == "bash":
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return Action("invalid", error="`bash` needs a non-empty `command` string")
        return Action("command", command.strip())
    if name == "read_skill" and skills:
        skill = arguments.get("name")
        if skill not in skills:
            return Action("invalid", error=f"`read_skill` needs `name`, one of: {', '.join(skills)}")
        path = skills[skill] if isinstance(skills, dict) else f"{skills_dir}/{skill}/SKILL.md"
        return Action("command", f"cat {shlex.quote(path)}")
    return Action("invalid", error=f"unknown tool {name[:60]!r}")
