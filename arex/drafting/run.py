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

from arex.drafting.base import Attempt, Draft, Drafter, DraftError, clip
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
    built_from: str = ""
    """What was built, for the report: the commit, or `<sha>+worktree` and the content digest."""


class Checkout(BaseModel):
    """What the drafter reads, and how the YAML names the repository."""

    repo: str
    """A URL, or the absolute path of a local folder."""
    commit: str | None
    """The commit the YAML names: fetched for a URL, HEAD of a clean local git folder; None for a
    folder built as it is (a dirty working tree, a plain folder)."""
    folder: Path
    name: str
    built_from: str = ""
    """What the build uses, said in the YAML's header and the draft report: the commit, or, for a
    working tree with changes, `<sha>+worktree` and the digest of its content."""


def is_url(source: str) -> bool:
    return "://" in source or bool(_SCP_URL.match(source))


def checkout(source: str) -> Checkout:
    """The repository as the build will see it: a URL fetched at its HEAD (the commit is pinned in
    the YAML), a local git folder's working tree, or a plain folder as it is."""
    from arex.envs.judge_sources import SourceError
    from arex.envs.ml_source import MLSource, fetch
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
        where = _local_checkout(local)
    # The drafter reads the files and shows them to the teacher: a link out of the tree would show a host file.
    refuse_links_leaving(where.folder, SourceError, shown=where.repo)
    return where


def _local_checkout(local: Path) -> Checkout:
    """A clean git folder is pinned to its HEAD (the YAML names the commit, so a later edit of the
    folder cannot change what the source builds); a dirty one is built as it is today, recorded as
    `<sha>+worktree` with the digest of its files; a plain folder by its digest alone."""
    from arex.envs.ml_source import WORKTREE, materialise, tree_digest, worktree

    if not (local / ".git").exists():
        return Checkout(
            repo=str(local), commit=None, folder=local, name=local.name, built_from="a folder that is no git repository"
        )
    commit, files = worktree(local)
    folder = materialise(files, str(local))
    if commit != WORKTREE and not commit.endswith(f"+{WORKTREE}"):
        return Checkout(repo=str(local), commit=commit, folder=folder, name=local.name, built_from=f"commit {commit}")
    built = f"the working tree at {commit} (uncommitted changes), content sha256 {tree_digest(files)}"
    return Checkout(repo=str(local), commit=None, folder=folder, name=local.name, built_from=built)


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
    if where.built_from and not where.commit:
        header += f"# Drafted from {where.built_from}.\n"
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
    progress: Callable[[str], None] | None = None,
) -> DraftResult:
    """Draft, build, revise: at most `budget` builds. Raises DraftError only if no first draft can
    be made; a drafter that gives up on a revision ends the loop with `stopped` set.
    `package_sources`: the builds let requirement lines choose a package index or URL.
    `progress` gets a line as each stage starts (fetching, drafting, each build stage and gate)."""
    say = progress or (lambda line: None)
    started = time.monotonic()
    say(f"fetching {source}" if is_url(source) else f"reading {source}")
    where = checkout(source)
    env_id = _slug(where.name)
    attempts: list[Attempt] = []
    yaml_path, stopped = out / f"{env_id}.yaml", ""  # write_overlay writes it there
    try:
        for number in range(1, max(1, budget) + 1):
            after = clip(attempts[-1].reason, 160) if attempts else ""
            say(f"attempt {number}: " + (f"revising after: {after}" if attempts else "drafting"))
            if hasattr(drafter, "progress"):  # a drafter's own slow steps (reading, pinning, a preflight)
                drafter.progress = lambda line, number=number: say(f"attempt {number}: {line}")  # type: ignore[attr-defined]
            try:
                draft = drafter.draft(where.folder, attempts)
            except DraftError as exc:
                if not attempts:
                    raise
                stopped = str(exc)
                break
            attempt, report = _build_attempt(draft, env_id, where, out, envs_out, sandbox, package_sources, number, say)
            attempts.append(attempt)
            if on_attempt is not None:
                on_attempt(number, attempt, report)
            if attempt.reason is None:
                break
            if report.status == "error":  # the machine's failure (Docker, memory), not the draft's
                stopped = f"the build failed outside the draft (no revision would help); build again: {attempt.reason}"
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
        built_from=where.built_from,
    )
    write_draft_report(result, source, getattr(drafter, "name", "?"), budget)
    return result


def _build_attempt(
    draft: Draft,
    env_id: str,
    where: Checkout,
    out: Path,
    envs_out: Path,
    sandbox: SandboxConfig | None,
    package_sources: bool,
    number: int,
    say: Callable[[str], None],
) -> tuple[Attempt, EnvReport]:
    """Write the draft as a source and build it, each build stage said as it starts."""
    from arex.envs.build import build_envs
    from arex.envs.ml_gates import watch_stages

    spec = {**draft.spec, "id": env_id}
    # a drafter that fell back on the checkout's folder (a cache hash)
    if spec.get("title") == where.folder.name:
        spec["title"] = env_id
    draft = draft.model_copy(update={"spec": spec})
    yaml_path = write_overlay(draft, env_id, where, out)
    say(f"attempt {number}: building {yaml_path}")
    with watch_stages(lambda built, stage: say(f"attempt {number}: {stage}") if built == env_id else None):
        [report] = build_envs([yaml_path], envs_out, sandbox, concurrency=1, package_sources=package_sources)
    reason = None if report.status in ("accepted", "skipped") else report.reason or report.status
    return Attempt(draft=draft, reason=reason), report


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
    if result.built_from:
        lines += [f"Built from {result.built_from}.", ""]
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


def _cell(text: str) -> str:
    """A table cell: one line, `|` escaped, never cut (a reason is read whole in the report)."""
    return " ".join(text.split()).replace("|", "\\|")
