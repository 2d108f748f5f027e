"""No verdict from host load: compile, checker and checker-compile steps are judged by the time they
ran or could have run, never by the time other containers took from them.

Each step's timeout is lowered here so that the load below pushes every step's wait for a CPU past
its whole timeout (checked on the kernel's evidence, the runner's starved_s): on a quiet host each
step finishes well within it. Once, under load, a g++ compile whose cc1plus had waited was judged
CE when the linker ran (the wait of a finished process was forgotten), a checker given no verdict
within its wall clock was JE, and a checker that compiled too slowly rejected its source at build.
"""

from __future__ import annotations

import pytest
from host_load_kit import HostLoad

import arex.grading.judge as judge_module
from arex.envs.judge_build import build_one, judge_jobs
from arex.envs.report import REJECTED_DIR
from arex.grading.verdicts import HOST_BUSY
from arex.sandbox import SandboxConfig

pytestmark = pytest.mark.docker

TASK = """
id: loadsum
title: Sum under load
time_limit_s: 0.5
memory_mb: 128
checker: {kind: testlib, source: checker/check.cpp}
scoring: fraction
solutions:
  - {path: solutions/ac.cpp, expected: accepted}
"""
# A testlib-style checker (exit 0 accepted, 1 wrong) that spends 0.2 s of CPU on each test, so a
# loaded host makes it wait longer than its (lowered) timeout.
CHECKER = r"""#include <cstdio>
#include <ctime>
int main(int argc, char **argv) {
    while (clock() < 0.2 * CLOCKS_PER_SEC) {}
    long out = 0, ans = 1;
    FILE *o = fopen(argv[2], "r"), *a = fopen(argv[3], "r");
    if (!o || !a || fscanf(a, "%ld", &ans) != 1) return 3;
    if (fscanf(o, "%ld", &out) != 1 || out != ans) { fprintf(stderr, "wrong: %ld\n", out); return 1; }
    return 0;
}
"""
SUM = '#include <cstdio>\n#include <ctime>\nint main(){long a,b;scanf("%%ld %%ld",&a,&b);%sprintf("%%ld\\n",%s);}\n'
BUSY = "while (clock() < %g * CLOCKS_PER_SEC) {}"
PROGRAMS = {
    # <iostream>: a compile of ~0.4 s of CPU and ~1 s of wall time (a bare <cstdio> one takes 0.07 s of CPU, too
    # little for HostLoad to starve it past a timeout its wall time fits in: pipes and reads are not CPU waits)
    "ac.cpp": "#include <iostream>\n" + SUM % ("", "a+b"),
    "wa.cpp": SUM % ("", "a-b"),
    "tle.cpp": SUM % (BUSY % 0.6, "a+b"),
    "busy-ac.cpp": SUM % (BUSY % 0.24, "a+b"),  # within the limit, CPU-bound: a long run under load
    "ce.cpp": "int main() { return undeclared; }\n",
}
# Lowered timeouts (seconds): each step uses a fraction of its own on a quiet host (ac.cpp's compile ~0.4 s of
# CPU and ~1 s of wall time, the checker 0.2 s of CPU). HostLoad leaves a sandbox ~1/16 of a CPU on a quiet
# two-core host: the checker waits well past its timeout (~3 s), the compile far longer than it runs. (A
# compile's wall time also holds reads and pipes, a few seconds on a loaded host: its timeout leaves room.)
LOWERED = {"COMPILE_TIMEOUT_S": 10.0, "CHECKER_COMPILE_TIMEOUT_S": 10.0, "CHECKER_TIMEOUT_S": 0.6}


def _source(folder):
    (folder / "private" / "tests").mkdir(parents=True)
    (folder / "private" / "checker").mkdir()
    (folder / "solutions").mkdir()
    (folder / "task.yaml").write_text(TASK)
    (folder / "statement.md").write_text("Print a + b.\n")
    (folder / "private" / "checker" / "check.cpp").write_text(CHECKER)
    for name, (a, b) in {"sample-1": (1, 2), "main-1": (30, 4)}.items():
        (folder / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (folder / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    for name, code in PROGRAMS.items():
        (folder / "solutions" / name).write_text(code)
    return folder


@pytest.fixture
def steps(monkeypatch, tmp_path):
    """Lowered timeouts, a checker cache of this test's own (each phase compiles its checker), and
    every judge step's result as (step, ExecResult)."""
    for name, value in LOWERED.items():
        monkeypatch.setattr(judge_module, name, value)
    seen: list = []
    real = judge_module.fair_exec

    def recorded(box, step, *args, **kw):
        result = real(box, step, *args, **kw)
        seen.append((step, result))
        return result

    monkeypatch.setattr(judge_module, "fair_exec", recorded)
    cache = {"dir": tmp_path / "cache-idle"}
    monkeypatch.setattr(judge_module, "cache_dir", lambda: cache["dir"])
    return seen, cache


def _build(source, out):
    (job,) = judge_jobs(source)
    return build_one(*job, out, SandboxConfig())


def _verdicts(judge, names) -> dict[str, list[tuple[str, str]]]:
    """Each program's (verdict, message) per test, graded in one pooled grading and checker container."""
    from arex.grading.pool import GradingPool

    pool = GradingPool(judge, cap=1)
    try:
        verdicts = {}
        for name in names:
            with pool.lease() as lease:
                result = judge.grade(PROGRAMS[name], "cpp17", box=lease.box, checker_box=lease.checker)
            verdicts[name] = [(t["verdict"], t["message"][:200]) for t in result.details["tests"]]
        return verdicts
    finally:
        pool.close()


def _only(verdicts) -> dict[str, list[str]]:
    return {name: [v for v, _ in tests] for name, tests in verdicts.items()}


def _waited_past_timeout(seen, step: str, timeout: float) -> bool:
    return any(s.startswith(step) and (r.starved_s or 0) > timeout for s, r in seen)


def test_build_and_grade_under_host_load_as_idle(tmp_path, steps):
    from arex.grading.judge import Judge

    seen, cache = steps
    source = _source(tmp_path / "loadsum")
    names = ["ac.cpp", "wa.cpp", "tle.cpp", "ce.cpp"]
    idle = _build(source, tmp_path / "idle")
    assert idle.status == "accepted", idle.reason
    env = tmp_path / "idle" / "loadsum"
    from arex.envs.judge_build import load_spec

    idle_verdicts = _verdicts(Judge(env, load_spec(env)), names)
    assert _only(idle_verdicts) == {
        "ac.cpp": ["AC", "AC"],
        "wa.cpp": ["WA", "WA"],
        "tle.cpp": ["TLE", "TLE"],
        "ce.cpp": ["CE", "CE"],
    }
    seen.clear()
    cache["dir"] = tmp_path / "cache-load"  # the checker is compiled again, under load
    with HostLoad():
        loaded = _build(source, tmp_path / "load")
        load_verdicts = _verdicts(Judge(env, load_spec(env)), names)
    assert loaded.status == "accepted", loaded.reason
    assert [(g.name, g.passed) for g in loaded.gates] == [(g.name, g.passed) for g in idle.gates]
    assert loaded.scores == idle.scores
    assert _only(load_verdicts) == _only(idle_verdicts), load_verdicts
    # The load really made the checker wait longer than its whole timeout and the compiler longer than it
    # ran, and the checker was compiled under it.
    shown = [(step, r.cpu_s, r.duration_s, r.starved_s) for step, r in seen]
    assert _waited_past_timeout(seen, "the checker", LOWERED["CHECKER_TIMEOUT_S"]), ("checker not starved", shown)
    compiles = [r for step, r in seen if step.startswith("the compiler") and r.ok]
    assert any((r.starved_s or 0) > 2 * (r.cpu_s or 0) > 0 for r in compiles), ("compiler not starved", shown)
    assert any(step.startswith("compiling checker") and r.ok for step, r in seen), shown


def test_a_step_starved_to_its_cap_is_the_hosts_failure(tmp_path, steps, monkeypatch):
    """Starved until the hard cap, twice: the grading has no verdict, says the host was too busy
    (infra_error), and the build is an error, not a rejection remembered for the next run. Each cap
    is set just above its step's timeout, which is well above the CPU the step needs: only a wait
    for a CPU can reach it."""
    from arex.envs.judge_build import load_spec
    from arex.grading.judge import Judge

    source = _source(tmp_path / "loadsum")
    assert _build(source, tmp_path / "idle").status == "accepted"
    env = tmp_path / "idle" / "loadsum"
    judge = Judge(env, load_spec(env))
    judge.checker_binary()  # compiled before the load: the caps below are the runs'
    with HostLoad():
        monkeypatch.setattr(judge_module, "COMPILE_TIMEOUT_S", 1.5)  # ac.cpp's compile takes ~0.4 s of CPU
        monkeypatch.setattr(judge_module, "STARVED_COMPILE_CAP_S", 1.6)
        compile_starved = judge.grade(PROGRAMS["ac.cpp"], "cpp17")
        build = _build(source, tmp_path / "load")
        monkeypatch.setattr(judge_module, "COMPILE_TIMEOUT_S", LOWERED["COMPILE_TIMEOUT_S"])
        monkeypatch.setattr(judge_module, "STARVED_COMPILE_CAP_S", 600.0)
        monkeypatch.setattr(judge, "wall_limit_s", 0.6)  # the program takes 0.24 s of CPU
        monkeypatch.setattr(judge, "starved_cap_s", 0.7)
        run_starved = judge.grade(PROGRAMS["busy-ac.cpp"], "cpp17")
        monkeypatch.setattr(judge, "wall_limit_s", 2.5)
        monkeypatch.setattr(judge, "starved_cap_s", 25.0)
        monkeypatch.setattr(judge_module, "CHECKER_TIMEOUT_S", 0.5)  # the checker takes 0.2 s of CPU
        monkeypatch.setattr(judge_module, "STARVED_CHECKER_CAP_S", 0.55)
        check_starved = judge.grade(PROGRAMS["ac.cpp"], "cpp17")
    for what, result in (("compile", compile_starved), ("run", run_starved), ("checker", check_starved)):
        verdicts = {t["verdict"] for t in result.details["tests"]}
        assert verdicts == {"JE"}, (what, result.details["tests"])  # no CE, TLE or WA of the submission's
        assert result.infra_error and result.infra_error.startswith(HOST_BUSY), (what, result.infra_error)
        assert result.details["host_starved"] and "waited" in result.infra_error
        assert not any("sleeping" in t["message"] for t in result.details["tests"])
    assert build.status == "error" and HOST_BUSY in build.reason, (build.status, build.reason)
    assert not list((tmp_path / "load" / REJECTED_DIR).glob("*.json"))  # nothing remembered as rejected
