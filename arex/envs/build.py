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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from arex.envs.batch_control import run_units
from arex.envs.decontam import Decontaminator, remove_build
from arex.envs.judge_build import BUILDER_VERSION, Job, build_one, job_for, judge_jobs, load_spec, write_env
from arex.envs.judge_generate import GenerationError
from arex.envs.judge_sources import Problem, SourceError, content_hash, source_files
from arex.envs.ml_build import build_ml, crash_reason
from arex.envs.report import EnvReport, cached_rejection, rejection_key, remember_rejection, write_report
from arex.envs.sources import stream
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
    where: str | None = None
    """A row of a streamed source: which ("<file> row N")."""
    stream: str | None = None
    """A source whose rows are read as they are built (a CodeContests parquet shard): its content hash."""


def build_envs(
    sources: list[Path],
    out: Path,
    sandbox: SandboxConfig | None = None,
    concurrency: int = 2,
    package_sources: bool = False,
    progress: Callable[[str], None] | None = None,
    decontam: Decontaminator | None = None,
) -> list[EnvReport]:
    """Build every problem of every source, `concurrency` at a time. Never raises for a bad source.
    `package_sources`: requirement lines may choose a package index or URL (`build.package_sources`).
    `progress` gets a line per unit started and finished; an interruption stops the batch as
    arex/envs/batch_control.py says, with the report written for what is done. `decontam`: the
    evaluation sets each unit is checked against before it is built (or, when only its build can
    tell, after), refused or flagged (arex/envs/decontam/)."""
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
        first = _reject_duplicates(work)
        listed: list[_Work] = []  # every unit, in order, streamed rows as they are read
        run = lambda w: _run(w, out, sandbox, package_sources, decontam)  # noqa: E731
        finish = lambda: _write(listed, out)  # noqa: E731
        workers = max(1, concurrency)
        run_units(pool, _units(work, first, listed), run, _label, progress or _quiet, finish, out, workers)
    return _write(listed, out)


def _units(work: list[_Work], first: dict[str, _Work], listed: list[_Work]) -> Iterator[_Work]:
    """The units to build, in order; each unit, built or not, is added to `listed` as it comes. A
    streamed source's rows are read one at a time, each checked for a duplicate id as it comes."""
    for w in work:
        if w.stream is None:
            listed.append(w)
            if w.report is None:
                yield w
            continue
        try:
            for where, problem in stream(w.source):
                unit = _streamed_unit(w, where, problem, first)
                listed.append(unit)
                if unit.report is None:
                    yield unit
        except SourceError as exc:  # unreadable from here on: the rows before it stand
            report = EnvReport(str(w.source), None, "rejected", f"unreadable source: {exc}")
            listed.append(_Work(w.source, report=report))


def _streamed_unit(w: _Work, where: str, problem: Problem | SourceError, first: dict[str, _Work]) -> _Work:
    """One row of a streamed source as a unit: its job, or its rejection (unreadable, or a duplicate
    of an earlier row or source, named once, with where that one is)."""
    if isinstance(problem, SourceError):
        return _Work(w.source, where=where, report=EnvReport(str(w.source), None, "rejected", str(problem)))
    unit = _Work(w.source, env_id=problem.spec.id, job=job_for(problem, w.source, w.stream), where=where)
    _check_duplicate(unit, first)
    if unit.report is not None:
        unit.job = None  # nothing of a rejected row is kept
    return unit


def _write(units: list[_Work], out: Path) -> list[EnvReport]:
    """The report of every unit that is done (all of them, unless the batch was interrupted)."""
    reports = [w.report for w in units if w.report is not None]
    write_report(reports, out)
    return reports


def _label(w: _Work) -> str:
    where = w.where or w.source
    return f"{w.env_id} ({where})" if w.env_id else str(where)


def _quiet(line: str) -> None:
    pass


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
    if source.suffix == ".parquet":  # a CodeContests shard: its rows are read as they are built
        return [_Work(source, stream=digest)]
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


def _reject_duplicates(work: list[_Work]) -> dict[str, _Work]:
    """Two sources (or rows) giving the same env id would overwrite each other: the first one, in
    the order given, builds; every other is rejected naming it. The first unit of each id."""
    first: dict[str, _Work] = {}
    for w in work:
        _check_duplicate(w, first)
    return first


def _check_duplicate(w: _Work, first: dict[str, _Work]) -> None:
    """Reject `w` if an earlier unit has its env id (naming that one), else remember it as the first."""
    if w.report is not None or w.env_id is None:
        return
    if w.env_id not in first:
        first[w.env_id] = w
        return
    other = first[w.env_id]
    where = other.where or (f"{other.source} (an earlier row)" if other.source == w.source else str(other.source))
    w.report = EnvReport(str(w.source), w.env_id, "rejected", f"duplicate id '{w.env_id}': also produced by {where}")


def _run(
    w: _Work, out: Path, sandbox: SandboxConfig, package_sources: bool = False, decontam: Decontaminator | None = None
) -> str:
    """Build one unit; whatever it raises becomes its own `error` report, so the batch goes on.
    How it ended, in words."""
    started = time.monotonic()
    try:
        if w.job is None:
            build = lambda: kind_named(w.kind, w.source).part("build")(w.source, out, sandbox, package_sources)  # noqa: E731
        else:
            build = lambda: build_one(*w.job, out, sandbox)  # noqa: E731
        w.report = build() if decontam is None else _screened(w, out, decontam, build)
    except Exception as exc:  # noqa: BLE001 - one source's failure is its report, not the batch's end
        w.report = EnvReport(str(w.source), w.env_id, "error", crash_reason(exc), seconds=time.monotonic() - started)
    w.job = None  # a built unit's problem (its tests' bytes) is not kept while the batch goes on
    return f"{w.report.status} in {w.report.seconds:.1f} s"


def _screened(w: _Work, out: Path, decontam: Decontaminator, build: Callable[[], EnvReport]) -> EnvReport:
    """The unit's report with the evaluation sets it overlaps: checked before the build when its
    source tells (a judge problem, an ML table in the repository), else in the env it built. Refused:
    not built, or its build (and any earlier one) removed from `out`; flagged: built and listed."""
    started = time.monotonic()
    found = decontam.before_build(w.job[0] if w.job else None, w.source)
    report = None if found and decontam.config.action == "refuse" else build()
    if found is None and report is not None and report.status in ("accepted", "skipped") and report.env_id:
        found = decontam.check_env(out / report.env_id)
    if not found:
        return report
    env_id = report.env_id if report is not None else w.env_id
    if decontam.config.action == "refuse":
        removed = remove_build(out, env_id)
        seconds = report.seconds if report is not None else time.monotonic() - started
        reason = f"overlaps an evaluation set: {found[0].describe()}" + (
            f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        )
        report = EnvReport(str(w.source), env_id, "rejected", reason + ("; its build removed" if removed else ""))
        report.seconds = seconds
    elif report.status in ("accepted", "skipped"):
        report.reason = "; ".join(filter(None, [report.reason, f"flagged: overlaps {found[0].describe()}"]))
    report.overlaps = [o.to_json() for o in found]
    return report
