"""The program's misbehaviour is the program's verdict (issue 26): an interactor that cannot parse
what a program wrote, and a prediction too large for a metric's arithmetic, are the submission's
failure, never an infrastructure failure that ends the rollout (and again on every re-run).

- The build gate: each interactor is fed malformed and oversized output by hostile programs, and
  one that crashes on it is rejected, naming the interactor and the input (the grading side, a
  crash taken as the program's WA, is tested in tests/grading/test_interactive.py).
- ML metrics: finite predictions of 1e200 and beyond through the path a rollout grades with.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import yaml
from repo_paths import TESTS

from arex.envs.build import build_envs, write_env
from arex.envs.judge_build import HOSTILE_GATE, _hostile_output_gate
from arex.envs.judge_sources import load
from arex.envs.report import GateLog
from arex.envs.runtime import load_env
from arex.grading import ml
from arex.grading.judge import Judge
from arex.grading.ml import NUMERIC, MLGrader
from arex.record.snapshots import SnapshotStore
from arex.sandbox import SandboxConfig, make_sandbox
from arex.specs import MLSpec

CORPUS = TESTS / "corpus"


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
    "eof": (
        ("    line = sys.stdin.readline()\n    if not line:\n        verdict(False)\n", "    line = input()\n"),
        "an end of file at once",
    ),
    # parts[0] of an empty line is an IndexError
    "empty-line": (("if len(parts) != 2 or", "if parts[0] == '' or len(parts) != 2 or"), "an empty line"),
    # math.isqrt of a negative number is a ValueError
    "negative": (
        ("    x = number(parts[1])\n", "    x = number(parts[1])\n    math.isqrt(x)\n"),
        "a line of '?' and a negative number",
    ),
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


# -- ML metrics: predictions too large for a float's arithmetic -----------------------------------
LABELS = "id,y,split\n" + "".join(f"{i},{i % 2},{'public' if i < 4 else 'private'}\n" for i in range(8))


def ml_env(root: Path, metric: str) -> Path:
    """A built ML env's folder as a rollout loads it: task.yaml, statement, private labels."""
    direction = "minimize" if metric in ("rmse", "mae", "log_loss") else "maximize"
    spec = {
        "kind": "ml",
        "id": f"big-{metric}",
        "title": "t",
        "run": "test -f submission.csv",
        "metric": {"name": metric, "direction": direction},
        "data": {"table": "data/full.csv", "target": "y"},
    }
    (root / "private").mkdir(parents=True)
    (root / "task.yaml").write_text(yaml.safe_dump(spec))
    (root / "statement.md").write_text("Predict y.\n")
    (root / "private" / "labels.csv").write_text(LABELS)
    return root


def predictions(values: list[str]) -> bytes:
    return ("id,prediction\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values))).encode()


EXTREME = {
    "1e200": ["1e200"] * 8,
    "-1e200": ["-1e200"] * 8,
    "1.7e308 and -1.7e308": ["1.7e308", "-1.7e308"] * 4,  # their squares overflow, and so do their sums
    "one huge among small": ["0.5"] * 7 + ["1e160"],
    "subnormal": ["5e-324"] * 8,
}


@pytest.mark.parametrize("metric", sorted(NUMERIC))
@pytest.mark.parametrize("case", list(EXTREME))
def test_any_finite_prediction_gets_a_score_or_an_invalid_verdict(tmp_path, metric, case):
    env = ml_env(tmp_path / "env", metric)
    grader = MLGrader(env, MLSpec.model_validate(yaml.safe_load((env / "task.yaml").read_text())))
    result = grader.score(predictions(EXTREME[case]))
    assert math.isfinite(result.held_out_score) and math.isfinite(result.public_score)
    assert result.feedback.startswith(("Submission valid", "Submission rejected")), result.feedback
    if "invalid" in result.details:  # the worst value, and why, in words that quote no label
        assert result.held_out_raw == grader.spec.metric.worst and "not a finite number" in result.details["invalid"]


def test_rmse_of_huge_predictions_is_their_true_size():
    # (1e200)² overflows a float; the root mean square does not, and is what the agent earned.
    assert ml.rmse([0, 1], [1e200, 1e200]) == pytest.approx(1e200)
    assert ml.rmse([0, 0], [3e200, 4e200]) == pytest.approx(math.sqrt(12.5) * 1e200)
    assert ml.r2([0, 1], [1e200, 1e200]) == -math.inf  # below any float: the grader calls it invalid


def test_any_exception_inside_a_metric_is_an_invalid_submission(tmp_path, monkeypatch):
    env = ml_env(tmp_path / "env", "rmse")

    def broken(y, p):
        raise ZeroDivisionError("label 1 divided by zero")

    monkeypatch.setitem(ml.METRICS, "rmse", broken)
    grader = MLGrader(env, MLSpec.model_validate(yaml.safe_load((env / "task.yaml").read_text())))
    result = grader.score(predictions(["0.5"] * 8))
    assert result.details["invalid"] == "rmse cannot be computed on these predictions (ZeroDivisionError)"
    assert "label 1" not in result.feedback  # the exception's own text may quote a label: never shown
    assert result.held_out_raw == 1e6 and result.infra_error is None


@pytest.fixture(scope="module")
def agent_box():
    box = make_sandbox(SandboxConfig(), "ml-big-predictions")
    box.start()
    yield box
    box.stop()


# Through Env.grade_round, as a rollout grades a round: the task's command runs in the agent's
# sandbox, the workspace is archived, and the prediction file read from the archive is scored.
ROUND_CASES = {
    ("rmse", "1e200"): "Submission valid (8 rows). Public rmse: ",
    ("r2", "1e200"): "Submission rejected: r2 of these predictions is -inf, not a finite number",
    ("mae", "1e200"): "Submission valid (8 rows). Public mae: ",
    ("rmse", "nan"): "Submission rejected: submission.csv line 2: prediction 'nan' is not finite",
    ("r2", "inf"): "Submission rejected: submission.csv line 2: prediction 'inf' is not finite",
}


@pytest.mark.docker
@pytest.mark.parametrize("metric, value", list(ROUND_CASES))
def test_a_round_with_huge_predictions_is_graded_never_an_infra_failure(tmp_path, agent_box, metric, value):
    env = load_env(ml_env(tmp_path / "env", metric))
    agent_box.write_file("submission.csv", predictions([value] * 8))
    result, sha, text = env.grade_round(agent_box, env.open_grading(), SnapshotStore(tmp_path / "snapshots"))
    assert result.feedback.startswith(ROUND_CASES[metric, value]), result.feedback
    assert result.infra_error is None and math.isfinite(result.held_out_score)
    assert sha is not None and text.startswith("id,prediction\n0," + value)
    if value == "1e200" and metric == "rmse":
        assert result.details["private"] == pytest.approx(1e200)  # a score: the true (awful) error


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
