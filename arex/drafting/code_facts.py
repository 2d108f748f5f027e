"""What a script's (or a notebook's) code says about its task, read from its syntax tree without
running it: the column it fits on (`y = df["X"]`, `fit(X, y)`, `X = df.drop(columns=["X"])`),
whether it trains on the label's logarithm, the estimators it builds and the metrics it scores with.
"""

from __future__ import annotations

import ast
import re

from pydantic import BaseModel, Field

LABEL_NAME = re.compile(r"^(y|y_?train|y_?tr|y_?all|target|targets|labels?|ys)$", re.I)
LABEL_CONSTANT = re.compile(r"^(target|label|y)_?(col|column|name|var|variable)?$", re.I)
"""A string constant naming the label: TARGET = "SalePrice", label_col = "Survived"."""
NOT_A_COLUMN = {"values", "array", "shape", "columns", "index", "T", "dtypes", "iloc", "loc", "str", "dt", "size"}
FEATURE_NAME = re.compile(r"^(x|x_?train|x_?tr|x_?all|features?|inputs?|data_?x)$", re.I)
ESTIMATOR = re.compile(
    r"(Regressor|Regression|Classifier|SVC|SVR|NB|Lasso|LassoCV|Ridge|RidgeCV|ElasticNet|ElasticNetCV)$"
)
CLASSIFIER = re.compile(r"(Classifier|LogisticRegression|LogisticRegressionCV|SVC|NB|RidgeClassifier\w*)$")
MODEL_LIBS = ("sklearn", "xgboost", "lightgbm", "catboost")
METRIC_CALLS = {
    "accuracy_score": "accuracy",
    "f1_score": "f1",
    "fbeta_score": "f1",  # the repository's F-beta: macro F1 is the closest built-in
    "roc_auc_score": "roc_auc",
    "log_loss": "log_loss",
    "mean_squared_error": "rmse",  # the same order as RMSE: arex scores the root
    "root_mean_squared_error": "rmse",
    "mean_absolute_error": "mae",
    "r2_score": "r2",
    "mean_squared_log_error": "rmsle",
    "root_mean_squared_log_error": "rmsle",
}
SCORING = {
    "accuracy": "accuracy",
    "f1": "f1",
    "f1_macro": "f1",
    "roc_auc": "roc_auc",
    "neg_log_loss": "log_loss",
    "neg_mean_squared_error": "rmse",
    "neg_root_mean_squared_error": "rmse",
    "neg_mean_absolute_error": "mae",
    "r2": "r2",
    "neg_mean_squared_log_error": "rmsle",
    "neg_root_mean_squared_log_error": "rmsle",
}


class CodeFacts(BaseModel):
    label_refs: list[str] = Field(default_factory=list)
    """Columns assigned to label-like names (y, y_train, target, labels)."""
    fit_refs: list[str] = Field(default_factory=list)
    """Columns passed as the labels of a `.fit(X, y)` call (traced through assignments and splits)."""
    dropped: list[str] = Field(default_factory=list)
    """Columns dropped from the table to make the features (`X = df.drop(columns=[...])`)."""
    log_label: str = ""
    """'log' or 'log1p' when the label is fitted as its logarithm (`y = np.log1p(df["price"])`)."""
    estimators: list[str] = Field(default_factory=list)
    """Estimator classes it builds (RandomForestRegressor, LogisticRegression, ...)."""
    models: list[list[str]] = Field(default_factory=list)
    """[import lines, class, call source] of each estimator imported from an ML library and built from
    constant arguments only: the repository's model, reusable as it is in a generated baseline."""
    metrics: list[str] = Field(default_factory=list)
    """arex metric names of the scores it computes (mean_squared_error → rmse, scoring='roc_auc', ...)."""


def code_facts(tree: ast.Module, text: str) -> CodeFacts:
    facts = CodeFacts()
    imported = _imported_from(tree)
    names: dict[str, str] = {}
    assigns = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        _assign(node, names, facts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            _call(node, names, facts, imported, text)
    return facts


def _imported_from(tree: ast.Module) -> dict[str, str]:
    """Local name → the import line that binds it (`from sklearn.ensemble import RandomForestRegressor`,
    `import xgboost`, `import lightgbm as lgb`)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                line = f"from {node.module} import {alias.name}"
                out[alias.asname or alias.name] = line + (f" as {alias.asname}" if alias.asname else "")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = f"import {alias.name} as {alias.asname}"
                else:
                    out[alias.name.split(".")[0]] = f"import {alias.name.split('.')[0]}"
    return out


def _model_import(node: ast.Call, imported: dict[str, str]) -> str:
    """The import line an estimator's call needs (`RandomForestRegressor(...)`, `xgboost.XGBRegressor(...)`,
    `lgb.LGBMRegressor(...)`), when it comes from an ML library; else ''."""
    func = node.func
    local = func.id if isinstance(func, ast.Name) else func.value.id if (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) else ""  # fmt: skip
    line = imported.get(local, "")
    module = line.split()[1] if line else ""
    return line if module.split(".")[0] in MODEL_LIBS else ""


def _add(items: list[str], value: str | None) -> None:
    if value and value not in items:
        items.append(value)


def column_of(node: ast.AST, names: dict[str, str], facts: CodeFacts | None = None) -> str | None:
    """The one column an expression takes from a table: df["X"], df[["X"]], df.loc[:, "X"],
    df[TARGET] (TARGET = "X"), df.X, df.pop("X"), np.log1p(df["X"]), df["X"].values, or a name
    assigned one of these. `names` maps variables to columns, and "str:<variable>" to its string."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Tuple) and key.elts:
            key = key.elts[-1]
        if isinstance(key, ast.List) and len(key.elts) == 1:
            key = key.elts[0]
        strings = _strings(key, names)
        return strings[0] if strings and not isinstance(key, (ast.List, ast.Tuple)) else None
    if isinstance(node, ast.Attribute) and node.attr in ("values", "array"):
        return column_of(node.value, names, facts)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr not in NOT_A_COLUMN:
        return node.attr  # df.SalePrice (a column only if the table has it: the caller checks)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr, first = node.func.attr, node.args[0] if node.args else None
        if attr == "pop" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
        if attr in ("to_numpy", "ravel", "astype", "copy", "reshape"):
            return column_of(node.func.value, names, facts)
        if attr in ("log", "log1p") and first is not None:
            column = column_of(first, names, facts)
            if column and facts is not None:
                facts.log_label = attr
            return column
    return None


def _assign(node: ast.Assign, names: dict[str, str], facts: CodeFacts) -> None:
    for target in node.targets:
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs = list(zip(target.elts, node.value.elts))
        elif isinstance(target, ast.Tuple) and _call_name(node.value) == "train_test_split":
            # X_train, X_test, y_train, y_test = train_test_split(X, y): two outputs per input
            args = node.value.args  # type: ignore[attr-defined]
            pairs = [(elt, args[i // 2]) for i, elt in enumerate(target.elts) if i // 2 < len(args)]
        else:
            pairs = [(target, node.value)]
        for name, value in pairs:
            if not isinstance(name, ast.Name):
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names[f"str:{name.id}"] = value.value
                if LABEL_CONSTANT.match(name.id):
                    _add(facts.label_refs, value.value)
                continue
            column = column_of(value, names, facts if LABEL_NAME.match(name.id) else None)
            if column:
                names[name.id] = column
                if LABEL_NAME.match(name.id):
                    _add(facts.label_refs, column)
            elif FEATURE_NAME.match(name.id) and isinstance(value, ast.Call) and _call_name(value) == "drop":
                for dropped in _dropped(value, names):
                    _add(facts.dropped, dropped)


def _call_name(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _strings(node: ast.AST | None, names: dict[str, str]) -> list[str]:
    """String constants, or variables holding one, alone or in a list."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and f"str:{node.id}" in names:
        return [names[f"str:{node.id}"]]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [v for e in node.elts if not isinstance(e, (ast.List, ast.Tuple)) for v in _strings(e, names)]
    return []


def _dropped(call: ast.Call, names: dict[str, str]) -> list[str]:
    """df.drop(columns=[...]) or df.drop([...], axis=1): the column names dropped."""
    keywords = {k.arg: k.value for k in call.keywords}
    if "columns" in keywords:
        return _strings(keywords["columns"], names)
    axis = keywords.get("axis")
    if isinstance(axis, ast.Constant) and axis.value in (1, "columns") and call.args:
        return _strings(call.args[0], names)
    return []


def _call(node: ast.Call, names: dict[str, str], facts: CodeFacts, imported: dict[str, str], text: str) -> None:
    name = _call_name(node)
    if name == "fit" and (len(node.args) >= 2 or any(k.arg == "y" for k in node.keywords)):
        labels = node.args[1] if len(node.args) >= 2 else next(k.value for k in node.keywords if k.arg == "y")
        _add(facts.fit_refs, column_of(labels, names, facts))
    if ESTIMATOR.search(name):
        _add(facts.estimators, name)
        line = _model_import(node, imported)
        source = ast.get_source_segment(text, node) if line and _constant_args(node) else None
        if source:
            source = " ".join(source.split())
            for numpy in ("np", "numpy"):  # missing=np.nan
                if f"{numpy}." in source:
                    line += f"\nimport numpy as {numpy}" if numpy == "np" else "\nimport numpy"
            if [line, name, source] not in facts.models:
                facts.models.append([line, name, source])
    metric = METRIC_CALLS.get(name)
    if metric:
        _add(facts.metrics, metric)
    for keyword in node.keywords:
        if keyword.arg and LABEL_CONSTANT.match(keyword.arg):  # process_data(df, label="salary")
            for label in _strings(keyword.value, names)[:1]:
                _add(facts.label_refs, label)
        if keyword.arg == "scoring":
            for scoring in _strings(keyword.value, names):
                _add(facts.metrics, SCORING.get(scoring))


def _constant_args(node: ast.Call) -> bool:
    """Only literal arguments (numbers, strings, None, True, -1): the call runs anywhere."""

    def constant(value: ast.AST) -> bool:
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            value = value.operand
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
            return value.value.id in ("np", "numpy") and value.attr in ("nan", "inf")
        if isinstance(value, (ast.List, ast.Tuple)):
            return all(constant(e) for e in value.elts)
        return isinstance(value, ast.Constant)

    return all(constant(a) for a in node.args) and all(k.arg and constant(k.value) for k in node.keywords)


def task_of(estimators: list[str]) -> str:
    """'classification' or 'regression' by the estimators the code builds ('' when none or both)."""
    kinds = {"classification" if CLASSIFIER.search(e) else "regression" for e in estimators}
    return kinds.pop() if len(kinds) == 1 else ""
