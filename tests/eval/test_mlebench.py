"""MLE-bench competitions without Docker: the two corpus competitions (tests/corpus/mlebench:
toy-survival scored by accuracy, toy-fares by RMSE) read from MLE-bench's layout, their grader's
score and medal for submissions placed on and around every threshold, the agent told nothing the
private answers decide, and bad input (the folder, config.yaml, the data, the leaderboard, a
submission) explained in one sentence naming the file or key."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from repo_paths import CORPUS
from typer.testing import CliRunner

from arex.cli import app
from arex.errors import UserInputError
from arex.eval import make_benchmark
from arex.eval.mlebench import (
    SUBMISSION,
    CompetitionError,
    MLEBenchGrader,
    _lay_out,
    _spec,
    check_submission,
    competition_folders,
    final_rank,
    load_competition,
)
from arex.grading.ml import SubmissionError
from arex.specs import GradeResult

MLEBENCH = CORPUS / "mlebench"
DATA = MLEBENCH / "data"


def answers(comp_id: str) -> list[dict[str, str]]:
    with (DATA / comp_id / "prepared" / "private" / "test.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def survival_submission(wrong: int) -> bytes:
    """Exactly `wrong` of the 40 test passengers predicted wrong: accuracy (40 - wrong) / 40."""
    rows = sorted(answers("toy-survival"), key=lambda r: r["passenger"])
    lines = [f"{r['passenger']},{1 - int(r['survived']) if i < wrong else r['survived']}" for i, r in enumerate(rows)]
    return ("passenger,survived\n" + "\n".join(lines) + "\n").encode()


def fares_submission(offset: float) -> bytes:
    """Every fare off by `offset`: RMSE = offset exactly (quarters and halves are exact in binary)."""
    lines = [f"{r['key']},{float(r['fare_amount']) + offset}" for r in answers("toy-fares")]
    return ("key,fare_amount\n" + "\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def graders(tmp_path_factory) -> dict[str, MLEBenchGrader]:
    """Each competition's env folder laid out as the build lays it out (no image: built-in metrics
    grade on the host), and its grader."""
    found = {}
    for comp_id in ("toy-survival", "toy-fares"):
        comp = load_competition(MLEBENCH / comp_id, DATA)
        work = tmp_path_factory.mktemp(comp_id) / comp_id
        _lay_out(work, comp)
        found[comp_id] = MLEBenchGrader(work, _spec(comp, "0" * 16))
    return found


def test_the_corpus_competitions_read_as_mle_bench_lays_them_out():
    assert [p.name for p in competition_folders(MLEBENCH)] == ["toy-fares", "toy-survival"]
    survival = load_competition(MLEBENCH / "toy-survival", DATA)
    assert (survival.builtin, survival.columns, survival.direction) == (
        "accuracy",
        ("passenger", "survived"),
        "maximize",
    )
    fares = load_competition(MLEBENCH / "toy-fares", DATA)
    assert (fares.grader, fares.builtin, fares.direction) == ("root-mean-squared-error", "rmse", "minimize")
    assert fares.answers == DATA / "toy-fares" / "prepared" / "private" / "test.csv"
    assert fares.public == DATA / "toy-fares" / "prepared" / "public"
    # The competition's own data folder works as --data too (MLE-bench's `<id>/` left out).
    assert load_competition(MLEBENCH / "toy-fares", DATA / "toy-fares").answers == fares.answers


@pytest.mark.parametrize(
    "wrong, accuracy, medal",
    [(1, 0.975, "gold"), (2, 0.95, "gold"), (3, 0.925, "silver"), (4, 0.9, "silver"), (5, 0.875, "bronze"),
     (6, 0.85, "bronze"), (7, 0.825, "above median"), (8, 0.8, "none"), (20, 0.5, "none")],
)  # fmt: skip
def test_accuracy_score_and_medal_around_every_threshold(graders, wrong, accuracy, medal):
    graded = graders["toy-survival"].score(survival_submission(wrong))
    assert graded.held_out_raw == accuracy and graded.held_out_score == accuracy
    assert graded.details["score"] == accuracy and graded.details["medal"] == medal
    assert graded.details["any_medal"] == (medal in ("gold", "silver", "bronze"))


@pytest.mark.parametrize(
    "offset, medal",
    [(0.5, "gold"), (1.0, "gold"), (1.5, "silver"), (2.0, "silver"), (2.5, "bronze"), (3.0, "bronze"),
     (3.5, "above median"), (4.0, "none"), (6.0, "none")],
)  # fmt: skip
def test_rmse_score_and_medal_around_every_threshold(graders, offset, medal):
    graded = graders["toy-fares"].score(fares_submission(offset))
    assert graded.held_out_raw == offset and graded.held_out_score == -offset  # higher is better everywhere
    assert graded.details["medal"] == medal


def test_the_agent_is_told_the_format_only_never_a_score(graders):
    """MLE-bench's rule: a gold and a hopeless submission read the same to the agent."""
    grader = graders["toy-fares"]
    told = {grader.score(fares_submission(d)).feedback for d in (0.5, 3.5, 40.0)}
    assert len(told) == 1 and "valid" in told.pop()
    for offset in (0.5, 40.0):
        graded = grader.score(fares_submission(offset))
        assert graded.public_score is None and str(offset) not in graded.feedback


@pytest.mark.parametrize(
    "body, message",
    [
        (
            b"key,fare\nride-0120,3\n",
            "has columns key, fare; expected those of sample_submission.csv: key, fare_amount",
        ),
        (b"key,fare_amount\nride-9999,3\n", "line 2: id 'ride-9999' is not a test id of sample_submission.csv"),
        (b"key,fare_amount\nride-0120,3\nride-0120,4\n", "line 3: id 'ride-0120' appears twice"),
        (b"key,fare_amount\nride-0120,3\n", "has 1 rows; expected 30, one per test id"),
        (b"key,fare_amount\nride-0120,cheap\n", "line 2: 'fare_amount' 'cheap' is not a number"),
        (b"key,fare_amount\nride-0120,inf\n", "line 2: 'fare_amount' 'inf' is not finite"),
        (b"key,fare_amount\nride-0120,\n", "line 2: empty 'fare_amount'"),
        (b"\xff\xfe", "is not UTF-8 text"),
    ],
)
def test_a_malformed_submission_is_invalid_and_told_why(graders, body, message):
    graded = graders["toy-fares"].score(body)
    assert graded.feedback == f"Submission invalid: {SUBMISSION} {message}"
    assert graded.held_out_raw == 1e6 and graded.details["medal"] == "invalid"


def test_check_submission_needs_no_number_for_a_label_metric():
    rows = check_submission(b"id,label\na,cat\nb,dog\n", ("id", "label"), {"a", "b"})
    assert rows["b"]["label"] == "dog"
    with pytest.raises(SubmissionError, match="expected 3, one per test id"):
        check_submission(b"id,label\na,cat\nb,dog\n", ("id", "label"), {"a", "b", "c"})


def _end(score, infra: str | None = None):
    grade = GradeResult(public_score=None, held_out_score=0.0, held_out_raw=0.0, feedback="", infra_error=infra,
                        details={"score": score})  # fmt: skip
    return SimpleNamespace(grade=grade)


def test_the_final_submission_is_graded_not_the_best(graders):
    env = SimpleNamespace(spec=graders["toy-survival"].spec)
    bench = make_benchmark("mle-bench")
    rounds = [_end(0.975), _end(0.5)]
    assert final_rank(env, rounds).label == "none" and bench.score(env, rounds).value == 0.0
    score = bench.score(env, rounds[:1])
    assert score.value == 100.0 and score.columns == {"metric": 0.975, "medal": "gold", "above median %": 100.0}
    assert bench.score(env, []).columns["medal"] == "invalid"
    assert bench.score(env, [_end(0.975, infra="engine down")]).value == 0.0


# -- bad input: one sentence naming the file or key -------------------------------------------------
def copy_competition(tmp_path: Path, comp_id: str = "toy-survival") -> tuple[Path, Path]:
    folder, data = tmp_path / "comps" / comp_id, tmp_path / "data" / comp_id
    shutil.copytree(MLEBENCH / comp_id, folder)
    shutil.copytree(DATA / comp_id, data)
    return folder, tmp_path / "data"


def edit_config(folder: Path, change) -> None:
    raw = yaml.safe_load((folder / "config.yaml").read_text())
    change(raw)
    (folder / "config.yaml").write_text(yaml.safe_dump(raw))


def test_missing_answers_file(tmp_path):
    folder, data = copy_competition(tmp_path)
    (data / "toy-survival" / "prepared" / "private" / "test.csv").unlink()
    with pytest.raises(CompetitionError) as caught:
        load_competition(folder, data)
    assert str(caught.value) == (
        f"{data}/toy-survival/prepared/private/test.csv (dataset.answers in {folder}/config.yaml) does not exist; "
        "prepare the competition's data and pass the folder holding toy-survival/prepared/ with --data"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda raw: raw["grader"].pop("name"), "config.yaml has no 'grader.name'; set it, e.g. grader.name: accuracy"),
        (lambda raw: raw.pop("dataset"), "config.yaml has no 'dataset.answers'; set it"),
        (lambda raw: raw.update(id="Toy Survival"), "id 'Toy Survival' must be lower-case letters"),
        (lambda raw: raw["dataset"].update(answers="../../etc/passwd"), "dataset.answers '../../etc/passwd' must be"),
        (lambda raw: raw["dataset"].update(answers="toy-survival/prepared/public/train.csv"),
         "is inside the public folder"),
        (lambda raw: raw["grader"].update(name="quadratic-weighted-kappa", grade_fn="missing:grade"),
         "grader.grade_fn 'missing:grade' names missing.py, which is not a file in"),
        (lambda raw: raw["grader"].update(name="quadratic-weighted-kappa", grade_fn=None),
         "grader 'quadratic-weighted-kappa' is not a built-in metric"),
    ],
)  # fmt: skip
def test_config_problems_name_the_key(tmp_path, change, message):
    folder, data = copy_competition(tmp_path)
    edit_config(folder, change)
    with pytest.raises(CompetitionError, match="^.*config.yaml") as caught:
        load_competition(folder, data)
    assert message in str(caught.value)


def test_data_and_leaderboard_problems_name_the_file(tmp_path):
    folder, data = copy_competition(tmp_path)
    board = folder / "leaderboard.csv"
    board.write_text(board.read_text().replace(",0.93\n", ",n/a\n"))
    with pytest.raises(CompetitionError, match=r"leaderboard.csv line 8: score 'n/a' is not a finite number"):
        load_competition(folder, data)
    lines = (MLEBENCH / "toy-survival" / "leaderboard.csv").read_text().splitlines()
    board.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")  # worst team first
    with pytest.raises(CompetitionError, match="ranks lower scores first, but accuracy is better when higher"):
        load_competition(folder, data)
    shutil.copyfile(MLEBENCH / "toy-survival" / "leaderboard.csv", board)
    private = data / "toy-survival" / "prepared" / "private" / "test.csv"
    private.write_text(private.read_text().replace("P1120,", "P9999,"))
    with pytest.raises(
        CompetitionError, match=r"list different test ids \(1 only in the answers, 1 only in the sample"
    ):
        load_competition(folder, data)
    private.write_text("passenger,label\nP1120,1\n")
    with pytest.raises(CompetitionError, match="lacks the sample submission's column\\(s\\) survived"):
        load_competition(folder, data)


def test_a_folder_that_is_no_competition(tmp_path):
    with pytest.raises(UserInputError, match="neither it nor its subfolders hold a config.yaml"):
        competition_folders(tmp_path)
    (tmp_path / "config.yaml").write_text("- a list\n")
    with pytest.raises(CompetitionError, match="must be a mapping of keys"):
        load_competition(tmp_path)


def test_arex_eval_says_which_file_is_missing_and_exits_2(tmp_path):
    """Without --data and no prepared/ folder in the competition: no Docker is touched."""
    result = CliRunner().invoke(app, ["eval", "mle-bench", str(MLEBENCH / "toy-fares"), "--out", str(tmp_path / "e")])
    assert result.exit_code == 2, result.output
    assert "problem toy-fares" in result.output and "(dataset.answers in" in result.output


def test_a_copy_of_the_answers_among_the_public_files_is_refused(tmp_path):
    """The attack on the rule: the labels handed over as a public file (here under another name)."""
    folder, data = copy_competition(tmp_path, "toy-fares")
    private = data / "toy-fares" / "prepared" / "private" / "test.csv"
    (data / "toy-fares" / "prepared" / "public" / "extra").mkdir()
    shutil.copyfile(private, data / "toy-fares" / "prepared" / "public" / "extra" / "rides.csv")
    with pytest.raises(CompetitionError, match=r"public/extra/rides.csv in the public folder is a copy of the answers"):
        load_competition(folder, data)


def test_the_env_is_the_same_on_a_rerun_and_new_when_the_answers_change(tmp_path):
    """A re-run of `arex eval` keeps the built env (so its rollouts resume); new answers make a new one."""
    from arex.eval.mlebench import _digest

    folder, data = copy_competition(tmp_path, "toy-fares")
    first = _digest(load_competition(folder, data), "arex-base:latest")
    assert _digest(load_competition(folder, data), "arex-base:latest") == first
    private = data / "toy-fares" / "prepared" / "private" / "test.csv"
    private.write_text(private.read_text().replace("ride-0120,28.75", "ride-0120,29.0"))
    assert _digest(load_competition(folder, data), "arex-base:latest") != first


def test_the_env_folder_keeps_the_answers_out_of_the_workspace_and_statement(graders):
    grader = graders["toy-survival"]
    workspace = grader.dir / "workspace"
    assert sorted(p.name for p in workspace.iterdir()) == ["data", "submission"]
    assert (workspace / "data").is_symlink() and str((workspace / "data").readlink()) == "/home/data"
    assert not any((workspace / "submission").iterdir())
    statement = (grader.dir / "statement.md").read_text()
    assert "# Toy Survival (MLE-bench)" in statement and "Submissions are scored by accuracy" in statement
    assert (
        "P1120,1" not in statement
        and (grader.dir / "private" / "answers.csv").read_bytes()
        == (DATA / "toy-survival" / "prepared" / "private" / "test.csv").read_bytes()
    )
