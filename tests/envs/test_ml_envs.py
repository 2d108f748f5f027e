"""ML-repository envs: metrics, submission checks, real git repositories, failing repos, gates."""

import json
import math
import textwrap
from pathlib import Path

import git
import pytest
import yaml
from repo_paths import REPO

from arex.envs.build import build_envs
from arex.envs.judge_sources import SourceError
from arex.envs.ml_build import MLSource, fetch, split_table
from arex.envs.runtime import IMAGE_WORKSPACE
from arex.grading import ml
from arex.grading.ml import MLGrader, SubmissionError, parse_submission
from arex.sandbox import SandboxConfig, make_sandbox
from arex.specs import MLSpec

ROOT = REPO


# -- metrics and submissions (pure) ------------------------------------------------------------
def test_metrics_on_hand_computed_values():
    assert ml.accuracy([1, 2, 3, 3], ["1", "2", "0", "3"]) == 0.75
    # f1 macro: class a: tp1 fp0 fn1 → 2/3; class b: tp1 fp1 fn0 → 2/3
    assert ml.f1_macro(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(2 / 3)
    assert ml.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert ml.roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5  # ties count half
    assert ml.rmse([1, 2, 3], [1, 2, 6]) == pytest.approx(math.sqrt(3))
    assert ml.mae([1, 2, 3], [2, 2, 1]) == 1.0
    assert ml.r2([1, 2, 3], [1, 2, 3]) == 1.0 and ml.r2([1, 2, 3], [2, 2, 2]) == 0.0
    assert ml.log_loss([1, 0], [0.5, 0.5]) == pytest.approx(math.log(2))
    with pytest.raises(SubmissionError, match="both classes"):
        ml.roc_auc([1, 1], [0.2, 0.3])


SPEC = MLSpec(
    id="t",
    title="t",
    run="python3 train.py",
    metric={"name": "rmse", "direction": "minimize"},
    data={"table": "data/full.csv", "target": "y"},
)


@pytest.mark.parametrize(
    "body, message",
    [
        (b"id,pred\n1,2\n", "no 'prediction' column (columns found: id, pred)"),
        (b"id,prediction\n1,2\n", "has 1 rows; expected 2"),
        (b"id,prediction\n1,2\n1,3\n", "id '1' appears twice"),
        (b"id,prediction\n1,2\n2,abc\n", "'abc' is not a number"),
        (b"id,prediction\n1,2\n3,4\n", "lacks predictions for 1 test ids"),
        (b"id,prediction\n1,2\n2,\n", "empty prediction"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_submissions_are_explained(body, message):
    with pytest.raises(SubmissionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_submission(body, SPEC, ["1", "2"])


def test_split_is_seeded_stratified_and_disjoint():
    table = "id,x,y\n" + "".join(f"{i},{i * 2},{i % 2}\n" for i in range(200))

    def with_split(**split):
        return MLSpec.model_validate(
            {**SPEC.model_dump(), "data": {"table": "data/full.csv", "target": "y", "split": split}}
        )

    spec = with_split(seed=5, test_fraction=0.3, public_fraction=0.5, stratify=True)
    first, second = split_table(spec, table.encode()), split_table(spec, table.encode())
    assert first == second
    _, train, public, private = first
    ids = [{r["id"] for r in part} for part in (train, public, private)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2]) and sum(map(len, ids)) == 200
    assert len(public) + len(private) == 60 and abs(len(public) - len(private)) <= 2
    assert sum(r["y"] == "1" for r in public + private) == 30  # classes kept in proportion
    other = with_split(seed=6, stratify=True)
    assert split_table(other, table.encode())[1] != train


# -- real git repositories ---------------------------------------------------------------------
TRAIN_OK = """
import csv
rows = list(csv.DictReader(open("data/train.csv")))
mean = sum(float(r["y"]) for r in rows) / len(rows)
slope = sum((float(r["x"]) - 50) * (float(r["y"]) - mean) for r in rows) / sum((float(r["x"]) - 50) ** 2 for r in rows)
test = list(csv.DictReader(open("data/test.csv")))
with open("submission.csv", "w") as f:
    f.write("id,prediction\\n")
    for r in test:
        f.write(f"{r['id']},{mean + slope * (float(r['x']) - 50)}\\n")
"""


def make_repo(
    path: Path, train: str = TRAIN_OK, spec_overrides: dict | None = None, extra: dict | None = None
) -> git.Repo:
    """A real repository: a labelled table, a training script, a spec; three commits and a branch."""
    path.mkdir(parents=True)
    repo = git.Repo.init(path, initial_branch="main")
    repo.config_writer().set_value("user", "name", "t").set_value("user", "email", "t@t").release()
    (path / "data").mkdir()
    (path / "data" / "full.csv").write_text("x,y\n" + "".join(f"{x},{3 * x + (x * 7919) % 13}\n" for x in range(100)))
    (path / "README.md").write_text("Predict y from x.\n")
    spec = {
        "id": path.name,
        "title": "linear",
        "run": "python3 train.py",
        "metric": {"name": "rmse", "direction": "minimize"},
        "data": {"table": "data/full.csv", "target": "y"},
        "time_limit_s": 20,
        "mutation": {"file": "train.py", "find": "mean + slope", "replace": "0 * slope"},
    }
    spec.update(spec_overrides or {})
    (path / "arex.yaml").write_text(yaml.safe_dump(spec))
    repo.index.add(["data/full.csv", "README.md", "arex.yaml"])
    repo.index.commit("data and spec")
    (path / "train.py").write_text("print('not yet')\n")
    repo.index.add(["train.py"])
    repo.index.commit("placeholder")
    (path / "train.py").write_text(textwrap.dedent(train))
    for rel, text in (extra or {}).items():
        (path / rel).write_text(text)
        repo.index.add([rel])
    repo.index.add(["train.py"])
    repo.index.commit("train")
    repo.create_head("experiment").checkout()
    (path / "train.py").write_text("raise SystemExit('the experiment branch is broken')\n")
    repo.index.add(["train.py"])
    repo.index.commit("broken experiment")
    repo.heads.main.checkout()
    return repo


def source_file(tmp_path: Path, name: str, url: str, commit: str | None, spec: dict | None = None) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump({"repo": url, **({"commit": commit} if commit else {}), **({"spec": spec} if spec else {})})
    )
    return path


def test_fetch_by_commit_branch_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "linear")
    url = f"file://{tmp_path / 'linear'}"
    first_commit = repo.heads.main.commit.parents[0].parents[0].hexsha
    old, sha = fetch(MLSource(url, first_commit, None, "t"))
    assert sha == first_commit and not (old / "train.py").exists()
    branch, branch_sha = fetch(MLSource(url, "experiment", None, "t"))
    assert branch_sha == repo.heads.experiment.commit.hexsha and "broken" in (branch / "train.py").read_text()
    again, _ = fetch(MLSource(url, first_commit, None, "t"))
    assert again == old  # cached by URL and commit: no second clone
    with pytest.raises(SourceError, match="does not exist"):
        fetch(MLSource(url, "0" * 40, None, "t"))
    with pytest.raises(SourceError, match="cannot reach"):
        fetch(MLSource(f"file://{tmp_path}/nowhere", "main", None, "t"))


@pytest.mark.docker
def test_failing_repositories_are_rejected_with_their_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    repos = {
        "good": {},
        "crashes": {"train": "raise RuntimeError('training blew up')\n"},
        "too-slow": {"train": "import time\ntime.sleep(60)\n"},
        "no-submission": {"train": "print('trained, forgot to write')\n"},
        "bad-metric": {"spec": {"metric": {"name": "spearman_of_doom", "direction": "maximize"}}},
        "leaky": {"extra": {"data/copy.csv": None}},
        "missing-file": {"spec": {"statement": "NOPE.md"}},
    }
    sources = []
    for name, how in repos.items():
        extra = None
        if "extra" in how:  # a repository that commits a second copy of the labelled table
            extra = {"data/copy.csv": ""}
        repo = make_repo(tmp_path / name, train=how.get("train", TRAIN_OK), spec_overrides=how.get("spec"), extra=extra)
        if name == "leaky":
            (tmp_path / name / "data" / "copy.csv").write_text((tmp_path / name / "data" / "full.csv").read_text())
            repo.index.add(["data/copy.csv"])
            repo.index.commit("backup of the data")
        sources.append(source_file(tmp_path, name, f"file://{tmp_path / name}", repo.heads.main.commit.hexsha))
    sources.append(source_file(tmp_path, "unreachable", f"file://{tmp_path}/missing-repo", "main"))
    reports = {Path(r.source).stem: r for r in build_envs(sources, tmp_path / "out", SandboxConfig(), concurrency=2)}
    status = {name: r.status for name, r in reports.items()}
    rejected = ("crashes", "too-slow", "no-submission", "bad-metric", "leaky", "missing-file", "unreachable")
    assert status == {"good": "accepted", **{name: "rejected" for name in rejected}}, {
        n: r.reason for n, r in reports.items()
    }
    assert (
        "failed (error, exit code 1)" in reports["crashes"].reason and "training blew up" in reports["crashes"].reason
    )
    assert "exceeded the 20s time limit" in reports["too-slow"].reason
    assert "no submission.csv was written" in reports["no-submission"].reason
    assert "metric.name" in reports["bad-metric"].reason and "spearman_of_doom" in reports["bad-metric"].reason
    assert "/workspace/data/copy.csv recovers 30 of 30 held-out labels" in reports["leaky"].reason
    assert "cannot reach" in reports["unreachable"].reason
    assert "field 'statement' names 'NOPE.md', which is not in the repository" in reports["missing-file"].reason
    good = reports["good"]
    assert {g.name for g in good.gates} == {
        "baseline runs",
        "baseline deterministic",
        "baseline leaves headroom",
        "no-op clearly worse",
        "mutation changes the score",
        "private labels unreachable",
    }
    built = yaml.safe_load((tmp_path / "out" / "good" / "task.yaml").read_text())
    assert built["source_commit"] == git.Repo(tmp_path / "good").heads.main.commit.hexsha
    assert set(built["checksums"]) == {"train", "test", "labels"} and built["image"].startswith("arex-env-good:")
    assert good.scores["baseline"] < good.scores["noop"] < good.scores["mutated"]  # rmse: lower is better


@pytest.mark.docker
def test_spec_beside_the_repository_and_labels_stay_private(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    repo = make_repo(tmp_path / "bare-repo")
    (tmp_path / "bare-repo" / "arex.yaml").unlink()
    repo.index.remove(["arex.yaml"])
    repo.index.commit("spec lives elsewhere")
    spec = {
        "id": "beside",
        "title": "t",
        "run": "python3 train.py",
        "metric": {"name": "mae", "direction": "minimize"},
        "data": {"table": "data/full.csv", "target": "y"},
    }
    spec = yaml.safe_load(yaml.safe_dump(spec))
    source = source_file(tmp_path, "beside", f"file://{tmp_path / 'bare-repo'}", None, spec)
    [report] = build_envs([source], tmp_path / "out")
    assert report.status == "accepted", report.reason
    assert "training labels shuffled" in next(g.detail for g in report.gates if g.name == "mutation changes the score")
    env = tmp_path / "out" / "beside"
    spec = MLSpec.model_validate(yaml.safe_load((env / "task.yaml").read_text()))
    labels = (env / "private" / "labels.csv").read_text()
    with make_sandbox(SandboxConfig(image=spec.image, seed=IMAGE_WORKSPACE), "label-check") as box:
        listing = box.exec("ls data; head -2 data/test.csv").stdout
        assert "full.csv" not in listing and listing.splitlines()[2] == "id,x"
        assert box.exec("grep -rl split /workspace || true").stdout.strip() == ""
        result = MLGrader(env, spec).grade(box)
    assert result.details["private"] == report.scores["baseline"]
    assert "public" in labels and "private" in labels


@pytest.mark.docker
def test_bundled_env_has_room_to_improve(tmp_path):
    [report] = build_envs([ROOT / "envs" / "ml-digits"], tmp_path)
    assert report.status == "accepted", report.reason
    spec = MLSpec.model_validate(yaml.safe_load((tmp_path / "ml-digits" / "task.yaml").read_text()))
    with make_sandbox(SandboxConfig(image=spec.image, seed=IMAGE_WORKSPACE), "improve") as box:
        text = box.read_file("train.py").decode()
        text = text.replace("DecisionTreeClassifier(max_depth=5, random_state=0)", "SVC(gamma=0.001)")
        box.write_file(
            "train.py", text.replace("from sklearn.tree import DecisionTreeClassifier", "from sklearn.svm import SVC")
        )
        improved = MLGrader(tmp_path / "ml-digits", spec).grade(box)
    assert improved.held_out_score > report.scores["baseline"] + 0.2, (improved.feedback, report.scores)
    scores = json.loads((tmp_path / "ml-digits" / ".build.json").read_text())["scores"]
    assert scores["noop"] < scores["baseline"]
