"""The repository's own model is the baseline where the drafter can run it: its run script as it is,
else the estimator its script or notebook builds (from literal arguments) inside the generated
pipeline, fitted on the log of the label when the metric is; the generic template only when the
repository builds no model, and the draft report says which. No Docker (the Docker end-to-end
build of a notebook-only Kaggle layout is test_draft_baseline_builds)."""

from __future__ import annotations

import random

import pytest
from test_draft_target import houses, kaggle, write_repo  # noqa: F401 - kaggle is a fixture

from arex.drafting.heuristic import HeuristicDrafter
from arex.drafting.run import draft_env


def test_the_notebook_model_is_the_baseline(kaggle):  # noqa: F811
    wrapper = kaggle.add["arex_train.py"]
    assert "from sklearn.ensemble import GradientBoostingRegressor" in wrapper
    # the metric is RMSE of the log price: the model fits log(SalePrice) and predicts back on its scale
    assert (
        "TransformedTargetRegressor(regressor=make_pipeline(prep, GradientBoostingRegressor(n_estimators=50, "
        "random_state=0)), func=np.log, inverse_func=np.exp)"
    ) in wrapper
    compile(wrapper, "arex_train.py", "exec")
    guesses = {g.field: g for g in kaggle.guesses}
    assert guesses["baseline"].value == "the repository's model in the generic pipeline"
    assert "house_prices.ipynb" in guesses["baseline"].why and guesses["run"].confidence == "medium"
    statement = kaggle.add[kaggle.spec["statement"]]
    assert "Improve this repository's model: the baseline is `arex_train.py`, which trains the repository's" in (
        statement
    )


def test_a_script_model_with_variable_arguments_is_not_copied_and_the_template_says_so(tmp_path):
    """A LinearRegression() fitted by a script is reused; an estimator built from a variable (which
    the wrapper cannot define) is not, and then the report says the generic template."""
    rng = random.Random(3)
    rows = "".join(f"{rng.randint(18, 64)},{rng.uniform(15, 45):.1f},{rng.uniform(1e3, 5e4):.2f}\n" for _ in range(80))
    table = "age,bmi,charges\n" + rows
    own = write_repo(tmp_path / "own", {
        "data_insurance.csv": table,
        "cost_prediction.py": "import pandas as pd\nfrom sklearn.linear_model import LinearRegression\n"
                              "df = pd.read_csv('data_insurance.csv')\nX, y = df[['age', 'bmi']], df['charges']\n"
                              "LinearRegression().fit(X, y)\n",
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(own, [])
    assert "model = make_pipeline(prep, LinearRegression())" in draft.add["arex_train.py"]
    assert {g.field: g.value for g in draft.guesses}["baseline"] == "the repository's model in the generic pipeline"
    variable = write_repo(tmp_path / "variable", {
        "data_insurance.csv": table,
        "fit.py": "import pandas as pd\nfrom sklearn.linear_model import Ridge\nALPHA = 3\n"
                  "df = pd.read_csv('data_insurance.csv')\nRidge(alpha=ALPHA).fit(df[['age']], df['charges'])\n",
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(variable, [])
    guesses = {g.field: g for g in draft.guesses}
    assert (
        "Ridge(alpha=ALPHA)" not in draft.add["arex_train.py"]
        and "model = make_pipeline(prep, Ridge())" in (draft.add["arex_train.py"])
    )
    assert guesses["baseline"].value == "the generic template" and guesses["baseline"].confidence == "low"
    assert "the repository builds no model the drafter can reuse" in guesses["baseline"].why


@pytest.mark.docker
@pytest.mark.timeout(1800)  # one build; its leak scan of the whole image takes minutes on a loaded two-core host
def test_draft_baseline_builds(tmp_path):
    """End to end on a notebook-only Kaggle layout: drafted, built and accepted in one attempt; the
    env grades the repository's target with the competition's metric, its workspace holds arex's
    split where the notebook reads it and no sample submission, and the baseline is the notebook's model."""
    import yaml
    from test_draft_target import KAGGLE_NOTEBOOK

    repo = write_repo(tmp_path / "house-prices", {
        "train.csv": houses(300, 1),
        "test.csv": houses(80, 2, labelled=False, start=1461),
        "sample_submission.csv": "Id,SalePrice\n" + "".join(f"{i},180000\n" for i in range(1461, 1541)),
        "house_prices.ipynb": KAGGLE_NOTEBOOK,
        "README.md": "# House Prices\n\nhouse-prices-advanced-regression-techniques, a notebook.\n",
    })  # fmt: skip
    result = draft_env(str(repo), tmp_path / "drafts", tmp_path / "envs", HeuristicDrafter(), budget=2)
    assert result.accepted, [a.reason for a in result.attempts]
    env = tmp_path / "envs" / "house-prices"
    task = yaml.safe_load((env / "task.yaml").read_text())
    assert task["data"]["target"] == "SalePrice"
    assert (task["metric"]["name"], task["metric"]["direction"]) == ("rmse_log", "minimize")
    assert task["baseline_score"] is not None and task["baseline_score"] > 0
    workspace = env / "workspace"
    assert not (workspace / "sample_submission.csv").exists()
    assert (workspace / "train.csv").read_text().startswith("Id,LotArea,Neighborhood,OverallQual,SalePrice,YrSold")
    assert "SalePrice" not in (workspace / "test.csv").read_text().splitlines()[0]
    assert "GradientBoostingRegressor(n_estimators=50" in (workspace / "arex_train.py").read_text()
    assert "| baseline | the repository's model in the generic pipeline |" in result.report.read_text()


def test_a_notebook_model_from_another_library_brings_its_requirement(tmp_path):
    from test_draft_target import notebook

    rng = random.Random(5)
    rows = "".join(f"{rng.randint(18, 64)},{rng.uniform(15, 45):.1f},{rng.uniform(1e3, 5e4):.2f}\n" for _ in range(60))
    code = (
        "import pandas as pd\nfrom xgboost import XGBRegressor\ndf = pd.read_csv('costs.csv')\n"
        "XGBRegressor(n_estimators=200).fit(df[['age', 'bmi']], df['charges'])"
    )
    repo = write_repo(
        tmp_path / "costs", {"costs.csv": "age,bmi,charges\n" + rows, "fit.ipynb": notebook(("code", code))}
    )
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    assert "model = make_pipeline(prep, XGBRegressor(n_estimators=200))" in draft.add["arex_train.py"]
    assert "xgboost" in draft.spec["requirements"]


def test_a_module_qualified_model_the_notebook_tunes_last(tmp_path):
    """Found on a real house-prices repository: `import xgboost`, a plain XGBRegressor(), then the
    tuned one with missing=np.nan; the tuned (last) one is the baseline's model, its imports with it.
    The competition is known by its table's columns and the README's words, not its URL."""
    from test_draft_target import notebook

    code = (
        "import numpy as np\nimport pandas as pd\nimport xgboost\ntrain = pd.read_csv('train.csv')\n"
        "regressor = xgboost.XGBRegressor()\n"
        "regressor = xgboost.XGBRegressor(n_estimators=90, max_depth=2,\n    missing=np.nan)\n"
        "regressor.fit(train.drop('SalePrice', axis=1), train['SalePrice'])\n"
    )
    lines = houses(60, 3).splitlines()  # with the competition's MSSubClass column
    table = "\n".join([lines[0].replace("Id,", "Id,MSSubClass,")] + [ln.replace(",", ",20,", 1) for ln in lines[1:]])
    repo = write_repo(tmp_path / "pricing", {
        "train.csv": table + "\n",
        "House Pricing.ipynb": notebook(("code", code)),
        "README.md": "## House Pricing Kaggle Competition\nKaggle competition\n",
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    wrapper = draft.add["arex_train.py"]
    assert "import xgboost\nimport numpy as np\n" in wrapper
    assert "make_pipeline(prep, xgboost.XGBRegressor(n_estimators=90, max_depth=2, missing=np.nan))" in wrapper
    assert "xgboost" in draft.spec["requirements"] and draft.spec["metric"]["name"] == "rmse_log"
