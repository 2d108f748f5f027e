"""`arex build-envs`: sources → validated env folders, with a report of every rejection.

Each source goes to the builder of its kind (judge_build, ml_build). An env is built in a
temporary folder, graded through its validation gates, and moved into place only if it passes
(report.py). Re-running skips a source whose content hash matches its last build.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from arex.envs.judge_build import Job, build_one, judge_jobs, load_spec, write_env
from arex.envs.judge_sources import SourceError
from arex.envs.ml_build import build_ml, is_ml_source
from arex.envs.report import EnvReport, write_report
from arex.sandbox import SandboxConfig

# load_spec and write_env are the judge builder's, kept importable from here for existing callers.
__all__ = ["EnvReport", "build_envs", "load_spec", "write_env"]


def build_envs(sources: list[Path], out: Path, sandbox: SandboxConfig | None = None, concurrency: int = 2) -> list[EnvReport]:
    """Build every problem of every source, `concurrency` at a time. Never raises for a bad source."""
    sandbox = sandbox or SandboxConfig()
    jobs: list[Job] = []
    reports: list[EnvReport] = []
    ml_sources: list[Path] = []
    for source in sources:
        if is_ml_source(source):
            ml_sources.append(source)
            continue
        try:
            jobs += judge_jobs(source)
        except (SourceError, OSError, ValueError) as exc:
            reports.append(EnvReport(str(source), None, "rejected", f"unreadable source: {exc}"))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        ml_reports = [pool.submit(build_ml, source, out, sandbox) for source in ml_sources]
        reports += list(pool.map(lambda job: build_one(*job, out, sandbox), jobs))
        reports += [future.result() for future in ml_reports]
    write_report(reports, out)
    return reports
