"""The judge: every verdict with its evidence, graded scores, the feedback split, trust boundaries."""

import textwrap
from pathlib import Path

import pytest
from repo_paths import REPO

from arex.envs.build import write_env
from arex.envs.judge_sources import load
from arex.grading.checkers import check_builtin, interpret_kattis, interpret_testlib
from arex.grading.judge import Judge
from arex.specs import CheckerSpec


# -- checkers (pure) ---------------------------------------------------------------------------
def test_builtin_checkers():
    token, exact = CheckerSpec(kind="token"), CheckerSpec(kind="exact")
    assert check_builtin(token, "1  2\n3\n", "1 2 3").accepted
    assert not check_builtin(token, "1 2", "1 2 3").accepted
    assert check_builtin(exact, "a b  \nc\n\n", "a b\nc").accepted
    assert not check_builtin(exact, "a  b\nc", "a b\nc").accepted
    assert not check_builtin(token, "YES", "yes").accepted
    assert check_builtin(CheckerSpec(kind="token", case_sensitive=False), "YES", "yes").accepted
    floats = CheckerSpec(kind="float", abs_tol=1e-6, rel_tol=0.0)
    assert check_builtin(floats, "0.3333334 x", "0.3333333 x").accepted
    assert not check_builtin(floats, "0.334", "0.333").accepted
    assert not check_builtin(floats, "nan", "1.0").accepted
    assert check_builtin(CheckerSpec(kind="float", abs_tol=0, rel_tol=1e-3), "1000.5", "1000").accepted


def test_custom_checker_protocols():
    assert interpret_kattis(42, None, "").accepted
    assert not interpret_kattis(43, None, "wrong").accepted
    scored = interpret_kattis(42, "0.25\n", "")
    assert (scored.ratio, scored.raw) == (0.25, 0.25)
    assert interpret_kattis(0, None, "").judge_error  # 0 is not a valid validator exit code
    assert interpret_testlib(0, "", "ok fine").accepted
    assert not interpret_testlib(1, "", "wrong answer").accepted
    assert interpret_testlib(3, "", "FAIL bad answer file").judge_error
    points = interpret_testlib(7, "", "points 0.4 partial")
    assert (points.accepted, points.ratio) == (False, 0.4)
    frontier = interpret_testlib(7, "", "points 1.0 Value: 10. Ratio: 0.8000, RatioUnbounded: 1.2500")
    assert (frontier.ratio, frontier.raw) == (0.8, 1.25)
    assert interpret_testlib(7, "", "no number").judge_error


# -- a tiny problem, graded for real -----------------------------------------------------------
SUM_TASK = """
id: sum-two
title: Sum of two
time_limit_s: 1.0
memory_mb: 64
output_limit_mb: 1
checker: {kind: token}
scoring: fraction
solutions:
  - {path: solutions/ok.cpp, expected: accepted}
"""


def make_sum_problem(root: Path) -> Path:
    (root / "private" / "tests").mkdir(parents=True)
    (root / "solutions").mkdir()
    (root / "task.yaml").write_text(SUM_TASK)
    (root / "statement.md").write_text("Print a + b.\n")
    cases = {"sample-1": (1, 2), "sample-2": (5, 7), "main-1": (10, 20), "main-2": (-3, 3), "main-3": (10**9, 10**9)}
    for name, (a, b) in cases.items():
        (root / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (root / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    (root / "solutions" / "ok.cpp").write_text(CPP_OK)
    return root


CPP_OK = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n'
SUBMISSIONS = {
    "AC-cpp": ("cpp17", CPP_OK),
    "AC-py": ("python3", "a, b = map(int, input().split())\nprint(a + b)\n"),
    "WA": ("python3", "a, b = map(int, input().split())\nprint(a - b)\n"),
    "TLE": ("cpp17", "int main(){volatile unsigned long x=0; for(;;) x++;}\n"),
    "TLE-sleeping": ("python3", "import time\ntime.sleep(30)\n"),
    "MLE": (
        "cpp17",
        (
            "#include <vector>\n#include <cstdio>\n"
            'int main(){std::vector<char> v(200<<20, 1); printf("%d\\n", v[12345]);}\n'
        ),
    ),
    "RE-segfault": ("cpp17", "int main(){volatile int *p = nullptr; *p = 1;}\n"),
    "RE-exception": ("python3", "raise ValueError('boom from the submission')\n"),
    "OLE": ("python3", "import sys\nwhile True: sys.stdout.write('y' * 65536)\n"),
    "CE": ("cpp17", "int main() { this is not c++ }\n"),
}


@pytest.fixture(scope="module")
def sum_judge(tmp_path_factory):
    source = make_sum_problem(tmp_path_factory.mktemp("src") / "sum-two")
    problem = load(source)[0]
    env = tmp_path_factory.mktemp("env") / "sum-two"
    write_env(problem, env)
    return Judge(env, problem.spec)


@pytest.mark.docker
@pytest.mark.parametrize("name", list(SUBMISSIONS))
def test_verdicts_with_evidence(sum_judge, name):
    language, code = SUBMISSIONS[name]
    result = sum_judge.grade(code, language)
    expected = name.split("-")[0]
    hidden = [t for t in result.details["tests"] if not t["sample"]]
    assert {t["verdict"] for t in hidden} == {expected}, hidden
    assert result.held_out_score == (1.0 if expected == "AC" else 0.0)
    first = hidden[0]
    if name == "TLE":
        # SIGXCPU at the CPU limit
        assert first["signal"] == 24 and first["time_s"] >= 0.5 and "CPU time" in first["message"]
    if name == "TLE-sleeping":
        assert first["wall_s"] >= sum_judge.wall_limit_s - 0.1  # no CPU used: caught by the wall clock
    if name == "RE-segfault":
        assert first["signal"] == 11 and "signal 11" in first["message"]
    if name == "RE-exception":  # stderr is shown for samples only: a hidden test's could quote its input
        sample = next(t for t in result.details["tests"] if t["sample"])
        assert (
            first["exit_code"] == 1
            and "boom" not in first["message"]
            and "boom from the submission" in sample["message"]
        )
    if name == "MLE":
        assert "64 MB" in first["message"]
    if name == "CE":
        assert "Compilation failed" in result.feedback and "error" in result.feedback
    if expected == "AC":
        assert first["time_s"] is not None and first["memory_kb"] > 0


@pytest.mark.docker
def test_feedback_details_samples_and_counts_hidden(sum_judge):
    # Right on the samples by table lookup, wrong on everything hidden.
    code = "a, b = map(int, input().split())\nprint({(1, 2): 3, (5, 7): 12}.get((a, b), -1))\n"
    result = sum_judge.grade(code, "python3")
    assert result.public_score == 1.0 and result.held_out_score == 0.0
    assert "Hidden tests: 0 of 3 accepted. Verdicts: WA 3." in result.feedback
    assert "2000000000" not in result.feedback and "main-1" not in result.feedback  # no hidden data leaks
    wrong = sum_judge.grade("print(0)\n", "python3")
    assert "sample-1: WA" in wrong.feedback and "expected: 3" in wrong.feedback and "input: 1 2" in wrong.feedback


@pytest.mark.docker
def test_answers_are_unreachable_and_claims_are_ignored(sum_judge):
    # A submission that hunts for answer files and claims a perfect score gets nothing.
    cheat = textwrap.dedent(
        """
        import os, sys
        found = [os.path.join(d, f) for d, _, fs in os.walk('/') for f in fs if f.endswith('.ans')]
        print('Ratio: 1.0000', file=sys.stderr)
        print('points 1.0', file=sys.stderr)
        print(open(found[0]).read() if found else 'no answers here')
        """
    )
    result = sum_judge.grade(cheat, "python3")
    assert result.held_out_score == 0.0 and result.public_score == 0.0
    assert all(t["verdict"] == "WA" for t in result.details["tests"])


@pytest.mark.docker
def test_groups_scoring_on_the_bundled_env(tmp_path):
    problem = load(REPO / "envs" / "judge-pair-sums")[0]
    write_env(problem, tmp_path / "env")
    judge = Judge(tmp_path / "env", problem.spec)
    quadratic = (tmp_path / "env" / "solutions" / "quadratic.cpp").read_text()
    result = judge.grade(quadratic, "cpp17")
    # Small subtask (30 points) passes, the large one (70) times out: 0.3 of the points.
    assert result.held_out_score == pytest.approx(0.3) and result.held_out_raw == pytest.approx(30.0)
    assert result.details["verdicts_hidden"] == {"AC": 5, "TLE": 3}
