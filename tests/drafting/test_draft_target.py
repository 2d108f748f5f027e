"""The heuristic drafter's target and metric come from what the repository says (README prose,
`y = df[...]`, `fit(X, y)`, `drop(columns=[...])`, notebooks' cells, a competition's layout and
name, the estimators it builds, the scores it computes), not from the last column; each guess keeps
its confidence and reason, and a low-confidence target is said in the console. No Docker: the
tables are shipped, nothing runs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import git
import pytest

from arex.drafting.heuristic import HeuristicDrafter
from arex.drafting.target import low_confidence_target
from arex.grading.ml import METRICS


def write_repo(root: Path, files: dict[str, str]) -> Path:
    """A real git repository holding `files`, committed."""
    root.mkdir(parents=True)
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    repo = git.Repo.init(root)
    repo.git.add("-A")
    repo.git.commit("-m", "init", author="t <t@example.com>",
                    env={"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})  # fmt: skip
    return root


def notebook(*cells: tuple[str, str]) -> str:
    """An .ipynb with (cell_type, source) cells, as Jupyter saves it."""
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True)}
                | ({"outputs": [], "execution_count": None} if kind == "code" else {})
                for kind, src in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def houses(n: int, seed: int, labelled: bool = True, start: int = 1) -> str:
    """A house-prices table: the label SalePrice sits before YrSold (not the last column)."""
    rng = random.Random(seed)
    head = ["Id", "LotArea", "Neighborhood", "OverallQual"] + (["SalePrice"] if labelled else []) + ["YrSold"]
    lines = [",".join(head)]
    for i in range(start, start + n):
        area, qual = rng.randint(2000, 20000), rng.randint(1, 10)
        price = int(20000 + area * 3 + qual * 15000 + rng.gauss(0, 8000))
        row = [i, area, rng.choice(["NAmes", "OldTown", "Edwards"]), qual] + ([price] if labelled else [])
        lines.append(",".join(str(v) for v in row + [rng.choice([2006, 2007, 2008, 2009, 2010])]))
    return "\n".join(lines) + "\n"


KAGGLE_NOTEBOOK = notebook(
    ("markdown", "# House prices\nWe predict the sale prices of the houses."),
    (
        "code",
        "!pip install lightgbm\nimport numpy as np\nimport pandas as pd\n"
        "from sklearn.ensemble import GradientBoostingRegressor\n"
        "train = pd.read_csv('train.csv')\ntest = pd.read_csv('test.csv')",
    ),  # fmt: skip
    ("code", "%matplotlib inline\ny = np.log(train['SalePrice'])\nX = train.drop(['Id', 'SalePrice'], axis=1)"),
    ("code", "model = GradientBoostingRegressor(n_estimators=50, random_state=0)\nmodel.fit(X, y)"),
    ("code", "this cell is not python ("),
)


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory):
    """A Kaggle layout, notebook only: train.csv, the competition's unlabelled test.csv, its
    sample_submission.csv, the data description; the label is not the last column."""
    root = tmp_path_factory.mktemp("kaggle") / "house-prices"
    repo = write_repo(root, {
        "train.csv": houses(200, 1),
        "test.csv": houses(80, 2, labelled=False, start=1461),
        "sample_submission.csv": "Id,SalePrice\n" + "".join(f"{i},180000\n" for i in range(1461, 1541)),
        "data_description.txt": "LotArea: Lot size in square feet\nOverallQual: overall quality\n",
        "house_prices.ipynb": KAGGLE_NOTEBOOK,
        "README.md": "# House Prices\n\nMy solution to the Kaggle competition\n"
        "[House Prices: Advanced Regression Techniques](https://www.kaggle.com/c/house-prices-advanced-regression-techniques).\n",
    })  # fmt: skip
    return HeuristicDrafter(pin=False).draft(repo, [])


def test_kaggle_layout_target_and_competition_metric(kaggle):
    """The label is the column the competition's test table lacks, that the notebook fits on and
    the sample submission asks for (high), not YrSold (the last column); the metric is the
    competition's RMSE of the log price, a built-in, said to be the competition's."""
    spec, guesses = kaggle.spec, {g.field: g for g in kaggle.guesses}
    assert spec["data"]["target"] == "SalePrice" and guesses["data.target"].confidence == "high"
    why = guesses["data.target"].why
    assert "test.csv has every column but 'SalePrice'" in why and "house_prices.ipynb uses 'SalePrice'" in why
    assert "house_prices.ipynb says it predicts it ('predict the sale prices of the houses')" in why
    assert "sample_submission.csv asks for 'SalePrice'" in why
    assert spec["metric"] == {"name": "rmse_log", "direction": "minimize"}
    assert guesses["metric.name"].confidence == "high" and "House Prices" in guesses["metric.name"].why
    assert spec["data"]["split"]["stratify"] is False and spec["data"]["id_column"] == "Id"


def test_readme_names_a_target_that_is_not_last(tmp_path):
    """'The target variable is G3' in the README, a table whose last column is something else."""
    rng = random.Random(4)
    rows = "".join(f"{rng.randint(15, 22)},{rng.randint(0, 20)},{rng.randint(0, 30)}\n" for _ in range(120))
    repo = write_repo(tmp_path / "grades", {
        "student.csv": "age,G3,absences\n" + rows,
        "README.md": "# Student grades\n\nData from two schools.\n\n## Data\n\nThe target variable is **G3**, "
                     "the final grade (0-20). Models are compared by mean absolute error.\n",
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    guesses = {g.field: g for g in draft.guesses}
    assert draft.spec["data"]["target"] == "G3" and guesses["data.target"].confidence == "high"
    assert "README names it the target" in guesses["data.target"].why
    # 21 integer grades would be classes by the values alone; the README's metric says regression
    assert draft.spec["metric"] == {"name": "mae", "direction": "minimize"}
    assert "mean absolute error" in guesses["metric.name"].why and guesses["metric.name"].confidence == "high"
    assert low_confidence_target(draft.guesses) is None


def test_script_fit_traced_through_a_split_and_a_regressor_on_integer_labels(tmp_path):
    """`y = df.pop("quality")`, split by train_test_split, fitted by a RandomForestRegressor and
    scored with mean_squared_error: regression on six integer grades (rmse), not classification."""
    rng = random.Random(6)
    rows = "".join(f"{rng.uniform(3, 15):.2f},{rng.randint(3, 8)},{rng.uniform(0.1, 2):.2f}\n" for _ in range(150))
    script = (
        "import pandas as pd\n"
        "from sklearn.ensemble import RandomForestRegressor\n"
        "from sklearn.metrics import mean_squared_error\n"
        "from sklearn.model_selection import train_test_split\n"
        "df = pd.read_csv('wine.csv')\n"
        "labels = df.pop('quality')\n"
        "X_tr, X_te, y_tr, y_te = train_test_split(df, labels, random_state=0)\n"
        "reg = RandomForestRegressor(n_estimators=100, max_depth=None, random_state=42)\n"
        "reg.fit(X_tr, y_tr)\n"
        "print(mean_squared_error(y_te, reg.predict(X_te)) ** 0.5)\n"
    )
    repo = write_repo(tmp_path / "wine", {"wine.csv": "acidity,quality,sulphates\n" + rows, "analysis.py": script})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    guesses = {g.field: g for g in draft.guesses}
    assert draft.spec["data"]["target"] == "quality"
    assert "analysis.py uses 'quality' as its label" in guesses["data.target"].why
    assert draft.spec["metric"] == {"name": "rmse", "direction": "minimize"}
    assert "analysis.py scores its model with it" in guesses["metric.name"].why


def test_a_low_confidence_target_is_said_in_the_console(tmp_path):
    """Nothing names the label: the last column, low, and the console line says so and where to fix it."""
    rng = random.Random(8)
    rows = "".join(f"{rng.random():.3f},{rng.random():.3f},{rng.random():.3f}\n" for _ in range(60))
    repo = write_repo(tmp_path / "blank", {"measurements.csv": "a,b,c\n" + rows})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    assert {g.field: g.confidence for g in draft.guesses}["data.target"] == "low"
    note = low_confidence_target(draft.guesses)
    assert note is not None and "'c'" in note and "data.target" in note and "the last column" in note


def test_log_metrics_are_built_ins():
    """RMSE of log price (house prices) and RMSLE, scored on the host as the other built-ins."""
    assert METRICS["rmse_log"]([100.0, 1000.0], [100.0, 100.0]) == pytest.approx(2.302585 / 2**0.5, rel=1e-5)
    assert METRICS["rmsle"]([0.0, 9.0], [0.0, 0.0]) == pytest.approx(2.302585 / 2**0.5, rel=1e-5)
    # outside the logarithm's domain: not a number, which the grader calls an invalid submission
    assert math.isnan(METRICS["rmse_log"]([1.0], [-1.0])) and math.isnan(METRICS["rmsle"]([1.0], [-1.0]))


def forest_repo(root: Path) -> Path:
    """A competition's layout whose unlabelled test.csv is larger than train.csv, a label named like
    no label, a notebook reading the files where Kaggle mounts them, and a README naming the
    label and, after 'from', the features."""
    rng = random.Random(11)

    def rows(n: int, labelled: bool, start: int) -> str:
        out = []
        for i in range(start, start + n):
            elevation, slope = rng.randint(1800, 3800), rng.randint(0, 60)
            label = [str(1 + (elevation > 2800) + (slope > 30))] if labelled else []
            out.append(",".join([str(i), str(elevation), str(slope)] + label + [rng.choice(["s1", "s2"])]))
        return "\n".join(out) + "\n"

    code = "import pandas as pd\ntrain = pd.read_csv('../input/forest-cover-type/train.csv')\ntrain.describe()\n"
    return write_repo(root, {
        "train.csv": "Id,Elevation,Slope,Cover_Type,Soil\n" + rows(90, True, 1),
        "test.csv": "Id,Elevation,Slope,Soil\n" + rows(300, False, 91),
        "eda.ipynb": notebook(("code", code)),
        "README.md": "# Forest cover\n\nWe predict the Elevation-driven cover type: we predict Cover_Type from "
                     "Elevation and Slope.\n",
    })  # fmt: skip


def test_competition_layout_with_a_larger_test_table_and_a_label_named_like_no_label(tmp_path):
    """The labelled table is train.csv though test.csv is larger (its columns are train's less one);
    the label is the column test.csv lacks, which the README says it predicts; the features named
    after 'from' get no credit."""
    draft = HeuristicDrafter(pin=False).draft(forest_repo(tmp_path / "forest"), [])
    guesses = {g.field: g for g in draft.guesses}
    assert draft.spec["data"]["table"] == "arex_data/train_table.csv" and "train.csv" in draft.remove
    assert draft.spec["data"]["target"] == "Cover_Type" and guesses["data.target"].confidence == "high"
    assert "test.csv has every column but 'Cover_Type'" in guesses["data.target"].why
    assert "the README says it predicts it" in guesses["data.target"].why
    assert draft.spec["metric"]["name"] == "accuracy"  # three integer classes


def test_code_forms_a_label_takes():
    """TARGET = "..." then df[TARGET] and drop(columns=[TARGET]); df.Label passed to fit; an
    estimator from another library with literal arguments is the repository's model."""
    from arex.drafting.inspect import scan_script

    code = scan_script(
        "nb.py",
        'import pandas as pd\nfrom xgboost import XGBClassifier\nTARGET = "Transported"\nID = "PassengerId"\n'
        "df = pd.read_csv('train.csv')\nX = df.drop(columns=[TARGET, ID])\nfeatures = df[TARGET]\n"
        "clf = XGBClassifier(n_estimators=300, max_depth=-1)\nclf.fit(X, df.Transported)\n"
        "print(cross_val_score(clf, X, df[TARGET], scoring='roc_auc'))\n",
    ).code
    assert code.label_refs == ["Transported"] and code.fit_refs == ["Transported"]
    assert code.dropped == ["Transported", "PassengerId"] and code.metrics == ["roc_auc"]
    assert code.models == [
        ["from xgboost import XGBClassifier", "XGBClassifier", "XGBClassifier(n_estimators=300, max_depth=-1)"]
    ]


def test_a_served_model_readme_and_a_notebook_that_trains_it(tmp_path):
    """Found on a real model-deployment repository: the README's curl example posts to /predict
    with an Age field (not prose about the task), and the notebook trains with
    `X_train, y_train = df.drop('Survived', axis=1), df.Survived`: the label is Survived, binary."""
    rng = random.Random(12)
    rows = "".join(f"{i},{rng.randint(1, 80)},{rng.uniform(5, 300):.2f},{rng.randint(0, 1)}\n" for i in range(100))
    code = (
        "import pandas as pd\nfrom sklearn.linear_model import LogisticRegression\n"
        "df = pd.read_csv('data/titanic.csv')\nX_train, y_train = df.drop('Survived', axis=1), df.Survived\n"
        "pipeline = LogisticRegression()\npipeline.fit(X_train, y_train)\n"
    )
    readme = (
        "# Deploy a model\n\nServe it:\n\n```\ncurl -X POST http://localhost:5000/predict -d '{\"Age\": 22}'\n```\n\n"
        "    curl http://localhost:5000/predict -d '{\"Age\": 30}'\n\nThen call /predict -d '{\"Age\": 40}' again.\n"
    )
    repo = write_repo(tmp_path / "deploy", {
        "data/titanic.csv": "PassengerId,Age,Fare,Survived\n" + rows,
        "Step 1 - Train and Serialize.ipynb": notebook(("code", code)),
        "README.md": readme,
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    guesses = {g.field: g for g in draft.guesses}
    assert draft.spec["data"]["target"] == "Survived" and "Age" not in guesses["data.target"].why
    assert "Step 1 - Train and Serialize.ipynb uses 'Survived' as its label" in guesses["data.target"].why
    assert draft.spec["metric"]["name"] in ("accuracy", "roc_auc")


def test_a_label_keyword_and_an_fbeta_score(tmp_path):
    """Found on a real course repository: the label is given as process_data(..., label="salary")
    and the model is scored with fbeta_score (macro F1 is the closest built-in)."""
    rng = random.Random(13)
    rows = "".join(
        f"{rng.randint(17, 90)},{rng.choice(['a', 'b', 'c'])},{rng.choice(['<=50K', '>50K'])}\n" for _ in range(90)
    )
    code = (
        "from sklearn.metrics import fbeta_score, precision_score\nfrom ml.data import process_data\n"
        "import pandas as pd\ndata = pd.read_csv('data/census.csv')\n"
        "X, y, enc, lb = process_data(data, categorical_features=['workclass'], label='salary', training=True)\n"
        "def compute_model_metrics(y, preds):\n    return fbeta_score(y, preds, beta=1, zero_division=1)\n"
    )
    repo = write_repo(tmp_path / "census", {"data/census.csv": "age,workclass,salary\n" + rows, "train_model.py": code})
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    guesses = {g.field: g for g in draft.guesses}
    assert draft.spec["data"]["target"] == "salary"
    assert "train_model.py uses 'salary' as its label" in guesses["data.target"].why
    assert draft.spec["metric"] == {"name": "f1", "direction": "maximize"}
    assert "train_model.py scores its model with it" in guesses["metric.name"].why
