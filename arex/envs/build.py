"""`arex build-envs`: sources → validated env folders, with a report of every rejection.

Each source goes to the builder of its kind (judge_build, ml_build). An env is built in a
temporary folder, graded through its validation gates, and moved into place only if it passes
(report.py). Re-running skips a source whose content hash matches its last build, accepted or
rejected. A bad source (missing, unreadable, a duplicate id) is one rejected report: the batch
goes on.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from arex.envs.judge_build import BUILDER_VERSION, Job, build_one, judge_jobs, load_spec, write_env
from arex.envs.judge_sources import SourceError, content_hash, source_files
from arex.envs.ml_build import build_ml, crash_reason, is_ml_source, open_source
from arex.envs.report import EnvReport, cached_rejection, rejection_key, remember_rejection, write_report
from arex.sandbox import SandboxConfig

# load_spec and write_env are the judge builder's, kept importable from here for existing callers.
__all__ = ["EnvReport", "build_envs", "load_spec", "write_env"]


@dataclass
class _Work:
    """One unit of the batch, in the order the user gave: a judge problem, an ML source, or a
    report already known (a rejected source)."""

    source: Path
    env_id: str | None = None
    job: Job | None = None
    ml: bool = False
    report: EnvReport | None = None


def build_envs(sources: list[Path], out: Path, sandbox: SandboxConfig | None = None, concurrency: int = 2,
               package_sources: bool = False) -> list[EnvReport]:
    """Build every problem of every source, `concurrency` at a time. Never raises for a bad source.
    `package_sources`: requirement lines may choose a package index or URL (`build.package_sources`)."""
    sandbox = sandbox or SandboxConfig()
    work: list[_Work] = []
    for source in sources:
        work += _plan(source, out)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        ml = [w for w in work if w.ml] if len(work) > 1 else []  # a lone source has no one to clash with
        for w, env_id in zip(ml, pool.map(_ml_env_id, [w.source for w in ml])):
            w.env_id = env_id
        _reject_duplicates(work)
        futures = [pool.submit(_run, w, out, sandbox, package_sources) for w in work if w.report is None]
        for future in futures:
            future.result()
    reports = [w.report for w in work if w.report is not None]
    write_report(reports, out)
    return reports


def _plan(source: Path, out: Path) -> list[_Work]:
    """The units of one source: a rejected report if it is missing or cannot be read (from the
    cache when its content is unchanged), else one per problem (or the ML source)."""
    started = time.monotonic()
    if not source.exists():
        return [_Work(source, report=EnvReport(str(source), None, "rejected", "no such file or folder"))]
    if is_ml_source(source):
        return [_Work(source, ml=True)]
    key = rejection_key(source)
    try:
        digest = content_hash(source_files(source), BUILDER_VERSION.encode())
    except OSError as exc:
        return [_Work(source, report=EnvReport(str(source), None, "rejected", f"unreadable source: {exc}"))]
    cached = cached_rejection(out, key, digest, source, started)
    if cached is not None:
        return [_Work(source, report=cached)]
    try:
        jobs = judge_jobs(source, digest)
    except (SourceError, OSError, ValueError) as exc:
        report = EnvReport(str(source), None, "rejected", f"unreadable source: {exc}", seconds=time.monotonic() - started)
        remember_rejection(out, key, digest, report)
        return [_Work(source, report=report)]
    return [_Work(source, env_id=job[0].spec.id, job=job) for job in jobs]


def _ml_env_id(source: Path) -> str | None:
    """The id an ML source's env gets (its spec is fetched once; build_ml reuses the cache), or
    None if it cannot be read: build_ml then reports why."""
    try:
        return open_source(source).spec.id
    except Exception:  # noqa: BLE001 - any failure is build_ml's to report, with its reason
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
            w.report = EnvReport(str(w.source), w.env_id, "rejected", f"duplicate id '{w.env_id}': also produced by {where}")
        else:
            first[w.env_id] = w


def _run(w: _Work, out: Path, sandbox: SandboxConfig, package_sources: bool = False) -> None:
    """Build one unit; whatever it raises becomes its own `error` report, so the batch goes on."""
    started = time.monotonic()
    try:
        if w.ml:
            w.report = build_ml(w.source, out, sandbox, package_sources)
        else:
            w.report = build_one(*w.job, out, sandbox)  # type: ignore[misc]
    except Exception as exc:  # noqa: BLE001 - one source's failure is its report, not the batch's end
        w.report = EnvReport(str(w.source), w.env_id, "error", crash_reason(exc), seconds=time.monotonic() - started)
