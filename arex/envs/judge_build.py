"""The judge builder: a problem (from judge_sources) → a validated env folder.

The env is laid out in a temporary folder and graded through its gates there: tests complete,
answers accepted by their checker, accepted submissions score 1.0 deterministically well within
the time limit, failing submissions caught, and a no-op scores clearly lower. A scored problem with
no accepted submission (Frontier-CS ships none) is validated without one (`_reference_free_gates`).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from pathlib import Path

from arex.envs.judge_generate import generated_data
from arex.envs.judge_sources import Problem, content_hash, detect, load, source_files
from arex.envs.report import (
    EnvReport,
    GateLog,
    cached_rejection,
    finish,
    remember_rejection,
    skipped_report,
    write_task,
)
from arex.envs.sources.frontier import CANDIDATES_DIR
from arex.envs.staging import staging
from arex.grading.checkers import Check
from arex.grading.interactive import crash_of
from arex.grading.judge import Judge
from arex.grading.languages import language_for
from arex.grading.verdicts import HostStarved
from arex.hashing import cache_dir
from arex.record.canary import CANARY_FILE, make_canary
from arex.sandbox import SandboxConfig, SandboxError
from arex.specs import GradeResult, JudgeSpec, SolutionRef, load_task_spec

# judge-2: legacy time limits round up (as problemtools), reference-free gates, no-sample problems.
# judge-3: generated tests (generators.yaml), include/, .timelimit, a candidate's margin over the no-op.
BUILDER_VERSION = "judge-3"
INTERACTIVE_GATES = "hostile-output-1"
"""In an interactive problem's build key: grading takes an interactor's crash as the program's wrong
answer, which holds only for an interactor that passed the hostile-output gate, so one accepted
before that gate is built again (other problems keep their builds)."""
STARTERS = {
    "cpp17": "#include <bits/stdc++.h>\nusing namespace std;\n\n"
    "int main() {\n    // read the input from stdin, write the answer to stdout\n    return 0;\n}\n",
    "python3": "import sys\n\n\n"
    "def main():\n    data = sys.stdin.read().split()\n    # compute and print the answer\n\n\nmain()\n",
    "pypy3": "import sys\n\n\n"
    "def main():\n    data = sys.stdin.read().split()\n    # compute and print the answer\n\n\nmain()\n",
    "c11": "#include <stdio.h>\n\n"
    "int main(void) {\n    /* read the input from stdin, write the answer to stdout */\n    return 0;\n}\n",
    "java": "import java.io.*;\nimport java.util.*;\n\n"
    "public class Main {\n    public static void main(String[] args) throws IOException {\n"
    "        // read the input from System.in, write the answer to System.out\n    }\n}\n",
}
NOOP = {
    "cpp17": "int main() { return 0; }\n",
    "python3": "\n",
    "pypy3": "\n",
    "c11": "int main(void) { return 0; }\n",
    "java": "public class Main { public static void main(String[] args) { } }\n",
}
# Reference-free validation: the answer files, offered as outputs, must be rated at least this
# (Frontier-CS testlib checkers print "Ratio: 1.0" for the best known answer itself).
ANSWER_RATIO_MIN = 0.99
CANDIDATE_MARGIN = 0.05
"""Reference-free validation from candidates: the best candidate's held-out score must exceed the
no-op's by at least this (scores in [0, 1]). A candidate at 0.0001 against a no-op at 0.000 shows
nothing of whether the checker rewards a better answer (a checker that hands out crumbs for any
output does that too); five points of the scale is a difference a real solution makes."""
# What a failing submission must be caught with, by its expected outcome.
MAX_GATED = 4
"""Solutions per expected outcome the gates grade (see `gated`)."""
# Kattis has no memory verdict: a run over the memory limit is a run-time error there.
CAUGHT_AS = {"wrong_answer": {"WA"}, "time_limit_exceeded": {"TLE"}, "run_time_error": {"RE", "MLE"}}

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
    if not (dest / CANARY_FILE).is_file():  # every env carries one; see arex/record/canary.py
        (dest / CANARY_FILE).parent.mkdir(parents=True, exist_ok=True)
        (dest / CANARY_FILE).write_text(make_canary(f"{problem.spec.id}\0{problem.statement}") + "\n")
    starter = dest / "workspace" / problem.spec.starter
    if not starter.exists():
        starter.parent.mkdir(parents=True, exist_ok=True)
        starter.write_text(STARTERS[language_for(starter.name).name])
    write_task(dest, problem.spec)


def load_spec(env_dir: Path) -> JudgeSpec:
    return load_task_spec(env_dir / "task.yaml", JudgeSpec)


class GateJudge(Judge):
    """The gates' judge: a grading the host's load starved (no verdict, arex/grading/verdicts.py)
    raises HostStarved, which ends the build as an `error` (built again on the next run), never a
    failed gate (a rejection, which is cached)."""

    def grade(self, *args, **kw) -> GradeResult:
        result = super().grade(*args, **kw)
        if result.details.get("host_starved"):
            raise HostStarved(result.infra_error)
        return result


# -- validation gates ----------------------------------------------------------------------------
def run_gates(env_dir: Path, spec: JudgeSpec, problem: Problem, sandbox: SandboxConfig) -> tuple[GateLog, JudgeSpec]:
    """Run the gates in order, stopping at the first that fails; returns the gates with the scores
    seen, and the spec (time limit resolved)."""
    log = GateLog()
    if problem.generation:
        log.check("tests generated", True, problem.generation)
    accepted = gated(spec.solutions, "accepted")
    if not _data_gates(log, GateJudge(env_dir, spec, sandbox)):
        return log, spec
    if not accepted and spec.scoring == "ratio" and problem.time_multiplier is None:
        _reference_free_gates(log, GateJudge(env_dir, spec, sandbox))
        return log, spec
    if not _has_reference(log, accepted, problem):
        return log, spec
    if problem.time_multiplier is not None:  # legacy Kattis: limit from the slowest accepted run
        spec = _derive_time_limit(
            log, GateJudge(env_dir, spec, sandbox), accepted, problem.time_multiplier, problem.time_resolution
        )
    judge = GateJudge(env_dir, spec, sandbox)
    reference = _accepted_gates(log, judge, accepted)
    if reference is not None and _hostile_output_gate(log, judge) and _failing_gates(log, judge):
        _noop_gate(log, judge, accepted[0].language, reference)
    return log, spec


def gated(solutions: tuple[SolutionRef, ...], expected: str) -> list[SolutionRef]:
    """The solutions of one category the gates grade: all, up to MAX_GATED; beyond, MAX_GATED spread
    evenly over them in path order (a CodeContests row may carry hundreds; each one graded costs a
    full run of the tests, twice for accepted ones). Every solution stays in the env."""
    mine = sorted((s for s in solutions if s.expected == expected), key=lambda s: s.path)
    if len(mine) <= MAX_GATED:
        return mine
    return [mine[round(i * (len(mine) - 1) / (MAX_GATED - 1))] for i in range(MAX_GATED)]


def _grade(judge: Judge, solution: SolutionRef, **kw) -> GradeResult:
    return judge.grade(
        (judge.env_dir / solution.path).read_text(encoding="utf-8", errors="replace"), solution.language, **kw
    )


def _slowest(result: GradeResult) -> float:
    return max((t.get("time_s") or 0.0 for t in result.details["tests"]), default=0.0)


def _noop_source(language: str) -> tuple[str, str]:
    """(source, language) of a program that prints nothing; C++ for a language without one."""
    return (NOOP[language], language) if language in NOOP else (NOOP["cpp17"], "cpp17")


def _public(result: GradeResult) -> str:
    return "n/a (no sample tests)" if result.public_score is None else f"{result.public_score:.3f}"


def _data_gates(log: GateLog, judge: Judge) -> bool:
    """Every test has its files; with a built-in checker, every answer passes it."""
    spec, private = judge.spec, judge.private
    missing = [t.name for t in spec.tests if not (private / t.input).is_file() or not (private / t.answer).is_file()]
    if not log.check(
        "tests complete",
        not missing,
        f"{len(spec.tests)} tests, each with input and answer" if not missing else f"missing files for {missing[:5]}",
    ):
        return False
    if spec.checker.kind not in ("exact", "token", "float"):
        # A custom checker's answer file need not be an output (it may hold just the best value):
        # the accepted submissions scoring 1.0 is what shows checker and answers agree.
        return True
    checks = judge.check_outputs({t.name: (private / t.answer).read_text(errors="replace") for t in spec.tests})
    bad = [name for name, c in checks.items() if not c.accepted or c.judge_error]
    return log.check(
        "answers pass checker",
        not bad,
        "every expected answer accepted by its own checker"
        if not bad
        else f"rejected: {bad[:5]} ({checks[bad[0]].message[:120]})",
    )


def _has_reference(log: GateLog, accepted: list[SolutionRef], problem: Problem) -> bool:
    if accepted:
        return log.check("has reference", True, f"{len(accepted)} accepted submission(s)")
    detail = "no accepted submission to validate against"
    summary = problem.skipped_summary("accepted")
    if summary:  # all were there, in languages arex does not run: say so, not "none"
        detail = f"no accepted submission arex can run: {summary}"
    return log.check("has reference", False, detail)


def legacy_time_limit(slowest: float, multiplier: float, resolution: float = 1.0) -> float:
    """The time limit of a legacy Kattis package, as problemtools computes it
    (Kattis/problemtools verifyproblem.py, Submissions._compute_time_limit):
    max(1, ceil(slowest × time_multiplier / time_resolution)) × time_resolution, i.e. rounded UP to
    the resolution and at least one resolution step."""
    steps = slowest * multiplier / resolution
    steps = math.ceil(round(steps, 9))  # 0.2 × 5 is 1.0000000000000002 in floats: still one step
    return max(1, steps) * resolution


def _derive_time_limit(
    log: GateLog, judge: Judge, accepted: list[SolutionRef], multiplier: float, resolution: float
) -> JudgeSpec:
    """The legacy limit from the slowest accepted run, graded under the provisional limit."""
    slowest = max([0.0, *(_slowest(_grade(judge, solution)) for solution in accepted)])
    limit = legacy_time_limit(slowest, multiplier, resolution)
    log.check(
        "time limit derived",
        True,
        f"slowest accepted {slowest:.2f}s × {multiplier:g}, rounded up to {resolution:g}s steps → {limit:g}s",
    )
    return judge.spec.model_copy(update={"time_limit_s": limit})


def _accepted_gates(log: GateLog, judge: Judge, accepted: list[SolutionRef]) -> GradeResult | None:
    """Each accepted submission scores 1.0 (on the samples too, if there are any), twice, well
    within the limit; returns the last grading (the reference), or None if a gate failed."""
    slowest, reference = 0.0, None
    for solution in accepted:
        first, second = _grade(judge, solution), _grade(judge, solution)
        if _broken(log, judge, first, solution.path):
            return None
        log.scores[f"accepted:{solution.path}"] = first.held_out_score
        verdicts = first.details["verdicts_hidden"]
        seen = f"held-out {first.held_out_score:.3f}, public {_public(first)}, verdicts {verdicts}"
        if not log.check(
            f"accepted scores 1.0 ({solution.path})",
            first.held_out_score == 1.0 and first.public_score in (None, 1.0),
            seen,
        ):
            return None
        if not log.check(
            f"deterministic ({solution.path})",
            first.held_out_score == second.held_out_score,
            f"two gradings: {first.held_out_score:.3f} and {second.held_out_score:.3f}",
        ):
            return None
        slowest = max(slowest, _slowest(first))
        reference = first
    limit = judge.spec.time_limit_s
    if not log.check(
        "time limit margin",
        slowest < limit / 2,
        f"slowest accepted test {slowest:.2f}s, limit {limit:g}s (needs < half)",
    ):
        return None
    return reference


def _failing_gates(log: GateLog, judge: Judge, checker_box=None) -> bool:
    """Wrong, slow and crashing submissions are caught; partial ones score strictly between."""
    for solution in [s for category in CAUGHT_AS for s in gated(judge.spec.solutions, category)]:
        result = _grade(judge, solution, stop_on_failure=True, checker_box=checker_box)
        if _broken(log, judge, result, solution.path):
            return False
        seen = {t["verdict"] for t in result.details["tests"]}
        log.scores[f"{solution.expected}:{solution.path}"] = result.held_out_score
        if not log.check(
            f"{solution.expected} caught ({solution.path})",
            bool(seen & CAUGHT_AS[solution.expected]),
            f"verdicts seen: {sorted(seen)}",
        ):
            return False
    for solution in gated(judge.spec.solutions, "partially_accepted"):
        if solution.expected == "partially_accepted":
            result = _grade(judge, solution, checker_box=checker_box)
            log.scores[f"partially_accepted:{solution.path}"] = result.held_out_score
            if not log.check(
                f"partial scores between ({solution.path})",
                0.0 < result.held_out_score < 1.0,
                f"held-out {result.held_out_score:.3f}",
            ):
                return False
    return True


def _starter_score(log: GateLog, judge: Judge, **kw) -> None:
    """The agent's starting point's score: recorded, so the room to improve is known."""
    starter = judge.env_dir / "workspace" / judge.spec.starter
    if starter.is_file():
        log.scores["starter"] = judge.grade(
            starter.read_text(errors="replace"), language_for(starter.name).name, **kw
        ).held_out_score


def _noop_gate(log: GateLog, judge: Judge, language: str, reference: GradeResult) -> None:
    """Records the starter's score; an empty program must score at most half the reference."""
    _starter_score(log, judge)
    noop = judge.grade(*_noop_source(language))
    log.scores["noop"] = noop.held_out_score
    log.check(
        "no-op scores clearly lower",
        noop.held_out_score <= 0.5 * reference.held_out_score,
        f"no-op {noop.held_out_score:.3f} vs reference {reference.held_out_score:.3f}",
    )


def _broken(log: GateLog, judge: Judge, result: GradeResult, whose: str, prefix: str = "") -> bool:
    """Did grading one of the env's own programs break the judge? Logs the failed gate if so. The
    env's programs are honest: an interactor that crashes on their output is the env's fault here
    (at grading, a crash is the program's wrong answer: arex/grading/interactive.py)."""
    if result.infra_error:
        return not log.check("checker works", False, prefix + result.infra_error)
    crash = _crash(result)
    if crash is not None:
        name, how = crash
        detail = f"interactor {judge.spec.checker.source} crashed on the output of {whose} (test {name}: {how})"
        return not log.check("interactor works", False, detail)
    return False


def _crash(result: GradeResult) -> tuple[str, str] | None:
    """The first test on which the interactor crashed: (its name, how), or None."""
    for test in result.details.get("tests", []):
        how = crash_of(test.get("message") or "")
        if how is not None:
            return test["name"], how
    return None


# -- an interactor meets hostile output ----------------------------------------------------------
HOSTILE_GATE = "interactor survives malformed output"
# What a hostile program writes (a Python bytes expression; None: nothing) and how the report says it.
HOSTILE_OUTPUTS: tuple[tuple[str | None, str], ...] = (
    (None, "an end of file at once"),
    ('b""', "an empty line"),
    ('b"-1"', "a negative number"),
    ('b"-9223372036854775809"', "a number below -2^63"),
    ('"\\u00b2".encode()', "'\u00b2' (a digit to str.isdigit(), not to int())"),
    ('b"9" * 5000', "a 5,000-digit number (over Python's 4,300-digit int() limit)"),
    ('b"x" * (1 << 20)', "a 1 MiB line"),
    # High bytes first: a line-reading interactor meets them (and invalid UTF-8) on the first line.
    ("bytes(range(128, 256)) + bytes(range(128))", "binary bytes (every byte value)"),
)
# Each is also sent after the usual query and answer marks, so an interactor that reads an
# operation first meets it where it parses a number.
HOSTILE_PREFIXES = ("", "? ", "! ")
# Writes its output, waits for the interactor's first words (its greeting, or its answer to the
# output), then exits: the interactor then gets the end of file, which the runner gives it only
# once the program has ended, and must give a verdict on both. Exiting before the greeting would
# make the interactor die of the closed pipe (the program's doing, so no crash); never exiting
# would leave an interactor that waits for more until the wall-clock limit. The wait is half of
# that limit: a greeting slower than that would break an honest grading too.
HOSTILE_PROGRAM = """import os
import select
import sys

payload = {payload}
try:
    if payload is not None:
        sys.stdout.buffer.write(payload + b"\\n")
        sys.stdout.buffer.flush()
except OSError:  # the interactor stopped reading: it has decided
    os._exit(0)
select.select([0], [], [], {wait})
os._exit(0)
"""


def hostile_programs(wait_s: float) -> list[tuple[str, str]]:
    """(Python source, what it writes) of every hostile program the gate runs."""
    programs = []
    for expression, what in HOSTILE_OUTPUTS:
        for prefix in HOSTILE_PREFIXES if expression is not None else ("",):
            payload = "None" if expression is None else f"{prefix.encode()!r} + {expression}"
            said = f"a line of '{prefix.strip()}' and {what}" if prefix else what
            programs.append((HOSTILE_PROGRAM.format(payload=payload, wait=f"{wait_s:g}"), said))
    return programs


def _hostile_output_gate(log: GateLog, judge: Judge) -> bool:
    """An interactor answers malformed and oversized output with a verdict, never a crash: a
    program writing each of HOSTILE_OUTPUTS is graded (on its first test: each one fails there),
    and the interactor must not die of it. This is what lets grading take an interactor's crash as
    the program's wrong answer (arex/grading/interactive.py). No gate for other checkers."""
    if judge.spec.checker.kind != "interactive":
        return True
    source, programs = judge.spec.checker.source, hostile_programs(judge.wall_limit_s / 2)
    box = judge.open_box()
    try:
        for program, what in programs:
            result = judge.grade(program, "python3", stop_on_failure=True, box=box)
            if result.infra_error:
                return log.check(HOSTILE_GATE, False, f"grading a program that wrote {what}: {result.infra_error}")
            crash = _crash(result)
            if crash is not None:
                name, how = crash
                detail = (
                    f"interactor {source} crashed ({how}) on test {name} when the program wrote {what}: "
                    "an interactor must answer malformed output with its wrong-answer verdict "
                    "(Kattis exit 43, testlib exit 1 or 2), not fail"
                )
                return log.check(HOSTILE_GATE, False, detail)
    finally:
        box.stop()
    detail = f"{len(programs)} programs writing malformed or oversized output each got a verdict, no crash"
    return log.check(HOSTILE_GATE, True, detail)


# -- reference-free validation (scored problems without an accepted submission) ------------------
# The rejection when nothing shows that grading rewards a better answer: what is missing, and the fix.
# Where a fix comes from, as a Frontier-CS clone is laid out: a file in the problem's own solutions/
# is an accepted reference (it must score 1.0); candidates of unknown score are read from
# algorithmic/solutions/<N>/ beside algorithmic/problems/<N>/ (and the problem's examples/).
WHERE_SOLUTIONS = (
    "add an accepted solution as <problem>/solutions/<name>.cpp (it must score 1.0), or build from a "
    "Frontier-CS clone whose algorithmic/solutions/<N>/ holds candidates for algorithmic/problems/<N>/"
)
NO_EVIDENCE = (
    "no accepted submission, the answer files are not rated as answers (placeholder answers?), "
    f"and no candidate solution scores {CANDIDATE_MARGIN:g} above the no-op: {WHERE_SOLUTIONS}"
)
NO_EVIDENCE_INTERACTIVE = (
    f"interactive problem with no solution: nothing shows the interactor accepts a good answer; {WHERE_SOLUTIONS}"
)
NO_EVIDENCE_INTERACTIVE_CANDIDATES = (
    f"interactive problem and no candidate solution scores {CANDIDATE_MARGIN:g} above the no-op: "
    f"nothing shows the interactor accepts a good answer; {WHERE_SOLUTIONS}"
)


def _reference_free_gates(log: GateLog, judge: Judge) -> None:
    """No 1.0 reference to grade: the checker (or interactor) compiles; something shows grading
    rewards a better answer, either the answer files (the best known answers, offered as outputs)
    rated high, or a candidate solution scoring above the no-op; a no-op scores low; grading is
    deterministic. The gates that applied become the env's note in the report."""
    program = "interactor" if judge.spec.checker.kind == "interactive" else "checker"
    try:
        judge.checker_binary()
    except HostStarved:
        raise  # the host's failure, not the checker's: no rejection
    except RuntimeError as exc:
        log.check(f"{program} compiles", False, str(exc))
        return
    log.check(f"{program} compiles", True, f"{judge.spec.checker.source} compiled")
    if not _hostile_output_gate(log, judge):
        return
    box = judge.open_checker_box() if program == "checker" else None  # an interactor checks no outputs
    try:
        applied = _better_answer_gates(log, judge, box)
        if applied is None or not _failing_gates(log, judge, checker_box=box):
            return
        _starter_score(log, judge, checker_box=box)
    finally:
        if box is not None:
            box.stop()
    log.notes.append(f"reference-free: no accepted submission; gates: {program} compiles, {applied}")


def _better_answer_gates(log: GateLog, judge: Judge, box) -> str | None:
    """The evidence that grading rewards a better answer: the answer files rated high (and the
    no-op below them on every test), else the best candidate above the no-op. Every candidate's
    score is recorded either way. Returns the gates that applied, as the report says them, or None
    if a gate failed."""
    checks = _answer_ratios(log, judge, box)
    noop = _grade_noop(log, judge, box) if checks is not None else None
    candidates = _grade_candidates(log, judge, box) if noop is not None else None
    if checks is None or noop is None or candidates is None:
        return None
    ratios = {name: c.ratio for name, c in checks.items()}
    tried = f"{len(candidates)} candidate{'s' if len(candidates) != 1 else ''}"
    if ratios and min(ratios.values()) >= ANSWER_RATIO_MIN:
        if not _answer_gates(log, judge, box, checks) or not _noop_below_answers(log, judge, noop, ratios):
            return None
        best = f", best of {tried} {max(candidates.values()):.3f}" if candidates else ""
        return (
            f"answers rated {min(ratios.values()):.3f}, no-op {noop.held_out_score:.3f} "
            f"(below the answer on every test), deterministic{best}"
        )
    return _candidate_gates(log, judge, box, noop.held_out_score, candidates, ratios)


def _answers_as_outputs(judge: Judge) -> dict[str, str]:
    return {t.name: (judge.private / t.answer).read_text(errors="replace") for t in judge.spec.tests}


def _answer_ratios(log: GateLog, judge: Judge, box) -> dict[str, Check] | None:
    """Each test's check of its answer file offered as the output; {} when there is nothing to
    rate (an interactor) or the checker cannot rate the answers and candidates can be graded
    instead (placeholder answers may make it fail); None if that failure is a failed gate."""
    if box is None:
        return {}
    checks = judge.check_outputs(_answers_as_outputs(judge), box)
    broken = [name for name, c in checks.items() if c.judge_error]
    if broken and any(s.expected == "candidate" for s in judge.spec.solutions):
        return {}
    if broken:
        log.check(
            "checker works",
            False,
            f"checker failed on test {broken[0]} ({len(broken)} of {len(checks)} tests): "
            f"{checks[broken[0]].message[:300]}",
        )
        return None
    log.scores["answers"] = sum(c.ratio for c in checks.values()) / len(checks)
    return checks


def _answer_gates(log: GateLog, judge: Judge, box, first: dict[str, Check]) -> bool:
    """The answer files rated ≥ ANSWER_RATIO_MIN (checked by the caller), and rated the same again."""
    low = min(first, key=lambda name: first[name].ratio)
    log.check("answers rated high", True, f"lowest {first[low].ratio:.3f} (test {low}) over {len(first)} tests")
    second = judge.check_outputs(_answers_as_outputs(judge), box)
    changed = [
        name
        for name in first
        if name not in second or (first[name].ratio, first[name].raw) != (second[name].ratio, second[name].raw)
    ]
    detail = (
        "two ratings of every answer equal"
        if not changed
        else (
            f"test {changed[0]} rated {first[changed[0]].ratio:.3f}, "
            f"then {second[changed[0]].ratio if changed[0] in second else 0.0:.3f}"
        )
    )
    return log.check("deterministic", not changed, detail)


def _noop_below_answers(log: GateLog, judge: Judge, noop: GradeResult, answers: dict[str, float]) -> bool:
    """The no-op scores at most half the answers, and strictly less than the answer on every test."""
    hidden = [t.name for t in judge.spec.tests if not t.sample] or list(answers)
    best = sum(answers[name] for name in hidden) / len(hidden)
    if not log.check(
        "no-op scores clearly lower",
        noop.held_out_score == 0.0 or noop.held_out_score < 0.5 * best,
        f"no-op {noop.held_out_score:.3f} vs answers {best:.3f}",
    ):
        return False
    ratios = {t["name"]: t["ratio"] for t in noop.details["tests"]}
    not_better = [name for name in answers if answers[name] <= ratios.get(name, 0.0)]
    detail = (
        "on every test the answer is rated above the no-op"
        if not not_better
        else f"test {not_better[0]}: answer {answers[not_better[0]]:.3f}, no-op {ratios[not_better[0]]:.3f}"
    )
    return log.check("better answer scores higher", not not_better, detail)


def _grade_noop(log: GateLog, judge: Judge, box) -> GradeResult | None:
    """A program that prints nothing, graded; None (gate failed) if the grading itself broke."""
    language = language_for(judge.spec.starter).name if judge.spec.starter else "cpp17"
    noop = judge.grade(*_noop_source(language), checker_box=box)
    if _broken(log, judge, noop, "the no-op program"):
        return None
    log.scores["noop"] = noop.held_out_score
    return noop


def _grade_candidates(log: GateLog, judge: Judge, box) -> dict[str, float] | None:
    """Each candidate's held-out score, by path; None (gate failed) if grading one broke the judge."""
    scores = {}
    for solution in judge.spec.solutions:
        if solution.expected != "candidate":
            continue
        result = _grade(judge, solution, checker_box=box)
        if _broken(log, judge, result, solution.path, prefix=f"grading {solution.path}: "):
            return None
        scores[solution.path] = log.scores[f"candidate:{solution.path}"] = result.held_out_score
    return scores


def _candidate_gates(
    log: GateLog, judge: Judge, box, noop: float, candidates: dict[str, float], ratios: dict[str, float]
) -> str | None:
    """Without answers rated as answers: the best candidate scores at least CANDIDATE_MARGIN above
    the no-op, the no-op at most half of it, and a candidate that far above grades the same twice."""
    best = max(candidates, key=lambda path: candidates[path], default="")
    score = candidates.get(best, 0.0)
    if score < max(noop, 0.0) + CANDIDATE_MARGIN:
        seen = ", ".join(f"{_short(path)} {value:.3f}" for path, value in candidates.items()) or "none"
        rated = f"answers rated {min(ratios.values()):.3f} at lowest; " if ratios else ""
        missing = NO_EVIDENCE
        if judge.spec.checker.kind == "interactive":
            missing = NO_EVIDENCE_INTERACTIVE_CANDIDATES if candidates else NO_EVIDENCE_INTERACTIVE
        log.check("better answer scores higher", False, f"{missing} ({rated}candidates: {seen}; no-op {noop:.3f})")
        return None
    tried = f"{len(candidates)} candidate{'s' if len(candidates) != 1 else ''}"
    log.check(
        "better answer scores higher",
        True,
        f"best of {tried} {score:.3f} ({_short(best)}), at least {CANDIDATE_MARGIN:g} above the no-op {noop:.3f}",
    )
    if not log.check(
        "no-op scores clearly lower",
        noop == 0.0 or noop < 0.5 * score,
        f"no-op {noop:.3f} vs best candidate {score:.3f}",
    ):
        return None
    above = {path: value for path, value in candidates.items() if value >= noop + CANDIDATE_MARGIN}
    stable = _stable_candidate(log, judge, box, above)
    if stable is None:
        return None
    shown = (
        "deterministic" if stable == best else f"deterministic ({_short(stable)} graded twice; {_short(best)} varies)"
    )
    return f"no-op {noop:.3f}, best of {tried} {score:.3f} ({_short(best)}), {shown}"


def _stable_candidate(log: GateLog, judge: Judge, box, above: dict[str, float]) -> str | None:
    """Grading is deterministic: some candidate above the no-op, graded again, scores the same.
    Candidates are tried best first, as many as needed: Frontier-CS's are often seeded by the clock
    or search until a deadline, so one whose score varies says nothing of the grader. Returns that
    candidate, or None (gate failed) if every one varied."""
    varied = []
    for path in sorted(above, key=lambda p: -above[p]):
        solution = next(s for s in judge.spec.solutions if s.path == path)
        again = _grade(judge, solution, checker_box=box).held_out_score
        if again == above[path]:
            log.check(
                "deterministic",
                True,
                f"{_short(path)} graded twice: {again:.3f} both times"
                + (f" ({', '.join(varied)} varied)" if varied else ""),
            )
            return path
        varied.append(f"{_short(path)} {above[path]:.6f} then {again:.6f}")
    detail = (
        f"every candidate above the no-op scored differently when graded again ({', '.join(varied)}): "
        "randomised or time-bound candidates, or a grader that is not deterministic"
    )
    log.check("deterministic", False, detail)
    return None


def _short(path: str) -> str:
    """A candidate's name as the report shows it: relative to solutions/candidates/."""
    return path.removeprefix(f"{CANDIDATES_DIR}/")


# -- the build -----------------------------------------------------------------------------------
def judge_jobs(source: Path, digest_base: str | None = None, sandbox: SandboxConfig | None = None) -> list[Job]:
    """One job per problem of the source; raises SourceError, OSError or ValueError if unreadable.
    `digest_base`: the source's content hash, if the caller has it already. A Kattis package whose
    tests its generators make has them made first, in `sandbox` (or read from the cache)."""
    files = source_files(source)
    generated = None
    if source.is_dir() and detect(source) == "kattis":
        generated = generated_data(source, files, sandbox or SandboxConfig())
    problems = load(source, *((generated.data, generated.summary) if generated else ()))
    digest_base = digest_base or content_hash(files, BUILDER_VERSION.encode())
    return [(problem, source, f"{digest_base}-{_problem_key(problem, source)}") for problem in problems]


def job_for(problem: Problem, source: Path, digest_base: str) -> Job:
    """The job of one problem read from `source` (a streamed row), as `judge_jobs` makes them."""
    return problem, source, f"{digest_base}-{_problem_key(problem, source)}"


def _problem_key(problem: Problem, source: Path) -> str:
    extra = problem.spec.model_dump_json().encode()
    if problem.spec.checker.kind == "interactive":
        extra += INTERACTIVE_GATES.encode()
    return content_hash(_outside(problem, source), extra)[:8]


def _outside(problem: Problem, source: Path) -> list[Path]:
    """Files the env takes from outside the source (a testlib.h or Frontier-CS candidate solutions
    from parent folders): the build depends on them too, so an edit to one rebuilds the env.
    Generated tests are not: the source's content and the generator version decide them."""
    inside = source.resolve() if source.is_dir() else source.resolve().parent
    made = (cache_dir() / "generated").resolve()
    return [
        p
        for p in problem.files.values()
        if isinstance(p, Path) and not p.resolve().is_relative_to(inside) and not p.resolve().is_relative_to(made)
    ]


def build_one(problem: Problem, source: Path, digest: str, out: Path, sandbox: SandboxConfig) -> EnvReport:
    """Build and gate one problem's env; skipped (accepted before) or rejected from the cache when
    its content is unchanged since the last build."""
    started = time.monotonic()
    env_id = problem.spec.id
    final = out / env_id
    earlier = skipped_report(final, digest, source, started) or cached_rejection(out, env_id, digest, source, started)
    if earlier is not None:
        return earlier
    report = EnvReport(str(source), env_id, "rejected")
    out.mkdir(parents=True, exist_ok=True)
    with staging(out, env_id) as tmp:  # a killed build's is deleted by the next build into `out`
        work = tmp / env_id
        spec = problem.spec.model_copy(update={"source_hash": digest})
        write_env(dataclasses.replace(problem, spec=spec), work)
        try:
            log, spec = run_gates(work, spec, problem, sandbox)
        except (SandboxError, RuntimeError, FileNotFoundError) as exc:
            report.status, report.reason = "error", f"{type(exc).__name__}: {exc}"
            report.seconds = time.monotonic() - started
            return report
        # the skills: the source folder's arex-skills/, if any
        finish(report, log, work, final, spec, digest, BUILDER_VERSION, skills_from=source)
    remember_rejection(out, env_id, digest, report)
    report.seconds = time.monotonic() - started
    return report
