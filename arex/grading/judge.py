"""The online judge: compile a submission, run it on every test in a grading sandbox, check, score.

Trust boundaries (docs/security.md has the whole threat model):
- The submission runs in a grading container (not the agent's), as an unprivileged user. No test
  data is stored in it: each test's input reaches the program on stdin, from the host, and answers
  never enter it. So neither the program nor its compiler can read another test's input.
- Each compile and test run is isolated: every process of the user is killed before it starts and
  after it ends. A grading's tests run pipelined (`Sandbox.run_each`: one request, the runner runs
  each test as that isolated run and streams its result back), and a test's input is in no file.
  A grading container is either fresh or handed out by a GradingPool (arex/grading/pool.py),
  which empties every writable place, removes IPC objects, checks that no process survived and
  re-hashes what grading relies on before each use: nothing of a previous submission survives
  into the next.
- Its output reaches the host through the command server's stream, so it cannot be edited afterwards.
- Checkers are trusted code: built-in ones run on the host; custom ones run in a separate checker
  sandbox that holds no submission code, with the private data mounted read-only.
- Interactors (interactive problems) must run beside the submission: in the grading container, as
  a uid of their own, with one test's data staged for one run in a folder the submission cannot
  open (arex/grading/interactive.py).
- Verdicts come from the kernel and the host: exit status, signal and the CPU time of the whole
  process tree from the runner's wait4 (a root process the program cannot reach), hard CPU limits
  (SIGXCPU, then SIGKILL), OOM events, the wall clock, the output cap. Nothing the program prints
  is evidence.
"""

from __future__ import annotations

import hashlib
import math
import shlex
import tempfile
from collections import Counter
from pathlib import Path

from arex.grading import interactive
from arex.grading.checkers import Check, check_builtin, interpret_kattis, interpret_testlib
from arex.grading.languages import language_named
from arex.grading.verdicts import (
    HOST_BUSY,
    STARVED_ATTEMPTS,
    HostStarved,
    Limits,
    fair_exec,
    program_failure,
)
from arex.hashing import cache_dir, tree_sha256
from arex.sandbox import Mount, SandboxConfig, make_sandbox
from arex.sandbox.base import ExecResult, RunLimits, Sandbox, SandboxError
from arex.specs import GradeResult, JudgeSpec, TestCase, TestResult

# Every judge step's timeout counts the time its processes ran or could have run: time they waited
# for a CPU the host gave other load extends it, up to a hard cap (RunLimits.starved_wall_s); a step
# stopped at the cap is run again, then reported as the host's failure (HostStarved), never judged.
COMPILE_TIMEOUT_S = 60.0
# A checker is compiled once per content hash, and testlib-based ones are heavy (16 s natively on a
# loaded machine): generous.
CHECKER_COMPILE_TIMEOUT_S = 300.0
STARVED_COMPILE_CAP_S = 600.0
CHECKER_TIMEOUT_S = 60.0
"""A checker's time to give one test's verdict."""
STARVED_CHECKER_CAP_S = 600.0
COMPILE_MEMORY = 2 << 30
PRIVATE_MOUNT = "/judge/private"
BATCH_INPUT_BYTES = 256 << 10
"""Test inputs run in one pipelined batch, at most (a larger input runs alone, as every test did)."""
RUN = "/workspace/run"
SIGXCPU, SIGKILL = 24, 9


class Judge:
    """Grades submissions for one judge env (a folder holding task.yaml and private/)."""

    def __init__(self, env_dir: str | Path, spec: JudgeSpec, sandbox: SandboxConfig | None = None):
        self.env_dir = Path(env_dir)
        self.private = self.env_dir / "private"
        self.spec = spec
        self.sandbox_config = sandbox or SandboxConfig()
        # A backstop only, for programs that sleep or block: verdicts come from CPU time. Time a
        # program waits for a CPU on a busy host extends it (up to the hard cap), so load alone
        # never turns a run within its CPU limit into a timeout.
        self.wall_limit_s = max(3 * spec.time_limit_s, spec.time_limit_s + 2.0)
        self.starved_cap_s = 10 * self.wall_limit_s
        self.limits = Limits(
            time_s=spec.time_limit_s, memory_mb=spec.memory_mb, output_mb=spec.output_limit_mb, wall_s=self.wall_limit_s
        )
        self._pins: dict[str, str] = {}  # private/ file → sha256, once pinned (pin_private)
        self._includes: dict[str, dict[str, bytes]] = {}  # language → include/ files (_included)

    def pin_private(self) -> None:
        """Record the sha256 of every test input and answer now: each later read is checked
        against it, so a file changed on disk mid-batch stops grading (judge envs record no
        checksums of their own)."""
        names = {n for t in self.spec.tests for n in (t.input, t.answer)}
        self._pins = {name: hashlib.sha256((self.private / name).read_bytes()).hexdigest() for name in sorted(names)}

    def private_bytes(self, name: str) -> bytes:
        """A private/ file's bytes, checked against its pin if pinned."""
        data = (self.private / name).read_bytes()
        pin = self._pins.get(name)
        if pin is not None and hashlib.sha256(data).hexdigest() != pin:
            raise SandboxError(
                f"{self.private / name} changed on disk since grading of env '{self.spec.id}' began; "
                "restore or rebuild the env (arex build-envs), then re-run"
            )
        return data

    # -- grading -----------------------------------------------------------------------------
    def open_box(self) -> Sandbox:
        """A fresh grading container. It holds no test data; to reuse it for another grading,
        hand it out through a GradingPool, which cleans and checks it first."""
        limit = self.spec.output_limit_mb << 20
        config = self.sandbox_config.model_copy(
            update={
                "memory": COMPILE_MEMORY,
                "pids_limit": 128,
                "output_limit": 2 * limit + 4096,
                "output_kill": limit,
                "mounts": (),
                "seed": None,
                "judge_area": self._judge_area(),
            }
        )
        box = make_sandbox(config, f"judge-{self.spec.id}")
        box.start()
        return box

    def _judge_area(self) -> int:
        """An interactive problem's grading container gets a private area for its interactor."""
        return interactive.area_bytes(self) if self.spec.checker.kind == "interactive" else 0

    def grade(
        self,
        source: str,
        language: str,
        samples_only: bool = False,
        stop_on_failure: bool = False,
        box: Sandbox | None = None,
        checker_box: Sandbox | None = None,
    ) -> GradeResult:
        """Grade one submission, in `box` (a fresh one from open_box or a GradingPool lease: clean)
        or in a fresh grading container. A broken submission is a low score; a broken env, or a host
        too busy to run a step (HostStarved), sets infra_error."""
        lang = language_named(language).for_submission(source, self.spec.memory_mb)  # Java: its class, its heap
        # Samples run first: the runs of one grading share the container's writable places, and a
        # sample's output (its stderr, its checker message) is shown to the agent. A hidden run
        # comes after every run the agent sees, so nothing it read or wrote can reach the feedback;
        # the pool wipes the container before the next grading.
        tests = [t for t in self.spec.tests if t.sample] + [
            t for t in self.spec.tests if not t.sample and not samples_only
        ]
        try:
            return self._grade(lang, source, tests, stop_on_failure, box, checker_box)
        except HostStarved as exc:  # no verdict at all: every test says why, and infra_error too
            return self._finish([self._result(t, "JE", message=str(exc)) for t in tests])

    def _grade(self, lang, source: str, tests: list[TestCase], stop_on_failure: bool, box, checker_box) -> GradeResult:
        results: list[TestResult] = []
        outputs: dict[str, str] = {}
        own = box is None
        box = box or self.open_box()
        try:
            compile_log = self._compile(box, lang, source)
            if compile_log is not None:
                results = [self._result(t, "CE", message=compile_log) for t in tests]
                return self._finish(results, compile_log=compile_log)
            too_big = self._limit_memory(box)
            if too_big is not None:
                results = [self._result(t, "MLE", message=too_big) for t in tests]
                return self._finish(results)
            for result, output in self._run_tests(box, lang.run, tests, stop_on_failure):
                if output is not None:
                    outputs[result.name] = output
                results.append(result)
        finally:
            if own:
                box.stop()
        return self._finish(self._checked(results, self.check_outputs(outputs, checker_box)))

    def _checked(self, results: list[TestResult], checks: dict[str, Check]) -> list[TestResult]:
        """The results with the checker's verdicts, in the spec's order."""
        final = []
        order = {t.name: i for i, t in enumerate(self.spec.tests)}
        for result in sorted(results, key=lambda r: order[r.name]):  # reported in the spec's order
            check = checks.get(result.name)
            if check is not None:
                verdict = (
                    "JE"
                    if check.judge_error
                    else ("AC" if check.accepted or (self.spec.scoring == "ratio" and check.ratio > 0) else "WA")
                )
                # A hidden test's checker message may quote its answer: only samples keep theirs.
                message = check.message if result.sample or check.judge_error else ""
                result = result.model_copy(
                    update={"verdict": verdict, "ratio": check.ratio, "raw": check.raw, "message": message}
                )
            final.append(result)
        return final

    def _compile(self, box: Sandbox, lang, source: str) -> str | None:
        """Write and compile the source (the box is clean: fresh or from a GradingPool). The
        compile log if it failed, else None."""
        box.write_file(f"{RUN}/{lang.source}", source)
        for rel, data in self._included(lang.name).items():  # after the source: they replace its namesakes
            box.write_file(f"{RUN}/{rel}", data)
        if not lang.compile:
            return None  # the tests' limit may stay on from a previous grading: no engine round trip
        box.set_memory_limit(COMPILE_MEMORY)
        limits = RunLimits(isolated=True, starved_wall_s=STARVED_COMPILE_CAP_S)
        compiled = fair_exec(box, "the compiler", list(lang.compile), COMPILE_TIMEOUT_S, limits, cwd=RUN)
        if compiled.status == "timeout":
            return (
                f"compilation timeout: the compiler ran over {COMPILE_TIMEOUT_S:g} s "
                f"({compiled.cpu_s or 0:.1f} s of CPU; time spent waiting for a CPU is not counted)"
            )
        return None if compiled.ok else (compiled.stderr or compiled.stdout)[-3000:]

    def _included(self, language: str) -> dict[str, bytes]:
        """The problem's files placed beside every submission in `language` (a Kattis package's
        include/: private/include/<language>/), read once per judge."""
        if language not in self._includes:
            folder = self.private / "include" / language
            files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
            self._includes[language] = {p.relative_to(folder).as_posix(): p.read_bytes() for p in files}
        return self._includes[language]

    def _limit_memory(self, box: Sandbox) -> str | None:
        """Tighten the memory limit for the test runs. None if done; else why every test is MLE.

        The compiled program's files live in the container's memory (tmpfs) and count against the
        limit, and the kernel will not set a limit below what is in use: a program whose binary
        alone is over it (a huge initialised array) is over the memory limit, which is the
        submission's failure, not the infrastructure's. If the box no longer answers, the probe
        raises SandboxError: that one is the infrastructure's."""
        try:
            box.set_memory_limit((self.spec.memory_mb + 16) << 20)
            return None
        except SandboxError:
            du = box.exec(["du", "-sk", RUN], timeout=30, cwd="/")
            size = du.stdout.split()[0] if du.ok and du.stdout.split() else "?"
            return (
                f"memory limit {self.spec.memory_mb} MB exceeded before the program started: "
                f"its compiled files alone take {size} KB"
            )

    def _run_tests(self, box: Sandbox, run: tuple[str, ...], tests: list[TestCase], stop_on_failure: bool):
        """Each test's result so far and its output to check (None if it did not finish), in order,
        up to the first failure if `stop_on_failure`. Batch tests run pipelined (`Sandbox.run_each`:
        one round trip for many, each run isolated as alone); interactive ones one by one."""
        if self.spec.checker.kind == "interactive":
            run_test = interactive.InteractiveRun(self, box, RUN).run
            for test in tests:
                result, output = run_test(box, run, test)
                yield result, output
                if stop_on_failure and result.verdict != "AC" and output is None:
                    return
            return
        limits, done = self._run_limits(), 0
        stop = (self.spec.time_limit_s, self.spec.memory_mb * 1024) if stop_on_failure else None
        while done < len(tests):
            batch = self._batch(tests[done:])
            inputs = [self.private_bytes(t.input) for t in batch]
            runs = box.run_each(list(run), inputs, timeout=self.wall_limit_s, cwd=RUN, limits=limits, stop=stop)
            if not runs:
                raise SandboxError(f"the grading container ran none of {len(batch)} test(s)")
            for test, r in zip(batch, runs):
                done += 1
                failure = program_failure(r, self.limits)
                if failure is not None and failure.host:  # starved at its cap (the batch ended there): once more
                    result, output = self._run(box, run, test, attempts=STARVED_ATTEMPTS - 1)
                else:
                    result, output = self._judged(test, r, failure)
                yield result, output
                if stop_on_failure and output is None:
                    return

    def _batch(self, tests: list[TestCase]) -> list[TestCase]:
        """The next tests to run in one batch: their inputs together at most BATCH_INPUT_BYTES (the
        command server holds them meanwhile, no more than it holds for one test of that size), at
        least one."""
        batch, size = [], 0
        for test in tests:
            size += (self.private / test.input).stat().st_size
            if batch and size > BATCH_INPUT_BYTES:
                break
            batch.append(test)
        return batch

    def _run_limits(self) -> RunLimits:
        return RunLimits(
            cpu_s=max(1, math.ceil(self.spec.time_limit_s)),
            stack=self.spec.memory_mb << 20,
            starved_wall_s=self.starved_cap_s,
            isolated=True,
        )

    def _run(
        self, box: Sandbox, run: tuple[str, ...], test: TestCase, attempts: int = STARVED_ATTEMPTS
    ) -> tuple[TestResult, str | None]:
        """Run one test alone, again if the host starved it (`attempts` in all). Returns the result so
        far and the output to check (None if it did not finish)."""
        stdin = self.private_bytes(test.input)
        for _ in range(attempts):
            r = box.exec(list(run), timeout=self.wall_limit_s, cwd=RUN, stdin=stdin, limits=self._run_limits())
            failure = program_failure(r, self.limits)
            if failure is None or not failure.host:
                break
        else:
            raise HostStarved(failure.message)
        return self._judged(test, r, failure)

    def _judged(self, test: TestCase, r: ExecResult, failure) -> tuple[TestResult, str | None]:
        """A run's result (its evidence, its failure if any) and its output to check (None if it
        failed). A hidden test's stderr is never kept: the program could print its input there."""
        evidence = {"time_s": r.cpu_s, "wall_s": r.duration_s, "memory_kb": r.memory_kb, "exit_code": r.exit_code}
        if failure is None:
            return self._result(test, "AC", **evidence), r.stdout
        message = (
            f"{failure.message}; stderr: {r.stderr[-500:]}"
            if failure.verdict == "RE" and test.sample
            else failure.message
        )
        return self._result(test, failure.verdict, signal=r.signal, message=message, **evidence), None

    @staticmethod
    def _result(test: TestCase, verdict: str, **fields) -> TestResult:
        return TestResult(
            name=test.name,
            group=test.group,
            sample=test.sample,
            verdict=verdict,
            ratio=1.0 if verdict == "AC" else 0.0,
            raw=1.0 if verdict == "AC" else 0.0,
            **fields,
        )

    # -- checking ----------------------------------------------------------------------------
    def open_checker_box(self) -> Sandbox:
        """A checker container: private data mounted read-only, the compiled checker inside. It
        never runs submission code, so it can be reused across gradings."""
        binary = self.checker_binary()
        config = self.sandbox_config.model_copy(
            update={
                "mounts": (Mount(source=str(self.private.resolve()), target=PRIVATE_MOUNT),),
                "memory": 1 << 30,
                "timeout_s": 60.0,
            }
        )
        box = make_sandbox(config, f"checker-{self.spec.id}")
        box.start()
        box.write_file("checker", binary.read_bytes(), mode=0o755)
        return box

    def check_outputs(self, outputs: dict[str, str], box: Sandbox | None = None) -> dict[str, Check]:
        """Check outputs (test name → output text) against the answers."""
        tests = {t.name: t for t in self.spec.tests}
        if not outputs:
            return {}
        checker = self.spec.checker
        if checker.kind in ("exact", "token", "float"):
            return {
                name: check_builtin(
                    self.spec.checker_of(tests[name]),
                    out,
                    self.private_bytes(tests[name].answer).decode(errors="replace"),
                )
                for name, out in outputs.items()
            }
        for name in outputs:  # the checker reads them from the mount: as pinned, or no check
            for file in (tests[name].input, tests[name].answer):
                if file in self._pins:
                    self.private_bytes(file)
        own = box is None
        box = box or self.open_checker_box()
        checks = {}
        try:
            with tempfile.TemporaryDirectory(prefix="arex-outputs-") as tmp:
                for name, output in outputs.items():
                    Path(tmp, f"{name}.out").write_text(output)
                box.exec("rm -rf outs")
                box.copy_in(tmp, "outs")
            for name in outputs:
                test = tests[name]
                inp, ans, out = (
                    f"{PRIVATE_MOUNT}/{test.input}",
                    f"{PRIVATE_MOUNT}/{test.answer}",
                    shlex.quote(f"outs/{name}.out"),
                )
                if checker.kind == "kattis":
                    flags = " ".join(_quote(f) for f in self.spec.checker_of(test).flags)
                    r = _run_checker(
                        box,
                        "rm -rf /tmp/fb && mkdir /tmp/fb && "
                        f"./checker {_quote(inp)} {_quote(ans)} /tmp/fb/ {flags} < {out}; code=$?; "
                        "printf '\\n@@arex-score@@'; cat /tmp/fb/score.txt 2>/dev/null; "
                        "printf '\\n@@arex-message@@'; cat /tmp/fb/judgemessage.txt 2>/dev/null; exit $code",
                    )
                    _, _, rest = r.stdout.rpartition("\n@@arex-score@@")
                    score, _, message = rest.partition("\n@@arex-message@@")
                    checks[name] = interpret_kattis(
                        r.exit_code, score if score.strip() else None, (message or r.stderr).strip()[:300]
                    )
                else:
                    r = _run_checker(box, ["./checker", inp, f"outs/{name}.out", ans])
                    checks[name] = interpret_testlib(r.exit_code, r.stdout, r.stderr)
                if r.status == "timeout":  # the checker's own failure, named as such (not "exited -1")
                    checks[name] = Check(
                        False,
                        0.0,
                        0.0,
                        f"checker timeout: no verdict within {CHECKER_TIMEOUT_S:g} s "
                        f"({r.cpu_s or 0:.1f} s of CPU; time spent waiting for a CPU is not counted)",
                        judge_error=True,
                    )
        finally:
            if own:
                box.stop()
        return checks

    def checker_binary(self) -> Path:
        """The compiled custom checker, built once per checker source and cached on the host."""
        source = self.private / (self.spec.checker.source or "")
        if not source.is_file():
            raise FileNotFoundError(f"Checker source '{source}' is missing from env '{self.spec.id}'.")
        folder = source.parent
        binary = cache_dir() / "checkers" / tree_sha256(folder)[:24] / "checker"
        if binary.exists():
            return binary
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_suffix(".tmp")
        if source.suffix == ".py":  # runs as is, with python3 from the image
            code = source.read_bytes()
            tmp.write_bytes(code if code.startswith(b"#!") else b"#!/usr/bin/env python3\n" + code)
            tmp.replace(binary)
            return binary
        config = self.sandbox_config.model_copy(update={"memory": COMPILE_MEMORY, "mounts": ()})
        with make_sandbox(config, f"checker-build-{self.spec.id}") as box:
            box.copy_in(folder, "src")
            command = ["g++", "-std=c++17", "-O2", "-pipe", "-I", "src", "-o", "checker", f"src/{source.name}"]
            limits = RunLimits(starved_wall_s=STARVED_COMPILE_CAP_S)
            built = fair_exec(box, f"compiling checker '{source.name}'", command, CHECKER_COMPILE_TIMEOUT_S, limits)
            if built.status == "timeout":
                raise RuntimeError(
                    f"Checker '{source.name}' of env '{self.spec.id}' does not compile: timeout after "
                    f"{CHECKER_COMPILE_TIMEOUT_S:g} s of compiling ({built.cpu_s or 0:.1f} s of CPU; "
                    "time spent waiting for a CPU is not counted)"
                )
            if not built.ok:
                log = (built.stderr or built.stdout).strip()[-2000:]
                log = log or f"g++ exited with code {built.exit_code} and printed nothing"
                raise RuntimeError(f"Checker '{source.name}' of env '{self.spec.id}' does not compile:\n{log}")
            tmp.write_bytes(box.read_file("checker"))
        tmp.replace(binary)
        return binary

    # -- scoring -----------------------------------------------------------------------------
    def _finish(self, results: list[TestResult], compile_log: str | None = None) -> GradeResult:
        samples = [r for r in results if r.sample]
        hidden = [r for r in results if not r.sample]
        public = self._score(samples, by_groups=False)[0] if samples else None  # no samples: undefined, not 0
        held, held_raw = self._score(hidden, by_groups=self.spec.scoring == "groups")
        judge_errors = [r for r in results if r.verdict == "JE"]
        host = next((r.message for r in judge_errors if r.message.startswith(HOST_BUSY)), None)
        details = {
            "kind": "judge",
            "scoring": self.spec.scoring,
            "tests": [r.model_dump() for r in results],
            "verdicts_hidden": dict(Counter(r.verdict for r in hidden)),
            "verdicts_samples": dict(Counter(r.verdict for r in samples)),
            "compile_log": compile_log,
            "host_starved": host is not None,
        }
        return GradeResult(
            public_score=public,
            held_out_score=held,
            held_out_raw=held_raw,
            feedback=self._feedback(samples, hidden, public, compile_log),
            details=details,
            infra_error=host
            or (
                f"checker failed on {len(judge_errors)} test(s) (first: test {judge_errors[0].name}): "
                f"{judge_errors[0].message}"
                if judge_errors
                else None
            ),
        )

    def _score(self, results: list[TestResult], by_groups: bool) -> tuple[float, float]:
        if not results:
            return 0.0, 0.0
        if by_groups:
            points = {g.name: g.points for g in self.spec.groups}
            groups: dict[str, list[TestResult]] = {}
            for r in results:
                groups.setdefault(r.group, []).append(r)
            total = sum(points.get(name, 1.0) for name in groups)
            earned = sum(points.get(name, 1.0) for name, rs in groups.items() if all(r.verdict == "AC" for r in rs))
            return earned / total, earned
        if self.spec.scoring == "ratio":
            return sum(r.ratio for r in results) / len(results), sum(r.raw for r in results) / len(results)
        passed = sum(r.verdict == "AC" for r in results)
        return passed / len(results), float(passed)

    def _feedback(self, samples, hidden, public: float | None, compile_log: str | None) -> str:
        lines = []
        if compile_log is not None:
            return "Compilation failed:\n" + compile_log[-2000:]
        passed = sum(r.verdict == "AC" and r.ratio >= 1.0 for r in samples)
        if public is None:
            lines.append("Sample tests: none: this problem has no sample tests, so there is no public score.")
        else:
            lines.append(f"Sample tests: {passed}/{len(samples)} passed (public score {public:.3f}).")
        tests = {t.name: t for t in self.spec.tests}
        for r in samples:
            timing = f"{r.time_s:.2f}s CPU, {(r.memory_kb or 0) // 1024} MB" if r.time_s is not None else ""
            lines.append(
                f"- {r.name}: {r.verdict}"
                + (f" ratio {r.ratio:.3f}" if self.spec.scoring == "ratio" else "")
                + (f" ({timing})" if timing else "")
            )
            if r.verdict != "AC" or r.ratio < 1.0:
                test = tests[r.name]
                lines.append(f"  input: {_clip((self.private / test.input).read_text(errors='replace'))}")
                lines.append(f"  expected: {_clip((self.private / test.answer).read_text(errors='replace'))}")
                if r.message:
                    lines.append(f"  detail: {_clip(r.message)}")
        counts = Counter(r.verdict for r in hidden)
        summary = ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
        lines.append(
            f"Hidden tests: {counts.get('AC', 0)} of {len(hidden)} accepted. Verdicts: {summary or 'none run'}."
        )
        slowest = max((r.time_s or 0.0 for r in hidden), default=0.0)
        lines.append(f"Slowest hidden test: {slowest:.2f}s CPU of the {self.spec.time_limit_s:g}s limit.")
        return "\n".join(lines)


def _run_checker(box: Sandbox, command) -> ExecResult:
    """One checker run: its timeout counts its own time, not the host's other load (fair_exec)."""
    return fair_exec(box, "the checker", command, CHECKER_TIMEOUT_S, RunLimits(starved_wall_s=STARVED_CHECKER_CAP_S))


def _quote(text: str) -> str:
    return shlex.quote(text)


def _clip(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"
