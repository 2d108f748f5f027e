"""`arex build-envs`: sources → validated env folders, with a report of every rejection.

Each source goes to the builder of its kind: the kind whose detector claims it in the table of
kinds (arex.specs.KINDS), else the default kind's (judge problems, built one problem at a time by
judge_build). An env is built in a staging folder in `out` (staging.py), graded through its
validation gates, and moved into place only if it passes (report.py); what a killed build left in
`out` (staging folders, sandboxes) is removed by the next build into it. Re-running skips a
source whose content hash matches its last build, accepted or rejected. A bad source (missing,
unreadable, a duplicate id) is one rejected report: the batch goes on.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from arex.envs.judge_build import BUILDER_VERSION, Job, build_one, judge_jobs, load_spec, write_env
from arex.envs.judge_generate import GenerationError
from arex.envs.judge_sources import SourceError, content_hash, source_files
from arex.envs.ml_build import build_ml, crash_reason
from arex.envs.report import EnvReport, cached_rejection, rejection_key, remember_rejection, write_report
from arex.envs.staging import remove_stale
from arex.sandbox import SandboxConfig, SandboxError
from arex.sandbox.leftovers import working_on
from arex.specs import DEFAULT_KIND, kind_named, source_kind

# load_spec and write_env are the judge builder's, kept importable from here for existing callers;
# build_ml is the ML kind's builder as its row in arex.specs.KINDS names it.
__all__ = ["EnvReport", "build_envs", "build_ml", "load_spec", "write_env"]


@dataclass
class _Work:
    """One unit of the batch, in the order the user gave: a judge problem (`job`), a source its
    kind's builder builds whole, or a report already known (a rejected source)."""

    source: Path
    kind: str = DEFAULT_KIND
    env_id: str | None = None
    job: Job | None = None
    report: EnvReport | None = None


def build_envs(
    sources: list[Path],
    out: Path,
    sandbox: SandboxConfig | None = None,
    concurrency: int = 2,
    package_sources: bool = False,
) -> list[EnvReport]:
    """Build every problem of every source, `concurrency` at a time. Never raises for a bad source.
    `package_sources`: requirement lines may choose a package index or URL (`build.package_sources`)."""
    sandbox = sandbox or SandboxConfig()
    work: list[_Work] = []
    # What killed builds into `out` left goes first (their sandboxes, their staging folders), and
    # this build's sandboxes carry `out` as their label, for the next build to find if this one is killed.
    with working_on(out, sandbox.backend), ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        remove_stale(out)
        # Planning may generate a package's tests (in a sandbox): as many at once as builds.
        for planned in pool.map(lambda source: _plan(source, out, sandbox), sources):
            work += planned
        # A lone source has no one to clash with.
        whole = [w for w in work if w.job is None and w.report is None] if len(work) > 1 else []
        for w, env_id in zip(whole, pool.map(_env_id, whole)):
            w.env_id = env_id
        _reject_duplicates(work)
        futures = [pool.submit(_run, w, out, sandbox, package_sources) for w in work if w.report is None]
        for future in futures:
            future.result()
    reports = [w.report for w in work if w.report is not None]
    write_report(reports, out)
    return reports


def _plan(source: Path, out: Path, sandbox: SandboxConfig | None = None) -> list[_Work]:
    """The units of one source: a rejected report if it is missing or cannot be read or its tests
    cannot be generated (from the cache when its content is unchanged), else one per problem (or
    the source, if its kind builds sources whole). An error report if the sandbox failed."""
    started = time.monotonic()
    if not source.exists():
        return [_Work(source, report=EnvReport(str(source), None, "rejected", "no such file or folder"))]
    kind = source_kind(source)
    if kind_named(kind, source).build is not None:
        return [_Work(source, kind=kind)]
    key = rejection_key(source)
    try:
        digest = content_hash(source_files(source), BUILDER_VERSION.encode())
    except OSError as exc:
        return [_Work(source, report=EnvReport(str(source), None, "rejected", f"unreadable source: {exc}"))]
    cached = cached_rejection(out, key, digest, source, started)
    if cached is not None:
        return [_Work(source, report=cached)]
    try:
        jobs = judge_jobs(source, digest, sandbox)
    except SandboxError as exc:  # the host's failure, not the source's: reported, never remembered
        return [_Work(source, report=EnvReport(str(source), None, "error", f"SandboxError: {exc}"))]
    except (SourceError, OSError, ValueError) as exc:
        reason = str(exc) if isinstance(exc, GenerationError) else f"unreadable source: {exc}"
        report = EnvReport(str(source), None, "rejected", reason, seconds=time.monotonic() - started)
        remember_rejection(out, key, digest, report)
        return [_Work(source, report=report)]
    return [_Work(source, env_id=job[0].spec.id, job=job) for job in jobs]


def _env_id(w: _Work) -> str | None:
    """The id the env of a source built whole will get, if its kind can tell before building (the
    ML kind fetches the spec once; its builder reuses the cache); None if it cannot be read."""
    env_id = kind_named(w.kind, w.source).part("env_id")
    try:
        return None if env_id is None else env_id(w.source)
    except Exception:  # noqa: BLE001 - any failure is the builder's to report, with its reason
        return None


def _reject_duplicates(work: list[_Work]) -> None:
    """Two sources (or rows) giving the same env id would overwrite each other: the first one, in
    the order given, builds; every other is rejected naming it."""
    first: dict[str, _Work] = {}
    for w in work:
        if w.report is not None or w.env_id is None:
            continue
        if w.env_id in first:
            other = first[w.env_id].source
            where = f"{other} (an earlier row)" if other == w.source else str(other)
            w.report = EnvReport(
                str(w.source), w.env_id, "rejected", f"duplicate id '{w.env_id}': also produced by {where}"
            )
        else:
            first[w.env_id] = w


def _run(w: _Work, out: Path, sandbox: SandboxConfig, package_sources: bool = False) -> None:
    """Build one unit; whatever it raises becomes its own `error` report, so the batch goes on."""
    started = time.monotonic()
    try:
        if w.job is None:
            w.report = kind_named(w.kind, w.source).part("build")(w.source, out, sandbox, package_sources)
        else:
            w.report = build_one(*w.job, out, sandbox)
    except Exception as exc:  # noqa: BLE001 - one source's failure is its report, not the batch's end
        w.report = EnvReport(str(w.source), w.env_id, "error", crash_reason(exc), seconds=time.monotonic() - started)
