"""The task statement a heuristic draft writes: what the agent must improve (the repository's model,
or the generic baseline), the data's columns (type, missing share, example values), the
repository's own description of the data, exactly which file is graded and how, and the files
that would mislead (a competition's unlabelled test table and sample submission) removed and said
so; code of the repository that reads a file arex moved is named with the file to read instead."""

from __future__ import annotations

import re
from pathlib import Path

from arex.drafting.base import Guess
from arex.drafting.baseline import moved_reads, repo_model
from arex.drafting.compose import WRAPPER
from arex.drafting.inspect import Column
from arex.drafting.survey import Survey
from arex.drafting.target import CLASSIFICATION

_DIRECTION = {"maximize": "higher is better", "minimize": "lower is better"}
_PREDICTION = {
    "roc_auc": "a score for the positive class (a probability, or any number that ranks)",
    "log_loss": "the probability of the positive class",
    "accuracy": "the predicted class, written as it appears in the training labels",
    "f1": "the predicted class, written as it appears in the training labels",
}
_METRIC_TEXT = {
    "accuracy": "the share of rows whose class is right",
    "f1": "F1 averaged over the classes (macro)",
    "roc_auc": "the area under the ROC curve",
    "log_loss": "the mean log loss of the positive class's probability",
    "rmse": "the root mean squared error",
    "mae": "the mean absolute error",
    "r2": "the coefficient of determination (R²)",
    "rmsle": "the root mean squared error between log(1 + label) and log(1 + prediction)",
    "rmse_log": "the root mean squared error between log(label) and log(prediction)",
}
DESCRIPTION = re.compile(
    r"(data_?description|description|data_?dictionary|dictionary|codebook|metadata|columns|features|"
    r"variables|schema|readme)[\w.-]*\.(txt|md|rst)$|\.names$",
    re.I,
)
COLUMN_ROWS = 60


def misleading(found: Survey, test_file: str) -> list[tuple[str, str]]:
    """(path, why) of the competition's files that would mislead next to arex's split: its sample
    submission (ids arex does not grade) and its unlabelled test table, unless arex's test rows
    are written over it."""
    out = []
    if found.layout.sample_submission:
        out.append(
            (
                found.layout.sample_submission,
                "the competition's sample submission (its ids are not the rows arex grades)",
            )
        )
    if found.layout.test and found.layout.test != test_file:
        out.append((found.layout.test, "the competition's unlabelled test rows (arex grades other rows)"))
    return out


def write_statement(spec: dict, found: Survey, removed: list[str]) -> tuple[str, list[str], list[Guess]]:
    """The statement's text, the files it removes (misleading ones), and the guesses to report
    (the baseline, the statement)."""
    data = spec["data"]
    extra = misleading(found, data["test_file"])
    baseline, guess = _baseline(spec, found)
    removed = removed + [p for p, _ in extra]
    lines = [f"# {spec['title']}", ""]
    if found.facts.readme_section:
        lines += [found.facts.readme_section.strip(), ""]
    lines += _task(spec, baseline) + _columns(found, data) + _files(found, spec, extra, removed)
    lines += [
        f"Rules: do not edit {', '.join(f'`{p}`' for p in spec.get('protected', ())) or 'nothing'}. "
        "There is no network access.",
        "",
    ]
    guesses = [
        guess,
        Guess(
            field="statement",
            value=spec["statement"],
            confidence="medium",
            why=(
                "written by the draft: the README's first section, the task as it is graded, the columns "
                "(type, missing share, examples), the data's description files and the files left out"
            ),
        ),
    ]
    return "\n".join(lines), [p for p, _ in extra], guesses


def _baseline(spec: dict, found: Survey) -> tuple[str, Guess]:
    run = spec["run"]
    if run != f"python3 {WRAPPER}":
        script = run.removeprefix("python3 ")
        text = f"this repository's own training script `{script}`"
        why = f"{script} reads the train and test files and writes the submission: it runs as the baseline"
        return text, Guess(field="baseline", value=f"the repository's {script}", confidence="high", why=why)
    task = "classification" if spec["metric"]["name"] in CLASSIFICATION else "regression"
    model = repo_model(found, spec["data"]["target"], task)
    text = f"`{WRAPPER}`, which trains {model.origin.split(':')[0]}"
    value = "the repository's model in the generic pipeline" if model.own else "the generic template"
    confidence = "medium" if model.own else "low"
    return text, Guess(field="baseline", value=value, confidence=confidence, why=f"{WRAPPER} trains {model.origin}")


def _task(spec: dict, baseline: str) -> list[str]:
    data, sub, metric = spec["data"], spec["submission"], spec["metric"]
    what = _PREDICTION.get(metric["name"], "the predicted value")
    return [
        "## Task",
        "",
        f"Improve this repository's model: the baseline is {baseline}. "
        f"Predict `{data['target']}` for every row of `{data['test_file']}`.",
        "",
        (
            f"- `{data['train_file']}`: the labelled training rows: the id column `{data['id_column']}`, "
            f"the features and `{data['target']}`."
        ),
        f"- `{data['test_file']}`: the rows to predict, with the same columns except `{data['target']}`.",
        f"- The graded file: `{spec['run']}` must write `{sub['file']}` with the columns "
        f"`{sub['id_column']},{sub['prediction_column']}`, one row per row of `{data['test_file']}`; "
        f"`{sub['prediction_column']}` is {what}. Nothing else is graded.",
        f"- Score: {metric['name']} ({_DIRECTION[metric['direction']]}): "
        f"{_METRIC_TEXT.get(metric['name'], metric['name'])}. Half of the test rows give the feedback score after each"
        " submission; the other half is held out.",
        "",
    ]


def _columns(found: Survey, data: dict) -> list[str]:
    columns = [c for c in found.table.columns]
    lines = [
        "## Columns",
        "",
        f"`{data['train_file']}` has these columns ({found.table.rows} labelled rows in all, before the split):",
        "",
        "| column | type | missing | examples |",
        "|---|---|---|---|",
    ]
    for c in columns[:COLUMN_ROWS]:
        name = f"`{c.name}`" + (" (the label)" if c.name == data["target"] else "")
        examples = ", ".join(f"`{_cell(v)}`" for v in c.examples)
        lines.append(f"| {name} | {_type(c)} | {1 - c.filled:.0%} | {examples} |")
    if len(columns) > COLUMN_ROWS:
        lines.append(f"| … {len(columns) - COLUMN_ROWS} more | | | |")
    if found.table.column(data["id_column"]) is None:
        lines.append(f"| `{data['id_column']}` (added by arex: the row's number) | integer | 0% | `0`, `1`, `2` |")
    return lines + [""]


def _type(c: Column) -> str:
    if c.numeric:
        kind = "integer" if c.integer else "number"
        return f"{kind} ({c.distinct} distinct)" if c.distinct <= 20 else kind
    return f"category ({c.distinct} values)" if c.distinct <= 50 else "text"


def _cell(value: str) -> str:
    return value.replace("|", "/").replace("`", "'")[:30]


def _files(found: Survey, spec: dict, extra: list[tuple[str, str]], removed: list[str]) -> list[str]:
    data = spec["data"]
    described = [
        f for f in found.facts.files if DESCRIPTION.search(Path(f).name) and not f.lower().startswith("readme")
    ]
    lines: list[str] = []
    if described:
        lines.append(
            "- The repository describes its data in " + ", ".join(f"`{f}`" for f in described[:5]) + ": read it."
        )
    if found.layout.test and found.layout.test == data["test_file"]:
        lines.append(
            f"- `{data['test_file']}` holds arex's test rows, written over the competition's own unlabelled test file."
        )
    lines += [f"- `{path}` is left out: {why}." for path, why in extra]
    for script, literal in moved_reads(found, data["train_file"], data["test_file"], removed):
        lines.append(
            f"- `{script}` reads `{literal}`, which is not in the workspace (arex split the labelled table): "
            f"to run it, point it at `{data['train_file']}` (labelled) and `{data['test_file']}` (to predict)."
        )
    return (["## Files", ""] + lines + [""]) if lines else []
