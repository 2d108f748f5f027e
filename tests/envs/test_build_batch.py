"""The judge build on real archives: batches with bad sources, cached rejections, duplicate ids, the
report table, legacy time limits, problems without samples, and reference-free scored problems."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import loop_kit as loop
import pyarrow.parquet as pq
import pytest
from repo_paths import TESTS

from arex.dataset.export import ExportConfig, export, kept_records
from arex.envs import build as build_module
from arex.envs import runtime
from arex.envs.build import build_envs
from arex.envs.judge_build import _has_reference, legacy_time_limit
from arex.envs.report import EnvReport, GateLog, report_table, write_report
from arex.grading.judge import Judge
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import BACKENDS, ExecResult
from arex.selection.selector import SelectConfig, select
from arex.specs import CheckerSpec, GradeResult, JudgeSpec
from arex.specs import TestCase as Case
from arex.specs import TestResult as Outcome
from arex.teacher.scripted import RoundScript

CORPUS = TESTS / "corpus"


def cc_row(name: str) -> dict:
    return {
        "name": name,
        "description": "Print a + b.",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["2 2\n"], "output": ["4\n"]},
    }


# -- batches ---------------------------------------------------------------------------------------
def test_a_missing_source_is_one_rejection_and_the_batch_goes_on(tmp_path):
    stray = tmp_path / "notes"
    stray.mkdir()
    (stray / "README.txt").write_text("not a problem\n")
    reports = build_envs([tmp_path / "no-such-problem", stray], tmp_path / "envs")
    assert [(Path(r.source).name, r.status) for r in reports] == [
        ("no-such-problem", "rejected"),
        ("notes", "rejected"),
    ]
    assert reports[0].reason == "no such file or folder"
    assert "not a problem source" in reports[1].reason


def test_an_unchanged_rejected_source_is_not_rebuilt_and_a_changed_one_is(tmp_path, monkeypatch):
    stray, out = tmp_path / "notes", tmp_path / "envs"
    stray.mkdir()
    (stray / "README.txt").write_text("not a problem\n")
    [first] = build_envs([stray], out)
    assert first.status == "rejected" and first.reason.startswith("unreadable source:")
    loads = []
    monkeypatch.setattr(build_module, "judge_jobs", lambda *a: loads.append(a) or [])
    [again] = build_envs([stray], out)
    assert again.status == "rejected" and again.reason == "rejected (unchanged since the last build): " + first.reason
    assert loads == []  # answered from the stamp: the source was not read again
    (stray / "README.txt").write_text("still not a problem\n")
    build_envs([stray], out)
    assert len(loads) == 1  # changed content: built again


def test_duplicate_ids_build_once_and_every_other_is_rejected_naming_the_first(tmp_path, monkeypatch):
    a, b = tmp_path / "a.json", tmp_path / "b.jsonl"
    a.write_text(json.dumps([cc_row("1 A. Sum")]))
    b.write_text(
        "\n".join(json.dumps(row) for row in (cc_row("1 A. Sum"), cc_row("2 B. Other"), cc_row("2 B. Other"))) + "\n"
    )
    built = []

    def fake_build(problem, source, digest, out, sandbox):
        built.append((problem.spec.id, source.name))
        return EnvReport(str(source), problem.spec.id, "accepted")

    monkeypatch.setattr(build_module, "build_one", fake_build)
    reports = build_envs([a, b], tmp_path / "envs")
    assert sorted(built) == [("cc-1-a-sum", "a.json"), ("cc-2-b-other", "b.jsonl")]
    assert [(r.env_id, r.status) for r in reports] == [
        ("cc-1-a-sum", "accepted"),
        ("cc-1-a-sum", "rejected"),
        ("cc-2-b-other", "accepted"),
        ("cc-2-b-other", "rejected"),
    ]
    assert reports[1].reason == f"duplicate id 'cc-1-a-sum': also produced by {a}"
    assert reports[3].reason == f"duplicate id 'cc-2-b-other': also produced by {b} (an earlier row)"


def test_a_multi_line_reason_stays_on_its_row_and_in_full_in_the_json(tmp_path):
    log = "solution.cpp: In function 'int main()':\nsolution.cpp:3:5: error: 'x' | was not declared\n" + "note: " * 200
    reports = [EnvReport("src/a", "a", "rejected", log), EnvReport("src/b|c", "b", "accepted")]
    write_report(reports, tmp_path)
    table = (tmp_path / "build-report.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "| status |" not in line]
    assert len(rows) == 2
    assert "'x' \\| was not declared" in rows[0] and "(full text in build-report.json)" in rows[0]
    assert rows[0].count(" | ") == 5 and "src/b\\|c" in rows[1]  # six cells each: no stray pipe
    assert json.loads((tmp_path / "build-report.json").read_text())["envs"][0]["reason"] == log
    assert report_table(reports, {}).count("\n| ") == 3  # header + two rows


def test_has_reference_says_when_every_accepted_submission_was_skipped():
    problem = SimpleNamespace(
        skipped=[("submissions/accepted/a.py", "accepted", "python2")],
        skipped_summary=lambda expected: "3 accepted submissions, all in skipped languages: python2",
    )
    log = GateLog()
    assert not _has_reference(log, [], problem)
    assert (
        log.gates[0].detail
        == "no accepted submission arex can run: 3 accepted submissions, all in skipped languages: python2"
    )


# -- legacy time limits ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "slowest, multiplier, resolution, limit",
    [
        (0.21, 5, 1.0, 2.0),
        (0.2, 5, 1.0, 1.0),
        (0.01, 5, 1.0, 1.0),
        (0.31, 5, 0.5, 2.0),
        (0.01, 5, 0.5, 0.5),
        (1.0, 2, 1.0, 2.0),
    ],
)
def test_legacy_time_limits_round_up_to_the_resolution(slowest, multiplier, resolution, limit):
    assert legacy_time_limit(slowest, multiplier, resolution) == limit


# -- no sample tests -------------------------------------------------------------------------------
def hidden_only_spec() -> JudgeSpec:
    tests = (Case(name="1", input="tests/1.in", answer="tests/1.ans", group="secret", sample=False),)
    return JudgeSpec(
        id="gap",
        title="Gap",
        time_limit_s=1.0,
        memory_mb=64,
        checker=CheckerSpec(kind="testlib", source="checker/chk.cc"),
        tests=tests,
    )


def test_without_samples_the_public_score_is_undefined_and_the_feedback_says_why(tmp_path):
    judge = Judge(tmp_path, hidden_only_spec())
    result = judge._finish(
        [Outcome(name="1", group="secret", sample=False, verdict="AC", ratio=1.0, raw=1.0, time_s=0.01)]
    )
    assert result.public_score is None and result.held_out_score == 1.0
    assert "no sample tests" in result.feedback and "0/0" not in result.feedback


class FakeCheckerBox:
    """A checker box whose checker never answers: every run is a timeout."""

    config = SimpleNamespace(timeout_s=60.0)

    def exec(self, command, **kw):
        if command == "rm -rf outs":
            return ExecResult(status="ok", exit_code=0, stdout="", stderr="", duration_s=0.0)
        return ExecResult(status="timeout", exit_code=-1, stdout="", stderr="", duration_s=60.0)

    def copy_in(self, source, target):
        pass


def test_a_checker_timeout_is_reported_as_a_timeout_naming_the_test(tmp_path):
    judge = Judge(tmp_path, hidden_only_spec())
    [check] = judge.check_outputs({"1": "5\n"}, FakeCheckerBox()).values()
    assert check.judge_error and "timeout" in check.message
    result = judge._finish(
        [Outcome(name="1", group="secret", sample=False, verdict="JE", ratio=0.0, raw=0.0, message=check.message)]
    )
    assert result.infra_error.startswith("checker failed on 1 test(s) (first: test 1): checker timeout")


class BlindEnv(loop.TallyEnv):
    """The tally env with nothing public to score, as a judge problem without sample tests."""

    def _grade(self, data, text, grading, log) -> GradeResult:
        graded = super()._grade(data, text, grading, log)
        return graded.model_copy(update={"public_score": None})


def test_every_reader_copes_with_an_undefined_public_score(tmp_path, monkeypatch):
    monkeypatch.setitem(runtime.KINDS, "tally", BlindEnv)
    monkeypatch.setitem(BACKENDS, "process", "process_sandbox:ProcessSandbox")
    root = tmp_path / "envs" / "blind"
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text("kind: tally\nid: blind\ntitle: Count up\n")
    (root / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt.\n")
    (root / "workspace" / "answer.txt").write_text("1\n")
    (root / "workspace" / "rules.txt").write_text("do not edit\n")
    env = runtime.load_env(root)
    _, [t], _ = loop.rollout(env, RoundScript(loop.climbing), tmp_path / "store", RolloutConfig(rounds=2))
    assert [r.end.grade.public_score for r in t.rounds] == [None, None]
    assert t.rounds[0].end.feedback.startswith("Public score: none (no sample tests)")
    assert t.rounds[-1].end.best.public is None and t.rounds[-1].end.best_public is None
    selection = select(tmp_path / "store", tmp_path / "envs", tmp_path / "sel", SelectConfig(), loop.process_sandbox())
    assert len(selection.kept) == 1
    export(kept_records(tmp_path / "sel"), tmp_path / "dataset", ExportConfig(), tmp_path / "envs")
    rows = pq.read_table(next((tmp_path / "dataset" / "rounds").glob("*.parquet"))).to_pylist()
    assert [row["public_score"] for row in rows] == [None, None]


# -- with Docker: reference-free validation, no-sample packages, cached gate rejections ------------
@pytest.mark.docker
def test_a_scored_problem_without_solutions_is_validated_reference_free(tmp_path):
    out = tmp_path / "envs"
    [report] = build_envs([CORPUS / "frontier-scored-noref"], out)
    assert report.status == "accepted", report.reason
    assert report.reason.startswith(
        "reference-free: no accepted submission; gates: checker compiles, answers rated 1.000, no-op 0.000"
    )
    names = [g.name for g in report.gates]
    assert names == [
        "tests complete",
        "checker compiles",
        "answers rated high",
        "deterministic",
        "no-op scores clearly lower",
        "better answer scores higher",
    ]
    assert report.scores["answers"] == 1.0 and report.scores["noop"] == 0.0
    assert "reference-free" in (out / "build-report.md").read_text()


@pytest.mark.docker
def test_a_checker_that_rates_anything_high_is_rejected_and_the_rejection_is_cached(tmp_path):
    source = tmp_path / "generous"
    shutil.copytree(CORPUS / "frontier-scored-noref", source)
    checker = (source / "chk.cc").read_text()
    (source / "chk.cc").write_text(
        checker.replace("    long long got = total(out, w, cap, &why);", "    long long got = best; (void)out;")
    )
    out = tmp_path / "envs"
    [report] = build_envs([source], out)
    assert report.status == "rejected" and "gate 'no-op scores clearly lower' failed: no-op 1.000" in report.reason
    [again] = build_envs([source], out)
    assert (again.status, again.reason) == ("rejected", "rejected (unchanged since the last build): " + report.reason)
    assert [g.name for g in again.gates] == [g.name for g in report.gates]


@pytest.mark.docker
def test_a_package_without_samples_is_accepted(tmp_path):
    [report] = build_envs([CORPUS / "kattis-no-samples"], tmp_path / "envs")
    assert report.status == "accepted", report.reason
    accepted = next(g for g in report.gates if g.name.startswith("accepted scores 1.0"))
    assert "public n/a (no sample tests)" in accepted.detail


def test_gates_grade_a_spread_sample_of_many_solutions():
    # A CodeContests row may carry hundreds of solutions: the gates grade MAX_GATED per outcome,
    # spread over them (first and last included), and every one stays in the env.
    from arex.envs.judge_build import MAX_GATED, gated
    from arex.specs import SolutionRef

    many = tuple(
        SolutionRef(path=f"solutions/accepted-{i:03d}.py", language="python3", expected="accepted") for i in range(40)
    )
    few = tuple(
        SolutionRef(path=f"solutions/wrong-{i}.py", language="python3", expected="wrong_answer") for i in range(2)
    )
    picked = gated(many + few, "accepted")
    assert len(picked) == MAX_GATED and picked[0] == many[0] and picked[-1] == many[-1]
    assert len({s.path for s in picked}) == MAX_GATED
    assert gated(many + few, "wrong_answer") == list(few) and gated(many, "run_time_error") == []
