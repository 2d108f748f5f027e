"""`arex eval mle-bench` in Docker on the two corpus competitions (tests/corpus/mlebench): the
scripted teacher submits one known file per round, placed on and around every threshold, and the
grades, medals, per-round curve and any-medal rate are checked against values worked out from the
answers here; the env image holds no private answer; a grader module from the competition folder
runs in a sandbox, never in arex's process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_mlebench import DATA, MLEBENCH, answers, fares_submission, survival_submission
from typer.testing import CliRunner

from arex.cli import app
from arex.envs.runtime import load_env
from arex.eval.mlebench import MLEBenchEnv, build_competition, load_competition
from arex.hashing import bytes_sha256
from arex.record.trajectory import load
from arex.sandbox import SandboxConfig, make_sandbox
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.docker


def wrong_ids(data: bytes) -> bytes:
    lines = data.decode().splitlines()
    lines[1] = "not-a-test-id," + lines[1].split(",", 1)[1]
    return ("\n".join(lines) + "\n").encode()


# Per round: the file submitted, and the grader's score and medal expected for it.
SURVIVAL = [(wrong_ids(survival_submission(1)), None, "invalid")] + [
    (survival_submission(wrong), (40 - wrong) / 40, medal)
    for wrong, medal in [(20, "none"), (8, "none"), (7, "above median"), (6, "bronze"), (5, "bronze"),
                         (4, "silver"), (3, "silver"), (2, "gold"), (1, "gold")]
]  # fmt: skip
FARES = [
    (fares_submission(offset), offset, medal)
    for offset, medal in [(6.0, "none"), (4.0, "none"), (3.5, "above median"), (3.0, "bronze"), (2.5, "bronze"),
                          (2.0, "silver"), (1.5, "silver"), (1.0, "gold"), (0.5, "gold")]
] + [(wrong_ids(fares_submission(0.5)), None, "invalid")]  # fmt: skip
PLAN = {"toy-survival": SURVIVAL, "toy-fares": FARES}


class CompetitionScript:
    """Writes the round's known submission for the competition the request is about."""

    def __init__(self):
        self.competition = "toy-survival"
        self.rounds = RoundScript(self.commands)

    def commands(self, n: int) -> list[str]:
        data = PLAN[self.competition][n - 1][0].decode()
        write = f"mkdir -p submission && cat > submission/submission.csv <<'EOF'\n{data}EOF"
        return ["head -3 data/train.csv && ls /home/data", write] if n == 1 else [write]

    def __call__(self, request: dict, index: int):
        self.competition = (
            "toy-fares" if "Toy Taxi Fares" in json.dumps(request.get("messages", [])) else "toy-survival"
        )
        return self.rounds(request, index)


@pytest.fixture(scope="module")
def mle_eval(tmp_path_factory):
    """`arex eval mle-bench` of both competitions: 10 rounds, 1 sample."""
    out = tmp_path_factory.mktemp("mlebench-eval") / "eval"
    with ScriptedServer(CompetitionScript(), model="scripted-teacher") as server:
        options = [f"teacher.base_url={server.base_url}", "teacher.model=scripted-teacher", "teacher.track_cost=false"]
        args = ["eval", "mle-bench", str(MLEBENCH), "--data", str(DATA), "--out", str(out), "--rounds", "10"]
        result = CliRunner().invoke(app, [*args, "--concurrency", "2", *(x for o in options for x in ("-c", o))])
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "eval.json").read_text()), result.output


def test_grader_score_and_medal_of_every_round(mle_eval):
    out, _, _ = mle_eval
    summary = json.loads((out / "summary.json").read_text())
    records = {line["env"]: load(Path(line["path"])) for line in summary["results"]}
    assert sorted(records) == ["toy-fares", "toy-survival"]
    for comp_id, plan in PLAN.items():
        ends = [r.end for r in records[comp_id].rounds]
        assert [(e.grade.details["score"], e.grade.details["medal"]) for e in ends] == [(s, m) for _, s, m in plan]
        assert all(e.grade.public_score is None for e in ends)
        # What the agent was told: the same words for every valid submission, gold or not; why for the invalid one.
        told = {e.feedback for e, (_, score, _) in zip(ends, plan) if score is not None}
        assert len(told) == 1 and "not scored here" in told.pop()
        [invalid] = [e.feedback for e, (_, score, _) in zip(ends, plan) if score is None]
        assert "id 'not-a-test-id' is not a test id of sample_submission.csv" in invalid


def test_final_submission_medals_curve_and_any_medal_rate(mle_eval):
    out, found, output = mle_eval
    [variant] = found["variants"]
    rows = {p["problem"]: p for p in variant["problems"]}
    assert found["evaluated"] == 2 and found["absent"] == []
    # MLE-bench grades the submission left at the end: survival's last is gold, fares' last is invalid.
    assert rows["toy-survival"]["value"] == 100.0 and rows["toy-survival"]["columns"]["medal"] == "gold"
    assert rows["toy-survival"]["columns"]["metric"] == 0.975
    assert rows["toy-fares"]["value"] == 0.0 and rows["toy-fares"]["columns"]["medal"] == "invalid"
    assert variant["score"] == 50.0  # any medal % over the set
    medal = {"gold", "silver", "bronze"}
    curve = [50.0 * ((SURVIVAL[k][2] in medal) + (FARES[k][2] in medal)) for k in range(10)]
    assert [c["score"] for c in variant["curve"]] == curve
    assert "any medal %: 50.00" in output


def test_the_env_image_holds_no_private_answer(mle_eval):
    out, _, _ = mle_eval
    for comp_id in PLAN:
        env = load_env(out / "envs" / comp_id)
        assert isinstance(env, MLEBenchEnv) and (env.dir / "private" / "answers.csv").is_file()
        private = (DATA / comp_id / "prepared" / "private" / "test.csv").read_bytes()
        target = env.spec.grader.columns[1]
        # Answer lines no public file has (survival: the label 1; the sample predicts 0 everywhere).
        lines = [f"{r[env.spec.grader.columns[0]]},{r[target]}" for r in answers(comp_id) if r[target] != "0"]
        with make_sandbox(env.sandbox_config(SandboxConfig()), f"look-{comp_id}") as box:
            listing = box.exec("ls -A /home/data /workspace /workspace/submission").stdout.split()
            same = box.exec(
                "find / -xdev -type f -size -1M -print0 2>/dev/null | xargs -0 sha256sum 2>/dev/null "
                f"| grep -c {bytes_sha256(private)}"
            )
            box.write_file("/tmp/lines", "\n".join(lines) + "\n")
            found = box.exec("grep -rlxFf /tmp/lines /home/data /workspace /opt/arex 2>/dev/null")
            written = box.exec("touch /home/data/mine")
        assert sorted(listing) == sorted(
            ["/home/data:", "description.md", "sample_submission.csv", "test.csv", "train.csv",
             "/workspace:", "data", "submission", "/workspace/submission:"]
        )  # fmt: skip
        assert same.stdout.strip() == "0" and found.stdout == "" and found.exit_code == 1
        assert not written.ok  # the public files are read-only


def test_labels_merged_into_the_public_test_file_are_caught(tmp_path):
    """The attack on the rule the leak scan answers: the test inputs shipped with their labels."""
    folder, data = tmp_path / "toy-fares", tmp_path / "data" / "toy-fares"
    shutil.copytree(MLEBENCH / "toy-fares", folder)
    shutil.copytree(DATA / "toy-fares", data)
    labels = {r["key"]: r["fare_amount"] for r in answers("toy-fares")}
    test = data / "prepared" / "public" / "test.csv"
    head, *rows = test.read_text().splitlines()
    test.write_text("\n".join([f"{head},fare_amount", *(f"{r},{labels[r.split(',')[0]]}" for r in rows)]) + "\n")
    report = build_competition(load_competition(folder, tmp_path / "data"), tmp_path / "envs", SandboxConfig())
    assert report.status == "rejected" and "gate 'private answers unreachable' failed" in report.reason
    assert "/home/data/test.csv recovers" in report.reason and not (tmp_path / "envs" / "toy-fares").exists()


GRADER = '''
"""A competition's own grader: accuracy, and an attempt on the machine that runs it."""
try:
    with open({host!r}, "w") as f:
        f.write("graded outside the sandbox")
except OSError:
    pass


def grade(submission, answers):
    truth = {{r["passenger"]: r["survived"] for r in answers}}
    return sum(truth[r["passenger"]] == r["survived"] for r in submission) / len(truth)
'''


def test_a_grader_module_runs_in_a_sandbox(tmp_path):
    folder = tmp_path / "toy-survival"
    shutil.copytree(MLEBENCH / "toy-survival", folder)
    host = tmp_path / "pwned"
    (folder / "grade.py").write_text(GRADER.format(host=str(host)))
    config = (folder / "config.yaml").read_text().replace("name: accuracy", "name: survival-accuracy")
    (folder / "config.yaml").write_text(config)
    comp = load_competition(folder, DATA)
    assert comp.builtin is None and comp.module == folder / "grade.py"
    report = build_competition(comp, tmp_path / "envs", SandboxConfig())
    assert report.status == "accepted", report.reason
    assert report.scores["sample"] == 0.725  # the sample submission, graded by the module (29 of 40 are 0)
    env = load_env(tmp_path / "envs" / "toy-survival")
    graded = env.grader.score(survival_submission(3))
    assert (graded.held_out_raw, graded.details["medal"]) == (0.925, "silver")
    assert not host.exists()  # the module ran, but not where arex runs
