"""What every builder shares: the gate log, the per-env report, the accept step, the build report.

A builder lays an env out in a temporary folder and runs its gates there; `finish` records the
outcome and, if every gate passed, stamps the env (.build.json) and moves it into place. The stamp
lets a re-run skip a source whose content hash is unchanged (`skipped_report`).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel

from arex.envs.layout import STAMP


@dataclass
class Gate:
    name: str
    passed: bool
    detail: str


@dataclass
class GateLog:
    """The gates run so far and the scores seen; gate runners stop at the first failed gate."""

    gates: list[Gate] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)

    def check(self, name: str, passed: bool, detail: str) -> bool:
        self.gates.append(Gate(name, passed, detail))
        return passed


@dataclass
class EnvReport:
    source: str
    env_id: str | None
    status: str  # accepted | rejected | skipped | error
    reason: str = ""
    gates: list[Gate] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {**self.__dict__, "gates": [g.__dict__ for g in self.gates]}


def write_task(env_dir: Path, spec: BaseModel) -> None:
    (env_dir / "task.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False), encoding="utf-8")


def skipped_report(final: Path, digest: str, source: Path, started: float) -> EnvReport | None:
    """The report of an env already built from the same content (its .build.json), else None."""
    stamp = final / STAMP
    if not stamp.is_file():
        return None
    previous = json.loads(stamp.read_text())
    if previous.get("source_hash") != digest:
        return None
    gates = [Gate(**g) for g in previous.get("gates", [])]
    return EnvReport(str(source), final.name, "skipped", "unchanged since the last build", gates, previous.get("scores", {}), time.monotonic() - started)


def finish(report: EnvReport, log: GateLog, work: Path, final: Path, spec: BaseModel, source_hash: str, builder: str) -> None:
    """Record the gates in `report`. If all passed: accept, write the final task.yaml (`spec`) and
    the stamp into `work`, and move it to `final`, replacing an earlier build."""
    report.gates, report.scores = log.gates, log.scores
    failed = [g for g in log.gates if not g.passed]
    if failed:
        report.reason = f"gate '{failed[0].name}' failed: {failed[0].detail}"
        return
    report.status = "accepted"
    write_task(work, spec)
    stamp = {"source_hash": source_hash, "builder": builder, "gates": [g.__dict__ for g in log.gates], "scores": log.scores}
    (work / STAMP).write_text(json.dumps(stamp, indent=2))
    if final.exists():
        shutil.rmtree(final)
    work.rename(final)


def write_report(reports: list[EnvReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "build-report.json"
    summary = {status: sum(r.status == status for r in reports) for status in ("accepted", "skipped", "rejected", "error")}
    path.write_text(json.dumps({"summary": summary, "envs": [r.to_json() for r in reports]}, indent=2))
    (out / "build-report.md").write_text(report_table(reports, summary), encoding="utf-8")
    return path


def report_table(reports: list[EnvReport], summary: dict[str, int]) -> str:
    lines = [
        "# Build report",
        "",
        ", ".join(f"{n} {status}" for status, n in summary.items()),
        "",
        "| env | source | status | scores | reason | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for r in reports:
        scores = ", ".join(f"{k.split(':')[0]} {v:.2f}" for k, v in r.scores.items())
        lines.append(f"| {r.env_id or '-'} | {r.source} | {r.status} | {scores} | {r.reason.replace('|', '/')} | {r.seconds:.1f} |")
    return "\n".join(lines) + "\n"
