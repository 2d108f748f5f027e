"""The judge builder: a problem (from judge_sources) → a validated env folder.

The env is laid out in a temporary folder and graded through its gates there: tests complete,
answers accepted by their checker, accepted submissions score 1.0 deterministically well within
the time limit, failing submissions caught, and a no-op scores clearly lower.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from arex.canary import CANARY_FILE, make_canary
from arex.envs.judge_sources import Problem, content_hash, load, source_files
from arex.envs.report import EnvReport, GateLog, finish, skipped_report, write_task
from arex.grading.judge import Judge
from arex.grading.languages import language_for
from arex.sandbox import SandboxConfig, SandboxError
from arex.specs import GradeResult, JudgeSpec, SolutionRef, load_task_spec

BUILDER_VERSION = "judge-1"
STARTERS = {
    "cpp17": "#include <bits/stdc++.h>\nusing namespace std;\n\nint main() {\n    // read the input from stdin, write the answer to stdout\n    return 0;\n}\n",
    "python3": "import sys\n\n\ndef main():\n    data = sys.stdin.read().split()\n    # compute and print the answer\n\n\nmain()\n",
}
NOOP = {"cpp17": "int main() { return 0; }\n", "python3": "\n"}
# What a failing submission must be caught with, by its expected outcome.
CAUGHT_AS = {"wrong_answer": {"WA"}, "time_limit_exceeded": {"TLE"}, "run_time_error": {"RE"}}

Job = tuple[Problem, Path, str]  # a problem, its source, its content hash


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
        starter.parent.mkdir(parents=True, exist_ok=True)
        starter.write_text(STARTERS[language_for(starter.name).name])
    write_task(dest, problem.spec)


def load_spec(env_dir: Path) -> JudgeSpec:
    return load_task_spec(env_dir / "task.yaml", JudgeSpec)


# -- validation gates ----------------------------------------------------------------------------
def run_gates(env_dir: Path, spec: JudgeSpec, problem: Problem, sandbox: SandboxConfig) -> tuple[GateLog, JudgeSpec]:
    """Run the gates in order, stopping at the first that fails; returns the gates with the scores
    seen, and the spec (time limit resolved)."""
    log = GateLog()
    accepted = [s for s in spec.solutions if s.expected == "accepted"]
    if not (_data_gates(log, Judge(env_dir, spec, sandbox)) and _has_reference(log, accepted)):
        return log, spec
    if problem.time_multiplier is not None:  # legacy Kattis: limit from the slowest accepted run
        spec = _derive_time_limit(log, Judge(env_dir, spec, sandbox), accepted, problem.time_multiplier)
    judge = Judge(env_dir, spec, sandbox)
    reference = _accepted_gates(log, judge, accepted)
    if reference is not None and _failing_gates(log, judge):
        _noop_gate(log, judge, accepted[0].language, reference)
    return log, spec


def _grade(judge: Judge, solution: SolutionRef, **kw) -> GradeResult:
    return judge.grade((judge.env_dir / solution.path).read_text(encoding="utf-8", errors="replace"), solution.language, **kw)


def _slowest(result: GradeResult) -> float:
    return max((t.get("time_s") or 0.0 for t in result.details["tests"]), default=0.0)


def _data_gates(log: GateLog, judge: Judge) -> bool:
    """Every test has its files; with a built-in checker, every answer passes it."""
    spec, private = judge.spec, judge.private
    missing = [t.name for t in spec.tests if not (private / t.input).is_file() or not (private / t.answer).is_file()]
    if not log.check("tests complete", not missing, f"{len(spec.tests)} tests, each with input and answer" if not missing else f"missing files for {missing[:5]}"):
        return False
    if spec.checker.kind not in ("exact", "token", "float"):
        # A custom checker's answer file need not be an output (it may hold just the best value):
        # the accepted submissions scoring 1.0 is what shows checker and answers agree.
        return True
    checks = judge.check_outputs({t.name: (private / t.answer).read_text(errors="replace") for t in spec.tests})
    bad = [name for name, c in checks.items() if not c.accepted or c.judge_error]
    return log.check("answers pass checker", not bad, "every expected answer accepted by its own checker" if not bad else f"rejected: {bad[:5]} ({checks[bad[0]].message[:120]})")


def _has_reference(log: GateLog, accepted: list[SolutionRef]) -> bool:
    return log.check("has reference", bool(accepted), f"{len(accepted)} accepted submission(s)" if accepted else "no accepted submission to validate against")


def _derive_time_limit(log: GateLog, judge: Judge, accepted: list[SolutionRef], multiplier: float) -> JudgeSpec:
    """limit = max(1, round(slowest accepted run × multiplier)), graded under the provisional limit."""
    slowest = max([0.0, *(_slowest(_grade(judge, solution)) for solution in accepted)])
    limit = max(1.0, float(int(0.5 + slowest * multiplier)))
    log.check("time limit derived", True, f"slowest accepted {slowest:.2f}s × {multiplier:g} → {limit:g}s")
    return judge.spec.model_copy(update={"time_limit_s": limit})


def _accepted_gates(log: GateLog, judge: Judge, accepted: list[SolutionRef]) -> GradeResult | None:
    """Each accepted submission scores 1.0, twice, well within the limit; returns the last
    grading (the reference), or None if a gate failed."""
    slowest, reference = 0.0, None
    for solution in accepted:
        first, second = _grade(judge, solution), _grade(judge, solution)
        if first.infra_error:
            log.check("checker works", False, first.infra_error)
            return None
        log.scores[f"accepted:{solution.path}"] = first.held_out_score
        verdicts = first.details["verdicts_hidden"]
        seen = f"held-out {first.held_out_score:.3f}, public {first.public_score:.3f}, verdicts {verdicts}"
        if not log.check(f"accepted scores 1.0 ({solution.path})", first.held_out_score == 1.0 and first.public_score == 1.0, seen):
            return None
        if not log.check(f"deterministic ({solution.path})", first.held_out_score == second.held_out_score, f"two gradings: {first.held_out_score:.3f} and {second.held_out_score:.3f}"):
            return None
        slowest = max(slowest, _slowest(first))
        reference = first
    limit = judge.spec.time_limit_s
    if not log.check("time limit margin", slowest < limit / 2, f"slowest accepted test {slowest:.2f}s, limit {limit:g}s (needs < half)"):
        return None
    return reference


def _failing_gates(log: GateLog, judge: Judge) -> bool:
    """Wrong, slow and crashing submissions are caught; partial ones score strictly between."""
    for solution in judge.spec.solutions:
        if solution.expected not in CAUGHT_AS:
            continue
        result = _grade(judge, solution, stop_on_failure=True)
        seen = {t["verdict"] for t in result.details["tests"]}
        log.scores[f"{solution.expected}:{solution.path}"] = result.held_out_score
        if not log.check(f"{solution.expected} caught ({solution.path})", bool(seen & CAUGHT_AS[solution.expected]), f"verdicts seen: {sorted(seen)}"):
            return False
    for solution in judge.spec.solutions:
        if solution.expected == "partially_accepted":
            result = _grade(judge, solution)
            log.scores[f"partially_accepted:{solution.path}"] = result.held_out_score
            if not log.check(f"partial scores between ({solution.path})", 0.0 < result.held_out_score < 1.0, f"held-out {result.held_out_score:.3f}"):
                return False
    return True


def _noop_gate(log: GateLog, judge: Judge, language: str, reference: GradeResult) -> None:
    """Records the starter's score; an empty program must score at most half the reference."""
    starter = judge.env_dir / "workspace" / judge.spec.starter
    if starter.is_file():  # the agent's starting point: recorded, so the room to improve is known
        log.scores["starter"] = judge.grade(starter.read_text(errors="replace"), language_for(starter.name).name).held_out_score
    noop = judge.grade(NOOP[language], language)
    log.scores["noop"] = noop.held_out_score
    log.check("no-op scores clearly lower", noop.held_out_score <= 0.5 * reference.held_out_score, f"no-op {noop.held_out_score:.3f} vs reference {reference.held_out_score:.3f}")


# -- the build -----------------------------------------------------------------------------------
def judge_jobs(source: Path) -> list[Job]:
    """One job per problem of the source; raises SourceError, OSError or ValueError if unreadable."""
    problems = load(source)
    digest_base = content_hash(source_files(source), BUILDER_VERSION.encode())
    return [(problem, source, f"{digest_base}-{content_hash([], problem.spec.model_dump_json().encode())[:8]}") for problem in problems]


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
            log, spec = run_gates(work, spec, problem, sandbox)
        except (SandboxError, RuntimeError, FileNotFoundError) as exc:
            report.status, report.reason = "error", f"{type(exc).__name__}: {exc}"
            report.seconds = time.monotonic() - started
            return report
        finish(report, log, work, final, spec, digest, BUILDER_VERSION)
    report.seconds = time.monotonic() - started
    return report

