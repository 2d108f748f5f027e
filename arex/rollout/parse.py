"""Reading the teacher's replies: one shell command per reply, and the four-part reflection."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.S)
_HEADINGS = ("REVIEW", "DIAGNOSE", "PLAN", "STATE")
_SECTION = re.compile(r"^\s*(?:#+\s*|\*\*)?(REVIEW|DIAGNOSE|PLAN|STATE)(?:\*\*)?\s*:?\s*(?:\*\*)?", re.M | re.I)


@dataclass(frozen=True)
class Action:
    kind: str  # command | submit | invalid
    command: str = ""
    error: str = ""


def parse_action(reply: str) -> Action:
    blocks = [b.strip() for b in _BLOCK.findall(reply or "")]
    blocks = [b for b in blocks if b]
    if not blocks:
        return Action("invalid", error="no fenced ```bash block")
    if len(blocks) > 1:
        return Action("invalid", error=f"{len(blocks)} command blocks; exactly one is allowed")
    command = blocks[0]
    if command.strip().lower() in ("submit", "$ submit"):
        return Action("submit", "submit")
    return Action("command", command)


@dataclass(frozen=True)
class Reflection:
    review: str
    diagnose: str
    plan: str
    state: str
    complete: bool
    """All four headings were present and non-empty."""


def parse_reflection(reply: str) -> Reflection:
    text = reply or ""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        key = match.group(1).upper()
        if key not in found:
            found[key] = text[match.end() : end].strip()
    complete = all(found.get(h) for h in _HEADINGS)
    # Without a STATE section, the whole reply is the best state we have.
    state = found.get("STATE") or text.strip()
    return Reflection(found.get("REVIEW", ""), found.get("DIAGNOSE", ""), found.get("PLAN", ""), state, complete)


def clip(text: str, limit: int) -> str:
    """Head and tail of a long text, with a visible marker."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters truncated ...]\n{text[-tail:]}"
