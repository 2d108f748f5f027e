"""The texts a heuristic draft adds: the generic training wrapper and the task statement."""

from __future__ import annotations

from pathlib import Path

WRAPPER = "arex_train.py"

_TEMPLATE = '''"""Baseline written by `arex draft-env`: {origin}.
Reads {train}, fits, predicts {test} and writes {submission} ({id}, prediction)."""
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
{model_import}

TRAIN, TEST, SUBMISSION = {train!r}, {test!r}, {submission!r}
ID, TARGET = {id!r}, {target!r}

train = pd.read_csv(TRAIN)
test = pd.read_csv(TEST)
features = [c for c in train.columns if c not in (ID, TARGET)]
numeric = [c for c in features if pd.api.types.is_numeric_dtype(train[c])]
categorical = [c for c in features if c not in numeric and train[c].nunique() <= 50]
# Free text (messages, reviews): the longest text column, as TF-IDF word counts.
texts = sorted((c for c in features if c not in numeric + categorical), \
key=lambda c: -train[c].fillna("").astype(str).str.len().mean())[:1]
for frame in (train, test):
    frame[texts] = frame[texts].fillna("").astype(str)
prep = ColumnTransformer(
    [("num", make_pipeline(SimpleImputer(), StandardScaler()), numeric),
     ("cat", make_pipeline(SimpleImputer(strategy="most_frequent"), \
OneHotEncoder(handle_unknown="ignore")), categorical)]
    + [("text", TfidfVectorizer(max_features=20000), c) for c in texts]
)
model = make_pipeline(prep, {model})
model.fit(train[numeric + categorical + texts], train[TARGET])
X_test = test[numeric + categorical + texts]
prediction = {predict}
pd.DataFrame({{ID: test[ID], "prediction": prediction}}).to_csv(SUBMISSION, index=False)
print("wrote", SUBMISSION)
'''


def wrapper_text(
    train: str,
    test: str,
    submission: str,
    id_column: str,
    target: str,
    task: str,
    proba: bool,
    factory: tuple[str, str] | None,
) -> str:
    """A scikit-learn pipeline over the numeric and low-cardinality columns; the model is the
    repository's own factory when it has one, else logistic regression or ridge."""
    if factory:
        module, function = factory
        model_import, model, origin = (
            f"from {module} import {function}",
            f"{function}()",
            f"the repository's {module}.{function}() in a generic pipeline",
        )
    elif task == "classification":
        model_import, model, origin = (
            "from sklearn.linear_model import LogisticRegression",
            "LogisticRegression(max_iter=2000)",
            "a generic template (logistic regression)",
        )
    else:
        model_import, model, origin = (
            "from sklearn.linear_model import Ridge",
            "Ridge()",
            "a generic template (ridge regression)",
        )
    predict = "model.predict_proba(X_test)[:, 1]" if proba else "model.predict(X_test)"
    return _TEMPLATE.format(
        origin=origin,
        train=train,
        test=test,
        submission=submission,
        id=id_column,
        target=target,
        model_import=model_import,
        model=model,
        predict=predict,
    )


_DIRECTION = {"maximize": "higher is better", "minimize": "lower is better"}
_PREDICTION = {
    "roc_auc": "a score for the positive class (a probability, or any number that ranks)",
    "log_loss": "the probability of the positive class",
    "accuracy": "the predicted class, written as it appears in the training labels",
    "f1": "the predicted class, written as it appears in the training labels",
}


def statement_text(spec: dict, title: str, readme_section: str) -> str:
    """What the agent reads: the README's first section, then the task as the build will grade it."""
    data, sub, metric = spec["data"], spec["submission"], spec["metric"]
    protected = ", ".join(f"`{p}`" for p in spec.get("protected", ())) or "nothing"
    what = _PREDICTION.get(metric["name"], "the predicted value")
    lines = [f"# {title}", ""]
    if readme_section:
        lines += [readme_section.strip(), ""]
    lines += [
        "## Task",
        "",
        f"Predict `{data['target']}` for every row of `{data['test_file']}`.",
        "",
        (
            f"- `{data['train_file']}`: the labelled training rows: the id column `{data['id_column']}`, "
            f"the features and `{data['target']}`."
        ),
        f"- `{data['test_file']}`: the rows to predict, with the same columns except `{data['target']}`.",
        f"- Run `{spec['run']}`: it must write `{sub['file']}` with columns "
        f"`{sub['id_column']},{sub['prediction_column']}`, one row per row of"
        f" `{data['test_file']}`; `{sub['prediction_column']}` is {what}.",
        f"- Score: {metric['name']} ({_DIRECTION[metric['direction']]}). "
        "Half of the test rows give the feedback score after each"
        " submission; the other half is held out.",
        "",
        f"Rules: do not edit {protected}. There is no network access.",
        "",
    ]
    return "\n".join(lines)


def statement_path(files: list[str]) -> str:
    """Where the statement goes: TASK.md unless the repository already has one."""
    for name in ("TASK.md", "AREX_TASK.md", "arex_task.md"):
        if name not in files:
            return name
    return "arex_statement.md"


def module_name(rel: str) -> str:
    return ".".join(Path(rel).with_suffix("").parts)
