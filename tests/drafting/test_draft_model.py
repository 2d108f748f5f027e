"""The model drafter: the scripted teacher (real HTTP on 127.0.0.1) inspects a real git repository in
a sandbox, writes arex.yaml, submits, and revises from the build's reason.

The fast tests act on the `process` test backend (tests/process_sandbox.py); the last one drafts in
a Docker sandbox and builds the drafts for real, through `draft_env`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import git
import pytest
import yaml

from arex.drafting.base import Attempt, Draft, DraftError
from arex.drafting.model import ModelDrafter
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.sandbox.base import BACKENDS
from arex.teacher.config import Price, TeacherConfig
from arex.teacher.scripted import Fault, ScriptedServer

TRAIN = """
import csv

train = list(csv.DictReader(open("data/train.csv")))
test = list(csv.DictReader(open("data/test.csv")))
centroids = {}
for label in sorted({r["label"] for r in train}):
    rows = [r for r in train if r["label"] == label]
    centroids[label] = [sum(float(r[c]) for r in rows) / len(rows) for c in ("x1", "x2")]

def nearest(row):
    point = [float(row["x1"]), float(row["x2"])]
    return min(centroids, key=lambda k: sum((a - b) ** 2 for a, b in zip(point, centroids[k])))

with open("submission.csv", "w") as out:
    out.write("id,prediction\\n")
    for row in test:
        out.write(f"{row['id']},{nearest(row)}\\n")
"""


def make_repo(path: Path) -> Path:
    """A real repository: a labelled table, a training script in arex's format, a README and a
    pickled model (binary) that does not belong in a task."""
    path.mkdir(parents=True)
    repo = git.Repo.init(path, initial_branch="main")
    repo.config_writer().set_value("user", "name", "t").set_value("user", "email", "t@t").release()
    (path / "data").mkdir()
    rows = []
    for i in range(160):
        x1, x2 = (i * 37) % 11, (i * 53) % 13
        label = int(x1 + x2 > 11) if i % 17 else int(x1 + x2 <= 11)  # a little label noise
        rows.append(f"{x1},{x2},{label}\n")
    (path / "data" / "table.csv").write_text("x1,x2,label\n" + "".join(rows))
    (path / "train.py").write_text(textwrap.dedent(TRAIN))
    (path / "README.md").write_text("Classify points: predict `label` from `x1` and `x2`.\n")
    (path / "model.pkl").write_bytes(b"\x80\x04\x95\x00\x00binary\x00")
    repo.index.add(["data/table.csv", "train.py", "README.md", "model.pkl"])
    repo.index.commit("a classifier")
    return path


def spec_text(direction: str = "maximize") -> str:
    return textwrap.dedent(f"""\
        id: draft-points
        title: Classify points
        statement: README.md
        run: sh run.sh
        submission: {{file: submission.csv, id_column: id, prediction_column: prediction}}
        metric: {{name: accuracy, direction: {direction}}}
        data:
          table: data/table.csv
          target: label
          split: {{seed: 3, test_fraction: 0.3, stratify: true}}
        time_limit_s: 60
        protected: [data/train.csv, data/test.csv]
        """)


def bash(command: str, thought: str = "Next step.") -> str:
    return f"{thought}\n```bash\n{command}\n```"


SUBMIT = bash("submit", "Done.")
WRITE = bash(
    f"rm model.pkl && printf 'python3 train.py\\n' > run.sh && cat > arex.yaml <<'EOF'\n{spec_text('minimize')}EOF",
    "Writing the spec.",
)
FIX = bash("sed -i 's/direction: minimize/direction: maximize/' arex.yaml", "Accuracy is maximized.")


def teacher(server: ScriptedServer, **kw) -> TeacherConfig:
    return TeacherConfig(
        model="scripted-teacher", base_url=server.base_url, track_cost=False, backoff_base_s=0.01, max_attempts=2, **kw
    )


def last_user(request: dict) -> str:
    return request["messages"][-1]["content"]


@pytest.fixture
def process(monkeypatch) -> SandboxConfig:
    monkeypatch.setitem(BACKENDS, "process", "process_sandbox:ProcessSandbox")
    return SandboxConfig(backend="process")


# -- fast: the process backend ---------------------------------------------------------------------
def test_submit_reads_the_spec_and_the_changes(tmp_path, process):
    repo = make_repo(tmp_path / "points")
    script = [
        SUBMIT,  # nothing written yet
        bash("printf 'id: [unclosed\\n' > arex.yaml"),
        SUBMIT,  # not YAML
        WRITE,
        bash(
            "mkdir -p __pycache__ && printf 'x' > __pycache__/t.pyc && printf 'a,b\\n' > submission.csv"
            " && head -c 64 /dev/zero > blob.bin"
        ),
        SUBMIT,
    ]
    with (
        ScriptedServer(script, model="scripted-teacher") as server,
        ModelDrafter(teacher=teacher(server), sandbox=process) as drafter,
    ):
        draft = drafter.draft(repo, [])
        requests = list(server.requests)
    assert len(requests) == 6
    assert "write the task spec `/workspace/arex.yaml`" in requests[0]["messages"][0]["content"]
    # names from arex.grading.ml
    assert "accuracy, f1, roc_auc, log_loss, rmse, mae, r2" in requests[0]["messages"][0]["content"]
    assert last_user(requests[1]) == "There is no /workspace/arex.yaml to submit; write the spec there, then submit."
    assert last_user(requests[3]).startswith("/workspace/arex.yaml cannot be used as the spec (line ")
    assert draft.spec == yaml.safe_load(spec_text("minimize"))
    assert draft.add == {"run.sh": "python3 train.py\n"}  # not arex.yaml, bytecode, arex's own outputs or binaries
    assert draft.remove == ("model.pkl",)
    guesses = {g.field: g for g in draft.guesses}
    assert guesses["metric.direction"].value == "minimize" and guesses["data.split.seed"].value == "3"
    assert guesses["protected"].value == "[data/train.csv, data/test.csv]"
    assert {g.confidence for g in draft.guesses} == {"medium"} and {g.why for g in draft.guesses} == {
        "written by the model"
    }


def test_a_rejected_draft_is_revised_in_the_same_conversation(tmp_path, process):
    repo = make_repo(tmp_path / "points")
    reason = "gate 'no-op clearly worse' failed: constant 1 scores -0.500000 vs baseline -0.900000"
    with (
        ScriptedServer([bash("ls"), WRITE, SUBMIT, FIX, SUBMIT], model="scripted-teacher") as server,
        ModelDrafter(teacher=teacher(server), sandbox=process) as drafter,
    ):
        first = drafter.draft(repo, [])
        second = drafter.draft(repo, [Attempt(draft=first, reason=reason)])
        requests = list(server.requests)
    # the command ran on the repository
    assert "README.md" in last_user(requests[1]) and "train.py" in last_user(requests[1])
    assert reason in last_user(requests[3])
    # the same conversation, continued
    assert requests[3]["messages"][: len(requests[2]["messages"])] == requests[2]["messages"]
    assert first.spec["metric"]["direction"] == "minimize" and second.spec["metric"]["direction"] == "maximize"
    # the same sandbox
    assert second.add == first.add == {"run.sh": "python3 train.py\n"} and second.remove == ("model.pkl",)


def test_another_drafters_attempt_is_laid_out_for_the_model(tmp_path, process):
    repo = make_repo(tmp_path / "points")
    earlier = Draft(spec=yaml.safe_load(spec_text("minimize")), add={"run.sh": "python3 train.py\n"}, remove=("*.pkl",))
    with (
        ScriptedServer([bash("ls; cat arex.yaml run.sh"), FIX, SUBMIT], model="scripted-teacher") as server,
        ModelDrafter(teacher=teacher(server), sandbox=process) as drafter,
    ):
        draft = drafter.draft(repo, [Attempt(draft=earlier, reason="gate 'no-op clearly worse' failed")])
        requests = list(server.requests)
    assert "gate 'no-op clearly worse' failed" in last_user(requests[0])
    shown = last_user(requests[1])
    assert "direction: minimize" in shown and "python3 train.py" in shown and "model.pkl" not in shown
    assert (
        draft.spec["metric"]["direction"] == "maximize" and draft.add == earlier.add and draft.remove == ("model.pkl",)
    )


@pytest.mark.parametrize(
    "budget, teacher_kw, message",
    [
        ({"max_tokens": 50}, {}, r"token budget 50 \(rollout.max_tokens\) was reached"),
        (
            {"max_cost_usd": 0.5},
            {"track_cost": True, "prices": {"scripted-teacher": Price(input=1e5, output=1e5)}},
            r"cost budget \$0.5 \(rollout.max_cost_usd\) was reached",
        ),
        ({"steps_per_round": 3}, {}, r"step budget of 3 commands per attempt \(rollout.steps_per_round\) ran out"),
    ],
)
def test_a_budget_exceeded_ends_with_a_draft_error(tmp_path, process, budget, teacher_kw, message):
    repo = make_repo(tmp_path / "points")
    with ScriptedServer([bash("ls")] * 10, model="scripted-teacher") as server:
        config = teacher(server).model_copy(update=teacher_kw)
        drafter = ModelDrafter(teacher=config, rollout=RolloutConfig(**budget), sandbox=process)
        with pytest.raises(DraftError, match=message) as caught:
            drafter.draft(repo, [])
        asked = server.stats["requests"]
    assert str(caught.value).startswith("The model drafter stopped: ") and str(caught.value).count(". ") == 0
    assert asked == (3 if "steps_per_round" in budget else 1)  # stopped before the next paid call
    assert drafter._session is None  # sandbox and conversation ended with the error


def test_a_teacher_failure_ends_with_a_draft_error(tmp_path, process):
    repo = make_repo(tmp_path / "points")
    with ScriptedServer([Fault.auth()], model="scripted-teacher") as server:
        with pytest.raises(
            DraftError, match=r"^The teacher failed while drafting: The teacher endpoint refused the API key"
        ):
            ModelDrafter(teacher=teacher(server), sandbox=process).draft(repo, [])


def test_replies_without_a_command_end_after_the_rollout_streak(tmp_path, process):
    repo = make_repo(tmp_path / "points")
    with ScriptedServer(["I think the spec is obvious."] * 5, model="scripted-teacher") as server:
        with pytest.raises(DraftError, match=r"3 replies in a row held no command"):
            ModelDrafter(teacher=teacher(server), sandbox=process).draft(repo, [])
        assert "no command I could run" in last_user(server.requests[1])


# -- Docker: the build's gates reject the first draft, the revision is accepted -------------------
@pytest.mark.docker
def test_draft_env_builds_the_revised_draft(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    from arex.drafting.run import draft_env

    repo = make_repo(tmp_path / "points")
    script = [
        bash("ls && head -3 data/table.csv && grep -n csv train.py", "Looking around."),
        WRITE,
        SUBMIT,
        FIX,
        SUBMIT,
    ]
    with ScriptedServer(script, model="scripted-teacher") as server, ModelDrafter(teacher=teacher(server)) as drafter:
        result = draft_env(str(repo), tmp_path / "sources", tmp_path / "envs", drafter, budget=3)
        requests = list(server.requests)
    assert len(requests) == 5
    assert "x1,x2,label" in last_user(requests[1]) and 'open("data/train.csv")' in last_user(requests[1])
    attempts = result.attempts
    assert len(attempts) == 2 and attempts[1].reason is None
    reason = attempts[0].reason
    assert reason.startswith("gate 'no-op clearly worse' failed")
    assert reason in last_user(requests[3]) and json.dumps(reason)[1:-1] in json.dumps(requests[3])
    # the conversation went on
    assert requests[3]["messages"][: len(requests[2]["messages"])] == requests[2]["messages"]
    assert (
        result.accepted
        and attempts[0].draft.remove == ("model.pkl",)
        and attempts[0].draft.add == {"run.sh": "python3 train.py\n"}
    )
    assert attempts[1].draft.spec["metric"]["direction"] == "maximize"
    env = tmp_path / "envs" / "points"  # draft_env names the env after the repository
    task = yaml.safe_load((env / "task.yaml").read_text())
    assert (
        task["metric"]["direction"] == "maximize" and task["run"] == "sh run.sh" and 0.8 < task["baseline_score"] <= 1.0
    )
    assert (env / "workspace" / "run.sh").read_text() == "python3 train.py\n" and not (
        env / "workspace" / "model.pkl"
    ).exists()
