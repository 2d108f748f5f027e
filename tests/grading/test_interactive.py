"""Interactive problems: a submission and an interactor connected by pipes in the grading
container, the verdict from the interactor; and the attacks a submission may try on it.

Two problems written for this project: `guess` (Kattis protocol, a Python interactor: find a hidden
number in [1, n] with at most k queries) and `guess-scored` (testlib protocol, a C++ interactor on
a minimal header of our own: the same game scored by the queries used, "Ratio: x").
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from arex.envs.build import write_env
from arex.envs.judge_sources import load
from arex.grading.checkers import Check
from arex.grading.interactive import INTERACTOR_CRASHED, Failure, decide
from arex.grading.judge import Judge
from arex.sandbox.base import ExecResult, InteractResult

# -- the Kattis-protocol problem -----------------------------------------------------------------
KATTIS_INTERACTOR = r"""
import os
import sys
import time

n, k = map(int, open(sys.argv[1]).read().split())
secret = int(open(sys.argv[2]).read().split()[0])
feedback = sys.argv[3]


def finish(ok, message):
    with open(feedback + "judgemessage.txt", "w") as f:
        f.write(message)
    if not ok:  # hang up, then take a while to exit (as an interpreter's teardown may)
        sys.stdout.flush()
        os.close(1)
        time.sleep(0.2)
    sys.exit(42 if ok else 43)


print(n, k, flush=True)
queries = 0
for line in sys.stdin:
    parts = line.split()
    if len(parts) != 2 or parts[0] not in ("?", "!") or not parts[1].lstrip("-").isdigit():
        finish(False, "malformed line %r" % line[:40])
    x = int(parts[1])
    if parts[0] == "!":
        if x != secret:
            finish(False, "wrong guess %d" % x)
        if sys.stdin.read().strip():
            finish(False, "output after the final answer")
        finish(True, "found it in %d queries" % queries)
    queries += 1
    if queries > k:
        finish(False, "more than %d queries" % k)
    print("<" if secret < x else (">" if secret > x else "="), flush=True)
finish(False, "no final answer")
"""

GUESS_TASK = """
id: guess
title: Guess the number
time_limit_s: 1.0
memory_mb: 64
output_limit_mb: 1
checker: {kind: interactive, protocol: kattis, source: checker/interactor.py}
scoring: fraction
"""
# name → (n, k, secret): k allows a binary search, never a linear scan.
GUESS_TESTS = {
    "sample-1": (10, 4, 7),
    "main-1": (1000, 10, 517),
    "main-2": (1000, 10, 1000),
    "main-3": (10**9, 30, 123456789),
}

PY_BINARY_SEARCH = """
import sys
n, k = map(int, input().split())
lo, hi = 1, n
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    reply = input()
    if reply == "=":
        break
    lo, hi = (lo, mid - 1) if reply == "<" else (mid + 1, hi)
print("!", mid, flush=True)
"""


def _write_problem(root: Path, task: str, tests: dict, checker: dict[str, str]) -> Path:
    (root / "private" / "tests").mkdir(parents=True)
    (root / "private" / "checker").mkdir()
    (root / "task.yaml").write_text(task)
    (root / "statement.md").write_text("Find the hidden number.\n")
    for name, (n, k, secret) in tests.items():
        (root / "private" / "tests" / f"{name}.in").write_text(f"{n} {k}\n")
        (root / "private" / "tests" / f"{name}.ans").write_text(f"{secret}\n")
    for name, text in checker.items():
        (root / "private" / "checker" / name).write_text(text)
    return root


def _judge(tmp_path_factory, name: str, task: str, tests: dict, checker: dict[str, str]) -> Judge:
    source = _write_problem(tmp_path_factory.mktemp("src") / name, task, tests, checker)
    problem = load(source)[0]
    env = tmp_path_factory.mktemp("env") / name
    write_env(problem, env)
    return Judge(env, problem.spec)


@pytest.fixture(scope="module")
def guess(tmp_path_factory):
    return _judge(tmp_path_factory, "guess", GUESS_TASK, GUESS_TESTS, {"interactor.py": KATTIS_INTERACTOR})


@pytest.fixture(scope="module")
def guess_box(guess):
    box = guess.open_box()
    yield box
    box.stop()


def _hidden(result) -> list[dict]:
    return [t for t in result.details["tests"] if not t["sample"]]


KATTIS_SUBMISSIONS = {
    "AC-binary-search": ("python3", PY_BINARY_SEARCH),
    "AC-cpp": (
        "cpp17",
        '#include <cstdio>\nint main(){long long n,k;scanf("%lld %lld",&n,&k);long long lo=1,hi=n,m;char r[4];'
        'for(;;){m=(lo+hi)/2;printf("? %lld\\n",m);fflush(stdout);scanf("%3s",r);if(r[0]==\'=\')break;'
        "if(r[0]=='<')hi=m-1;else lo=m+1;}printf(\"! %lld\\n\",m);fflush(stdout);}\n",
    ),
    "WA-wrong-guess": ("python3", "n, k = map(int, input().split())\nprint('!', n + 1, flush=True)\n"),
    # A linear scan: over the query budget on every hidden test.
    "WA-too-many-queries": (
        "python3",
        (
            "n, k = map(int, input().split())\n"
            "for x in range(1, n + 1):\n"
            "    print('?', x, flush=True)\n"
            "    if input() == '=':\n"
            "        break\n"
            "print('!', x, flush=True)\n"
        ),
    ),
    # Wrong, then crashes on the end of file the interactor's hang-up leaves: still WA (it rejected
    # first), though the interactor exits after the crash (the runner holds the pipes until it has
    # seen the interactor end, so the program cannot see the hang-up first).
    "WA-then-crash": ("python3", "n, k = map(int, input().split())\nprint('!', n + 1, flush=True)\ninput()\n"),
    "TLE-spinning": ("python3", "input()\nwhile True:\n    pass\n"),
    "TLE-sleeping": ("python3", "import time\ninput()\ntime.sleep(60)\n"),
    "RE-crash": ("python3", "input()\nraise SystemExit(3)\n"),
    # Finds the number, then crashes: the interactor accepted, the program failed: RE.
    "RE-after-answer": ("python3", PY_BINARY_SEARCH + "import os\nos.kill(os.getpid(), 11)\n"),
    "MLE": ("python3", "input()\nx = bytearray(200 << 20)\nprint('!', len(x), flush=True)\n"),
    "OLE-stderr": ("python3", "import sys\ninput()\nwhile True:\n    sys.stderr.write('x' * 65536)\n"),
}


@pytest.mark.docker
@pytest.mark.parametrize("name", list(KATTIS_SUBMISSIONS))
def test_kattis_protocol_verdicts(guess, guess_box, name):
    language, code = KATTIS_SUBMISSIONS[name]
    result = guess.grade(code, language, box=guess_box)
    expected = name.split("-")[0]
    hidden = _hidden(result)
    assert result.infra_error is None
    assert {t["verdict"] for t in hidden} == {expected}, hidden
    assert result.held_out_score == (1.0 if expected == "AC" else 0.0)
    if expected == "AC":
        assert all(t["time_s"] is not None and t["memory_kb"] > 0 for t in hidden)
    if name == "TLE-spinning":
        assert hidden[0]["signal"] == 24 or hidden[0]["time_s"] > 1.0
    if name == "RE-after-answer":
        assert hidden[0]["signal"] == 11
    if name == "WA-then-crash":  # it did crash (EOFError), after the interactor's rejection
        assert all(t["exit_code"] == 1 for t in hidden)


@pytest.mark.docker
def test_sample_feedback_shows_the_interactor_message_hidden_ones_do_not(guess, guess_box):
    result = guess.grade("n, k = map(int, input().split())\nprint('!', 424242, flush=True)\n", "python3", box=guess_box)
    sample = next(t for t in result.details["tests"] if t["sample"])
    assert sample["verdict"] == "WA" and "wrong guess 424242" in sample["message"]
    assert all(t["message"] == "" for t in _hidden(result))
    assert "123456789" not in result.feedback  # a hidden secret never reaches the feedback


# -- output that crashes the interactor ------------------------------------------------------------
# The guess interactor checks `isdigit()`, then calls int(): "²" passes the check and int() refuses
# it, and so does a 5,000-digit number (Python's limit on int() of a string is 4,300 digits). The
# interactor then dies with a traceback on every test: that is the program's wrong answer, never a
# judge error that would end the rollout as an infrastructure failure (and again on a re-run).
CRASHING_LINES = {"5000-digit-number": "? " + "9" * 5000, "superscript-two": "? \u00b2"}


@pytest.mark.docker
@pytest.mark.parametrize("name", list(CRASHING_LINES))
def test_output_that_crashes_the_interactor_is_the_programs_wrong_answer(guess, guess_box, name):
    code = f"import sys\ninput()\nprint({CRASHING_LINES[name]!r}, flush=True)\nsys.stdin.read()\n"
    result = guess.grade(code, "python3", box=guess_box)
    assert result.infra_error is None, result.infra_error
    assert {t["verdict"] for t in result.details["tests"]} == {"WA"}, result.details["tests"]
    assert result.held_out_score == 0.0 and result.public_score == 0.0
    hidden = _hidden(result)
    assert all(t["message"].startswith(INTERACTOR_CRASHED) for t in hidden), hidden
    # A hidden test's message is our own words: not the interactor's traceback, which may quote its source or data.
    assert not any("Traceback" in t["message"] or "int(" in t["message"] for t in hidden)
    assert "123456789" not in str(result.model_dump())  # a hidden secret appears nowhere in the result
    sample = next(t for t in result.details["tests"] if t["sample"])
    assert "ValueError" in sample["message"]  # a sample, public, shows what the interactor choked on


# -- the verdict rules, without Docker -----------------------------------------------------------
def _outcome(
    first, program_status="ok", code=0, signal=None, ia_exit=42, ia_signal=None, ia_output="", cpu=0.1, memory_kb=1000
):
    program = ExecResult(
        status=program_status,
        exit_code=code,
        stdout="",
        stderr="",
        duration_s=0.2,
        cpu_s=cpu,
        memory_kb=memory_kb,
        signal=signal,
    )
    return InteractResult(
        program=program, interactor_exit=ia_exit, interactor_signal=ia_signal, interactor_output=ia_output, first=first
    )


def _verdict(r: InteractResult, check: Check, protocol="kattis") -> str:
    from arex.grading.verdicts import Limits, program_failure

    decided = decide(
        protocol, r, check, program_failure(r.program, Limits(time_s=1.0, memory_mb=64, output_mb=1, wall_s=3.0))
    )
    return decided.verdict if isinstance(decided, Failure) else ("AC" if decided.accepted else "WA")


def test_verdict_rules():
    ok, wrong, broken = (
        Check(True, 1.0, 1.0),
        Check(False, 0.0, 0.0, "wrong"),
        Check(False, 0.0, 0.0, "exit 1", judge_error=True),
    )
    # Rejected first: WA whatever the program did after; the program crashed first: RE.
    assert _verdict(_outcome("interactor", "error", 1, ia_exit=43), wrong) == "WA"
    assert _verdict(_outcome("program", "error", 1, ia_exit=43), wrong) == "RE"
    # Accepted, but the program crashed or ran over its CPU time: its failure.
    assert _verdict(_outcome("program", "error", 139, signal=11), ok) == "RE"
    assert _verdict(_outcome("program", cpu=1.5), ok) == "TLE"
    assert _verdict(_outcome("program"), ok) == "AC"
    # Accepted and hung up, then the program wrote into the closed pipe: not a crash. Any other
    # death after an acceptance still is.
    assert _verdict(_outcome("interactor", "error", 141, signal=13), ok) == "AC"
    assert _verdict(_outcome("interactor", "error", 139, signal=11), ok) == "RE"
    assert _verdict(_outcome("program", "error", 141, signal=13), ok) == "RE"
    # Over the memory limit is MLE even when it answered wrongly first; spinning after a rejection is WA.
    assert _verdict(_outcome("interactor", ia_exit=43, memory_kb=200_000), wrong) == "MLE"
    assert _verdict(_outcome("interactor", "error", 152, signal=24, ia_exit=43, cpu=2.0), wrong) == "WA"
    # The interactor died of the program hanging up (SIGPIPE, BrokenPipeError), or ran out of time
    # beside it: the program's failure, never a judge error.
    assert _verdict(_outcome("interactor", ia_exit=141, ia_signal=13), broken) == "WA"
    assert _verdict(_outcome("interactor", ia_exit=1, ia_output="BrokenPipeError: [Errno 32]"), broken) == "WA"
    assert _verdict(_outcome(None, "timeout", 124, ia_exit=137), broken) == "TLE"
    assert _verdict(_outcome("program", ia_exit=1), broken) == "WA"  # it exited before the interactor was done
    # The interactor crashing (a traceback, a signal, testlib's FAIL) while the program talks: the
    # program's output made it fail, a wrong answer (the build showed honest output does not).
    assert _verdict(_outcome("interactor", ia_exit=1, ia_output="Traceback: ZeroDivisionError"), broken) == "WA"
    assert _verdict(_outcome("interactor", ia_exit=139, ia_signal=11), broken) == "WA"
    fail = Check(False, 0.0, 0.0, "FAIL", judge_error=True)
    assert _verdict(_outcome("interactor", ia_exit=3), fail, "testlib") == "WA"
    assert _verdict(_outcome("program", ia_exit=3), fail, "testlib") == "WA"
    assert _verdict(_outcome("interactor", ia_exit=1, memory_kb=200_000), broken) == "MLE"  # as after a rejection
    # Only an interactor that never started (staging failed, cannot execute, not found) is a judge error.
    for code in (125, 126, 127):
        stage_failed = _outcome("interactor", ia_exit=code, ia_output="arex: staging the interactor files failed")
        assert _verdict(stage_failed, broken) == "JE"


# -- attacks on the interactor and its data --------------------------------------------------------
ATTACK_READ = r"""
import os, re, sys
n, k = map(int, input().split())
me, paths, saw, leaked = os.getpid(), set(), [], []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
    try:  # an interactor's command line names its files
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        paths.update(a.decode() for a in args if a.startswith(b"/.arex-judge"))
        saw += [a.decode() for a in args if b"answer" in a]
    except OSError:
        pass
    for sub in ("environ", "mem", "cwd", "root/.arex-judge/run/answer", "fd/0", "fd/1", "fd/3", "fd/4"):
        paths.add(f"/proc/{pid}/{sub}")
for top in ("/.arex-judge", "/tmp", "/dev/shm", "/home", "/judge"):
    for root, dirs, files in os.walk(top):
        paths.update(os.path.join(root, f) for f in files)
paths.update(["/.arex-judge/run/answer", "/.arex-judge/run/input", "/.arex-judge/interactor"])
candidates = []
for path in sorted(paths):
    try:
        data = " ".join(os.listdir(path)).encode() if os.path.isdir(path) else open(path, "rb").read(1 << 16)
    except OSError:
        continue
    leaked.append(path)
    candidates += [int(x) for x in re.findall(rb"\d+", data) if 1 <= int(x) <= n]
print("saw:", sorted(set(saw))[:1], "LEAKED:" if leaked else "nothing readable", leaked[:5], file=sys.stderr)
for c in list(dict.fromkeys(candidates))[:k]:  # only what leaked can find the number
    print("?", c, flush=True)
    if input() == "=":
        print("!", c, flush=True)
        break
else:
    print("! 1", flush=True)
"""

ATTACK_SIGNAL = r"""
import ctypes, os, signal, sys
n, k = map(int, input().split())
libc = ctypes.CDLL(None, use_errno=True)
others, won = [], []
for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        uid = int(next(l for l in open(f"/proc/{pid}/status") if l.startswith("Uid:")).split()[1])
    except (OSError, StopIteration):
        continue
    if uid not in (0, os.getuid()):
        others.append(pid)
for pid in others:
    for sig in (0, signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
            won.append(f"kill {pid} {sig}")
        except OSError:
            pass
    if libc.ptrace(ctypes.c_long(16), ctypes.c_int(pid), None, None) == 0:  # PTRACE_ATTACH
        won.append(f"ptrace {pid}")
print("interactors:", len(others), "won:", won, file=sys.stderr)
if not others or won:
    print("! 0", flush=True)  # wrong on purpose: accepted only if the interactor was there and out of reach
else:
""" + textwrap.indent(PY_BINARY_SEARCH.split("\n", 3)[3], "    ")

ATTACK_FAKE_VERDICT = r"""
import base64, os, sys
n, k = map(int, input().split())
for d in ("/.arex-judge/run/feedback", "/.arex-judge", "/tmp/feedback", "/tmp", "/workspace/run"):
    for name, text in (("judgemessage.txt", "accepted"), ("score.txt", "1.0")):
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        except OSError:
            pass
print("@@arex-score@@1.0\n@@arex-message@@accepted\nRatio: 1.0000\npoints 1.0", file=sys.stderr)
print("judgemessage.txt", base64.b64encode(b"accepted").decode(), file=sys.stderr)
print("score.txt", base64.b64encode(b"1.0").decode(), file=sys.stderr)
print("! 0", flush=True)
try:
    input()
except EOFError:
    os._exit(42)  # the Kattis "accepted" exit code, from the wrong process
"""

ATTACK_LEFTOVER = r"""
import os, sys, time
n, k = map(int, input().split())
alive = False
try:  # a daemon of the previous test still running?
    os.kill(int(open("/tmp/arex-daemon").read()), 0)
    alive = True
except (OSError, ValueError):
    pass
program = os.getpid()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # detached: no parent link to the program, its own session
        with open("/tmp/arex-daemon", "w") as f:
            f.write(str(os.getpid()))
        end = time.time() + 60
        while time.time() < end:  # answer wrongly in any later program's dialogue
            for p in os.listdir("/proc"):
                if p.isdigit() and int(p) not in (program, os.getpid()):
                    try:
                        with open(f"/proc/{p}/fd/1", "w") as out:
                            out.write("! 0\n")
                    except OSError:
                        pass
            time.sleep(0.005)
    os._exit(0)
os.wait()
if alive:
    print("! 0", flush=True)
else:
""" + textwrap.indent(PY_BINARY_SEARCH.split("\n", 3)[3], "    ")

NO_PROCESS_LEFT = (
    "import os\n"
    "print(sorted(os.stat(f'/proc/{p}').st_uid for p in os.listdir('/proc')"
    " if p.isdigit() and int(p) != os.getpid() and os.stat(f'/proc/{p}').st_uid in (1000, 1001)))"
)


@pytest.mark.docker
def test_attack_reading_the_test_data_fails(guess, guess_box):
    result = guess.grade(ATTACK_READ, "python3", box=guess_box)
    assert result.infra_error is None and result.held_out_score == 0.0 and result.public_score == 0.0
    assert {t["verdict"] for t in result.details["tests"]} == {"WA"}
    sample = next(t for t in result.details["tests"] if t["sample"])
    assert "/.arex-judge/run/answer" in sample["message"]  # it found where the answer is...
    assert "nothing readable" in sample["message"] and "LEAKED" not in sample["message"]  # ...and could not open it


@pytest.mark.docker
def test_attack_signalling_or_tracing_the_interactor_fails(guess, guess_box):
    result = guess.grade(ATTACK_SIGNAL, "python3", box=guess_box)
    sample = next(t for t in result.details["tests"] if t["sample"])
    assert "interactors: 1 won: []" in sample["message"]  # there was one, and nothing reached it
    assert {t["verdict"] for t in result.details["tests"]} == {"AC"} and result.held_out_score == 1.0


@pytest.mark.docker
def test_attack_forging_the_verdict_fails(guess, guess_box):
    result = guess.grade(ATTACK_FAKE_VERDICT, "python3", box=guess_box)
    assert result.infra_error is None and result.held_out_score == 0.0
    assert {t["verdict"] for t in result.details["tests"]} == {"WA"}
    assert guess_box.exec(["ls", "-a", "/tmp"]).stdout.count("feedback") == 1  # wrote its own folder, not the judge's


@pytest.mark.docker
def test_attack_leaving_a_process_for_the_next_test_fails(guess, guess_box):
    result = guess.grade(ATTACK_LEFTOVER, "python3", box=guess_box)
    assert {t["verdict"] for t in result.details["tests"]} == {"AC"}, result.details["tests"]
    assert guess_box.exec(["python3", "-c", NO_PROCESS_LEFT]).stdout.strip() == "[]"  # neither side outlives a grading


# -- the testlib-protocol problem: a C++ interactor on a header of our own ------------------------
JUDGELIB_H = r"""
// judgelib.h: the few interactor helpers the tests need, written for arex's tests (the testlib
// calling convention: interactor <input> <output> <answer>; exit 0 accepted, 1 wrong answer,
// 3 judge failure, 7 points; the verdict message on stderr).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

enum Outcome { ACCEPTED = 0, WRONG = 1, FAILURE = 3, POINTS = 7 };

[[noreturn]] inline void quit(Outcome outcome, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    exit(outcome);
}

struct Files {
    FILE *input, *output, *answer;
};

inline Files open_files(int argc, char **argv) {
    if (argc < 4) quit(FAILURE, "usage: %s input output answer", argv[0]);
    Files f{fopen(argv[1], "r"), fopen(argv[2], "w"), fopen(argv[3], "r")};
    if (!f.input || !f.output || !f.answer) quit(FAILURE, "cannot open the test files");
    return f;
}

inline long long read_number(FILE *from, const char *what) {
    long long x;
    if (fscanf(from, "%lld", &x) != 1) quit(from == stdin ? WRONG : FAILURE, "expected a number: %s", what);
    return x;
}
"""

TESTLIB_INTERACTOR = r"""
#include "judgelib.h"
#include <cmath>
#include <cstring>

int main(int argc, char **argv) {
    Files f = open_files(argc, argv);
    long long n = read_number(f.input, "n"), k = read_number(f.input, "k"), secret = read_number(f.answer, "secret");
    printf("%lld %lld\n", n, k);
    fflush(stdout);
    long long best = (long long)std::floor(std::log2((double)n)) + 1;  // what a binary search needs
    for (long long queries = 0;; queries++) {
        char op[2];
        if (scanf("%1s", op) != 1) quit(WRONG, "unexpected end of the dialogue after %lld queries", queries);
        long long x = read_number(stdin, "a guess");
        if (op[0] == '!') {
            if (x != secret) quit(WRONG, "wrong guess %lld", x);
            fprintf(f.output, "%lld\n", queries);
            double ratio = queries <= best ? 1.0 : (double)best / queries;
            if (ratio >= 1.0) quit(ACCEPTED, "found in %lld queries. Ratio: 1.0000", queries);
            quit(POINTS, "points %.4f found in %lld queries. Ratio: %.4f", ratio, queries, ratio);
        }
        if (op[0] != '?') quit(WRONG, "unknown operation %s", op);
        if (queries + 1 > k) quit(WRONG, "more than %lld queries", k);
        printf("%s\n", secret < x ? "<" : secret > x ? ">" : "=");
        fflush(stdout);
    }
}
"""

SCORED_TASK = """
id: guess-scored
title: Guess the number, scored
time_limit_s: 1.0
memory_mb: 64
output_limit_mb: 1
checker: {kind: interactive, protocol: testlib, source: checker/interactor.cpp}
scoring: ratio
"""
SCORED_TESTS = {"sample-1": (100, 400, 37), "main-1": (1000, 4000, 517), "main-2": (10**6, 4 * 10**6, 999_999)}
# Splits at a quarter, not the middle: more queries than a binary search, a partial score.
PY_QUARTER_SEARCH = PY_BINARY_SEARCH.replace("mid = (lo + hi) // 2", "mid = lo + (hi - lo) // 4")


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    return _judge(
        tmp_path_factory,
        "guess-scored",
        SCORED_TASK,
        SCORED_TESTS,
        {"interactor.cpp": TESTLIB_INTERACTOR, "judgelib.h": JUDGELIB_H},
    )


@pytest.fixture(scope="module")
def scored_box(scored):
    box = scored.open_box()
    yield box
    box.stop()


TESTLIB_SUBMISSIONS = {
    "full": ("python3", PY_BINARY_SEARCH, {"AC"}),
    "partial": ("python3", PY_QUARTER_SEARCH, {"AC"}),
    "wrong": ("python3", "n, k = map(int, input().split())\nprint('!', n + 1, flush=True)\n", {"WA"}),
    "crash": ("python3", "input()\nimport os\nos.abort()\n", {"RE"}),
    "spin": ("python3", "input()\nwhile True:\n    pass\n", {"TLE"}),
    # Hangs up at once: the interactor meets a closed pipe or an empty dialogue; never a judge error.
    "hang-up": ("python3", "import os\nos.close(0)\nos.close(1)\n", {"WA"}),
    "fake-ratio": ("python3", ATTACK_FAKE_VERDICT, {"WA"}),
}


@pytest.mark.docker
@pytest.mark.parametrize("name", list(TESTLIB_SUBMISSIONS))
def test_testlib_protocol_verdicts_and_ratios(scored, scored_box, name):
    language, code, verdicts = TESTLIB_SUBMISSIONS[name]
    result = scored.grade(code, language, box=scored_box)
    assert result.infra_error is None
    assert {t["verdict"] for t in _hidden(result)} == verdicts, result.details["tests"]
    if name == "full":
        assert result.held_out_score == 1.0
    elif name == "partial":
        assert 0.2 < result.held_out_score < 1.0 and all(0 < t["ratio"] < 1 for t in _hidden(result))
    else:
        assert result.held_out_score == 0.0


@pytest.mark.docker
def test_an_interactor_that_talks_from_a_thread_works(tmp_path_factory):
    # Real validators start threads (one writes the test while the main thread reads the answer).
    # glibc sizes a thread's stack by RLIMIT_STACK: at the interactor's address-space size, no
    # thread could start and every test was a judge error.
    threaded = KATTIS_INTERACTOR.replace(
        "print(n, k, flush=True)\n",
        "import threading\nt = threading.Thread(target=lambda: print(n, k, flush=True))\nt.start()\nt.join()\n",
    )
    assert threaded != KATTIS_INTERACTOR
    judge = _judge(tmp_path_factory, "guess-threaded", GUESS_TASK, GUESS_TESTS, {"interactor.py": threaded})
    result = judge.grade(PY_BINARY_SEARCH, "python3")
    assert result.infra_error is None, result.infra_error
    assert {t["verdict"] for t in result.details["tests"]} == {"AC"}
