"""Every benchmark, one table: `make bench` (B_ONLY=judge_overhead,agent_overhead for a subset).

Runs each bench/<name>.py (not files starting with "_", not this runner) in its own process,
showing its output as it goes, and reads its last line of key=value pairs. FIGURES below is the one
place that says which keys are arex's figure, its baseline's and the ratio, and what the target is.
Writes bench/results/results.md and results.json and prints the Markdown table; exits non-zero if
a bench failed, printed no key=value line, or has no entry in FIGURES. A missed target is shown,
not an error: the machines are shared and noisy.
"""

from __future__ import annotations

import json
import operator
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"


@dataclass(frozen=True)
class Figures:
    arex: str
    """The last line's key holding arex's figure."""
    baseline: str
    """The key holding the baseline's figure (the same quantity, measured the other way)."""
    ratio: str
    """The key holding the bench's own ratio (named as it likes), or "": the runner divides arex by
    baseline, and a target names that "ratio"."""
    target: str
    """Conditions on the last line's keys, joined by " and ": `ratio <= 1.5`."""


FIGURES = {
    "agent_overhead": Figures("arex_ms_per_step", "mini_ms_per_step", "ratio", "ratio <= 0.5"),
    "concurrency": Figures("concurrent_s", "serial_s", "speedup", "speedup >= 12"),  # 12 of 16 rollouts (issue 16)
    "context_growth": Figures(
        "bounded_tokens",
        "full_tokens",
        "full_over_bounded_total",
        "full_over_bounded_total >= 5 and bounded_r30_over_r2 <= 1.3",
    ),
    "draft_env": Figures("accepted", "drafted", "", "ratio >= 1"),
    "env_rebuild": Figures("second_s", "first_s", "ratio", "ratio <= 0.1"),
    "export": Figures("peak_mb", "baseline_peak_mb", "", "ratio <= 0.5 and peak_mb_at_2x <= 1.25 * peak_mb"),
    # the baseline (criterion off) keeps every hostile trajectory: ratio = the fraction arex keeps (issue 27)
    "hygiene": Figures("hostile_kept", "hostile", "", "hostile_kept <= 0 and honest_dropped <= 0"),
    "judge_overhead": Figures("arex_s", "native_s", "ratio", "ratio <= 1.5"),
    # shares of prompt tokens a prefix cache serves, bounded context vs mini-swe-agent's append-only history (issue 33)
    "prefix_cache": Figures("bounded_ideal", "mini_ideal", "", "bounded_ideal >= 0.95 and bounded_openai >= 0.9"),
}
_CONDITION = re.compile(r"^\s*(\w+)\s*(<=|>=|<|>)\s*(?:([\d.]+)\s*\*\s*(\w+)|([\d.]+))\s*$")
_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclass
class Row:
    bench: str
    status: str  # ok | failed | no figures
    arex: float | None = None
    baseline: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    last_line: str = ""
    error: str = ""
    seconds: float = 0.0


def parse_line(line: str) -> dict[str, float] | None:
    """The bench's figures from its last line, or None if it is not all key=number pairs."""
    pairs = [part.split("=", 1) for part in line.split()]
    try:
        values = {key: float(value) for key, value in pairs}
    except ValueError:
        return None
    return values or None


def met(target: str, values: dict[str, float]) -> bool:
    """Whether every condition of `target` holds (a key the line lacks: not met)."""
    for condition in target.split(" and "):
        match = _CONDITION.match(condition)
        if match is None:
            raise SystemExit(
                f"bench/run_all.py: FIGURES target {condition!r} is not `key <op> number` or `key <op> number * key`"
            )
        key, op, factor, other, number = match.groups()
        bound = float(factor) * values[other] if other in values else (float(number) if number else None)
        if key not in values or bound is None or not _OPS[op](values[key], bound):
            return False
    return True


def run(name: str) -> Row:
    """One bench in its own process; its stdout shown as it comes, its last line read."""
    print(f"\n=== bench/{name}.py", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, str(BENCH / f"{name}.py")],
            cwd=BENCH.parent,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            bufsize=1,
        )
        lines = []
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line.strip())
        proc.wait()
        err.seek(0)
        errors = [line.strip() for line in err.read().splitlines() if line.strip()]
    seconds = time.monotonic() - started
    last = next((line for line in reversed(lines) if line), "")
    if proc.returncode:
        print("\n".join(errors[-20:]), file=sys.stderr, flush=True)  # the end of its traceback, where the reader is
        return Row(
            name,
            "failed",
            error=f"exit {proc.returncode}: {errors[-1] if errors else 'no stderr'}",
            last_line=last,
            seconds=seconds,
        )
    return figures(name, last, seconds)


def figures(name: str, last: str, seconds: float) -> Row:
    values = parse_line(last)
    if values is None:
        return Row(name, "failed", error="its last line is not key=value pairs", last_line=last, seconds=seconds)
    spec = FIGURES.get(name)
    if spec is None:
        return Row(name, "no figures", error="add it to FIGURES in bench/run_all.py", last_line=last, seconds=seconds)
    arex, baseline = values.get(spec.arex), values.get(spec.baseline)
    if spec.ratio:
        ratio = values.get(spec.ratio)
    else:
        ratio = arex / baseline if arex is not None and baseline else None
    if ratio is not None:
        values.setdefault("ratio", ratio)  # a ratio the runner worked out is the target's "ratio"
    return Row(name, "ok", arex, baseline, ratio, spec.target, met(spec.target, values), last, seconds=seconds)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def markdown(rows: list[Row]) -> str:
    lines = [
        "| bench | arex | baseline | ratio | target | met | seconds | last line |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        spec = FIGURES.get(r.bench)
        if r.status != "ok":
            lines.append(
                f"| {r.bench} | {r.status}: {r.error.replace('|', '/')} | | | {spec.target if spec else ''} | no | "
                f"{r.seconds:.0f} | `{r.last_line}` |"
            )
            continue
        arex, baseline = f"{_number(r.arex)} ({spec.arex})", f"{_number(r.baseline)} ({spec.baseline})"
        lines.append(
            f"| {r.bench} | {arex} | {baseline} | {_number(r.ratio)} | {r.target} | {'met' if r.met else 'missed'} | "
            f"{r.seconds:.0f} | `{r.last_line}` |"
        )
    return "\n".join(lines) + "\n"


def selected(only: str) -> list[str]:
    """The benches to run: every bench/<name>.py, or the comma-separated names of B_ONLY."""
    names = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_") and p.name != Path(__file__).name)
    wanted = [n.strip().removesuffix(".py") for n in only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise SystemExit(f"B_ONLY names no bench {', '.join(unknown)}; the benches are: {', '.join(names)}")
    return wanted or names


def main() -> int:
    rows = [run(name) for name in selected(os.environ.get("B_ONLY", ""))]
    RESULTS.mkdir(exist_ok=True)
    table = markdown(rows)
    (RESULTS / "results.md").write_text(table)
    (RESULTS / "results.json").write_text(
        json.dumps({"finished_at": time.time(), "benches": [asdict(r) for r in rows]}, indent=2) + "\n"
    )
    print(f"\n{table}")
    print(f"written: {RESULTS.relative_to(BENCH.parent)}/results.md, results.json")
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
