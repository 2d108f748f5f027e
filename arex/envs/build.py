"""`arex build-envs`: sources → validated env folders, with a report of every rejection.

An env is built in a temporary folder, graded through its validation gates, and moved into place
only if it passes. Re-running skips a source whose content hash matches its last build.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from arex.canary import CANARY_FILE, make_canary

from arex.envs.judge_sources import Problem, SourceError, content_hash, load, source_files
from arex.grading.judge import Judge
from arex.sandbox import SandboxConfig, SandboxError
from arex.specs import JudgeSpec

BUILDER_VERSION = "judge-1"
STARTERS = {
    "cpp17": "#include <bits/stdc++.h>\nusing namespace std;\n\nint main() {\n    // read the input from stdin, write the answer to stdout\n    return 0;\n}\n",
    "python3": "import sys\n\n\ndef main():\n    data = sys.stdin.read().split()\n    # compute and print the answer\n\n\nmain()\n",
}
NOOP = {"cpp17": "int main() { return 0; }\n", "python3": "\n"}


@dataclass
class Gate:
    name: str
    passed: bool
    detail: str


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


def write_env(problem: Problem, dest: Path) -> None:
    """Lay out an env folder: task.yaml, statement.md, workspace/, private/, solutions/."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, src in problem.files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            target.write_bytes(src)
        else:
            shutil.copyfile(src, target)
    (dest / "statement.md").write_text(problem.statement, encoding="utf-8")
    if not (dest / CANARY_FILE).is_file():  # every env carries one; see arex/canary.py
        (dest / CANARY_FILE).parent.mkdir(parents=True, exist_ok=True)
        (dest / CANARY_FILE).write_text(make_canary(f"{problem.spec.id}\0{problem.statement}") + "\n")
    starter = dest / "workspace" / problem.spec.starter
    if not starter.exists():
        from arex.grading.languages import language_for

        starter.parent.mkdir(parents=True, exist_ok=True)
        starter.write_text(STARTERS[language_for(starter.name).name])
    (dest / "task.yaml").write_text(yaml.safe_dump(problem.spec.model_dump(mode="json"), sort_keys=False), encoding="utf-8")


def load_spec(env_dir: Path) -> JudgeSpec:
    return JudgeSpec.model_validate(yaml.safe_load((env_dir / "task.yaml").read_text(encoding="utf-8")))


# -- validation gates ----------------------------------------------------------------------------
def run_gates(env_dir: Path, spec: JudgeSpec, problem: Problem, sandbox: SandboxConfig) -> tuple[list[Gate], dict[str, float], JudgeSpec]:
    """Run every gate; returns the gates, the scores seen, and the spec (time limit resolved)."""
    gates: list[Gate] = []
    scores: dict[str, float] = {}

    def gate(name: str, passed: bool, detail: str) -> bool:
        gates.append(Gate(name, passed, detail))
        return passed

    missing = [t.name for t in spec.tests if not (env_dir / "private" / t.input).is_file() or not (env_dir / "private" / t.answer).is_file()]
    if not gate("tests complete", not missing, f"{len(spec.tests)} tests, each with input and answer" if not missing else f"missing files for {missing[:5]}"):
        return gates, scores, spec
    judge = Judge(env_dir, spec, sandbox)
    if spec.checker.kind in ("exact", "token", "float"):
        answers = {t.name: (env_dir / "private" / t.answer).read_text(errors="replace") for t in spec.tests}
        checks = judge.check_outputs(answers)
        bad = [name for name, c in checks.items() if not c.accepted or c.judge_error]
        if not gate("answers pass checker", not bad, "every expected answer accepted by its own checker" if not bad else f"rejected: {bad[:5]} ({checks[bad[0]].message[:120]})"):
            return gates, scores, spec
    # A custom checker's answer file need not be an output (it may hold just the best value): the
    # accepted submissions scoring 1.0 below is what shows checker and answers agree.
    accepted = [s for s in spec.solutions if s.expected == "accepted"]
    if not gate("has reference", bool(accepted), f"{len(accepted)} accepted submission(s)" if accepted else "no accepted submission to validate against"):
        return gates, scores, spec

    def grade(solution, **kw):
        return judge.grade((env_dir / solution.path).read_text(encoding="utf-8", errors="replace"), solution.language, **kw)

    if problem.time_multiplier is not None:  # legacy Kattis: limit from the slowest accepted run
        slowest = 0.0
        for solution in accepted:
            slowest = max(slowest, max((t.get("time_s") or 0.0 for t in grade(solution).details["tests"]), default=0.0))
        limit = max(1.0, float(int(0.5 + slowest * problem.time_multiplier)))
        spec = spec.model_copy(update={"time_limit_s": limit})
        judge = Judge(env_dir, spec, sandbox)
        gate("time limit derived", True, f"slowest accepted {slowest:.2f}s × {problem.time_multiplier:g} → {limit:g}s")

    slowest, reference = 0.0, None
    for solution in accepted:
        first, second = grade(solution), grade(solution)
        if first.infra_error:
            gate("checker works", False, first.infra_error)
            return gates, scores, spec
        scores[f"accepted:{solution.path}"] = first.held_out_score
        verdicts = first.details["verdicts_hidden"]
        if not gate(f"accepted scores 1.0 ({solution.path})", first.held_out_score == 1.0 and first.public_score == 1.0, f"held-out {first.held_out_score:.3f}, public {first.public_score:.3f}, verdicts {verdicts}"):
            return gates, scores, spec
        if not gate(f"deterministic ({solution.path})", first.held_out_score == second.held_out_score, f"two gradings: {first.held_out_score:.3f} and {second.held_out_score:.3f}"):
            return gates, scores, spec
        slowest = max(slowest, max((t["time_s"] or 0.0 for t in first.details["tests"]), default=0.0))
        reference = first
    if not gate("time limit margin", slowest < spec.time_limit_s / 2, f"slowest accepted test {slowest:.2f}s, limit {spec.time_limit_s:g}s (needs < half)"):
        return gates, scores, spec

    wanted = {"wrong_answer": {"WA"}, "time_limit_exceeded": {"TLE"}, "run_time_error": {"RE"}}
    for solution in spec.solutions:
        if solution.expected not in wanted:
            continue
        result = grade(solution, stop_on_failure=True)
        seen = {t["verdict"] for t in result.details["tests"]}
        scores[f"{solution.expected}:{solution.path}"] = result.held_out_score
        if not gate(f"{solution.expected} caught ({solution.path})", bool(seen & wanted[solution.expected]), f"verdicts seen: {sorted(seen)}"):
            return gates, scores, spec

    for solution in spec.solutions:
        if solution.expected == "partially_accepted":
            result = grade(solution)
            scores[f"partially_accepted:{solution.path}"] = result.held_out_score
            if not gate(f"partial scores between ({solution.path})", 0.0 < result.held_out_score < 1.0, f"held-out {result.held_out_score:.3f}"):
                return gates, scores, spec

    starter = env_dir / "workspace" / spec.starter
    if starter.is_file():  # the agent's starting point: recorded, so the room to improve is known
        from arex.grading.languages import language_for

        scores["starter"] = judge.grade(starter.read_text(errors="replace"), language_for(starter.name).name).held_out_score

    language = accepted[0].language
    noop = judge.grade(NOOP[language], language)
    scores["noop"] = noop.held_out_score
    gate("no-op scores clearly lower", noop.held_out_score <= 0.5 * reference.held_out_score, f"no-op {noop.held_out_score:.3f} vs reference {reference.held_out_score:.3f}")
    return gates, scores, spec


# -- the build -----------------------------------------------------------------------------------
def skipped_report(final: Path, digest: str, source: Path, started: float) -> EnvReport | None:
    """The report of an env already built from the same content (its .build.json), else None."""
    stamp = final / ".build.json"
    if not stamp.is_file():
        return None
    previous = json.loads(stamp.read_text())
    if previous.get("source_hash") != digest:
        return None
    gates = [Gate(**g) for g in previous.get("gates", [])]
    return EnvReport(str(source), final.name, "skipped", "unchanged since the last build", gates, previous.get("scores", {}), time.monotonic() - started)


def build_one(problem: Problem, source: Path, digest: str, out: Path, sandbox: SandboxConfig) -> EnvReport:
    started = time.monotonic()
    env_id = problem.spec.id
    final = out / env_id
    skipped = skipped_report(final, digest, source, started)
    if skipped is not None:
        return skipped
    report = EnvReport(str(source), env_id, "rejected")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{env_id}-", dir=out) as tmp:
        work = Path(tmp) / env_id
        spec = problem.spec.model_copy(update={"source_hash": digest})
        write_env(Problem(spec=spec, statement=problem.statement, files=problem.files, time_multiplier=problem.time_multiplier), work)
        try:
            gates, scores, spec = run_gates(work, spec, problem, sandbox)
        except (SandboxError, RuntimeError, FileNotFoundError) as exc:
            report.status, report.reason = "error", f"{type(exc).__name__}: {exc}"
            report.seconds = time.monotonic() - started
            return report
        report.gates, report.scores = gates, scores
        failed = [g for g in gates if not g.passed]
        if failed:
            report.reason = f"gate '{failed[0].name}' failed: {failed[0].detail}"
        else:
            report.status = "accepted"
            (work / "task.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
            (work / ".build.json").write_text(json.dumps({"source_hash": digest, "builder": BUILDER_VERSION, "gates": [g.__dict__ for g in gates], "scores": scores}, indent=2))
            if final.exists():
                shutil.rmtree(final)
            work.rename(final)
    report.seconds = time.monotonic() - started
    return report


def build_envs(sources: list[Path], out: Path, sandbox: SandboxConfig | None = None, concurrency: int = 2) -> list[EnvReport]:
    """Build every problem of every source, `concurrency` at a time. Never raises for a bad source."""
    from arex.envs.ml_build import build_ml, is_ml_source

    sandbox = sandbox or SandboxConfig()
    jobs, reports, ml_sources = [], [], []
    for source in sources:
        if is_ml_source(source):
            ml_sources.append(source)
            continue
        try:
            problems = load(source)
            digest_base = content_hash(source_files(source), BUILDER_VERSION.encode())
        except (SourceError, OSError, ValueError) as exc:
            reports.append(EnvReport(str(source), None, "rejected", f"unreadable source: {exc}"))
            continue
        for problem in problems:
            jobs.append((problem, source, f"{digest_base}-{content_hash([], problem.spec.model_dump_json().encode())[:8]}"))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        ml_reports = [pool.submit(build_ml, source, out, sandbox) for source in ml_sources]
        reports += list(pool.map(lambda job: build_one(*job, out, sandbox), jobs))
        reports += [future.result() for future in ml_reports]
    write_report(reports, out)
    return reports


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
