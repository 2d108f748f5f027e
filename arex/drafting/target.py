"""The target and the metric, from what the repository says: its README and notebooks' prose ("the
target variable is X", "predict X"), its code (`y = df["X"]`, `fit(X, y)`, `drop(columns=["X"])`,
the estimators it builds and the scores it computes), a competition's layout (a test table without
the label, a sample submission naming it) and the competition it names. Each candidate carries the
evidence for it, so the draft report says why and how sure; the last column is only a fallback."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from arex.drafting.code_facts import task_of
from arex.drafting.inspect import Column, RepoFacts, ScriptInfo, TableInfo

TARGET_NAMES = ("target", "label", "labels", "class", "y", "survived", "quality", "price", "saleprice", "outcome",
                "diagnosis", "species", "churn", "default", "income", "salary", "rating", "sales", "medv", "fraud",
                "is_fraud", "response", "result", "category")  # fmt: skip
ID_NAME = re.compile(r"^(id|idx|index|row_?id|uid|key|.*_id|.*Id)$", re.I)
CLASSIFICATION = ("accuracy", "f1", "roc_auc", "log_loss")
REGRESSION = ("rmse", "mae", "r2", "rmsle", "rmse_log")
MINIMIZE = ("log_loss", "rmse", "mae", "rmsle", "rmse_log")
REGRESSION_DISTINCT = 20

_EXPLICIT = re.compile(
    r"\b(?:target|label|dependent|response|outcome)(?:\s+(?:variable|column|feature|attribute|field))?"
    r"\s*(?:is|:|=|will be|here is)\s",
    re.I,
)
_CODE_BLOCK = re.compile(r"```.*?(```|$)|~~~.*?(~~~|$)", re.S)
_COMMAND_LINE = re.compile(r"^(\s{4,}|\t|\s*[$>#]\s|\s*(curl|wget|http|python|pip|docker|heroku)\b)", re.I)
_PREDICT = re.compile(
    r"\b(?:predict(?:s|ing|ed|ion of)?|forecast(?:s|ing)?|classify(?:ing)?|estimat(?:e|es|ing))\s", re.I
)
_README_METRICS = (
    (re.compile(r"\b(?:rmsle|root[- ]mean[- ]squared?[- ]log(?:arithmic)?[- ]error)\b", re.I), "rmsle"),
    (
        re.compile(
            r"(?:rmse|root[- ]mean[- ]squared?[- ]error)\W+(?:\w+\W+){0,3}?(?:the\s+)?(?:log|logarithm)s?\b"
            r"|logarithm of the predicted value",
            re.I,
        ),
        "rmse_log",
    ),
    (re.compile(r"\b(?:rmse|root[- ]mean[- ]squared?[- ]error)\b", re.I), "rmse"),
    (re.compile(r"\b(?:mae|mean[- ]absolute[- ]error)\b", re.I), "mae"),
    (re.compile(r"\b(?:r2|r-squared|r²|coefficient of determination)(?!\w)", re.I), "r2"),
    (re.compile(r"\b(?:roc[- ]auc|auc|area under the (?:roc )?curve)\b", re.I), "roc_auc"),
    (re.compile(r"\b(?:log[- ]?loss|cross[- ]entropy)\b", re.I), "log_loss"),
    (re.compile(r"\b(?:f1|f1[- ]score|f-score)\b", re.I), "f1"),
    (re.compile(r"\b(?:evaluated|scored|measured|metric)\b[^.\n]{0,40}\baccuracy\b", re.I), "accuracy"),
)
COMPETITIONS = (
    (
        re.compile(
            r"house-prices-advanced-regression-techniques|house prices:? advanced regression"
            r"|kaggle[^\n]{0,80}house pric|house pric[^\n]{0,80}kaggle"
            r"|\bcolumns:[^\n]*\bMSSubClass\b[^\n]*\bSalePrice\b",  # the competition's own table
            re.I,
        ),
        "rmse_log",
        "Kaggle's House Prices competition scores the RMSE between the logarithms of predicted and observed prices",
    ),
    (
        re.compile(r"bike-sharing-demand|bike sharing demand", re.I),
        "rmsle",
        "Kaggle's Bike Sharing Demand scores RMSLE",
    ),
    (
        re.compile(r"kaggle\.com/c(?:ompetitions)?/titanic\b|titanic: machine learning", re.I),
        "accuracy",
        "Kaggle's Titanic competition scores accuracy",
    ),  # fmt: skip
    (
        re.compile(r"kaggle\.com/c(?:ompetitions)?/spaceship-titanic|spaceship titanic", re.I),
        "accuracy",
        "Kaggle's Spaceship Titanic scores accuracy",
    ),  # fmt: skip
    (
        re.compile(r"kaggle\.com/c(?:ompetitions)?/digit-recognizer|digit recognizer", re.I),
        "accuracy",
        "Kaggle's Digit Recognizer scores accuracy",
    ),  # fmt: skip
)


class Layout(BaseModel):
    """A competition's files beside the labelled table: its unlabelled test table and sample submission."""

    test: str | None = None
    sample_submission: str | None = None
    missing: list[str] = Field(default_factory=list)
    """Columns of the labelled table the test table lacks (ids left out): the label, in a competition."""


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def kaggle_layout(table: TableInfo, tables: list[TableInfo]) -> Layout:
    """The test table whose columns are the labelled table's less a few, and a two-column sample submission."""
    layout = Layout()
    names = set(table.names)
    for other in tables:
        if other.path == table.path or other.note:
            continue
        stem = Path(other.path).stem.lower()
        if "sample" in stem or "submission" in stem:
            if len(other.columns) >= 2 and layout.sample_submission is None:
                layout.sample_submission = other.path
            continue
        missing = [n for n in table.names if n not in set(other.names) and not ID_NAME.match(n)]
        if "test" in stem and set(other.names) < names and 1 <= len(missing) <= 3 and layout.test is None:
            layout.test, layout.missing = other.path, missing
    return layout


def sample_target(layout: Layout, tables: list[TableInfo], table: TableInfo) -> str | None:
    """The sample submission's prediction column, when the labelled table has it."""
    sample = next((t for t in tables if t.path == layout.sample_submission), None)
    if sample is None:
        return None
    return next((c for c in sample.names[1:] if table.column(c) is not None), None)


def prose_targets(text: str, columns: list[str]) -> list[tuple[str, float, str]]:
    """Columns the prose names after 'the target variable is' (weight 3) or 'predict' (weight 2),
    each once; code blocks and command lines (`curl .../predict -d '{"Age": 22}'`) are not prose."""
    out: list[tuple[str, float, str]] = []
    text = _CODE_BLOCK.sub("", text)
    text = "\n".join(line for line in text.splitlines() if not _COMMAND_LINE.match(line))
    for pattern, weight, what in ((_EXPLICIT, 3.0, "names it the target"), (_PREDICT, 2.0, "says it predicts it")):
        seen = set()
        for match in pattern.finditer(text):
            before, after = text[max(0, match.start() - 1) : match.start()], text[match.end() : match.end() + 1]
            if before in ("/", "_", ".") or after in ("-", "/", "(", "{"):  # a URL, a function, an option
                continue
            window = re.split(
                r"[.;\n]|\b(?:using|from|with|based on|given|by|in terms of)\b", text[match.end() : match.end() + 100]
            )[0]
            column = _column_in(window, columns)
            if column and column not in seen:
                seen.add(column)
                quote = " ".join((match.group(0) + window).split())[:80]
                out.append((column, weight, f"{what} ({quote!r})"))
    return out


def _column_in(window: str, columns: list[str]) -> str | None:
    """The first column named in the window: a word or up to three adjacent words, compared without
    case, spaces or underscores, singular or plural ('sale prices' is SalePrice)."""
    exact = {norm(c): c for c in columns}
    words = re.findall(r"[A-Za-z0-9_]+", window)
    for i in range(len(words)):
        for n in (3, 2, 1):
            key = norm("".join(words[i : i + n]))
            if len(key) < 2 or i + n > len(words):
                continue
            if key in exact or (key.endswith("s") and key[:-1] in exact):  # 'house prices' is the price
                return exact.get(key) or exact[key[:-1]]
    return None


def target_candidates(
    table: TableInfo, run: ScriptInfo | None, facts: RepoFacts, layout: Layout | None = None
) -> list[tuple[str, str, str]]:
    """Columns that could be the label, best first, as (column, confidence, why): every piece of
    evidence adds a weight (the run script fitting on it 3, the README naming it the target 3, a
    competition's test table lacking it 3, a script or notebook fitting on it 2, the README saying it
    predicts it 2, dropped to make the features 1, named like a label 1, the last column 0.5);
    high at 3 or more, medium at 1, else low. Never an id, a constant or a free-text column."""
    usable = _usable(table)
    names = [c.name for c in usable]
    score: dict[str, float] = {}
    why: dict[str, list[str]] = {}
    evidence = _code_evidence(run, facts) + _prose(facts, names) + _layout_evidence(table, facts, layout)
    evidence += [
        (c.name, 1.0, f"the column is named like a label ({c.name!r})")
        for c in usable
        if c.name.lower() in TARGET_NAMES
    ]
    evidence += [(usable[-1].name, 0.5, "the last column")] if usable else []
    for name, weight, reason in evidence:
        if name in names and reason not in why.get(name, []):
            score[name] = score.get(name, 0.0) + weight
            why.setdefault(name, []).append(reason)
    for c in reversed(usable[:-1]):
        if len(score) >= 3:
            break
        if c.name not in score:
            score[c.name], why[c.name] = 0.1, ["a fallback: an earlier column"]
    order = sorted(score, key=lambda n: -score[n])  # stable: the first evidence breaks ties
    return [(n, _confidence(score[n]), "; ".join(why[n])) for n in order]


def _code_evidence(run: ScriptInfo | None, facts: RepoFacts) -> list[tuple[str, float, str]]:
    out = [(ref, 3.0, f"{run.path} fits on {ref!r}") for ref in (run.code.fit_refs + run.label_refs if run else [])]
    for s in facts.scripts + facts.notebooks:
        if s is run:
            continue
        out += [(ref, 2.0, f"{s.path} uses {ref!r} as its label") for ref in s.code.fit_refs + s.label_refs]
        dropped = [ref for ref in s.code.dropped if not ID_NAME.match(ref)]
        out += [(ref, 1.0 / len(dropped), f"{s.path} drops {ref!r} to make its features") for ref in dropped]
    return out


def _layout_evidence(table: TableInfo, facts: RepoFacts, layout: Layout | None) -> list[tuple[str, float, str]]:
    if layout is None:
        return []
    out = []
    if layout.test and len(layout.missing) == 1:
        out.append((layout.missing[0], 3.0, f"{layout.test} has every column but {layout.missing[0]!r} (unlabelled)"))
    elif layout.test:
        out += [(name, 1.0, f"{layout.test} lacks it") for name in layout.missing]
    sample = sample_target(layout, facts.tables, table)
    if sample:
        out.append((sample, 2.0, f"{layout.sample_submission} asks for {sample!r}"))
    return out


def _prose(facts: RepoFacts, names: list[str]) -> list[tuple[str, float, str]]:
    out = [(c, w, f"the README {r}") for c, w, r in prose_targets(facts.readme_text, names)]
    for nb in facts.notebooks:
        out += [(c, w * 0.75, f"{nb.path} {r}") for c, w, r in prose_targets(nb.notes, names)]
    return out


def _confidence(score: float) -> str:
    return "high" if score >= 3 else "medium" if score >= 1 else "low"


def _usable(table: TableInfo) -> list[Column]:
    free_text = max(50, table.rows // 5)  # a non-numeric column with this many values is text, not a label
    return [
        c
        for c in table.columns
        if c.distinct > 1
        and c.filled >= 0.5
        and not (c.unique and not c.numeric)
        and not (c.unique and ID_NAME.match(c.name))
        and (c.numeric or c.distinct < free_text)
    ]


# -- the task and the metric ------------------------------------------------------------------------
class TaskHints(BaseModel):
    """What the repository says about the task beyond its label: metrics named, estimators built."""

    metrics: list[tuple[str, str]] = Field(default_factory=list)
    """(metric, why) in the order found: the code's scores, the README's words, the competition's."""
    task: str = ""
    """'classification' or 'regression' by its estimators; '' when they do not say."""
    task_why: str = ""


def task_hints(facts: RepoFacts, target: str) -> TaskHints:
    """The metrics and the kind of task the repository names, for `target`."""
    hints = TaskHints()
    fitting = [s for s in facts.scripts + facts.notebooks if target in s.code.fit_refs + s.label_refs]
    code = fitting or facts.scripts + facts.notebooks
    for s in code:
        for metric in s.code.metrics:
            if metric == "rmse" and s.code.log_label and target in s.code.fit_refs + s.label_refs:
                metric = "rmsle" if s.code.log_label == "log1p" else "rmse_log"
            hints.metrics.append((metric, f"{s.path} scores its model with it"))
    # the README, the notebooks' prose, the file names and the tables' columns (a competition's data is its signature)
    columns = ["columns: " + " ".join(t.names) for t in facts.tables]
    corpus = "\n".join([facts.readme_text] + [nb.notes for nb in facts.notebooks] + facts.files + columns)
    for pattern, metric in _README_METRICS:
        match = pattern.search(facts.readme_text)
        if match:
            hints.metrics.append((metric, f"the README names it ({match.group(0)!r})"))
    for pattern, metric, why in COMPETITIONS:
        if pattern.search(corpus):
            hints.metrics.insert(0, (metric, why))
    estimators = [e for s in code for e in s.code.estimators]
    hints.task = task_of(estimators)
    if hints.task:
        hints.task_why = f"the repository fits {', '.join(dict.fromkeys(estimators))}"
    return hints


def metric_options(col: Column, rows: int, proba: bool, hints: TaskHints | None = None) -> list[tuple[str, str, str]]:
    """(metric, direction, why) for a target column, best first: the metrics the repository names
    that suit the column, then the defaults for its kind of task."""
    hints = hints or TaskHints()
    kind, kind_why = task_kind(col, hints)
    options: list[tuple[str, str, str]] = []
    for metric, why in hints.metrics:
        if metric in [o[0] for o in options] or not _suits(metric, col, kind):
            continue
        options.append((metric, "minimize" if metric in MINIMIZE else "maximize", why))
    for metric, direction, why in _defaults(col, kind, kind_why, proba):
        if metric not in [o[0] for o in options]:
            options.append((metric, direction, why))
    return options


def task_kind(col: Column, hints: TaskHints) -> tuple[str, str]:
    """Classification or regression: the metrics the repository names, else its estimators, else the values."""
    named = {"classification" if m in CLASSIFICATION else "regression" for m, _ in hints.metrics}
    named = {k for k in named if k == "classification" or col.numeric}
    if len(named) == 1:
        kind = named.pop()
        return kind, f"{kind}: the repository scores it with {', '.join(dict.fromkeys(m for m, _ in hints.metrics))}"
    if hints.task == "regression" and col.numeric:
        return "regression", f"regression: {hints.task_why}"
    if hints.task == "classification" and (not col.numeric or col.integer or col.distinct <= REGRESSION_DISTINCT):
        return "classification", f"classification: {hints.task_why}"
    classes = not col.numeric or (col.integer and col.distinct <= REGRESSION_DISTINCT)
    if classes:
        return "classification", f"{_kind_text(col)}: classification"
    return "regression", f"numeric target with {col.distinct} distinct values: regression"


def _kind_text(col: Column) -> str:
    return "binary" if col.distinct == 2 else f"{col.distinct} classes"


def _binary01(col: Column) -> bool:
    return col.distinct == 2 and set(col.values) <= {"0", "1", "0.0", "1.0", "true", "false", "True", "False"}


def _suits(metric: str, col: Column, kind: str) -> bool:
    if metric in ("roc_auc", "log_loss"):
        return kind == "classification" and _binary01(col)
    if metric in CLASSIFICATION:
        return kind == "classification"
    if metric == "rmsle":
        return kind == "regression" and col.minimum is not None and col.minimum > -1
    if metric == "rmse_log":
        return kind == "regression" and col.minimum is not None and col.minimum > 0
    return kind == "regression"


def _defaults(col: Column, kind: str, kind_why: str, proba: bool) -> list[tuple[str, str, str]]:
    if kind == "regression":
        return [("rmse", "minimize", kind_why), ("mae", "minimize", "regression, a second choice")]
    what = _kind_text(col)
    options = [("accuracy", "maximize", kind_why), ("f1", "maximize", f"{what}: macro F1, a second choice")]
    if _binary01(col):
        auc = (
            "roc_auc",
            "maximize",
            f"{what} 0/1 target" + (" and the script predicts probabilities" if proba else ""),
        )
        options = [auc] + options if proba else options[:1] + [auc] + options[1:]
    return options


def metric_confidence(why: str, hints: TaskHints | None) -> str:
    """high when the repository (or its competition) names the metric, else medium."""
    named = {w for _, w in (hints.metrics if hints else [])}
    return "high" if why in named else "medium"


def low_confidence_target(guesses) -> str | None:
    """The console's warning when the target is a low-confidence guess (None otherwise)."""
    target = next((g for g in guesses if g.field == "data.target"), None)
    if target is None or target.confidence != "low":
        return None
    return (
        f"the target {target.value!r} is a low-confidence guess ({target.why}): "
        "check data.target in the drafted YAML before using the env"
    )
