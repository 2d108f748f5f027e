"""Skills in the Agent Skills format: `<name>/SKILL.md` with `name` and `description` front matter.

The general catalogue is the top-level `skills/` folder of the checkout, beside `envs/` and
`configs/`; a wheel ships it inside the package as `arex/_skills` (setup.py). `bundled_skills()`
finds whichever this arex runs from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from arex import yamltext
from arex.errors import UserInputError

SHIPPED = "_skills"
"""The catalogue's folder inside an installed package (a wheel's copy of the top-level skills/)."""


def bundled_skills() -> Path:
    """The general skills catalogue: in a checkout (an editable install, or the source tree on the
    path), its top-level skills/; else the copy the wheel shipped in the package. The checkout is
    known by its pyproject.toml beside the package, so a stray skills/ in site-packages is never
    taken. A real folder, not a zip member: it is mounted into sandboxes."""
    package = Path(str(resources.files("arex")))
    root = package.parent
    if (root / "pyproject.toml").is_file() and (root / "skills").is_dir():
        return root / "skills"
    return package / SHIPPED


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
        meta = yamltext.safe_load(front) or {}
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


# -- task-specific skills: an env's own, beside the general ones ----------------------------------
ENV_SKILLS = "skills"
"""The folder of a built env that holds its own skills (`skills/<name>/SKILL.md`)."""
SOURCE_SKILLS = "arex-skills"
"""The folder of a source (judge problem folder, ML repository) whose skills `build-envs` copies
into the built env's `skills/`."""
MAX_SKILL_BYTES = 12_000
"""The most a task skill's SKILL.md may hold (the bundled general ones are under 5 kB)."""
MAX_DESCRIPTION_CHARS = 1024
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def check_task_skill(folder: Path) -> Skill:
    """A task skill in the Agent Skills format: name = folder (lowercase words joined by hyphens,
    at most 64 characters), a description, a non-empty body, SKILL.md within MAX_SKILL_BYTES.
    SkillError naming the file otherwise."""
    path = folder / "SKILL.md"
    if not path.is_file():
        raise SkillError(f"{path}: missing; a skill is a folder holding SKILL.md")
    if path.stat().st_size > MAX_SKILL_BYTES:
        raise SkillError(
            f"{path}: {path.stat().st_size} bytes, over the {MAX_SKILL_BYTES}-byte cap for a task skill; shorten it"
        )
    if len(folder.name) > 64 or not _NAME.match(folder.name):
        raise SkillError(
            f"{path}: the name {folder.name!r} must be lowercase letters and digits joined by single hyphens, "
            "at most 64 characters"
        )
    try:
        skill = read_skill(folder)
    except UnicodeDecodeError:
        raise SkillError(f"{path}: not UTF-8 text") from None
    if len(skill.description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"{path}: the description is over {MAX_DESCRIPTION_CHARS} characters")
    return skill


def task_target(skills_target: str) -> str:
    """Where an env's own skills appear in the sandbox: beside the general ones, `task-<name>`
    (`/skills` → `/task-skills`). A separate mount: a folder inside a read-only mount cannot be a
    mount point."""
    head, sep, tail = skills_target.rstrip("/").rpartition("/")
    return f"{head}{sep}task-{tail}"


@dataclass(frozen=True)
class SkillSet:
    """The skills one rollout carries: the general ones (rollout.skills_dir) and the env's own,
    each with the folder mounted and where it appears in the sandbox."""

    general: tuple[Skill, ...] = ()
    task: tuple[Skill, ...] = ()
    general_dir: Path | None = None
    task_dir: Path | None = None
    general_target: str = "/skills"
    task_target: str = "/task-skills"

    def paths(self) -> dict[str, str]:
        """`read_skill` names → SKILL.md inside the sandbox. A task skill named like a general one
        is offered as `task/<name>`."""
        out = {s.name: f"{self.general_target}/{s.name}/SKILL.md" for s in self.general}
        for s in self.task:
            out[f"task/{s.name}" if s.name in out else s.name] = f"{self.task_target}/{s.name}/SKILL.md"
        return out

    def catalogue(self) -> str:
        """The catalogue lines of the system prompt; the env's own skills marked as written for
        this task, with where they are."""
        lines = [f"- {s.name}: {s.description}" for s in self.general]
        if self.task:
            lines.append(
                f"Written for this task, read-only at {self.task_target} (`cat {self.task_target}/<name>/SKILL.md`):"
            )
            lines += [f"- {s.name}: {s.description}" for s in self.task]
        return "\n".join(lines) or "(none: this run has no skills, and nothing is mounted for them)"


def skill_set(general_dir: Path | None, env_dir: Path | None, general_target: str) -> SkillSet:
    """The skills of one rollout: `general_dir`'s (None: general skills off) and the env's own
    `skills/` (None: task skills off). A folder with no skill in it is not mounted."""
    general = tuple(load_skills(general_dir)) if general_dir is not None else ()
    task_dir = Path(env_dir) / ENV_SKILLS if env_dir is not None else None
    task = tuple(load_skills(task_dir)) if task_dir is not None else ()
    return SkillSet(
        general,
        task,
        general_dir if general else None,
        task_dir if task else None,
        general_target,
        task_target(general_target),
    )
