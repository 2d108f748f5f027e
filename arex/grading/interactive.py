"""Interactive problems: the submission talks to an interactor (Kattis interactive output
validators, testlib/Frontier-CS interactors) through pipes, and the interactor gives the verdict.

Both run in the grading container, which holds no test data between runs (docs/security.md):
- The interactor is trusted judge code. It runs as its own uid (SandboxConfig.judge_uid, never the
  agent's), from a private tmpfs only that uid may enter (JUDGE_AREA, mode 0700). Its binary, the
  test's input and answer are staged there for one run and wiped after it, and its feedback files
  are read back from there: the submission can neither read them nor write a verdict there, nor
  signal, trace or open the interactor's /proc entries (the kernel refuses across uids).
- The runner (runner.c, -I) starts both, each under its own limits, as a root process neither can
  reach; it reports both exit statuses, the submission's CPU time and memory, and whose main
  process ended first; both sides are killed at the end and swept before and after each run.
- The verdict follows the Kattis rules: an interactor that rejects before the submission ends
  gives WA even if the submission then crashes; otherwise the submission's own failure (TLE, MLE,
  RE) wins; otherwise the interactor's verdict. An interactor that fails because the submission
  stopped talking (EPIPE, SIGPIPE, end of file after it exited), or that runs out of time beside
  it, is the submission's failure, never a judge error: the agent cannot end a grading as an
  infrastructure failure that way.
- An interactor that crashes (a traceback, a signal, an exit code outside its protocol's verdicts,
  testlib's FAIL) on what the submission wrote, or on its end of file, is rejecting the
  submission's output: WA, with our own words on a hidden test (INTERACTOR_CRASHED). The build is where a crash is the
  env's fault: its gates run the env's own solutions on every test and feed the interactor
  malformed and oversized output (judge_build._hostile_output_gate), and reject an interactor that
  crashes on either. So at grading the one thing that differs from what the build saw is the
  program's output, and an agent cannot end a rollout as an infrastructure failure by printing
  what the interactor cannot parse (a 5,000-digit number, "²"). Only a failure to start the
  interactor at all (staging, exec: exit codes 125-127) is a judge error.
"""

from __future__ import annotations

import base64
import io
import math
import tarfile
from pathlib import Path
from typing import Protocol

from arex.grading.checkers import Check, interpret_kattis, interpret_testlib
from arex.grading.verdicts import STARVED_ATTEMPTS, Failure, HostStarved, Limits, program_failure, starved_message
from arex.sandbox.base import JUDGE_AREA, InteractResult, RunLimits, Sandbox
from arex.specs import JudgeSpec, TestCase, TestResult


class Grader(Protocol):
    """What an interactive run needs of the judge (arex.grading.judge.Judge), which calls it."""

    spec: JudgeSpec
    private: Path
    limits: Limits
    wall_limit_s: float
    starved_cap_s: float

    def checker_binary(self) -> Path: ...

    def private_bytes(self, name: str) -> bytes: ...


INTERACTOR_MEMORY = 256 << 20
"""Room beside the submission in the container's memory limit for the interactor."""
INTERACTOR_ADDRESS_SPACE = 2 << 30
AREA_SLACK = 32 << 20
RUN_DIR = f"{JUDGE_AREA}/run"
BINARY = f"{JUDGE_AREA}/interactor"
FEEDBACK_FILES = ("judgemessage.txt", "score.txt", "judgeerror.txt")
FEEDBACK_CAP = 16384
SIGKILL, SIGPIPE, SIGXCPU = 9, 13, 24
INTERACTOR_CRASHED = "wrong answer: the interactor crashed on the program's output"
"""How a crash of the interactor's begins a test's message: the build gates look for it."""
ENDED_EARLY = (
    "the interaction ended before the interactor could accept (the program stopped reading or writing, or exited early)"
)
# The interactor never ran: _STAGE's own failure (125), or sh's "cannot execute" / "not found".
STARTUP_FAILED = (125, 126, 127)
# Runs as the judge's uid with the runner's stdin on fd 3: unpack this test's files (and the
# interactor, on a grading's first test) into a fresh private folder, then become the interactor.
_STAGE = (
    f"cd {JUDGE_AREA} && rm -rf run && mkdir -m 700 run run/feedback && tar -x -f - -C run <&3 "
    '|| { echo "arex: staging the interactor files failed" >&2; exit 125; }\n'
    "if [ -f run/interactor ]; then mv -f run/interactor interactor && chmod 700 interactor || exit 125; fi\n"
    '[ -x interactor ] || { echo "arex: no interactor staged" >&2; exit 125; }\n'
    'exec 3<&-\nexec "$@"'
)
# Runs as the judge's uid after the run: print each feedback file (name, base64), then wipe the run.
_COLLECT = (
    f"cd {RUN_DIR} 2>/dev/null || exit 0\n"
    'for f in "$@"; do [ -f "feedback/$f" ] && '
    f'printf "%s %s\\n" "$f" "$(head -c {FEEDBACK_CAP} "feedback/$f" | base64 -w0)"; done\n'
    f"cd / && rm -rf {RUN_DIR}"
)


def area_bytes(judge: Grader) -> int:
    """Size of the private area a grading container needs: the interactor, one test's input and
    answer, its feedback."""
    largest = max(
        (
            (judge.private / t.input).stat().st_size + (judge.private / t.answer).stat().st_size
            for t in judge.spec.tests
        ),
        default=0,
    )
    return AREA_SLACK + judge.checker_binary().stat().st_size + 2 * largest


class InteractiveRun:
    """Runs one grading's tests of an interactive problem in one grading container."""

    def __init__(self, judge: Grader, box: Sandbox, cwd: str):
        self.judge = judge
        self.cwd = cwd
        self.spec = judge.spec
        self.binary = judge.checker_binary().read_bytes()
        self.staged = False
        # The interactor's memory and the staged files live in the container beside the program:
        # its memory limit gets room for them (the program's own limit is judged by its peak).
        box.set_memory_limit(((self.spec.memory_mb + 16) << 20) + INTERACTOR_MEMORY + area_bytes(judge))

    def run(self, box: Sandbox, program: tuple[str, ...], test: TestCase) -> tuple[TestResult, None]:
        """Run one test; the interactor's verdict is final, so there is never an output to check."""
        tl = self.spec.time_limit_s
        limits = RunLimits(
            cpu_s=max(1, math.ceil(tl)),
            stack=self.spec.memory_mb << 20,
            starved_wall_s=self.judge.starved_cap_s,
            isolated=True,
        )
        interactor_limits = RunLimits(cpu_s=max(2, math.ceil(4 * tl)), address_space=INTERACTOR_ADDRESS_SPACE)
        # The runner's clock counts both sides' waits for a CPU: one the host starved to the hard cap
        # is run again, then reported as the host's failure (both sides' CPU limits still decide).
        for _ in range(STARVED_ATTEMPTS):
            r = box.interact(
                list(program),
                ["sh", "-c", _STAGE, "arex-interactor", *self._command(test)],
                stdin=self._staging(test),
                timeout=self.judge.wall_limit_s,
                cwd=self.cwd,
                limits=limits,
                interactor_limits=interactor_limits,
            )
            self.staged = True
            collected = box.judge_exec(["sh", "-c", _COLLECT, "arex-collect", *FEEDBACK_FILES], timeout=60)
            if not r.program.starved:
                return self._result(test, r, _parse_feedback(collected.stdout)), None
        raise HostStarved(starved_message("the program and its interactor", r.program))

    def _command(self, test: TestCase) -> list[str]:
        checker = self.spec.checker_of(test)  # a test data group may give the interactor its own arguments
        if checker.protocol == "testlib":
            return [BINARY, f"{RUN_DIR}/input", f"{RUN_DIR}/output", f"{RUN_DIR}/answer"]
        return [BINARY, f"{RUN_DIR}/input", f"{RUN_DIR}/answer", f"{RUN_DIR}/feedback/", *checker.flags]

    def _staging(self, test: TestCase) -> bytes:
        """A tar of the test's input and answer, and of the interactor on a grading's first test."""
        members = {"input": self.judge.private_bytes(test.input), "answer": self.judge.private_bytes(test.answer)}
        if not self.staged:
            members["interactor"] = self.binary
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o700 if name == "interactor" else 0o600
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    def _result(self, test: TestCase, r: InteractResult, feedback: dict[str, str]) -> TestResult:
        p = r.program
        evidence = {
            "time_s": p.cpu_s,
            "wall_s": p.duration_s,
            "memory_kb": p.memory_kb,
            "exit_code": p.exit_code,
            "signal": p.signal,
        }
        check = interactor_check(self.spec.checker.protocol, r, feedback)
        failure = program_failure(r.program, self.judge.limits, idle="waiting for the interactor or idle")
        decided = decide(self.spec.checker.protocol, r, check, failure)
        if isinstance(decided, Failure):
            return _make(test, decided.verdict, 0.0, 0.0, _failure_message(test, decided, check, r), evidence)
        scored = self.spec.scoring == "ratio" and decided.ratio > 0
        verdict = "AC" if decided.accepted or scored else "WA"
        # A sample's stderr is shown even when the interactor decided: it is the agent's only trace of the dialogue.
        message = decided.message + (f"; stderr: {p.stderr[-500:]}" if p.stderr.strip() else "") if test.sample else ""
        return _make(test, verdict, decided.ratio, decided.raw, message, evidence)


def interactor_check(protocol: str, r: InteractResult, feedback: dict[str, str]) -> Check:
    """The interactor's own verdict, read as its protocol says."""
    if protocol == "testlib":
        return interpret_testlib(r.interactor_exit, "", r.interactor_output)
    message = (feedback.get("judgemessage.txt") or feedback.get("judgeerror.txt") or r.interactor_output).strip()[:300]
    return interpret_kattis(r.interactor_exit, feedback.get("score.txt"), message)


def decide(protocol: str, r: InteractResult, check: Check, failure: Failure | None) -> Check | Failure:
    """The verdict, by the Kattis rules (see the module doc)."""
    if check.judge_error:
        if _startup_failed(r):
            return Failure("JE", f"interactor failed: {check.message[:300]}")
        if not _crashed(r):
            return failure or Failure("WA", ENDED_EARLY)
        # It died of what the program wrote (or of its end of file): the program's output was not
        # acceptable, since the build showed the interactor survives honest and malformed output
        # (see the module doc). As after a rejection: a crash first decides, unless over a hard limit.
        if failure is not None and (failure.verdict in ("MLE", "OLE") or r.first != "interactor"):
            return failure
        return Failure("WA", f"{INTERACTOR_CRASHED} ({crash_status(r)})")
    if failure is not None and failure.verdict in ("MLE", "OLE"):
        return failure  # over a hard resource limit: the kernel would have stopped it there
    if not check.accepted and r.first == "interactor":
        return check  # it rejected first: what the program did after (crash, spin, hang) follows from that
    if (
        check.accepted
        and r.first == "interactor"
        and failure is not None
        and failure.verdict == "RE"
        and r.program.signal == SIGPIPE
    ):
        return check  # accepted, then the program wrote into the closed pipe: the judge hung up, not a crash
    return failure or check


def crash_status(r: InteractResult) -> str:
    """How the interactor ended, in our words: never its output, which may quote the test."""
    return f"signal {r.interactor_signal}" if r.interactor_signal else f"exit code {r.interactor_exit}"


def _startup_failed(r: InteractResult) -> bool:
    """Did the interactor fail to start (nothing of the program's had reached it)?"""
    return r.interactor_signal is None and r.interactor_exit in STARTUP_FAILED


def _crashed(r: InteractResult) -> bool:
    """Did the interactor fail other than because the program hung up on it (SIGPIPE,
    BrokenPipeError) or used up the time (the program's own failures)? An end of file is no
    excuse: the program's end is output the interactor must judge too."""
    hung_up = (
        r.interactor_signal == SIGPIPE
        or "BrokenPipeError" in r.interactor_output
        or "Broken pipe" in r.interactor_output
    )
    out_of_time = r.interactor_signal in (SIGKILL, SIGXCPU) or r.program.status in ("timeout", "oom", "output_limit")
    return not hung_up and not out_of_time


def _parse_feedback(text: str) -> dict[str, str]:
    files = {}
    for line in text.splitlines():
        name, _, data = line.partition(" ")
        if name in FEEDBACK_FILES:
            files[name] = base64.b64decode(data).decode("utf-8", "replace")
    return files


def _failure_message(test: TestCase, decided: Failure, check: Check, r: InteractResult) -> str:
    """Our own words (and a judge error's cause); the interactor's message and the program's stderr
    may quote the test, so only samples show them. A crash's own text is a traceback, which quotes
    the interactor's source: a sample shows its last line (the error), inside the crash's account."""
    if not test.sample or decided.verdict == "JE":
        return decided.message
    if decided.message.startswith(INTERACTOR_CRASHED):
        error = _last_line(r.interactor_output)
        crashed = f"{INTERACTOR_CRASHED} ({crash_status(r)}{': ' + error if error else ''})"
        return crashed + _sample_detail("", r.program.stderr)
    return decided.message + _sample_detail(check.message, r.program.stderr)


def crash_of(message: str) -> str | None:
    """A test message's account of an interactor crash ("exit code 1: ValueError: ..."), else None."""
    if not message.startswith(INTERACTOR_CRASHED):
        return None
    return message.removeprefix(INTERACTOR_CRASHED).split("; stderr: ")[0].strip().removeprefix("(").removesuffix(")")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _sample_detail(interactor_message: str, stderr: str) -> str:
    parts = [
        f"; interactor: {interactor_message[:300]}" if interactor_message else "",
        f"; stderr: {stderr[-500:]}" if stderr.strip() else "",
    ]
    return "".join(parts)


def _make(test: TestCase, verdict: str, ratio: float, raw: float, message: str, evidence: dict) -> TestResult:
    return TestResult(
        name=test.name,
        group=test.group,
        sample=test.sample,
        verdict=verdict,
        ratio=ratio,
        raw=raw,
        message=message,
        **evidence,
    )
