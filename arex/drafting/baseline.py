"""The baseline a heuristic draft trains when the repository has no script that reads a train and a
test file and writes a submission: the repository's own model where the drafter can run it (a
model factory, or the estimator its training script or notebook fits, built from literal
arguments), in the generic wrapper's pipeline; the generic model only when the repository has none.
Also where the wrapper's train and test files go, so the repository's own code still finds them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from arex.drafting.base import Guess
from arex.drafting.code_facts import CLASSIFIER
from arex.drafting.compose import WRAPPER, module_name, wrapper_text
from arex.drafting.survey import Survey, reads_table
from arex.drafting.target import CLASSIFICATION


class Model(BaseModel):
    """The model the wrapper builds: its import line, the expression, and what it is (for the report)."""

    imports: str
    expression: str
    origin: str
    """e.g. "the repository's RandomForestRegressor(n_estimators=200) from train.py"."""
    own: bool
    """The repository's model (True) or the generic template's (False)."""


def repo_model(found: Survey, target: str, task: str) -> Model:
    """The repository's model for `target` and `task` ('classification' or 'regression'), else the generic one."""
    for s in found.facts.scripts:
        if s.factories and not s.main_guard and s.path != WRAPPER:
            module, function = module_name(s.path), s.factories[0]
            return Model(
                imports=f"from {module} import {function}",
                expression=f"{function}()",
                origin=f"the repository's {module}.{function}() (a model factory in {s.path})",
                own=True,
            )
    scripts = found.facts.scripts + found.facts.notebooks
    fitting = [s for s in scripts if target in s.code.fit_refs + s.label_refs]
    for s in fitting + [s for s in scripts if s not in fitting]:
        for imports, name, source in reversed(s.code.models):  # the last one built: the tuned, final model
            if ("classification" if CLASSIFIER.search(name) else "regression") == task:
                return Model(
                    imports=imports,
                    expression=source,
                    origin=f"the repository's {source} (as {s.path} builds it)",
                    own=True,
                )
    if task == "classification":
        return Model(
            imports="from sklearn.linear_model import LogisticRegression",
            expression="LogisticRegression(max_iter=2000)",
            origin="a generic template (logistic regression): the repository builds no model the drafter can reuse",
            own=False,
        )
    return Model(
        imports="from sklearn.linear_model import Ridge",
        expression="Ridge()",
        origin="a generic template (ridge regression): the repository builds no model the drafter can reuse",
        own=False,
    )


def wrapper_paths(found: Survey) -> tuple[str, str]:
    """The wrapper's train and test files: the repository's own paths for a competition's layout
    (train.csv and test.csv, so its notebooks and scripts read arex's split where they read theirs),
    else data/train.csv and data/test.csv, or arex_data/ when those names hold other files."""
    if found.layout.test and found.table.path != found.layout.test:
        return found.table.path, found.layout.test
    files = found.facts.files
    if found.table_add is not None and found.run_script is None and reads_table(found.facts, found.table.path):
        # the repository's code reads the table: arex's training rows take its place, so that code runs
        test = Path(found.table.path).with_name("test.csv").as_posix()
        return found.table.path, test if test not in files else "arex_data/test.csv"
    train, test = "data/train.csv", "data/test.csv"
    if (train in files and train != found.table_path) or (test in files and test != found.table_path):
        return "arex_data/train.csv", "arex_data/test.csv"
    return train, test


def moved_reads(found: Survey, train: str, test: str, removed: list[str]) -> list[tuple[str, str]]:
    """(script or notebook, literal) for each data path the repository's code reads that is not in
    the workspace as it expects: the labelled table (split by arex) and the files the draft removes."""
    given = {Path(train).name: train, Path(test).name: test}
    gone = {Path(p).name for p in removed + [found.table.path, found.table_path]} - set(given)
    out = []
    for s in found.facts.scripts + found.facts.notebooks:
        for literal in s.literals:
            name, where = Path(literal).name, literal.removeprefix("./")
            # gone, or a split file read from elsewhere (a Kaggle notebook's ../input/<competition>/train.csv)
            moved = name in gone or (name in given and where != given[name])
            if literal not in s.written and moved and (s.path, literal) not in out:
                out.append((s.path, literal))
    return out


def wrapper_run(
    found: Survey, id_column: str, target: str, metric: str, add: dict[str, str]
) -> tuple[str, tuple[str, str, str, list[str]], list[Guess]]:
    """The generic wrapper around the repository's model (or the template's): its run command,
    (train, test, submission, submission columns), and the guess that says which model it trains."""
    train, test = wrapper_paths(found)
    task = "classification" if metric in CLASSIFICATION else "regression"
    model = repo_model(found, target, task)
    log = {"rmse_log": "log", "rmsle": "log1p"}.get(metric, "")
    add[WRAPPER] = wrapper_text(
        train,
        test,
        "submission.csv",
        id_column,
        target,
        metric in ("roc_auc", "log_loss"),
        (model.imports, model.expression, model.origin),
        log,
    )
    why = (
        "no script reads a train and a test CSV and writes a submission"
        if found.run_script is None
        else f"{found.run_script.path} did not pass the gates"
    )
    fitted = " on the label's logarithm (the metric's scale)" if log else ""
    guess = Guess(
        field="run",
        value=f"python3 {WRAPPER}",
        confidence="medium" if model.own else "low",
        why=f"{why}: the draft adds {WRAPPER}, training {model.origin}{fitted}",
    )
    return f"python3 {WRAPPER}", (train, test, "submission.csv", [id_column, "prediction"]), [guess]
