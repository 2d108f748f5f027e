"""`arex eval frontier-cs` on a Frontier-CS algorithmic track written for this project
(tests/corpus/frontier-track: the repository's layout, ten problems with data and one without):
the scripted teacher submits known files, and the scores are checked against the benchmark's
formula computed here from the test data, independently of arex's judge."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from repo_paths import CORPUS
from typer.testing import CliRunner

from arex.cli import app
from arex.errors import UserInputError
from arex.eval import make_benchmark
from arex.eval.base import Source
from arex.eval.frontier import SHIM, case_scores, problems_folder
from arex.eval.run import prepare
from arex.specs import GradeResult
from arex.teacher.scripted import RoundScript, ScriptedServer

TRACK = CORPUS / "frontier-track"
PROBLEMS = TRACK / "algorithmic" / "problems"


def _grade(ratios: list[tuple[float, float]], infra: str | None = None) -> GradeResult:
    tests = [{"name": str(i), "sample": i == 0, "ratio": r, "raw": u} for i, (r, u) in enumerate(ratios)]
    return GradeResult(
        public_score=None, held_out_score=0.0, held_out_raw=0.0, feedback="", details={"tests": tests},
        infra_error=infra,
    )  # fmt: skip


def test_case_scores_count_every_case_the_first_included():
    # Frontier-CS averages over all of config.yaml's cases; arex's held-out score leaves the sample out.
    assert case_scores(_grade([(1.0, 1.125), (0.625, 0.625), (0.625, 0.625)]), 3) == pytest.approx(
        (100 * 2.25 / 3, 100 * 2.375 / 3)
    )
    # A case the grading did not reach (a compile error: no case at all) counts 0; a ratio over 1 is capped.
    assert case_scores(_grade([(1.0, 1.0)]), 4) == (25.0, 25.0)
    assert case_scores(_grade([]), 3) == (0.0, 0.0)
    assert case_scores(_grade([(1.7, 1.7)]), 1) == (100.0, 170.0)


def test_reward_is_the_better_of_final_and_best_graded():
    env = SimpleNamespace(spec=SimpleNamespace(tests=[1, 2]))
    bench = make_benchmark("frontier-cs")

    def end(n: int, ratios, infra=None):
        return SimpleNamespace(round=n, grade=_grade(ratios, infra))

    rounds = [end(1, [(0.5, 0.5), (0.5, 0.5)]), end(2, [(1.0, 1.2), (1.0, 1.4)]), end(3, [(0.2, 0.2), (0.0, 0.0)])]
    score = bench.score(env, rounds)
    assert (score.value, score.columns["unbounded"], score.columns["final"], score.columns["round"]) == (
        pytest.approx(100.0), pytest.approx(130.0), pytest.approx(10.0), 2,
    )  # fmt: skip
    assert bench.score(env, rounds[:1]).value == pytest.approx(50.0)
    # A round whose grading failed for the infrastructure is no graded submission; none at all scores 0.
    failed = end(4, [(1.0, 1.0), (1.0, 1.0)], infra="engine down")
    assert bench.score(env, [rounds[0], failed]).value == pytest.approx(50.0)
    assert bench.score(env, [failed]).value == 0.0 and bench.score(env, []).value == 0.0


def test_problems_as_shipped_absent_data_listed(tmp_path):
    bench = make_benchmark("frontier-cs")
    notes: list[str] = []
    assert problems_folder(TRACK) == problems_folder(TRACK / "algorithmic") == problems_folder(PROBLEMS) == PROBLEMS
    items, envs = prepare(bench, Source(TRACK, tmp_path / "envs", notify=notes.append))
    assert [i.id for i in items] == [str(k) for k in range(11)]
    assert [e.id for e in envs] == [f"frontier-{k}" for k in range(10)]
    [absent] = [i for i in items if i.env is None]
    assert absent.id == "10" and "testdata/1.in is missing" in absent.absent and "problem 10" in notes[0]
    # Every case of config.yaml is in the env, the first one (the sample the agent is shown) too.
    assert len(envs[0].spec.tests) == 3 and envs[0].spec.tests[0].sample
    assert not (tmp_path / "envs" / "frontier-0" / "solutions").exists()  # no example goes into the env
    again, _ = prepare(bench, Source(TRACK, tmp_path / "envs", only=("0", "9")))
    assert [i.id for i in again] == ["0", "9"]
    with pytest.raises(UserInputError, match="--problems: 77 not found"):
        prepare(bench, Source(TRACK, tmp_path / "envs", only=("77",)))
    with pytest.raises(UserInputError, match="is not the Frontier-CS algorithmic track"):
        prepare(bench, Source(CORPUS / "kattis-2023", tmp_path / "envs"))


def test_checker_fail_on_a_submission_is_its_zero_not_a_broken_env(tmp_path):
    # The benchmark's judge scores a case 0 whatever way its checker does not accept, FAIL included; arex's
    # judge takes a FAIL for a broken env (a training rollout ends on it). The eval's env wraps the checker.
    items, envs = prepare(make_benchmark("frontier-cs"), Source(TRACK, tmp_path / "envs", only=("9",)))
    checker = envs[0].spec.checker
    assert checker.source == f"checker/{SHIM}"
    shim = (envs[0].dir / "private" / checker.source).read_text()
    assert '#include "chk.cc"' in shim and "code == 0 || code == 7 ? code : 1" in shim
    assert (envs[0].dir / "private" / "checker" / "chk.cc").read_bytes() == (PROBLEMS / "9" / "chk.cc").read_bytes()


# -- the whole run, in Docker -------------------------------------------------------------------
def _digits(rule: str) -> str:
    """A C++ program printing n copies of the digit `rule` (an expression of n)."""
    return (
        "#include <iostream>\n#include <string>\nint main() { int n; std::cin >> n; "
        f'std::cout << std::string(n, {rule}) << "\\n"; }}\n'
    )


EXAMPLES = PROBLEMS / "0" / "examples"
ECHO_SUM = "#include <iostream>\nint main() { long long x, s = 0; while (std::cin >> x) s += x; std::cout << s; }\n"
# problem -> the file submitted in round 1 and in round 2, and the digit sum it prints for a given n.
SUBMITTED = {
    "0": [((EXAMPLES / "gpt5.cpp").read_text(), lambda n: 9 * n if n <= 3 else 5 * n),
          ((EXAMPLES / "reference.cpp").read_text(), lambda n: 8 * n)],
    "1": [(_digits("'9'"), lambda n: 9 * n), ("#include <cstdio>\nint main() { puts(\"1\"); }\n", lambda n: 1)],
    "2": [("int main( {\n", "compile error"), (_digits("'8'"), lambda n: 8 * n)],
    **{str(k): [(_digits("'5'"), lambda n: 5 * n), (_digits("'9'"), lambda n: 9 * n)] for k in range(3, 9)},
    # Round 2 prints nothing: problem 9's checker FAILs on it (exit 3), which the benchmark scores 0.
    "9": [(ECHO_SUM, "right"), ("int main() { return 0; }\n", "wrong")],
}  # fmt: skip


def _expected(problem: str, output) -> tuple[float, float]:
    """The benchmark's formula on the problem's test data: 100 x the mean over every case of the
    checker's ratio (capped at 1), and of the uncapped ratio; computed here from the data files."""
    cases = sorted((PROBLEMS / problem / "testdata").glob("*.in"), key=lambda p: int(p.stem))
    if problem == "9":
        return (100.0, 100.0) if output == "right" else (0.0, 0.0)
    if output == "compile error":  # every case 0
        return 0.0, 0.0
    ratios = []
    for case in cases:
        n, reference = int(case.read_text()), int(case.with_suffix(".ans").read_text())
        ratios.append(output(n) / reference)
    bounded = [min(r, 1.0) for r in ratios]
    return 100 * sum(bounded) / len(cases), 100 * sum(ratios) / len(cases)


class TrackScript:
    """Writes the known file for the problem in the request (from its statement's title), then submits.
    One RoundScript per problem: the server answers rollouts in parallel threads, so no state is shared."""

    def __init__(self):
        self.scripts = {problem: self._script(problem) for problem in SUBMITTED}

    @staticmethod
    def _script(problem: str) -> RoundScript:
        return RoundScript(lambda n: [f"cat > solution.cpp <<'EOF'\n{SUBMITTED[problem][n - 1][0]}EOF"])

    def __call__(self, request: dict, index: int):
        text = json.dumps(request.get("messages", []))
        problem = "9" if "Echo Sum" in text else next(str(k) for k in range(9) if f"Digit Budget {k}\\n" in text)
        return self.scripts[problem](request, index)


@pytest.fixture(scope="module")
def track_eval(tmp_path_factory):
    """`arex eval frontier-cs` of the whole track: 10 problems, 2 rounds, 1 sample."""
    out = tmp_path_factory.mktemp("frontier-eval") / "eval"
    with ScriptedServer(TrackScript(), model="scripted-teacher") as server:
        options = [f"teacher.base_url={server.base_url}", "teacher.model=scripted-teacher", "teacher.track_cost=false"]
        args = ["eval", "frontier-cs", str(TRACK), "--out", str(out), "--rounds", "2", "--concurrency", "3"]
        result = CliRunner().invoke(app, [*args, *(x for o in options for x in ("-c", o))])
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "eval.json").read_text()), result.output


@pytest.mark.docker
def test_problem_0_examples_score_what_the_formula_gives(track_eval):
    _, found, _ = track_eval
    zero = next(p for p in found["variants"][0]["problems"] if p["problem"] == "0")
    gpt5, reference = (_expected("0", output) for _, output in SUBMITTED["0"])
    assert gpt5 == pytest.approx((75.0, 100 * (1.125 + 0.625 + 0.625) / 3))  # the formula by hand, too
    assert zero["curve"] == pytest.approx([gpt5[0], reference[0]])
    assert zero["value"] == pytest.approx(100.0) and zero["columns"]["unbounded"] == pytest.approx(reference[1])


@pytest.mark.docker
def test_ten_problem_run_table_mean_curve_and_report(track_eval, tmp_path):
    out, found, output = track_eval
    [v] = found["variants"]
    rows = {p["problem"]: p for p in v["problems"]}
    assert found["evaluated"] == 10 and [a["problem"] for a in found["absent"]] == ["10"]
    assert rows["10"]["status"] == "absent"
    per_round = {}
    for problem, submitted in SUBMITTED.items():
        scores = [_expected(problem, output) for _, output in submitted]
        best = max(range(2), key=lambda r: (scores[r][0], r))  # the better of final and best: the final on a tie
        assert rows[problem]["curve"] == pytest.approx([scores[0][0], max(scores[0][0], scores[1][0])]), problem
        assert rows[problem]["value"] == pytest.approx(scores[best][0]), problem
        assert rows[problem]["columns"]["unbounded"] == pytest.approx(scores[best][1]), problem
        per_round[problem] = rows[problem]["curve"]
    mean = sum(rows[p]["value"] for p in SUBMITTED) / 10
    assert v["score"] == pytest.approx(mean) and v["spread"] == 0.0
    curve = [sum(c[k] for c in per_round.values()) / 10 for k in (0, 1)]
    assert [c["score"] for c in v["curve"]] == pytest.approx(curve)
    assert v["usage"]["prompt_tokens"] > 0 and all(rows[p]["tokens"] > 0 for p in SUBMITTED)
    assert f"score (0-100): {v['score']:.2f}" in output and "not evaluated: problem 10" in output
    md = (out / "eval.md").read_text()
    assert "| 10 | not evaluated |" in md and f"**score (0-100): {v['score']:.2f}**" in md
    report = CliRunner().invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Benchmark: frontier-cs" in html and "Not evaluated: problem 10" in html
