"""`arex build-envs --draft-skills`: the teacher writes skills for each accepted env.

One request per entry of the prompts file's `skills` (arex/data/prompts/skills.yaml: by default an
approach skill and a local-testing skill), built from what the agent will see anyway (the statement,
the workspace's file list) and the build's results (gates, scores, the task's limits and metric).
Each reply is checked as a shipped skill is (arex.envs.task_skills: the format, no canary, no hidden
test content, no private labels) before it is written to the env's `skills/`; a rejected one is
reported with its reason and never written. An env that already has a drafted skill is not
drafted again (re-running resumes).
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator

import yaml

from arex.envs.layout import STAMP
from arex.envs.report import EnvReport, write_report
from arex.envs.task_skills import PrivateData, SkillNote, keep, read_record, record
from arex.errors import UserInputError
from arex.specs import DEFAULT_KIND, kind_of
from arex.teacher.client import TeacherClient, TeacherConfig

PROMPTS = Path(str(resources.files("arex").joinpath("data", "prompts", "skills.yaml")))
STATEMENT_CHARS = 8000
FILES_SHOWN = 150
_FENCE = re.compile(r"^```[A-Za-z]*\n(.*?)\n```\s*$", re.S)


def load_prompts(path: Path = PROMPTS) -> dict:
    """The drafting prompts: `system`, `request` and `skills` (a list of {name, focus})."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserInputError(f"skill prompts file {path} cannot be read ({exc}); reinstall arex") from None
    ok = isinstance(data, dict) and isinstance(data.get("system"), str) and isinstance(data.get("request"), str)
    if (
        not ok
        or not isinstance(data.get("skills"), list)
        or not all(isinstance(s, dict) and {"name", "focus"} <= set(s) for s in data["skills"])
    ):
        raise UserInputError(
            f"skill prompts file {path} must define system, request (texts) and skills (a list of name and focus)"
        )
    return data


def skill_name(pattern: str, env_id: str) -> str:
    """The skill's folder name for this env: lowercase words joined by hyphens, at most 64 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", env_id.lower()).strip("-")[:40].strip("-") or "task"
    return re.sub(r"[^a-z0-9]+", "-", pattern.replace("{env_id}", slug).lower()).strip("-")[:64].strip("-")


def _files(workspace: Path) -> str:
    files = (
        sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file())
        if workspace.is_dir()
        else []
    )
    more = f"\n... and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
    return "\n".join(f"- {f}" for f in files[:FILES_SHOWN]) + more or "(empty)"


def _gates(env_dir: Path) -> str:
    stamp = json.loads((env_dir / STAMP).read_text()) if (env_dir / STAMP).is_file() else {}
    lines = [
        f"- {g['name']}: {'passed' if g.get('passed') else 'FAILED'} ({g.get('detail', '')})"
        for g in stamp.get("gates", [])
    ]
    scores = ", ".join(f"{name} {value:.4g}" for name, value in stamp.get("scores", {}).items())
    return "\n".join(lines) + (f"\nScores (held-out, higher is better): {scores}" if scores else "")


def _facts(raw: dict, path: Path) -> str:
    """The task's limits, metric and files, as the build resolved them: its kind's to say."""
    facts = kind_of(raw, path).part("facts")
    return facts(raw) if facts is not None else ""


def request(prompts: dict, env_dir: Path, entry: dict, name: str, workdir: str) -> list[dict]:
    """The messages of one skill's request."""
    raw = yaml.safe_load((env_dir / "task.yaml").read_text(encoding="utf-8")) or {}
    statement = (env_dir / "statement.md").read_text(encoding="utf-8")[:STATEMENT_CHARS]
    text = prompts["request"].format(
        title=raw.get("title", env_dir.name),
        kind=raw.get("kind", DEFAULT_KIND),
        statement=statement.strip(),
        workdir=workdir,
        files=_files(env_dir / "workspace"),
        gates=_gates(env_dir),
        facts=_facts(raw, env_dir / "task.yaml"),
        name=name,
        focus=str(entry["focus"]).strip(),
    )
    return [{"role": "system", "content": prompts["system"]}, {"role": "user", "content": text}]


def skill_text(reply: str) -> str:
    """The SKILL.md in a reply: as sent, or out of one fence around it; from its first `---` line."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    start = text.find("---")
    return (text[start:] if start > 0 and text[start - 1] == "\n" else text).strip() + "\n"


async def draft_env(
    env_dir: Path, client: TeacherClient, prompts: dict, workdir: str = "/workspace"
) -> list[SkillNote]:
    """Draft the env's skills, each checked before it is kept; their notes (also in the env's record)."""
    private, notes = PrivateData(env_dir), []
    for entry in prompts["skills"]:
        name = skill_name(str(entry["name"]), env_dir.name)
        reply = await client.chat(request(prompts, env_dir, entry, name, workdir))
        if reply.status != "ok":
            notes.append(SkillNote(name, "drafted", "rejected", f"the teacher's reply was {reply.status}"))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            folder.mkdir()
            (folder / "SKILL.md").write_text(skill_text(reply.content or ""), encoding="utf-8")
            notes.append(keep(folder, env_dir, "drafted", private))
    record(env_dir, notes)
    return notes


def has_drafted(env_dir: Path) -> bool:
    return any(n.origin == "drafted" and n.status == "kept" for n in read_record(env_dir))


async def draft_all(
    reports: list[EnvReport],
    out: Path,
    client: TeacherClient,
    workdir: str = "/workspace",
    notify: Callable[[str], None] = print,
) -> None:
    """Draft skills for every accepted (or unchanged) env of the build; each report gets its notes."""
    prompts = load_prompts()
    for report in reports:
        env_dir = out / (report.env_id or "")
        if report.status not in ("accepted", "skipped") or not report.env_id or not (env_dir / "task.yaml").is_file():
            continue
        if has_drafted(env_dir):
            notify(f"{report.env_id}: has drafted skills already, not drafted again")
            report.skills = read_record(env_dir)
            continue
        notes = await draft_env(env_dir, client, prompts, workdir)
        report.skills = read_record(env_dir)
        for n in notes:
            notify(f"{report.env_id}: skill {n.name} {n.status}" + (f": {n.reason}" if n.reason else ""))


@contextmanager
def teacher_endpoint(
    config: TeacherConfig, notify: Callable[[str], None] = print
) -> Iterator[tuple[str, TeacherConfig]]:
    """The teacher's base URL and the settings to call it with: teacher.base_url and `config`, or
    the bundled local teacher started for the block and `config` fitted to it (its one slot,
    timeouts at its measured speed: arex.teacher.local)."""
    if config.base_url is not None:
        yield config.base_url, config
        return
    from arex.teacher.local import LocalTeacher

    notify("no teacher.base_url configured: starting the bundled local teacher ...")
    local = LocalTeacher(config.local, model_alias=config.model).start()
    try:
        yield local.base_url, local.fit(config)
    finally:
        local.stop()


def draft_skills(
    reports: list[EnvReport], out: Path, config: TeacherConfig, workdir: str, notify: Callable[[str], None] = print
) -> None:
    """`--draft-skills`: draft with the configured teacher (or the local one); the build report is
    written again with every skill's outcome, even if the teacher fails part way."""

    async def run(base_url: str, settings: TeacherConfig) -> None:
        client = TeacherClient(settings, base_url)
        try:
            await draft_all(reports, out, client, workdir, notify)
        finally:
            await client.close()

    try:
        with teacher_endpoint(config, notify) as (base_url, settings):
            asyncio.run(run(base_url, settings))
    finally:
        write_report(reports, out)
