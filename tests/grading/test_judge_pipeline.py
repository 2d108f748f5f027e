"""A grading's tests run pipelined (one request runs the whole list through the runner, results
streamed back) and are judged exactly as one run per request judged them.

The Docker tests grade hostile submissions both ways in one pooled container and compare every
verdict; the others drive the judge's host-side logic (batches, the retry of a starved run before any
later test, the early stop) through a sandbox whose runs are scripted results.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arex.envs.build import write_env
from arex.envs.judge_sources import load
from arex.grading import judge as judge_module
from arex.grading.judge import Judge
from arex.grading.verdicts import HOST_BUSY
from arex.sandbox.base import ExecResult, Sandbox, ends_batch

TASK = """
id: pipe
title: Pipelined
time_limit_s: 0.5
memory_mb: 64
output_limit_mb: 1
checker: {kind: token}
scoring: fraction
"""
CASES = {"sample-1": (1, 2), "main-1": (3, 4), "main-2": (5, 6), "main-3": (7, 8), "main-4": (9, 10)}


def _problem(root: Path) -> Judge:
    src = root / "src" / "pipe"
    (src / "private" / "tests").mkdir(parents=True)
    (src / "task.yaml").write_text(TASK)
    (src / "statement.md").write_text("Print a + b.\n")
    for name, (a, b) in CASES.items():
        (src / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (src / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    problem = load(src)[0]
    env = root / "env" / "pipe"
    write_env(problem, env)
    return Judge(env, problem.spec)


READ = "import os, sys, time\na, b = map(int, sys.stdin.read().split())\n"
# Each fails one hidden test its own way (a == 5: main-2) and passes the others, so a result that
# landed on the wrong test, or a limit that carried over from one run to the next, shows.
PROGRAMS = {
    "AC": READ + "print(a + b)\n",
    "WA": READ + "print(a + b + (a == 5))\n",
    "RE": READ + "sys.exit(3) if a == 5 else print(a + b)\n",
    "TLE-cpu": READ + "while a == 5 and time.process_time() < 3: pass\nprint(a + b)\n",
    "TLE-sleeping": READ + "time.sleep(60 if a == 5 else 0)\nprint(a + b)\n",
    "OLE": READ + "while a == 5: sys.stdout.write('y' * 65536)\nprint(a + b)\n",
    "MLE": READ + "big = bytearray((200 << 20) if a == 5 else 1)\nbig[-1] = 1\nprint(a + b)\n",
    # Every run looks for any other process of its user (a daemon an earlier run left), answers wrong
    # if it finds one, then leaves a double-forked daemon of its own behind.
    "AC-daemons": READ
    + (
        "me = os.getpid()\nothers = []\n"
        "for p in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        if int(p) != me and os.stat(f'/proc/{p}').st_uid == os.getuid():\n"
        "            others.append(p)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(a + b + len(others), flush=True)\n"
        "os.system('setsid sleep 300 >/dev/null 2>&1 & ( setsid nohup sleep 301 >/dev/null 2>&1 & )')\n"
    ),
}


def _verdicts(result) -> list[tuple[str, str]]:
    return [(t["name"], t["verdict"]) for t in result.details["tests"]]


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    from arex.grading.pool import GradingPool

    pool = GradingPool(_problem(tmp_path_factory.mktemp("pipe")), cap=1)
    yield pool
    pool.close()


def _grade(pool, code: str, stop_on_failure: bool = False):
    with pool.lease() as lease:
        result = pool.judge.grade(code, "python3", box=lease.box, stop_on_failure=stop_on_failure)
    assert pool.replaced == 0, pool.failures
    return result


@pytest.mark.docker
def test_pipelined_verdicts_equal_one_run_per_request(pooled, monkeypatch):
    """Every program graded pipelined, with no command per test, then one run per request (the
    default `Sandbox.run_each`): the same verdict on every test, and each the expected one."""
    from arex.sandbox.served import ServedSandbox

    alone, starved = [], []
    exec_, run_each = ServedSandbox.exec, ServedSandbox.run_each

    def counted(self, command, *args, **kwargs):
        alone.append(command == ["python3", "solution.py"])
        return exec_(self, command, *args, **kwargs)

    def batched(self, *args, **kwargs):
        runs = run_each(self, *args, **kwargs)
        starved.append(runs[-1].starved)
        return runs

    monkeypatch.setattr(ServedSandbox, "exec", counted)
    monkeypatch.setattr(ServedSandbox, "run_each", batched)
    piped = {name: _grade(pooled, code) for name, code in PROGRAMS.items()}
    # A test runs alone only to run again a run the host's load starved to its cap.
    assert sum(alone) == sum(starved), (alone, starved)
    monkeypatch.setattr(ServedSandbox, "run_each", Sandbox.run_each)
    one_by_one = {name: _grade(pooled, code) for name, code in PROGRAMS.items()}
    for name in PROGRAMS:
        assert _verdicts(piped[name]) == _verdicts(one_by_one[name]), name
        expected = name.split("-")[0]
        want = [(t.name, expected if t.name == "main-2" else "AC") for t in pooled.judge.spec.tests]
        assert _verdicts(piped[name]) == want, (name, piped[name].details["tests"])
    cpu = {t["name"]: t["time_s"] for t in piped["TLE-cpu"].details["tests"]}
    assert cpu["main-2"] >= 0.5 and cpu["main-3"] < 0.5, cpu  # each run's own CPU time, none carried over
    sleeping = {t["name"]: t["message"] for t in piped["TLE-sleeping"].details["tests"]}
    assert "wall-clock" in sleeping["main-2"], sleeping


@pytest.mark.docker
def test_early_stop_ends_the_pipeline_at_the_first_failure(pooled):
    """With stop_on_failure (the build's gates), no test after the first failure runs: each run
    leaves its mark in /tmp, which the container keeps until the pool cleans it."""
    code = READ + "open(f'/tmp/ran-{a}', 'w').close()\nsys.exit(3) if a == 5 else print(a + b)\n"
    with pooled.lease() as lease:
        result = pooled.judge.grade(code, "python3", box=lease.box, stop_on_failure=True)
        ran = sorted(lease.box.exec("ls /tmp", cwd="/").stdout.split())
    assert _verdicts(result) == [("main-1", "AC"), ("main-2", "RE"), ("sample-1", "AC")]  # the spec's order
    assert ran == ["ran-1", "ran-3", "ran-5"]


# -- the judge's side of the pipeline, on scripted runs ------------------------------------------
def _run(stdout: str = "", **fields) -> ExecResult:
    base = dict(status="ok", exit_code=0, stdout=stdout, stderr="", duration_s=0.01, cpu_s=0.01, memory_kb=1000)
    return ExecResult(**{**base, **fields})


STARVED = dict(status="timeout", exit_code=124, starved=True, starved_s=40.0, duration_s=50.0)


class ScriptedBox(Sandbox):
    """A sandbox whose runs answer from a script keyed by the input, and which records every call:
    only the judge's bookkeeping around the runs is under test here."""

    def __init__(self, answers: dict[bytes, list[ExecResult]]):
        self.answers, self.calls = answers, []

    def _answer(self, stdin: bytes) -> ExecResult:
        return self.answers[stdin].pop(0)

    def run_each(self, command, stdins, *, timeout, cwd, limits, stop=None):
        self.calls.append(("batch", [s.decode().split()[0] for s in stdins]))
        results = []
        for stdin in stdins:
            results.append(self._answer(stdin))
            if ends_batch(results[-1], stop):
                break
        return results

    def exec(self, command, timeout=None, cwd=None, env=None, stdin=None, limits=None):
        self.calls.append(("alone", stdin.decode().split()[0]))
        return self._answer(stdin)

    start = stop = read_file = write_file = copy_in = archive = restore = set_memory_limit = lambda *a, **k: None


def _scripted(judge: Judge, overrides: dict[str, list[ExecResult]]) -> dict[bytes, list[ExecResult]]:
    answers = {f"{a} {b}\n".encode(): [_run(f"{a + b}\n")] for a, b in CASES.values()}
    for name, runs in overrides.items():
        a, b = CASES[name]
        answers[f"{a} {b}\n".encode()] = runs
    return answers


RUN = ("python3", "solution.py")


def _in_order(judge: Judge) -> list:
    """The tests as Judge.grade runs them: samples first."""
    return sorted(judge.spec.tests, key=lambda t: not t.sample)


def test_a_starved_run_runs_again_before_any_later_test(tmp_path):
    judge = _problem(tmp_path)
    box = ScriptedBox(_scripted(judge, {"main-2": [_run(**STARVED), _run("11\n")]}))
    results = list(judge._run_tests(box, RUN, _in_order(judge), stop_on_failure=False))
    assert [r.verdict for r, _ in results] == ["AC"] * 5
    assert box.calls == [("batch", ["1", "3", "5", "7", "9"]), ("alone", "5"), ("batch", ["7", "9"])]


def test_a_run_starved_twice_is_the_hosts_failure(tmp_path):
    judge = _problem(tmp_path)
    box = ScriptedBox(_scripted(judge, {"main-2": [_run(**STARVED), _run(**STARVED)]}))
    with pytest.raises(judge_module.HostStarved, match=HOST_BUSY):
        list(judge._run_tests(box, RUN, _in_order(judge), stop_on_failure=False))
    assert box.calls == [("batch", ["1", "3", "5", "7", "9"]), ("alone", "5")]


def test_batches_hold_bounded_input_and_stop_at_the_first_failure(tmp_path, monkeypatch):
    judge = _problem(tmp_path)
    monkeypatch.setattr(judge_module, "BATCH_INPUT_BYTES", 9)  # two 4-byte inputs, and a third over it
    box = ScriptedBox(_scripted(judge, {"main-3": [_run(status="error", exit_code=1)]}))
    results = list(judge._run_tests(box, RUN, _in_order(judge), stop_on_failure=True))
    assert [r.verdict for r, _ in results] == ["AC", "AC", "AC", "RE"]
    assert box.calls == [("batch", ["1", "3"]), ("batch", ["5", "7"])]
    # Over the CPU limit with exit status 0 is a failure too: the batch stops there.
    box = ScriptedBox(_scripted(judge, {"main-1": [_run("7\n", cpu_s=0.7)]}))
    results = list(judge._run_tests(box, RUN, _in_order(judge), stop_on_failure=True))
    assert [r.verdict for r, _ in results] == ["AC", "TLE"] and box.calls == [("batch", ["1", "3"])]
