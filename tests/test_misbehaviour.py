"""The program's misbehaviour is the program's verdict (issue 26): an interactor that cannot parse
what a program wrote is the submission's
failure, never an infrastructure failure that ends the rollout (and again on every re-run).

- The build gate: each interactor is fed malformed and oversized output by hostile programs, and
  one that crashes on it is rejected, naming the interactor and the input (the grading side, a
  crash taken as the program's WA, is tested in tests/test_interactive.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from arex.envs.build import build_envs, write_env
from arex.envs.judge_build import HOSTILE_GATE, _hostile_output_gate
from arex.envs.judge_sources import load
from arex.envs.report import GateLog
from arex.grading.judge import Judge

CORPUS = Path(__file__).parent / "corpus"


# -- the build gate: an interactor fed hostile output ----------------------------------------------
# The corpus's Kattis guesser with its token check as a parameter: the naive check is the one it
# had, and the one Python interactors are written with (isdigit(), then int()).
GUESSER = "output_validators/guesser/guesser.py"
ROBUST_CHECK = "(line[1].isascii() and line[1].isdigit() and len(line[1]) < 19)"
NAIVE_CHECK = "line[1].isdigit()"


def kattis_package(root: Path, check: str) -> Path:
    shutil.copytree(CORPUS / "kattis-interactive", root)
    text = (root / GUESSER).read_text()
    assert ROBUST_CHECK in text
    (root / GUESSER).write_text(text.replace(ROBUST_CHECK, check))
    return root


@pytest.mark.docker
def test_an_interactor_that_crashes_on_malformed_output_is_rejected_and_a_robust_one_accepted(tmp_path):
    naive = kattis_package(tmp_path / "naive" / "higher-or-lower", NAIVE_CHECK)
    robust = kattis_package(tmp_path / "robust" / "higher-or-lower", ROBUST_CHECK)
    [rejected] = build_envs([naive], tmp_path / "envs-naive")
    assert rejected.status == "rejected", rejected.reason
    # One sentence: the gate, the interactor, how it died (a sample shows its error), and the input.
    crashed = f"gate '{HOSTILE_GATE}' failed: interactor checker/guesser.py crashed (exit code 1: ValueError"
    assert rejected.reason.startswith(crashed), rejected.reason
    said = "when the program wrote a line of '?' and '\u00b2' (a digit to str.isdigit(), not to int())"
    assert said in rejected.reason, rejected.reason
    assert "Kattis exit 43" in rejected.reason
    [accepted] = build_envs([robust], tmp_path / "envs-robust")
    assert accepted.status == "accepted", accepted.reason
    gate = next(g for g in accepted.gates if g.name == HOSTILE_GATE)
    assert gate.passed, gate
    assert gate.detail.startswith("22 programs writing malformed or oversized output each got a verdict"), gate


# A Kattis interactor that rejects malformed output properly; each variant breaks it in one place.
INTERACTOR = """
import math
import sys

n = int(open(sys.argv[1]).read().split()[0])
secret = int(open(sys.argv[2]).read())


def verdict(accepted):
    sys.exit(42 if accepted else 43)


def number(word):
    digits = word[1:] if word.startswith("-") else word
    if not (digits.isascii() and digits.isdigit() and len(digits) < 19):
        verdict(False)
    return int(word)


print(n, flush=True)
while True:
    line = sys.stdin.readline()
    if not line:
        verdict(False)
    parts = line.split()
    if len(parts) != 2 or parts[0] not in ("?", "!"):
        verdict(False)
    x = number(parts[1])
    if parts[0] == "!":
        verdict(x == secret)
    print("<" if secret < x else ">" if secret > x else "=", flush=True)
"""
# name → (what changes: old, new), and what the gate must name as the input that crashed it.
BREAKS = {
    # input() raises EOFError at the end of file
    "eof": (("    line = sys.stdin.readline()\n    if not line:\n        verdict(False)\n", "    line = input()\n"),
            "an end of file at once"),
    # parts[0] of an empty line is an IndexError
    "empty-line": (("if len(parts) != 2 or", "if parts[0] == '' or len(parts) != 2 or"), "an empty line"),
    # math.isqrt of a negative number is a ValueError
    "negative": (("    x = number(parts[1])\n", "    x = number(parts[1])\n    math.isqrt(x)\n"),
                 "a line of '?' and a negative number"),
    # strict UTF-8 decoding of bytes that are not UTF-8 is a UnicodeDecodeError
    "binary": (("sys.stdin.readline()", "sys.stdin.buffer.readline().decode()"), "binary bytes (every byte value)"),
}
# A C++ interactor reading a word into a fixed buffer: a long token overruns it.
CPP_INTERACTOR = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>

__attribute__((noinline)) static bool asks() {
    char word[64];
    if (scanf("%s", word) != 1) return false;
    return strcmp(word, "?") == 0;
}

int main(int argc, char **argv) {
    FILE *input = fopen(argv[1], "r");
    long long n;
    if (!input || fscanf(input, "%lld", &n) != 1) return 1;
    printf("%lld\n", n);
    fflush(stdout);
    exit(asks() ? 43 : 43);
}
"""
TASK = """
id: {name}
title: Guess
time_limit_s: 1.0
memory_mb: 64
output_limit_mb: 1
checker: {{kind: interactive, protocol: kattis, source: checker/{source}}}
scoring: fraction
"""


def interactor_judge(root: Path, name: str, source: str, code: str) -> Judge:
    (root / "src" / "private" / "tests").mkdir(parents=True)
    (root / "src" / "private" / "checker").mkdir()
    (root / "src" / "task.yaml").write_text(TASK.format(name=name, source=source))
    (root / "src" / "statement.md").write_text("Find the hidden number.\n")
    for test, (n, secret) in {"sample-1": (10, 7), "main-1": (1000, 517)}.items():
        (root / "src" / "private" / "tests" / f"{test}.in").write_text(f"{n}\n")
        (root / "src" / "private" / "tests" / f"{test}.ans").write_text(f"{secret}\n")
    (root / "src" / "private" / "checker" / source).write_text(code)
    problem = load(root / "src")[0]
    write_env(problem, root / "env")
    return Judge(root / "env", problem.spec)


@pytest.mark.docker
@pytest.mark.parametrize("name", [*BREAKS, "cpp-fixed-buffer"])
def test_the_gate_names_the_input_that_crashed_the_interactor(tmp_path, name):
    if name == "cpp-fixed-buffer":
        judge, expected = interactor_judge(tmp_path, name, "interactor.cpp", CPP_INTERACTOR), "a 5,000-digit number"
    else:
        (old, new), expected = BREAKS[name]
        assert old in INTERACTOR
        judge = interactor_judge(tmp_path, name, "interactor.py", INTERACTOR.replace(old, new, 1))
    log = GateLog()
    assert _hostile_output_gate(log, judge) is False
    [gate] = log.gates
    assert gate.name == HOSTILE_GATE and not gate.passed
    source = judge.spec.checker.source
    assert gate.detail.startswith(f"interactor {source} crashed ("), gate.detail
    assert f"on test sample-1 when the program wrote {expected}" in gate.detail, gate.detail
    if name == "cpp-fixed-buffer":  # the overrun ends it by a signal (SIGSEGV, or SIGABRT from a stack guard)
        assert gate.detail.startswith(f"interactor {source} crashed (signal "), gate.detail


def test_an_interactive_env_built_before_the_gate_is_built_again(monkeypatch):
    # Grading takes an interactor's crash as the program's WA only because the build rejected an
    # interactor that crashes: one accepted before the gate existed has its build key changed.
    from arex.envs import judge_build

    def keys():
        return {name: judge_build.judge_jobs(CORPUS / name)[0][2] for name in ("kattis-interactive", "kattis-2023")}

    before = keys()
    monkeypatch.setattr(judge_build, "INTERACTIVE_GATES", "hostile-output-0")
    after = keys()
    assert after["kattis-interactive"] != before["kattis-interactive"]
    assert after["kattis-2023"] == before["kattis-2023"]  # other problems keep their builds
