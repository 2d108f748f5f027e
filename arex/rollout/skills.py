"""Skills in the Agent Skills format: `<name>/SKILL.md` with `name` and `description` front matter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from arex.errors import UserInputError


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path


class SkillError(UserInputError, ValueError):
    """A skill folder that does not follow the Agent Skills format; the message names the file."""


def read_skill(folder: Path) -> Skill:
    path = folder / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise SkillError(f"{path}: must start with '---' front matter holding name and description")
    try:
        _, front, body = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise SkillError(f"{path}: unreadable front matter ({exc})") from None
    name, description = meta.get("name"), meta.get("description")
    if name != folder.name:
        raise SkillError(f"{path}: field 'name' is {name!r}; it must equal the folder name {folder.name!r}")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{path}: field 'description' is missing")
    if not body.strip():
        raise SkillError(f"{path}: the body is empty")
    return Skill(name, " ".join(description.split()), folder)


def load_skills(root: Path, only: list[str] | None = None) -> list[Skill]:
    if not root.is_dir():
        return []
    skills = [read_skill(p) for p in sorted(root.iterdir()) if (p / "SKILL.md").is_file()]
    return [s for s in skills if only is None or s.name in only]


def catalogue(root: Path, only: list[str] | None = None) -> str:
    """The lines the agent sees: '- name: description'."""
    return "\n".join(f"- {s.name}: {s.description}" for s in load_skills(root, only))
