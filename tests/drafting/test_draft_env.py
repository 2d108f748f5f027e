"""`arex draft-env` with the heuristic drafter: the guesses on repositories written here (target,
metric, id column, file literals, requirements, tables to convert or remove), the revision rules,
and, with real Docker builds, drafts of the bundled ML envs' repositories (their arex.yaml removed)
that pass every gate in one command, and a draft revised after the leak gate rejected it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import git
import pytest
import yaml
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.config import ArexConfig
from arex.drafting import DRAFTERS, Attempt, DraftError, make_drafter
from arex.drafting.heuristic import HeuristicDrafter
from arex.drafting.inspect import pypi_names, read_table, scan_script
from arex.drafting.run import draft_env
from arex.errors import UserInputError

ROOT = REPO
runner = CliRunner()


def write_repo(root: Path, files: dict[str, str | bytes], commit: bool = True) -> Path:
    """A real git repository holding `files`, committed."""
    root.mkdir(parents=True)
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
    if commit:
        repo = git.Repo.init(root)
        repo.git.add("-A")
        repo.git.commit(
            "-m",
            "init",
            author="t <t@example.com>",
            env={"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"},
        )
    return root


def table(rows: int, seed: int = 0, delimiter: str = ",", header=("row_id", "age", "fare", "Survived")) -> str:
    rng = random.Random(seed)
    lines = [delimiter.join(header)]
    for i in range(rows):
        age, fare = rng.randint(1, 80), round(rng.uniform(5, 300), 2)
        lines.append(delimiter.join(str(v) for v in (i + 100, age, fare, int(fare + rng.gauss(0, 40) > 150))))
    return "\n".join(lines) + "\n"


TRAIN_PY = """
import csv
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
X, y = train[["age", "fare"]], train["Survived"]
model = LogisticRegression().fit(X, y)
with open("preds.csv", "w") as f:
    w = csv.writer(f)
    w.writerow(["row_id", "Survived"])
    for i, p in zip(test["row_id"], model.predict(test[["age", "fare"]])):
        w.writerow([i, p])
"""


# -- heuristics on repositories written here (no Docker: the tables are shipped) --------------------
def test_shipped_semicolon_table_with_a_run_script(tmp_path):
    """Target from the label the script fits on, id from the column it writes, the literals as the
    file names, and a semicolon cp1252 table converted to CSV (the original removed)."""
    rng = random.Random(1)
    rows = [
        f"{i};{rng.randint(1, 80)};{rng.uniform(5, 300):.2f};{rng.choice(['Ä1', 'B2', 'Ç3'])};{i % 2}"
        for i in range(100, 220)
    ]
    text = ("row_id;age;fare;cabin;Survived\n" + "\n".join(rows) + "\n").encode("cp1252")
    repo = write_repo(
        tmp_path / "titanic",
        {
            "data/passengers.csv": text,
            "train.py": TRAIN_PY,
            "README.md": "# Titanic\n\nWho survived?\n\n## Usage\nrun it\n",
        },
    )
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    spec = draft.spec
    assert spec["data"]["target"] == "Survived" and spec["data"]["id_column"] == "row_id"
    assert spec["run"] == "python3 train.py"
    assert (spec["data"]["train_file"], spec["data"]["test_file"]) == ("data/train.csv", "data/test.csv")
    assert spec["submission"] == {"file": "preds.csv", "id_column": "row_id", "prediction_column": "Survived"}
    assert spec["metric"] == {"name": "accuracy", "direction": "maximize"} and spec["data"]["split"]["stratify"] is True
    assert spec["data"]["table"] == "arex_data/passengers_table.csv" and draft.add[
        "arex_data/passengers_table.csv"
    ].startswith("row_id,age,fare,cabin,Survived\n100,")
    assert "Ç3" in draft.add["arex_data/passengers_table.csv"]
    assert "data/passengers.csv" in draft.remove
    assert spec["requirements"] == ["pandas", "scikit-learn"]
    statement = draft.add[spec["statement"]]
    assert (
        statement.startswith("# Titanic\n\nWho survived?")
        and "## Usage" not in statement
        and "accuracy (higher is better)" in statement
    )
    confidence = {g.field: g.confidence for g in draft.guesses}
    assert confidence["data.target"] == "high" and confidence["run"] == "high"


def test_regression_without_a_script_gets_the_wrapper(tmp_path):
    rng = random.Random(3)
    rows = "\n".join(f"{rng.uniform(0, 1):.4f},{rng.choice('abc')},{rng.uniform(100, 900):.2f}" for _ in range(80))
    repo = write_repo(tmp_path / "houses", {"houses.csv": "size,zone,value\n" + rows + "\n"}, commit=False)
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    spec = draft.spec
    assert spec["data"]["target"] == "value" and spec["metric"] == {"name": "rmse", "direction": "minimize"}
    assert spec["data"]["id_column"] == "id" and spec["data"]["split"]["stratify"] is False
    assert spec["run"] == "python3 arex_train.py" and "Ridge()" in draft.add["arex_train.py"]
    compile(draft.add["arex_train.py"], "arex_train.py", "exec")
    guesses = {g.field: g for g in draft.guesses}
    assert (
        guesses["run"].confidence == "low"
        and guesses["data.target"].confidence == "low"
        and guesses["data.id_column"].confidence == "low"
    )


def test_target_by_name_id_by_name_and_duplicates_removed(tmp_path):
    """`label` is named like a target though not last; a unique `uid` is the id; another labelled
    copy of the table is removed; a model factory in the repository is used by the wrapper."""
    rng = random.Random(5)
    body = "".join(
        f"u{i},{rng.choice(['cat', 'dog', 'bird'])},{rng.random():.3f},{rng.random():.3f}\n" for i in range(60)
    )
    repo = write_repo(tmp_path / "pets", {
        "data/pets.csv": "uid,label,f1,f2\n" + body,
        "backup/pets_old.csv": "uid,label,f1,f2\n" + body[: len(body) // 2],
        "model.py": (
            "from sklearn.tree import DecisionTreeClassifier\n"
            "\n"
            "def build_model():\n"
            "    return DecisionTreeClassifier(random_state=0)\n"
        ),
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    assert draft.spec["data"]["target"] == "label" and draft.spec["data"]["id_column"] == "uid"
    assert draft.spec["metric"]["name"] == "accuracy" and draft.remove == ("backup/pets_old.csv",)
    assert "from model import build_model" in draft.add["arex_train.py"]
    assert {g.field: g.confidence for g in draft.guesses}["run"] == "medium"


def test_literal_extraction_and_requirement_mapping():
    info = scan_script(
        "src/fit.py",
        """
import os, yaml, cv2
import numpy as np
from sklearn.ensemble import RandomForestClassifier
from . import helpers
import utils
df = pd.read_csv("input/train_v2.csv"); te = pd.read_csv('input/test_v2.csv')
X_tr, y_tr = df.drop(columns=["target"]), df["target"]
p = RandomForestClassifier().fit(X_tr, y_tr).predict_proba(te)[:, 1]
pd.DataFrame({"ID": te["ID"], "target": p}).to_csv("submission.csv", index=False)
""",
    )
    assert sorted(info.literals) == ["input/test_v2.csv", "input/train_v2.csv", "submission.csv"] and info.written == [
        "submission.csv"
    ]
    assert info.label_refs == ["target"] and info.submission_columns == ["ID", "target"] and info.uses_proba
    assert pypi_names(info.imports, {"utils", "fit"}) == ["numpy", "opencv-python-headless", "pyyaml", "scikit-learn"]


def test_table_sniffing_and_encodings():
    tsv = read_table("d/x.tsv", b"a\tb\n1\t2\n3\t4\n")
    assert (tsv.format, tsv.delimiter, tsv.rows, tsv.column("a").integer) == (
        "tsv",
        "\t",
        2,
        True,
    ) and not tsv.plain_csv
    latin = read_table("x.csv", "name;score\nJosé;1\nZoë;2\n".encode("latin-1"))
    assert (latin.delimiter, latin.encoding, latin.names, latin.rows) == (";", "cp1252", ["name", "score"], 2)
    records = read_table("x.jsonl", b'{"a": 1, "b": true}\n{"a": 2.0, "b": false}\n')
    assert records.names == ["a", "b"] and records.column("b").values == ["0", "1"] and not records.plain_csv


# -- revisions from the gate's reason (no Docker) -----------------------------------------------
def test_revisions_follow_the_reason(tmp_path):
    repo = write_repo(
        tmp_path / "titanic",
        {"data/train.csv": table(100), "train.py": TRAIN_PY.replace("model.predict(", "model.predict_proba(")},
    )
    drafter = HeuristicDrafter(pin=False)
    first = drafter.draft(repo, [])
    assert first.spec["metric"]["name"] == "roc_auc"  # a binary 0/1 target and a script predicting probabilities
    noop = drafter.draft(
        repo, [Attempt(draft=first, reason="gate 'no-op clearly worse' failed: constant 0 scores 0.5 vs baseline 0.5")]
    )
    assert noop.spec["metric"]["name"] == "accuracy" and noop.spec["run"] == "python3 train.py"
    assert any(g.field == "revision" and "trying accuracy" in g.why for g in noop.guesses)
    crash = drafter.draft(
        repo,
        [
            Attempt(
                draft=first,
                reason="gate 'baseline runs' failed: run crashed; ModuleNotFoundError: No module named 'xgboost'",
            )
        ],
    )
    assert "xgboost" in crash.spec["requirements"]
    flaky = drafter.draft(
        repo, [Attempt(draft=first, reason="gate 'baseline deterministic' failed: two runs: 0.8 and 0.7")]
    )
    assert (
        flaky.spec["run"] == "python3 arex_train.py"
        and "model = make_pipeline(prep, LogisticRegression())" in flaky.add["arex_train.py"]  # train.py's model
    )
    assert flaky.spec["metric"]["name"] == "accuracy" and "model.predict(X_test)" in flaky.add["arex_train.py"]
    # a reason no rule knows is still revised: the next thing to try (here the generic wrapper)
    unknown = drafter.draft(repo, [Attempt(draft=first, reason="something nobody expected")])
    assert unknown.spec["run"] == "python3 arex_train.py"
    with pytest.raises(DraftError, match="names no repository or package file"):
        drafter.draft(
            repo,
            [
                Attempt(
                    draft=first,
                    reason="gate 'private labels unreachable' failed: probes that should fail succeeded: ['x']",
                )
            ],
        )


def test_a_library_copy_of_the_dataset_is_scrubbed(tmp_path):
    """Found on a real Titanic repository: scikit-learn ships the Titanic table among its OpenML
    test files, so the leak gate names a file under dist-packages; the revision scrubs it."""
    repo = write_repo(tmp_path / "titanic", {"data/train.csv": table(100), "train.py": TRAIN_PY})
    drafter = HeuristicDrafter(pin=False)
    first = drafter.draft(repo, [])
    assert "scrub" not in first.spec
    where = (
        "/usr/local/lib/python3.11/dist-packages/"
        "sklearn/datasets/tests/data/openml/id_40945/data-v1-dl-16826755.arff.gz"
    )
    reason = (
        f"gate 'private labels unreachable' failed: {where} recovers 264 of 268 held-out labels"
        " (column 2; rows found by their feature values)"
    )
    second = drafter.draft(repo, [Attempt(draft=first, reason=reason)])
    assert second.spec["scrub"] == ["sklearn/datasets/tests/data/openml/id_40945/data-v1-dl-16826755.arff.gz"]
    assert any(g.field == "revision" and "scrubbed sklearn/" in g.why for g in second.guesses)


def test_spreadsheet_export_with_unnamed_columns_and_free_text(tmp_path):
    """Found on a real SMS spam repository: a header `v1,v2,,,` (unnamed, nearly empty columns) and
    the feature a free-text message. The empty columns get names the build uses too, they are never
    the target, the message is not the target either, and the wrapper reads it as text."""
    rng = random.Random(9)
    words = ["win", "cash", "now", "call", "meet", "lunch", "later", "prize", "free", "home", "see", "you"]
    lines = ["v1,v2,,,"]
    for i in range(120):
        spam = rng.random() < 0.3
        text = " ".join(rng.choice(words[:5] if spam else words[5:]) for _ in range(6)) + f" {i}"
        lines.append(f"{'spam' if spam else 'ham'},{text},{'x' if i % 40 == 0 else ''},,")
    repo = write_repo(
        tmp_path / "sms",
        {
            "dataset/spam.csv": "\r\n".join(lines) + "\r\n",
            "results/summary.csv": "model,score\n" + "".join(f"m{i},{i / 10}\n" for i in range(400)),
        },
    )
    info = read_table("dataset/spam.csv", (repo / "dataset/spam.csv").read_bytes())
    assert info.names == ["v1", "v2", "column_3", "column_4", "column_5"]
    (repo / "analyse.py").write_text(
        'import pandas as pd\ndf = pd.read_csv("dataset/spam.csv")\npd.DataFrame().to_csv("results/summary.csv")\n'
    )
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    # read by a script (so converted: the training rows take its place); the bigger results table is its output
    assert draft.spec["data"]["table"].endswith(("/spam.csv", "/spam_table.csv"))
    assert draft.spec["data"]["target"] == "v1" and draft.spec["metric"]["name"] == "accuracy"
    assert "TfidfVectorizer" in draft.add["arex_train.py"]


def test_pins_leave_out_a_name_pip_cannot_install(monkeypatch, tmp_path):
    """An import with no PyPI package (here `helpers_internal`) is left out of the pins, the rest pinned;
    a build whose preflight names a package with no version drops it on the revision."""
    from arex.envs import ml_images
    from arex.envs.judge_sources import SourceError

    def resolve(names, image):
        if "helpers-internal" in names:
            raise SourceError(
                f"Requirements preflight (pip dry run on {image}, Python 3.11.2): helpers-internal in the requirements"
                " to pin cannot be installed; versions that install: none."
            )
        return {n: "1.0" for n in names}

    monkeypatch.setattr(ml_images, "resolve_pins", resolve, raising=False)
    script = TRAIN_PY.replace("import csv", "import csv\nimport helpers_internal")
    repo = write_repo(tmp_path / "titanic", {"data/all.csv": table(60), "train.py": script})
    drafter = HeuristicDrafter()
    first = drafter.draft(repo, [])
    assert first.spec["requirements"] == ["pandas==1.0", "scikit-learn==1.0"]
    assert (
        "left out (pip cannot install them): helpers-internal"
        in {g.field: g.why for g in first.guesses}["requirements"]
    )
    unpinned = HeuristicDrafter(pin=False)
    assert unpinned.draft(repo, []).spec["requirements"] == ["helpers-internal", "pandas", "scikit-learn"]
    reason = (
        "Requirements preflight (pip dry run on arex-base:latest, Python 3.11.2):"
        " helpers-internal in the spec's requirements cannot be installed"
        " from a wheel for Python 3.11.2; versions that install: none."
    )
    draft = unpinned.draft(repo, [Attempt(draft=first, reason=f"unreadable source: {reason}")])
    assert draft.spec["requirements"] == ["pandas", "scikit-learn"]


def test_unknown_drafter_is_one_sentence():
    assert "heuristic" in DRAFTERS
    with pytest.raises(UserInputError, match=r"Unknown drafter 'oracle': choose one of .*heuristic"):
        make_drafter("oracle", ArexConfig())


# -- real builds --------------------------------------------------------------------------------
def bundled_repo(tmp_path: Path, name: str) -> Path:
    """The bundled env's files in a fresh git repository, without its arex.yaml."""
    files = {p.name: p.read_bytes() for p in (ROOT / "envs" / name).iterdir() if p.is_file() and p.name != "arex.yaml"}
    return write_repo(tmp_path / "repos" / name, files)


@pytest.mark.docker
@pytest.mark.parametrize("name", ["ml-digits", "ml-diabetes", "ml-breast-cancer"])
def test_draft_env_builds_each_bundled_repository(tmp_path, name):
    repo = bundled_repo(tmp_path, name)
    out, envs = tmp_path / "drafts", tmp_path / "envs"
    result = runner.invoke(app, ["draft-env", str(repo), "--out", str(out), "--envs-out", str(envs), "--budget", "3"])
    assert result.exit_code == 0, result.output
    assert "accepted after" in result.output and "data.target" in result.output
    source = yaml.safe_load((out / f"{name}.yaml").read_text())
    assert source["repo"] == str(repo.resolve()) and source["spec"]["id"] == name
    assert source["commit"] == git.Repo(repo).head.commit.hexsha  # a clean git folder: pinned to its commit
    stamp = json.loads((envs / name / ".build.json").read_text())
    assert stamp["gates"] and all(g["passed"] for g in stamp["gates"])
    assert {g["name"] for g in stamp["gates"]} >= {"baseline runs", "no-op clearly worse", "private labels unreachable"}
    task = yaml.safe_load((envs / name / "task.yaml").read_text())
    expected = yaml.safe_load((ROOT / "envs" / name / "arex.yaml").read_text())
    assert task["data"]["target"] == expected["data"]["target"]
    assert (task["metric"]["name"], task["metric"]["direction"]) == (
        expected["metric"]["name"],
        expected["metric"]["direction"],
    )
    assert task["leak_probes"] and task["scrub"]  # the packaged scikit-learn data is scrubbed and probed
    report = json.loads((out / f"{name}.draft.json").read_text())
    assert report["accepted"] and report["drafter"] == "heuristic"


@pytest.mark.docker
def test_a_rejected_draft_is_revised_from_the_leak_gate(tmp_path):
    """A second copy of the table (a .txt the drafter does not read as a table) fails the leak
    gate; the revision removes the file the gate names and the build accepts."""
    data = table(240, seed=9)
    repo = write_repo(
        tmp_path / "survival",
        {"data/train.csv": data, "notes/rows.txt": data, "train.py": TRAIN_PY, "README.md": "# Survival\n"},
    )
    result = draft_env(str(repo), tmp_path / "drafts", tmp_path / "envs", HeuristicDrafter(), budget=3)
    assert [a.reason is None for a in result.attempts] == [False, True], [a.reason for a in result.attempts]
    assert "private labels unreachable" in result.attempts[0].reason and "notes/rows.txt" in result.attempts[0].reason
    assert result.accepted and "notes/rows.txt" in result.attempts[1].draft.remove
    assert yaml.safe_load(result.source_yaml.read_text())["remove"] == ["data/train.csv", "notes/rows.txt"]
    assert (tmp_path / "envs" / "survival" / "task.yaml").is_file()
    markdown = (tmp_path / "drafts" / "survival.draft.md").read_text()
    assert "| 1 | rejected |" in markdown and "| 2 | accepted |" in markdown and "| revision | 1 |" in markdown
