"""The gates an ML env must pass: the baseline runs and is deterministic, leaves room to improve,
a constant prediction scores clearly worse, a mutation changes the score, and the held-out labels
are unreachable. Each stage is announced to the listeners of `watch_stages` as it starts."""

from __future__ import annotations

import math
import random
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Callable

from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.leak_probe import LeakProbe, LeakScanFailed, describe, run_scan
from arex.envs.ml_data import csv_bytes
from arex.envs.ml_source import tail
from arex.envs.report import GateLog
from arex.grading.ml import MLGrader
from arex.sandbox import SandboxConfig, make_sandbox
from arex.sandbox.base import Sandbox
from arex.specs import GradeResult, MLSpec

# -- stages, as they happen ------------------------------------------------------------------
_LISTENERS: list[Callable[[str, str], None]] = []
_LOCK = threading.Lock()


@contextmanager
def watch_stages(listener: Callable[[str, str], None]):
    """Call `listener(env_id, stage)` as each build stage of an ML env starts (the builds run in
    threads of the batch, so a context variable would not reach them)."""
    with _LOCK:
        _LISTENERS.append(listener)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(listener)


def stage(env_id: str, what: str) -> None:
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(env_id, what)


BEST = {"accuracy": 1.0, "f1": 1.0, "roc_auc": 1.0, "r2": 1.0}
"""Each built-in metric's best value where it is not 0 (the errors and losses, minimized, are best at 0)."""


# -- gates -----------------------------------------------------------------------------------
def constant_prediction(spec: MLSpec, train: list[dict]) -> str:
    values = [r[spec.data.target] for r in train]
    if spec.metric.name in ("accuracy", "f1"):
        return max(sorted(set(values)), key=values.count)
    numbers = [float(v) for v in values]
    return repr(sum(numbers) / len(numbers))


def run_ml_gates(env_dir: Path, spec: MLSpec, train: list[dict], sandbox: SandboxConfig, probe: LeakProbe) -> GateLog:
    """The gates in order, stopping at the first that fails; `probe` holds the held-out rows whose
    labels no file the agent can read may give away."""
    log = GateLog()
    grader = MLGrader(env_dir, spec)
    config = sandbox.model_copy(
        update={"image": spec.image, "seed": IMAGE_WORKSPACE, "mounts": (), "memory": max(sandbox.memory, 2 << 30)}
    )
    run = partial(_graded_run, config, grader)
    baseline = _baseline_gates(log, spec, run)
    if (
        baseline is not None
        and _headroom_gate(log, spec, baseline)
        and _noop_gate(log, grader, train, baseline)
        and _mutation_gate(log, spec, train, run, baseline)
    ):
        stage(spec.id, "gate: private labels unreachable (leak scan)")
        _leak_gate(log, spec, config, probe)
    return log


def _headroom_gate(log: GateLog, spec: MLSpec, baseline: GradeResult) -> bool:
    """The baseline leaves room to improve: at the metric's best on both halves of the test rows
    (1.000 accuracy, 0 RMSE) the task teaches nothing, and no submission could score better."""
    # a baseline already at the best leaves the agent nothing to improve
    best = BEST.get(spec.metric.name, 0.0 if spec.metric.direction == "minimize" else None)
    public, private = baseline.details.get("public"), baseline.held_out_raw
    at_best = (
        best is not None
        and public is not None
        and all(math.isclose(v, best, abs_tol=1e-9) for v in (float(public), private))
    )
    return log.check(
        "baseline leaves headroom",
        not at_best,
        (
            f"the baseline already scores the best {spec.metric.name} ({private:.6f} on the held-out rows, "
            f"{float(public or 0):.6f} on the public ones): the task is too easy to teach anything; choose a harder "
            "target or metric, or fewer features"
        )
        if at_best
        else f"baseline {private:.6f}, best possible {best if best is not None else 'unbounded'}",
    )


def _graded_run(
    config: SandboxConfig, grader: MLGrader, prepare: Callable[[Sandbox], None] | None = None
) -> tuple[GradeResult, float]:
    """The env's own run and grading in a fresh sandbox, after `prepare(box)`; with its seconds."""
    with make_sandbox(config, f"gate-{grader.spec.id}") as box:
        if prepare:
            prepare(box)
        started = time.monotonic()
        result = grader.grade(box)
        return result, time.monotonic() - started


def _baseline_gates(log: GateLog, spec: MLSpec, run: Callable[..., tuple[GradeResult, float]]) -> GradeResult | None:
    """The repository's own solution runs within the limit and scores the same twice."""
    stage(spec.id, f"gate: baseline runs ({spec.run})")
    baseline, seconds = run()
    invalid = baseline.details.get("invalid")
    detail = (
        f"{spec.run} in {seconds:.1f}s (limit {spec.time_limit_s:g}s)"
        if invalid is None
        else f"{invalid}; {tail(baseline.details.get('log_tail', ''), 300)}"
    )
    if not log.check("baseline runs", invalid is None, detail):
        return None
    log.scores["baseline"] = baseline.held_out_raw
    log.scores["baseline_public"] = baseline.details["public"]
    stage(spec.id, "gate: baseline deterministic (a second run)")
    again, _ = run()
    gap = abs(again.held_out_raw - baseline.held_out_raw)
    if not log.check(
        "baseline deterministic",
        gap <= spec.tolerance,
        f"two runs: {baseline.held_out_raw:.6f} and {again.held_out_raw:.6f} (tolerance {spec.tolerance:g})",
    ):
        return None
    return baseline


def _noop_gate(log: GateLog, grader: MLGrader, train: list[dict], baseline: GradeResult) -> bool:
    """Predicting a constant (the majority class, or the mean) scores clearly below the baseline."""
    spec = grader.spec
    ids = [r[spec.data.id_column] for r in grader.labels]
    constant = constant_prediction(spec, train)
    noop_csv = csv_bytes(
        [spec.submission.id_column, spec.submission.prediction_column],
        [{spec.submission.id_column: i, spec.submission.prediction_column: constant} for i in ids],
    )
    noop = grader.score(noop_csv)
    log.scores["noop"] = noop.held_out_raw
    margin = max(1e-3, 0.02 * abs(baseline.held_out_score))
    return log.check(
        "no-op clearly worse",
        noop.held_out_score < baseline.held_out_score - margin,
        f"constant {constant[:12]} scores {noop.held_out_raw:.6f} vs baseline {baseline.held_out_raw:.6f}",
    )


def _mutator(spec: MLSpec, train: list[dict]) -> tuple[Callable[[Sandbox], None], str]:
    """How to break the baseline (the spec's mutation, else shuffled training labels), and how to say it."""
    if spec.mutation:
        mutation = spec.mutation

        def mutate(box: Sandbox) -> None:
            text = box.read_file(mutation.file).decode()
            if mutation.find not in text:
                raise SourceError(f"mutation.find not found in {mutation.file}")
            box.write_file(mutation.file, text.replace(mutation.find, mutation.replace))

        return mutate, f"{mutation.file}: {mutation.find!r} → {mutation.replace!r}"

    def shuffle_labels(box: Sandbox) -> None:
        rows = [dict(r) for r in train]
        labels = [r[spec.data.target] for r in rows]
        random.Random(1).shuffle(labels)
        for row, label in zip(rows, labels):
            row[spec.data.target] = label
        box.write_file(spec.data.train_file, csv_bytes(list(train[0].keys()), rows))

    return shuffle_labels, "training labels shuffled"


def _mutation_gate(
    log: GateLog, spec: MLSpec, train: list[dict], run: Callable[..., tuple[GradeResult, float]], baseline: GradeResult
) -> bool:
    mutate, what = _mutator(spec, train)
    stage(spec.id, f"gate: mutation changes the score ({what})")
    mutated, _ = run(mutate)
    log.scores["mutated"] = mutated.held_out_raw
    return log.check(
        "mutation changes the score",
        abs(mutated.held_out_raw - baseline.held_out_raw) > spec.tolerance,
        f"{what}: {mutated.held_out_raw:.6f} vs baseline {baseline.held_out_raw:.6f}",
    )


def _leak_gate(log: GateLog, spec: MLSpec, config: SandboxConfig, probe: LeakProbe) -> None:
    """No file the agent can read (workspace and image, any format, name or encoding) recovers
    held-out labels, every data file can be read, and the spec's probes fail."""
    with make_sandbox(config, f"leak-{spec.id}") as box:
        probe_failures = [p for p in spec.leak_probes if box.exec(p, timeout=120).ok]
        try:
            report = run_scan(box, probe)
        except LeakScanFailed as exc:
            log.check("private labels unreachable", False, str(exc))
            return
    problems, scanned = describe(report, probe)
    if probe_failures:
        problems.append(f"probes that should fail succeeded: {probe_failures}")
    detail = (
        "; ".join(problems) + f" ({scanned})"
        if problems
        else f"{scanned}: no file recovers their labels; {len(spec.leak_probes)} probe(s) fail as they should"
    )
    log.check("private labels unreachable", not problems, detail)
