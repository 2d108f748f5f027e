"""`arex draft-env`: fetch a repository, ask a drafter for a spec, write it as an overlay source,
build it, and revise from the build's reason until it is accepted or the budget is spent.

The draft is written as `<out>/<id>.yaml` (`repo`, `commit` for a URL, `spec`, `add`, `remove`)
with the added files under `<out>/<id>/`, so it is an ordinary ML source a person can edit and
build again with `arex build-envs`. `<out>/<id>.draft.{md,json}` say what each attempt did and
how each field was guessed.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Callable

import yaml
from pydantic import BaseModel

from arex.drafting.base import Attempt, Draft, Drafter, DraftError
from arex.envs.report import EnvReport
from arex.sandbox import SandboxConfig

_SCP_URL = re.compile(r"^[\w.-]+@[\w.-]+:")


class DraftResult(BaseModel):
    env_id: str
    source_yaml: Path
    accepted: bool
    attempts: list[Attempt]
    seconds: float
    stopped: str = ""
    """Why the loop ended before the budget without an accepted draft (the drafter gave up), else ''."""
    report: Path | None = None
    """The Markdown report beside the YAML (`<id>.draft.md`)."""


class Checkout(BaseModel):
    """What the drafter reads, and how the YAML names the repository."""

    repo: str
    """A URL, or the absolute path of a local folder."""
    commit: str | None
    """The commit fetched for a URL; None for a local folder (its working tree is built)."""
    folder: Path
    name: str


def is_url(source: str) -> bool:
    return "://" in source or bool(_SCP_URL.match(source))


def checkout(source: str) -> Checkout:
    """The repository as the build will see it: a URL fetched at its HEAD (the commit is pinned in
    the YAML), a local git folder's working tree, or a plain folder as it is."""
    from arex.envs.judge_sources import SourceError
    from arex.envs.ml_source import MLSource, fetch, materialise, worktree
    from arex.specs import refuse_links_leaving

    name = re.sub(r"\.git$", "", source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    if is_url(source):
        folder, commit = fetch(MLSource(url=source, rev=None, spec=None, origin=source))
        where = Checkout(repo=source, commit=commit, folder=folder, name=name)
    else:
        local = Path(source).expanduser().resolve()
        if not local.is_dir():
            raise DraftError(
                f"{source} is neither a repository URL nor a folder: give a git URL or the path of a local repository"
            )
        folder = materialise(worktree(local)[1], str(local)) if (local / ".git").exists() else local
        where = Checkout(repo=str(local), commit=None, folder=folder, name=local.name)
    # The drafter reads the files and shows them to the teacher: a link out of the tree would show a host file.
    refuse_links_leaving(where.folder, SourceError, shown=where.repo)
    return where


def write_overlay(draft: Draft, env_id: str, where: Checkout, out: Path) -> Path:
    """`<out>/<id>.yaml` and the added files under `<out>/<id>/` (replacing an earlier attempt's)."""
    out.mkdir(parents=True, exist_ok=True)
    added = out / env_id
    if added.exists():
        shutil.rmtree(added)
    for rel, text in draft.add.items():
        (added / rel).parent.mkdir(parents=True, exist_ok=True)
        (added / rel).write_text(text, encoding="utf-8")
    data: dict = {"repo": where.repo}
    if where.commit:
        data["commit"] = where.commit
    data["spec"] = draft.spec
    if draft.add:
        data["add"] = {rel: f"{env_id}/{rel}" for rel in draft.add}
    if draft.remove:
        data["remove"] = list(draft.remove)
    path = out / f"{env_id}.yaml"
    header = (
        f"# Drafted by `arex draft-env` from {where.repo}; edit freely and rebuild with `arex build-envs {path}`.\n"
    )
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200), encoding="utf-8")
    return path


def draft_env(
    source: str,
    out: Path,
    envs_out: Path,
    drafter: Drafter,
    budget: int = 3,
    sandbox: SandboxConfig | None = None,
    on_attempt: Callable[[int, Attempt, EnvReport], None] | None = None,
    package_sources: bool = False,
) -> DraftResult:
    """Draft, build, revise: at most `budget` builds. Raises DraftError only if no first draft can
    be made; a drafter that gives up on a revision ends the loop with `stopped` set.
    `package_sources`: the builds let requirement lines choose a package index or URL."""
    from arex.envs.build import build_envs

    started = time.monotonic()
    where = checkout(source)
    env_id = _slug(where.name)
    attempts: list[Attempt] = []
    yaml_path, stopped = out / f"{env_id}.yaml", ""
    try:
        for number in range(1, max(1, budget) + 1):
            try:
                draft = drafter.draft(where.folder, attempts)
            except DraftError as exc:
                if not attempts:
                    raise
                stopped = str(exc)
                break
            spec = {**draft.spec, "id": env_id}
            # a drafter that fell back on the checkout's folder (a cache hash)
            if spec.get("title") == where.folder.name:
                spec["title"] = env_id
            draft = draft.model_copy(update={"spec": spec})
            yaml_path = write_overlay(draft, env_id, where, out)
            [report] = build_envs([yaml_path], envs_out, sandbox, concurrency=1, package_sources=package_sources)
            attempt = Attempt(
                draft=draft, reason=None if report.status in ("accepted", "skipped") else report.reason or report.status
            )
            attempts.append(attempt)
            if on_attempt is not None:
                on_attempt(number, attempt, report)
            if attempt.reason is None:
                break
    finally:
        close = getattr(drafter, "close", None)
        if callable(close):
            close()
    result = DraftResult(
        env_id=env_id,
        source_yaml=yaml_path,
        accepted=bool(attempts) and attempts[-1].reason is None,
        attempts=attempts,
        seconds=time.monotonic() - started,
        stopped=stopped,
        report=out / f"{env_id}.draft.md",
    )
    write_draft_report(result, source, getattr(drafter, "name", "?"), budget)
    return result


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "ml-env"


def write_draft_report(result: DraftResult, source: str, drafter: str, budget: int) -> None:
    """`<id>.draft.md` (attempts, then the final draft's guessed fields) and `<id>.draft.json`."""
    out = result.source_yaml.parent
    out.mkdir(parents=True, exist_ok=True)
    record = {"source": source, "drafter": drafter, "budget": budget, **result.model_dump(mode="json")}
    (out / f"{result.env_id}.draft.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    outcome = (
        f"accepted after {len(result.attempts)} attempt(s)"
        if result.accepted
        else f"not accepted after {len(result.attempts)} attempt(s) (budget {budget})"
    )
    lines = [
        f"# Draft of {source}: {result.env_id}",
        "",
        f"{outcome}; drafter `{drafter}`; {result.seconds:.0f}s; source: `{result.source_yaml.name}`",
        "",
    ]
    if result.stopped:
        lines += [f"The drafter stopped: {result.stopped}", ""]
    lines += ["## Attempts", "", "| # | outcome | reason |", "|---|---|---|"]
    lines += [
        f"| {i} | {'accepted' if a.reason is None else 'rejected'} | {_cell(a.reason or '')} |"
        for i, a in enumerate(result.attempts, 1)
    ]
    if result.attempts:
        lines += ["", "## Guessed fields (last draft)", "", "| field | value | confidence | why |", "|---|---|---|---|"]
        lines += [
            f"| {g.field} | {_cell(g.value)} | {g.confidence} | {_cell(g.why)} |"
            for g in result.attempts[-1].draft.guesses
        ]
    (out / f"{result.env_id}.draft.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cell(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[:limit] + " …"
    return text.replace("|", "\\|")
