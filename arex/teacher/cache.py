"""Prompt-cache breakpoints (`teacher.cache_breakpoints`) for endpoints that cache only where asked.

vLLM, SGLang and OpenAI cache a repeated prompt prefix on their own; Anthropic-style APIs and several
gateways cache only up to a message marked with `cache_control`. Marked here: the system prompt (the
stable prefix every request of a rollout begins with) and the last message (so the next call, which
extends this one, finds it cached). A marked message's text becomes one text part carrying the mark;
nothing else of the request changes, and the record rebuilds it with this same function.
"""

from __future__ import annotations

from typing import Any

MARK = {"type": "ephemeral"}


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, str) or not content:  # nothing to mark (an assistant turn of tool calls only)
        return message
    return {**message, "content": [{"type": "text", "text": content, "cache_control": dict(MARK)}]}


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` as sent with breakpoints: the first system message and the last message marked."""
    out = list(messages)
    at = {len(out) - 1} | {next((i for i, m in enumerate(out) if m.get("role") == "system"), len(out) - 1)}
    for i in at:
        if 0 <= i < len(out):
            out[i] = _marked(out[i])
    return out
