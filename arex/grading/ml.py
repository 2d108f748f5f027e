"""ML grading: a prediction file from the agent's sandbox, scored on the host against private labels.

The agent's sandbox runs the task's command; arex copies the submission out with a size cap and
computes the metric here, on labels that never entered the sandbox. A missing, malformed or
mis-sized submission scores nothing and says exactly what is wrong. The predictions are the
agent's: whatever they make a metric do (raise, overflow, come out NaN or infinite) is an invalid
submission, never a failure of the run; a finite prediction whose metric is a finite number is scored.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Callable

from arex.sandbox.base import Sandbox
from arex.specs import GradeResult, MLSpec

SUBMISSION_CAP = 64 << 20


class SubmissionError(ValueError):
    """A submission that cannot be scored; the message says what to fix. The agent's doing, not
    the user's: grading catches it and shows it to the agent (so it is no ArexError)."""


# -- metrics (plain Python: exact, dependency-free, deterministic) ------------------------------
def accuracy(y: list, p: list) -> float:
    return sum(str(a) == str(b) for a, b in zip(y, p)) / len(y)


def f1_macro(y: list, p: list) -> float:
    labels = sorted({str(v) for v in y} | {str(v) for v in p})
    scores = []
    for label in labels:
        tp = sum(str(a) == label and str(b) == label for a, b in zip(y, p))
        fp = sum(str(a) != label and str(b) == label for a, b in zip(y, p))
        fn = sum(str(a) == label and str(b) != label for a, b in zip(y, p))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(scores) / len(scores)


def roc_auc(y: list, p: list) -> float:
    """Binary ROC AUC by the rank statistic (ties get average ranks)."""
    truth = [_binary(v) for v in y]
    scores = [float(v) for v in p]
    positives = sum(truth)
    negatives = len(truth) - positives
    if positives == 0 or negatives == 0:
        raise SubmissionError("ROC AUC needs both classes among the scored rows")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, t in zip(ranks, truth) if t)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def log_loss(y: list, p: list) -> float:
    eps = 1e-15
    total = 0.0
    for a, b in zip(y, p):
        q = min(max(float(b), eps), 1 - eps)
        total -= math.log(q) if _binary(a) else math.log(1 - q)
    return total / len(y)


def rmse(y: list, p: list) -> float:
    return _root_mean_square([float(a) - float(b) for a, b in zip(y, p)])


def _root_mean_square(d: list[float]) -> float:
    """The square of a difference over ~1.3e154 overflows a float (OverflowError), but the root mean
    square is still a float: then it is computed scaled by the largest difference (NaN if a
    difference itself overflowed)."""
    total = _sum_of_squares(d)
    if math.isfinite(total):
        return math.sqrt(total / len(d))
    scale = max(abs(x) for x in d)
    return scale * math.sqrt(sum((x / scale) ** 2 for x in d) / len(d))


def _sum_of_squares(d: list[float]) -> float:
    try:
        return sum(x**2 for x in d)
    except OverflowError:
        return math.inf


def rmsle(y: list, p: list) -> float:
    """RMSE of log(1 + value) (Kaggle's RMSLE); NaN (an invalid submission) if a value is at or below -1."""
    return _log_rms([_log(float(a), 1.0) - _log(float(b), 1.0) for a, b in zip(y, p)])


def rmse_log(y: list, p: list) -> float:
    """RMSE of log(value), as house prices are scored; NaN (an invalid submission) if a value is at or below 0."""
    return _log_rms([_log(float(a), 0.0) - _log(float(b), 0.0) for a, b in zip(y, p)])


def _log_rms(d: list[float]) -> float:
    return math.nan if any(math.isnan(x) for x in d) else _root_mean_square(d)


def _log(value: float, shift: float) -> float:
    """log(shift + value), NaN outside the logarithm's domain (the grader calls a NaN score invalid)."""
    return (math.log1p(value) if shift else math.log(value)) if value + shift > 0 else math.nan


def mae(y: list, p: list) -> float:
    return sum(abs(float(a) - float(b)) for a, b in zip(y, p)) / len(y)


def r2(y: list, p: list) -> float:
    ys = [float(a) for a in y]
    mean = sum(ys) / len(ys)
    total = sum((a - mean) ** 2 for a in ys)
    residual = _sum_of_squares([a - float(b) for a, b in zip(ys, p)])
    return 1 - residual / total if total else 0.0  # -inf past a float's range: an invalid submission


def _binary(value) -> int:
    text = str(value).strip().lower()
    if text in ("1", "1.0", "true", "yes"):
        return 1
    if text in ("0", "0.0", "false", "no"):
        return 0
    raise SubmissionError(f"expected a binary label (0/1), got {value!r}")


METRICS: dict[str, Callable[[list, list], float]] = {
    "accuracy": accuracy,
    "f1": f1_macro,
    "roc_auc": roc_auc,
    "log_loss": log_loss,
    "rmse": rmse,
    "mae": mae,
    "r2": r2,
    "rmsle": rmsle,
    "rmse_log": rmse_log,
}
NUMERIC = {"roc_auc", "log_loss", "rmse", "mae", "r2", "rmsle", "rmse_log"}


def resolve_metric(name: str) -> Callable[[list, list], float]:
    """A built-in metric by name. Metric code from a repository is never run: scoring happens on the
    host, outside any sandbox, and a repository (or a model drafting its spec) is not trusted."""
    if name not in METRICS:
        raise ValueError(
            f"unknown metric '{name}'; the metrics are {', '.join(METRICS)} "
            "(arex runs no metric code from the repository, since scoring happens outside the sandbox)"
        )
    return METRICS[name]


# -- submissions ---------------------------------------------------------------------------------
def read_labels(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def parse_submission(data: bytes, spec: MLSpec, expected_ids: list[str]) -> dict[str, str]:
    """id → prediction. Raises SubmissionError naming what is wrong."""
    sub = spec.submission
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionError(f"{sub.file} is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    for column in (sub.id_column, sub.prediction_column):
        if column not in header:
            raise SubmissionError(
                f"{sub.file} has no '{column}' column (columns found: {', '.join(header) or 'none'}); "
                f"expected {sub.id_column},{sub.prediction_column}"
            )
    predictions: dict[str, str] = {}
    for line, row in enumerate(reader, start=2):
        key, value = (row.get(sub.id_column) or "").strip(), (row.get(sub.prediction_column) or "").strip()
        if key in predictions:
            raise SubmissionError(f"{sub.file} line {line}: id {key!r} appears twice")
        if value == "":
            raise SubmissionError(f"{sub.file} line {line}: empty prediction for id {key!r}")
        if spec.metric.name in NUMERIC:
            try:
                number = float(value)
            except ValueError:
                raise SubmissionError(f"{sub.file} line {line}: prediction {value!r} is not a number") from None
            if not math.isfinite(number):
                raise SubmissionError(f"{sub.file} line {line}: prediction {value!r} is not finite")
        predictions[key] = value
    if len(predictions) != len(expected_ids):
        raise SubmissionError(
            f"{sub.file} has {len(predictions)} rows; expected {len(expected_ids)} (one per row of the test file)"
        )
    missing = [i for i in expected_ids if i not in predictions]
    if missing:
        raise SubmissionError(f"{sub.file} lacks predictions for {len(missing)} test ids, e.g. {missing[:3]}")
    return predictions


class MLGrader:
    """Scores submissions of one ML env (a folder with task.yaml and private/labels.csv)."""

    def __init__(self, env_dir: str | Path, spec: MLSpec):
        self.env_dir = Path(env_dir)
        self.spec = spec
        self.labels = read_labels(self.env_dir / "private" / "labels.csv")
        self.metric = resolve_metric(spec.metric.name)
        self.sign = 1.0 if spec.metric.direction == "maximize" else -1.0

    def _metric(self, rows: list[dict[str, str]], predictions: dict[str, str]) -> float:
        """The metric's value; SubmissionError if the predictions make it fail or leave a float's range."""
        target, name = self.spec.data.target, self.spec.metric.name
        truth, predicted = [r[target] for r in rows], [predictions[r[self.spec.data.id_column]] for r in rows]
        try:
            value = float(self.metric(truth, predicted))
        except SubmissionError:
            raise
        except Exception as exc:  # the agent's numbers broke the arithmetic: its submission, not the run, failed
            # Only the exception's type: its text may quote a label.
            raise SubmissionError(f"{name} cannot be computed on these predictions ({type(exc).__name__})") from None
        if not math.isfinite(value):
            raise SubmissionError(
                f"{name} of these predictions is {value}, not a finite number: predictions too far from any label"
            )
        return value

    def score(self, data: bytes) -> GradeResult:
        id_column = self.spec.data.id_column
        public = [r for r in self.labels if r["split"] == "public"]
        private = [r for r in self.labels if r["split"] == "private"]
        try:
            predictions = parse_submission(data, self.spec, [r[id_column] for r in self.labels])
            public_value, private_value = self._metric(public, predictions), self._metric(private, predictions)
        except SubmissionError as exc:
            return self.invalid(str(exc))
        name = self.spec.metric.name
        feedback = (
            f"Submission valid ({len(predictions)} rows). "
            f"Public {name}: {public_value:.6f} ({self.spec.metric.direction} is better)."
        )
        return GradeResult(
            public_score=self.sign * public_value,
            held_out_score=self.sign * private_value,
            held_out_raw=private_value,
            feedback=feedback,
            details={
                "kind": "ml",
                "metric": name,
                "direction": self.spec.metric.direction,
                "public": public_value,
                "private": private_value,
                "rows": len(predictions),
            },
        )

    def invalid(self, message: str) -> GradeResult:
        worst = self.spec.metric.worst
        return GradeResult(
            public_score=self.sign * worst,
            held_out_score=self.sign * worst,
            held_out_raw=worst,
            feedback=f"Submission rejected: {message}",
            details={"kind": "ml", "metric": self.spec.metric.name, "invalid": message},
        )

    def run(self, sandbox: Sandbox) -> tuple[GradeResult | None, str]:
        """Run the task's command in the sandbox: (a failing grade or None, the log's tail)."""
        result = sandbox.exec(self.spec.run, timeout=self.spec.time_limit_s)
        log = (result.stdout + result.stderr)[-3000:]
        if result.status == "timeout":
            return self.with_log(
                self.invalid(f"'{self.spec.run}' exceeded the {self.spec.time_limit_s:g}s time limit"), log
            ), log
        if not result.ok:
            return self.with_log(
                self.invalid(f"'{self.spec.run}' failed ({result.status}, exit code {result.exit_code})"), log
            ), log
        return None, log

    def grade(self, sandbox: Sandbox) -> GradeResult:
        """Run the task's command in the sandbox, then score the submission file it wrote (the
        build's gates; rollouts grade from the round's workspace archive, see Env.grade_round)."""
        failed, log = self.run(sandbox)
        if failed is not None:
            return failed
        try:
            data = sandbox.read_file(self.spec.submission.file, max_bytes=SUBMISSION_CAP)
        except FileNotFoundError:
            return self.with_log(self.invalid(f"no {self.spec.submission.file} was written"), log)
        except (ValueError, IsADirectoryError) as exc:
            return self.with_log(self.invalid(str(exc)), log)
        return self.with_log(self.score(data), log)

    @staticmethod
    def with_log(result: GradeResult, log: str) -> GradeResult:
        if not log:
            return result
        return result.model_copy(
            update={
                "feedback": result.feedback + "\nRun log (tail):\n" + log,
                "details": {**result.details, "log_tail": log},
            }
        )
