"""The statement a heuristic draft writes is one a strong agent can act on: the columns with their
types, missing share and example values; the repository's data description named; exactly which
file is graded; a competition's own test table and sample submission removed or explained; the
repository's code that reads a file arex moved named with what to read instead; the README's
images and bare links left out. No Docker."""

from __future__ import annotations

import random

from test_draft_target import houses, kaggle, write_repo  # noqa: F401 - kaggle is a fixture

from arex.drafting.heuristic import HeuristicDrafter


def test_kaggle_statement_columns_files_and_graded_file(kaggle):  # noqa: F811
    spec, statement = kaggle.spec, kaggle.add[kaggle.spec["statement"]]
    # arex's split goes where the notebook reads (train.csv, test.csv): the repository's code still runs
    assert (spec["data"]["train_file"], spec["data"]["test_file"]) == ("train.csv", "test.csv")
    assert "sample_submission.csv" in kaggle.remove and "test.csv" not in kaggle.remove
    assert "| `SalePrice` (the label) | integer | 0% |" in statement
    assert "| `Neighborhood` | category (3 values) | 0% | `" in statement
    assert "`data_description.txt`" in statement
    assert "`sample_submission.csv` is left out: the competition's sample submission" in statement
    assert "`test.csv` holds arex's test rows, written over the competition's own unlabelled test file" in statement
    assert (
        "The graded file: `python3 arex_train.py` must write `submission.csv` with the columns `Id,prediction`"
        in statement
    )
    assert "rmse_log (lower is better): the root mean squared error between log(label) and log(prediction)" in (
        statement
    )


def test_missing_share_and_a_script_reading_the_table(tmp_path):
    """A script reads the labelled table arex splits: the training rows are written at the table's
    path (the table itself converted under another name), so the script still runs. A column missing
    in a quarter of the rows says 25%."""
    rng = random.Random(2)
    rows = "".join(
        f"{age},{rng.choice(['yes', 'no'])},{rng.uniform(1e3, 5e4):.2f}\n"
        for i, age in enumerate(("", "NA")[i % 8 == 0] if i % 4 == 0 else rng.randint(18, 64) for i in range(80))
    )
    script = (
        "import pandas as pd\nfrom sklearn.linear_model import LinearRegression\n"
        "df = pd.read_csv('data/data_insurance.csv')\nX = df[['age']].fillna(40)\ny = df['charges']\n"
        "model = LinearRegression()\nmodel.fit(X, y)\n"
    )
    repo = write_repo(tmp_path / "insurance", {
        "data/data_insurance.csv": "age,smoker,charges\n" + rows,
        "cost_prediction.py": script,
        "README.md": "# Insurance\n\n![banner](https://example.org/b.png)\nPredicts medical cost.\n\nOUTPUT:\n"
                     '<img src="https://github.com/user-attachments/assets/x.png">\n\n## Usage\nrun it\n',
    })  # fmt: skip
    draft = HeuristicDrafter(pin=False).draft(repo, [])
    statement = draft.add[draft.spec["statement"]]
    assert statement.startswith("# Insurance\n\nPredicts medical cost.\n\n## Task")  # no image, no 'OUTPUT:'
    assert "| `age` | integer | 25% |" in statement  # empty or 'NA' (pandas reads both as missing)
    assert "| `id` (added by arex: the row's number) | integer | 0% |" in statement  # the table has no id column
    # the script reads the table: arex's training rows are written where it reads them, so it still runs
    assert (draft.spec["data"]["train_file"], draft.spec["data"]["test_file"]) == (
        "data/data_insurance.csv",
        "data/test.csv",
    )
    assert "data/data_insurance.csv" in draft.remove and draft.spec["data"]["table"] != "data/data_insurance.csv"
    assert "`data/data_insurance.csv` has these columns" in statement and "not in the workspace" not in statement


def test_a_notebook_reading_the_competition_mount_is_told_where_the_files_are(tmp_path):
    from test_draft_target import forest_repo

    draft = HeuristicDrafter(pin=False).draft(forest_repo(tmp_path / "forest"), [])
    statement = draft.add[draft.spec["statement"]]
    assert (draft.spec["data"]["train_file"], draft.spec["data"]["test_file"]) == ("train.csv", "test.csv")
    assert "- `eda.ipynb` reads `../input/forest-cover-type/train.csv`, which is not in the workspace" in statement
    assert "point it at `train.csv` (labelled) and `test.csv` (to predict)" in statement
