"""Frontier-CS problems without a reference solution: the model-written candidate solutions the
repository ships (`algorithmic/solutions/<id>/`, `examples/` in a problem) become `candidate`
solutions, and the reference-free gates take a candidate scoring above the no-op as the evidence
that grading rewards a better answer when the answer files cannot show it (interactive problems,
placeholder answers). Every package here is written for this test."""

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from repo_paths import TESTS

from arex.envs import judge_build
from arex.envs.build import build_envs
from arex.envs.judge_build import NO_EVIDENCE, NO_EVIDENCE_INTERACTIVE, judge_jobs
from arex.envs.judge_sources import load
from arex.envs.report import GateLog
from arex.specs import GradeResult, SolutionRef

CORPUS = TESTS / "corpus"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def frontier_tree(base: Path, pid: str, problem: dict[str, str], solutions: dict[str, str]) -> Path:
    """The repository's layout: <base>/algorithmic/problems/<pid>/ and .../solutions/<pid>/."""
    write(base / "algorithmic" / "solutions" / pid, solutions)
    return write(base / "algorithmic" / "problems" / pid, problem)


# -- which candidates a problem gets (no Docker) ---------------------------------------------------
def test_candidates_are_few_diverse_and_the_packages_own(tmp_path):
    shipped = [
        "claude4.1opus",
        "claude4.5sonnet",
        "claude4.5sonnet_1",
        "gemini2.5pro",
        "gemini3pro",
        "gpt5",
        "gpt5.2",
        "grok4",
    ]
    solutions = {f"{name}.cpp": "int main() {}\n" for name in shipped}
    solutions["gpt5.1.FAILED"] = '{"error": "Not generated"}\n'  # a failed generation: no program
    config = "time: 1s\nmemory: 64m\nchecker: chk.cc\nsubtasks: [{n_cases: 2}]\n"
    problem = {
        "config.yaml": config,
        "statement.txt": "# Sum\n",
        "chk.cc": "int main() {}\n",
        "examples/reference.cpp": "int main() {}\n",
    }
    problem |= {f"testdata/{i}.{ext}": f"{i}\n" for i in (1, 2) for ext in ("in", "ans")}
    folder = frontier_tree(tmp_path, "5", problem, solutions)
    (tmp_path / "outside.cpp").write_text("int main() { /* not the package's */ }\n")
    (tmp_path / "algorithmic" / "solutions" / "5" / "aaa.cpp").symlink_to(tmp_path / "outside.cpp")

    [few] = load(folder)
    names = [s.path.removeprefix("solutions/candidates/") for s in few.spec.solutions]
    # examples first, then one per model family (families in name order, newest version first)
    assert names == ["examples/reference.cpp", "claude4.5sonnet.cpp", "gemini3pro.cpp"]
    assert {s.expected for s in few.spec.solutions} == {"candidate"}
    assert (
        few.files["solutions/candidates/gemini3pro.cpp"]
        == tmp_path / "algorithmic" / "solutions" / "5" / "gemini3pro.cpp"
    )

    from arex.envs.sources.frontier import load_frontier

    every = [s.path.removeprefix("solutions/candidates/") for s in load_frontier(folder, candidates=20).spec.solutions]
    assert every[3:] == [
        "gpt5.2.cpp",
        "grok4.cpp",
        "claude4.1opus.cpp",
        "gemini2.5pro.cpp",
        "gpt5.cpp",
        "claude4.5sonnet_1.cpp",
    ]
    assert "aaa.cpp" not in every  # a link out of the solutions folder is never followed


def test_an_edited_candidate_outside_the_problem_folder_rebuilds_the_env(tmp_path):
    config = "time: 1s\nmemory: 64m\nchecker: chk.cc\nsubtasks: [{n_cases: 2}]\n"
    problem = {"config.yaml": config, "statement.txt": "# Sum\n", "chk.cc": "int main() {}\n"}
    problem |= {f"testdata/{i}.{ext}": f"{i}\n" for i in (1, 2) for ext in ("in", "ans")}
    folder = frontier_tree(tmp_path, "6", problem, {"gpt5.cpp": "int main() { return 0; }\n"})
    [(_, _, before)] = judge_jobs(folder)
    (tmp_path / "algorithmic" / "solutions" / "6" / "gpt5.cpp").write_text("int main() { return 1; }\n")
    [(_, _, after)] = judge_jobs(folder)
    assert before != after  # else a rejection (or an env) made with the old candidate would be reused


def test_a_candidate_whose_score_varies_does_not_decide_determinism(monkeypatch):
    """Frontier-CS candidates are often clock-seeded: the next candidate above the no-op shows the
    grader deterministic; only when every one varies is the gate failed."""
    refs = [
        SolutionRef(path=f"solutions/candidates/{name}.cpp", language="cpp17", expected="candidate")
        for name in ("clock", "fixed", "zero")
    ]
    judge = SimpleNamespace(spec=SimpleNamespace(solutions=refs))
    second = {"clock": [0.877], "fixed": [0.5], "zero": [0.0]}
    graded = []

    def regrade(judge, solution, **kw):
        name = Path(solution.path).stem
        graded.append(name)
        return GradeResult(public_score=None, held_out_score=second[name].pop(0), held_out_raw=0.0, feedback="")

    monkeypatch.setattr(judge_build, "_grade", regrade)
    log = GateLog()
    above = {"solutions/candidates/fixed.cpp": 0.5, "solutions/candidates/clock.cpp": 0.889}
    assert judge_build._stable_candidate(log, judge, None, above) == "solutions/candidates/fixed.cpp"
    assert graded == ["clock", "fixed"]  # best first; the zero-scoring one never needed
    assert log.gates[-1].passed and "(clock.cpp 0.889000 then 0.877000 varied)" in log.gates[-1].detail

    second["clock"], second["fixed"] = [0.88], [0.4]
    failed = GateLog()
    assert judge_build._stable_candidate(failed, judge, None, above) is None
    assert not failed.gates[-1].passed and failed.gates[-1].detail.startswith(
        "every candidate above the no-op scored differently"
    )


def test_a_candidate_a_crumb_above_the_noop_is_no_evidence(monkeypatch):
    """A checker that gives 0.0001 for any output made a Frontier-CS problem pass: a candidate at
    0.0001 against a no-op at 0.000. The best candidate must be CANDIDATE_MARGIN above the no-op,
    and the rejection says where solutions come from in a Frontier-CS clone."""
    refs = [SolutionRef(path="solutions/candidates/crumb.cpp", language="cpp17", expected="candidate")]
    judge = SimpleNamespace(spec=SimpleNamespace(solutions=refs, checker=SimpleNamespace(kind="testlib")))
    regraded = []
    monkeypatch.setattr(judge_build, "_grade", lambda *a, **kw: regraded.append(a) or None)
    log = GateLog()
    crumb = {"solutions/candidates/crumb.cpp": 0.0001}
    assert judge_build._candidate_gates(log, judge, None, 0.0, crumb, {}) is None
    assert not log.gates[-1].passed and log.gates[-1].name == "better answer scores higher"
    assert NO_EVIDENCE in log.gates[-1].detail and "crumb.cpp 0.000" in log.gates[-1].detail
    assert "algorithmic/solutions/<N>/" in NO_EVIDENCE and "<problem>/solutions/" in NO_EVIDENCE
    assert regraded == []  # rejected on the scores seen: nothing graded again

    enough = GateLog()
    margin = {"solutions/candidates/crumb.cpp": judge_build.CANDIDATE_MARGIN}
    stable = GradeResult(public_score=None, held_out_score=judge_build.CANDIDATE_MARGIN, held_out_raw=0.0, feedback="")
    monkeypatch.setattr(judge_build, "_grade", lambda *a, **kw: stable)
    assert judge_build._candidate_gates(enough, judge, None, 0.0, margin, {}) is not None
    assert all(g.passed for g in enough.gates), enough.gates


# -- the gates (Docker) ----------------------------------------------------------------------------
LINEAR = (
    "n = int(input())\n"
    "for y in range(1, n + 1):\n"
    '    print("?", y, flush=True)\n'
    '    if input() == "=":\n'
    "        break\n"
    'print("!", y, flush=True)\n'
)
THIRDS = r"""#include <cstdio>
int main() {
    long long n, low = 1, high, y = 1; char reply[4];
    if (scanf("%lld", &n) != 1) return 0;
    for (high = n;;) {
        y = low + (high - low) / 3;
        printf("? %lld\n", y); fflush(stdout);
        if (scanf("%3s", reply) != 1 || reply[0] == '=') break;
        if (reply[0] == '<') high = y - 1; else low = y + 1;
    }
    printf("! %lld\n", y); fflush(stdout);
}
"""


def interactive_problem(base: Path, solutions: dict[str, str]) -> Path:
    """Guess a hidden number (the corpus's interactor, scored by questions asked); 3 tests."""
    config = (
        "type: interactive\ninteractor: interactor.cc\ntime: 1s\nmemory: 64m\nsubtasks: [{score: 100, n_cases: 3}]\n"
    )
    statement = "# Hidden Number\nGuess x in [1, n] with '? y' questions ('<', '>', '='), then '! x'.\n"
    tests = {
        "1.in": "100 99\n",
        "1.ans": "7\n",
        "2.in": "200 199\n",
        "2.ans": "8\n",
        "3.in": "1000 999\n",
        "3.ans": "10\n",
    }
    folder = frontier_tree(
        base,
        "21",
        {"config.yaml": config, "statement.txt": statement, **{f"testdata/{k}": v for k, v in tests.items()}},
        solutions,
    )
    for name in ("interactor.cc", "testlib.h"):
        shutil.copyfile(CORPUS / "frontier-interactive" / name, folder / name)
    return folder


@pytest.mark.docker
def test_an_interactive_problem_is_accepted_on_its_best_candidate_and_rejected_without_one(tmp_path):
    folder = interactive_problem(tmp_path / "with", {"alpha.py": LINEAR, "beta.cpp": THIRDS})
    [report] = build_envs([folder], tmp_path / "envs")
    assert report.status == "accepted", report.reason
    linear, thirds = (
        report.scores["candidate:solutions/candidates/alpha.py"],
        report.scores["candidate:solutions/candidates/beta.cpp"],
    )
    assert 0.0 < linear < thirds < 1.0  # neither need score 1.0: the better one is the evidence
    expected = (
        r"reference-free: no accepted submission; gates: interactor compiles, no-op 0\.000,"
        rf" best of 2 candidates {thirds:.3f} \(beta\.cpp\), deterministic"
    )
    assert re.fullmatch(expected, report.reason), report.reason
    gates = [
        "tests complete",
        "interactor compiles",
        "interactor survives malformed output",
        "better answer scores higher",
    ]
    gates += ["no-op scores clearly lower", "deterministic"]
    assert [g.name for g in report.gates] == gates

    bare = interactive_problem(tmp_path / "without", {})
    [rejected] = build_envs([bare], tmp_path / "envs2")
    assert rejected.status == "rejected" and NO_EVIDENCE_INTERACTIVE in rejected.reason, rejected.reason


CHECKER = r"""// chk <input> <output> <answer>: the output's total weight over the capacity. The answer file is a
// placeholder and never read. Exit codes as testlib's: 0 ok, 1 wrong answer, 7 partial ("Ratio:").
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "r");
    long long n, cap, k, i, sum = 0;
    if (!in || !out || fscanf(in, "%lld %lld", &n, &cap) != 2) return 3;
    std::vector<long long> w(n); std::vector<bool> used(n);
    for (auto& x : w) if (fscanf(in, "%lld", &x) != 1) return 3;
    if (fscanf(out, "%lld", &k) != 1 || k < 0 || k > n) { fprintf(stderr, "wrong answer: bad count\n"); return 1; }
    for (long long j = 0; j < k; j++) {
        if (fscanf(out, "%lld", &i) != 1 || i < 1 || i > n || used[i - 1]) { fprintf(stderr, "wrong answer: bad parcel\n"); return 1; }
        used[i - 1] = true; sum += w[i - 1];
    }
    if (sum > cap) { fprintf(stderr, "wrong answer: over the capacity\n"); return 1; }
    double r = (double)sum / cap;
    fprintf(stderr, "points %.6f Ratio: %.6f, RatioUnbounded: %.6f\n", r, r, r);
    return r >= 1.0 ? 0 : 7;
}
"""  # noqa: E501
# Takes parcels in input order while they fit: valid, rarely the best.
FIRST_FIT = r"""#include <cstdio>
#include <vector>
int main() {
    long long n, cap, sum = 0; scanf("%lld %lld", &n, &cap);
    std::vector<long long> take;
    for (long long i = 1, w; i <= n && scanf("%lld", &w) == 1; i++) if (sum + w <= cap) { sum += w; take.push_back(i); }
    printf("%zu\n", take.size());
    for (long long i : take) printf("%lld ", i);
    printf("\n");
}
"""


def placeholder_problem(base: Path, examples: dict[str, str]) -> Path:
    """A scored problem whose answer files are placeholders ("zzz"); 3 tests."""
    config = "type: default\nchecker: chk.cc\ntime: 1s\nmemory: 64m\nsubtasks: [{score: 100, n_cases: 3}]\n"
    statement = "# Fill the Sack\nChoose parcels of total weight as close to C as you can without going over.\n"
    tests = {"1.in": "3 10\n6 5 4\n", "2.in": "4 17\n9 4 8 7\n", "3.in": "3 9\n7 3 2\n"}
    tests |= {f"{i}.ans": "zzz\n" for i in (1, 2, 3)}
    problem = {
        "config.yaml": config,
        "statement.txt": statement,
        "chk.cc": CHECKER,
        **{f"testdata/{k}": v for k, v in tests.items()},
    }
    return frontier_tree(base, "113", problem | {f"examples/{k}": v for k, v in examples.items()}, {})


@pytest.mark.docker
def test_placeholder_answers_need_a_candidate_above_the_noop(tmp_path):
    [report] = build_envs([placeholder_problem(tmp_path / "with", {"first_fit.cpp": FIRST_FIT})], tmp_path / "envs")
    assert report.status == "accepted", report.reason
    score = report.scores["candidate:solutions/candidates/examples/first_fit.cpp"]
    assert 0.0 < score < 1.0 and report.scores["answers"] == 0.0 and report.scores["noop"] == 0.0
    assert (
        report.reason == "reference-free: no accepted submission; gates: checker compiles, no-op 0.000,"
        f" best of 1 candidate {score:.3f} (examples/first_fit.cpp), deterministic"
    )

    [rejected] = build_envs([placeholder_problem(tmp_path / "without", {})], tmp_path / "envs2")
    assert rejected.status == "rejected", rejected.reason
    assert rejected.reason.startswith(
        f"gate 'better answer scores higher' failed: {NO_EVIDENCE}"
        " (answers rated 0.000 at lowest; candidates: none; no-op 0.000)"
    )
