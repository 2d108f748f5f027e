"""What every builder shares: the gate log, the per-env report, the accept step, the build report.

A builder lays an env out in a temporary folder and runs its gates there; `finish` records the
outcome and, if every gate passed, stamps the env (.build.json) and moves it into place. The stamp
lets a re-run skip a source whose content hash is unchanged (`skipped_report`); a rejection is
stamped too (`.rejected/<key>.json` in the out folder), so an unchanged rejected source is not
rebuilt either (`cached_rejection`).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel

import arex
from arex.envs.layout import STAMP
from arex.envs.skills import SOURCE_SKILLS
from arex.envs.task_skills import SkillNote, read_record, ship
from arex.hashing import text_sha256, tree_sha256

REJECTED_DIR = ".rejected"
REASON_CELL_CHARS = 300
UNCHANGED_REJECTION = "rejected (unchanged since the last build): "


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
    notes: list[str] = field(default_factory=list)
    """How the env was validated when it differs from the usual gates (e.g. reference-free):
    becomes an accepted env's reason, so the report says which gates applied."""

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
    skills: list[SkillNote] = field(default_factory=list)
    """The env's own skills: shipped with the source or drafted (`--draft-skills`), kept or rejected."""
    overlaps: list[dict] = field(default_factory=list)
    """Evaluation items this env overlaps (arex/envs/decontam/): each with its set, evidence and action."""

    def to_json(self) -> dict:
        return {**self.__dict__, "gates": [g.__dict__ for g in self.gates], "skills": [s.__dict__ for s in self.skills]}


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
    return EnvReport(
        str(source),
        final.name,
        "skipped",
        "unchanged since the last build",
        gates,
        previous.get("scores", {}),
        time.monotonic() - started,
        read_record(final),
    )


def finish(
    report: EnvReport,
    log: GateLog,
    work: Path,
    final: Path,
    spec: BaseModel,
    source_hash: str,
    builder: str,
    skills_from: Path | None = None,
) -> None:
    """Record the gates in `report`. If all passed: accept, write the final task.yaml (`spec`) and
    the stamp into `work`, and move it to `final`, replacing an earlier build. `skills_from`: the
    source folder, whose `arex-skills/` (the task's own skills) are checked and copied into the env."""
    if skills_from is not None and not [g for g in log.gates if not g.passed]:
        _ship_skills(report, log, skills_from, work)
    report.gates, report.scores = log.gates, log.scores
    failed = [g for g in log.gates if not g.passed]
    if failed:
        report.reason = f"gate '{failed[0].name}' failed: {failed[0].detail}"
        return
    report.status = "accepted"
    report.reason = "; ".join(log.notes)
    write_task(work, spec)
    stamp = {
        "source_hash": source_hash,
        "builder": builder,
        "gates": [g.__dict__ for g in log.gates],
        "scores": log.scores,
    }
    (work / STAMP).write_text(json.dumps(stamp, indent=2))
    if final.exists():
        shutil.rmtree(final)
    work.rename(final)


def _ship_skills(report: EnvReport, log: GateLog, source: Path, work: Path) -> None:
    """The source's own skills into the env, each checked (format, no private data): a gate."""
    report.skills = ship(source, work)
    if not report.skills:
        return
    rejected = [n for n in report.skills if n.status != "kept"]
    kept = ", ".join(n.name for n in report.skills if n.status == "kept")
    detail = (
        f"{SOURCE_SKILLS}/{rejected[0].name}: {rejected[0].reason}"
        if rejected
        else f"{len(report.skills)} shipped, format and private data checked: {kept}"
    )
    log.check("task skills", not rejected, detail)


# -- rejections, cached by content ----------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Of arex's own code: a rejection may be arex's limit (a format or language not supported yet),
    so one made by other code is not trusted; accepted envs are keyed by builder version instead."""
    root = Path(arex.__file__).parent
    return tree_sha256(
        root, [p for p in root.rglob("*") if p.suffix in (".py", ".c") and "__pycache__" not in p.parts]
    )[:20]


def rejection_key(source: Path) -> str:
    """The stamp name of a source rejected before it had an env id (unreadable): its name and path."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", source.name)[:60] or "source"
    return f"source-{name}-{text_sha256(str(source.resolve()))[:8]}"


def _rejection_stamp(out: Path, key: str) -> Path:
    return out / REJECTED_DIR / f"{key}.json"


def cached_rejection(out: Path, key: str, digest: str, source: Path, started: float) -> EnvReport | None:
    """The earlier rejection of the same content by the same code, if any, as a report."""
    stamp = _rejection_stamp(out, key)
    try:
        previous = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict) or previous.get("source_hash") != f"{digest}:{code_fingerprint()}":
        return None
    reason = str(previous.get("reason", ""))
    gates = [Gate(**g) for g in previous.get("gates", []) if isinstance(g, dict)]
    return EnvReport(
        str(source),
        previous.get("env_id"),
        "rejected",
        UNCHANGED_REJECTION + reason,
        gates,
        previous.get("scores", {}),
        time.monotonic() - started,
    )


def remember_rejection(out: Path, key: str, digest: str, report: EnvReport) -> None:
    """Stamp a rejection (not an error: infrastructure failures are retried), or clear the stamp
    once the env is accepted."""
    stamp = _rejection_stamp(out, key)
    if report.status == "accepted":
        stamp.unlink(missing_ok=True)
        return
    if report.status != "rejected":
        return
    stamp.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "source_hash": f"{digest}:{code_fingerprint()}",
        "source": report.source,
        "env_id": report.env_id,
        "reason": report.reason,
        "gates": [g.__dict__ for g in report.gates],
        "scores": report.scores,
    }
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(stamp)


# -- the build report ------------------------------------------------------------------------------
def write_report(reports: list[EnvReport], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "build-report.json"
    summary = {
        status: sum(r.status == status for r in reports) for status in ("accepted", "skipped", "rejected", "error")
    }
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
        lines.append(
            f"| {_cell(r.env_id or '-')} | {_cell(r.source)} | {r.status} | {_cell(scores)} | "
            f"{_cell(r.reason, REASON_CELL_CHARS)} | {r.seconds:.1f} |"
        )
    return "\n".join(lines + _skill_lines(reports) + _overlap_lines(reports)) + "\n"


def _skill_lines(reports: list[EnvReport]) -> list[str]:
    """The envs' own skills (shipped or drafted), each kept or rejected with its reason."""
    notes = [(r.env_id or "-", n) for r in reports for n in r.skills]
    if not notes:
        return []
    lines = ["", "## Task skills", "", "| env | skill | origin | status | reason |", "|---|---|---|---|---|"]
    return lines + [
        f"| {_cell(env)} | {_cell(n.name)} | {n.origin} | {n.status} | {_cell(n.reason, REASON_CELL_CHARS)} |"
        for env, n in notes
    ]


def _overlap_lines(reports: list[EnvReport]) -> list[str]:
    """Every env found in an evaluation set: refused (not built, or removed) or flagged, and why."""
    found = [(r.env_id or r.source, o) for r in reports for o in r.overlaps]
    if not found:
        return []
    lines = ["", "## Decontamination", "", "| env | action | evaluation set | item | evidence |", "|---" * 5 + "|"]
    return lines + [
        f"| {_cell(env)} | {o['action']} | {_cell(o['eval_set'])} | {_cell(o['item'])} | "
        f"{_cell('; '.join(o['signals']), REASON_CELL_CHARS)} |"
        for env, o in found
    ]


def _cell(text: str, limit: int | None = None) -> str:
    """One Markdown table cell: a compile log or other multi-line text stays on its row (newlines
    collapsed, pipes escaped); a long one is clipped, its full text kept in build-report.json."""
    text = " ".join(text.split())
    if limit is not None and len(text) > limit:
        text = text[:limit].rstrip() + " … (full text in build-report.json)"
    return text.replace("\\", "\\\\").replace("|", "\\|")
