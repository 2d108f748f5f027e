"""The generic training wrapper a heuristic draft adds (the statement is `statement.py`'s)."""

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
model = {wrap}
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
    proba: bool,
    model: tuple[str, str, str],
    log: str = "",
) -> str:
    """A scikit-learn pipeline over the numeric, low-cardinality and free-text columns around
    `model`: (its import line, the expression building it, what it is). With `log` ('log' or
    'log1p', for a metric on the label's logarithm) the model fits the logarithm and predicts
    back on the label's scale."""
    model_import, expression, origin = model
    origin = origin.replace('"', "'")  # it stands in the wrapper's docstring
    predict = "model.predict_proba(X_test)[:, 1]" if proba else "model.predict(X_test)"
    wrap = f"make_pipeline(prep, {expression})"
    if log:
        inverse = "np.exp" if log == "log" else "np.expm1"
        model_import += "\nimport numpy as np\nfrom sklearn.compose import TransformedTargetRegressor"
        wrap = f"TransformedTargetRegressor(regressor={wrap}, func=np.{log}, inverse_func={inverse})"
    return _TEMPLATE.format(
        origin=origin,
        train=train,
        test=test,
        submission=submission,
        id=id_column,
        target=target,
        model_import=model_import,
        wrap=wrap,
        predict=predict,
    )


def statement_path(files: list[str]) -> str:
    """Where the statement goes: TASK.md unless the repository already has one."""
    for name in ("TASK.md", "AREX_TASK.md", "arex_task.md"):
        if name not in files:
            return name
    return "arex_statement.md"


def module_name(rel: str) -> str:
    return ".".join(Path(rel).with_suffix("").parts)
