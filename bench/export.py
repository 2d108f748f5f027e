"""Export: 5,000 synthetic 30-round trajectories → parquet shards, streamed, against building the
same rows in memory with `datasets.Dataset.from_list`; then 10,000 to show memory stays flat.

Run: python bench/export.py
Each measurement runs in a fresh process; peak memory is that process's maximum RSS.
rows_per_s and mb_per_s: rows written (both granularities) and trajectory JSONL read, per second.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arex.hashing import file_sha256  # noqa: E402 (after the path is set)

TRAJECTORIES = int(sys.argv[1]) if len(sys.argv) > 1 else 5000  # a smaller count for a quick look
ROUNDS = 30
WORDS = (
    "the solution reads input parses tokens sorts pairs counts sums grades tests fails passes improves time limit "
    "memory verdict accepted wrong answer feature model metric split"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def write_trajectory(path: Path, index: int) -> None:
    """One record in arex's trajectory schema: header, 30 rounds of 2 steps + submit + reflection, end."""
    rng = random.Random(index)
    system = "You are an engineer improving a solution over many rounds. " + _text(rng, 120)
    lines = [
        {
            "type": "header",
            "schema_version": 2,
            "key": f"t{index:06d}",
            "env_id": f"env-{index % 7}",
            "env_kind": "judge",
            "domain": "algorithmic",
            "spec_hash": "bench",
            "sample": 0,
            "teacher": {"model": "bench-teacher", "base_url": "http://127.0.0.1:0/v1"},
            "sampling": {"temperature": 0.7},
            "config_hash": "bench",
            "config": {"rounds": ROUNDS},
            "arex_version": "bench",
            "baseline_score": 0.3,
            "started_at": 0.0,
        }
    ]
    score = 0.3
    for number in range(1, ROUNDS + 1):
        context = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": f"Round {number} of {ROUNDS}.\nState: {_text(rng, 60)}\nFeedback: {_text(rng, 40)}",
            },
        ]
        lines.append({"type": "round_start", "round": number, "context": context})
        for step in range(3):
            submit = step == 2
            content = (
                f"Step {step} of trajectory {index}: {_text(rng, 30)}\n"
                f"```bash\n{'submit' if submit else 'python3 solution.py < in.txt'}\n```"
            )
            call = {
                "sampling": {},
                "model": "bench-teacher",
                "content": content,
                "status": "ok",
                "prompt_tokens": 900,
                "completion_tokens": 60,
                "cost_usd": 0.0,
            }
            action = (
                {"kind": "submit", "command": "submit", "error": ""}
                if submit
                else {"kind": "command", "command": "python3 solution.py < in.txt", "error": ""}
            )
            observation = None if submit else f"exit code 0 (ok), 0.1s\n{_text(rng, 50)}"
            lines.append(
                {
                    "type": "step",
                    "round": number,
                    "step": step,
                    "call": call,
                    "action": action,
                    "observation": observation,
                }
            )
        score = min(1.0, score + rng.random() * 0.05)
        reflection = (
            f"REVIEW: {_text(rng, 25)}\nDIAGNOSE: {_text(rng, 25)}\nPLAN: {_text(rng, 20)}\nSTATE: {_text(rng, 40)}"
        )
        lines.append(
            {
                "type": "round_end",
                "round": number,
                "ending": "submitted",
                "submission": _text(rng, 40),
                "grade": {"public_score": score, "held_out_score": score, "held_out_raw": score, "feedback": "graded"},
                "feedback": _text(rng, 40),
                "reflect_prompt": (
                    f"Your submission for round {number} was graded.\n{_text(rng, 40)}\n"
                    "Reflect, then write your state update."
                ),
                "reflection": {
                    "call": {
                        "sampling": {},
                        "model": "bench-teacher",
                        "content": reflection,
                        "status": "ok",
                        "prompt_tokens": 1200,
                        "completion_tokens": 120,
                        "cost_usd": 0.0,
                    },
                    "complete": True,
                },
                "state": _text(rng, 40),
                "best": {"round": number, "held_out": score, "public": score},
                "best_public": {"round": number, "public": score},
            }
        )
    lines.append({"type": "end", "status": "done", "reason": "all rounds", "rounds": ROUNDS})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def make_store(root: Path, count: int) -> tuple[Path, int]:
    """A store of `count` trajectories and a selection folder keeping all of them."""
    store, selection = root / "store", root / "selected"
    selection.mkdir(parents=True, exist_ok=True)
    kept, size = [], 0
    for i in range(count):
        path = store / f"env-{i % 7}" / f"t{i:06d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            write_trajectory(path, i)
        size += path.stat().st_size
        kept.append(
            json.dumps(
                {"key": path.stem, "env_id": path.parent.name, "path": str(path), "record_sha": file_sha256(path)}
            )
        )
    (selection / "kept.jsonl").write_text("\n".join(kept[:count]) + "\n")
    return selection, size


CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from arex.dataset.export import ExportConfig, RowBuilder, export, kept_records
from arex.record.trajectory import load
selection, out, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
started = time.perf_counter()
if mode == "arex":
    stats = export(kept_records(selection), out, ExportConfig(shard_mb=128))
    rows = sum(stats.rows.values())
    written = sum(s["bytes"] for s in stats.shards.values())
else:
    import datasets
    builder = RowBuilder(ExportConfig())
    everything = {{}}
    for path in kept_records(selection):
        for granularity, items in builder.rows(load(path)).rows.items():  # every granularity arex's export writes
            everything.setdefault(granularity, []).extend(items)
    written = 0
    for granularity, items in everything.items():
        ds = datasets.Dataset.from_list(items)
        written += ds.to_parquet(str(out / f"{{granularity}}.parquet"))
    rows = sum(len(v) for v in everything.values())
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "rows": rows, "written": written, \
"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def measure(selection: Path, out: Path, mode: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT)), str(selection), str(out / "ds"), mode],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"{mode} export failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="arex-bench-export-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        selection, size = make_store(root, TRAJECTORIES)
        print(
            f"made {TRAJECTORIES} trajectories x {ROUNDS} rounds ({size / 1e6:.0f} MB of JSONL) "
            f"in {time.perf_counter() - started:.0f}s"
        )
        arex = measure(selection, root / "arex-1x", "arex")
        baseline = measure(selection, root / "baseline", "baseline")
        shutil.rmtree(root / "arex-1x")
        shutil.rmtree(root / "baseline")
        selection2, size2 = make_store(root, 2 * TRAJECTORIES)
        arex2 = measure(selection2, root / "arex-2x", "arex")
    mb = size / 1e6
    print(
        f"{'run':28} {'trajectories':>12} {'rows':>8} {'seconds':>8} {'rows/s':>8} {'MB/s in':>8} {'out MB':>7} "
        f"{'peak MB':>8}"
    )
    runs = (
        ("arex export (streaming)", TRAJECTORIES, mb, arex),
        ("datasets.Dataset.from_list", TRAJECTORIES, mb, baseline),
        ("arex export, 2x trajectories", 2 * TRAJECTORIES, size2 / 1e6, arex2),
    )
    for name, n, m, data in runs:
        print(
            f"{name:28} {n:12} {data['rows']:8} {data['seconds']:8.1f} {data['rows'] / data['seconds']:8.0f} "
            f"{m / data['seconds']:8.1f} {data['written'] / 1e6:7.1f} {data['peak_mb']:8.0f}"
        )
    print(
        f"rows_per_s={arex['rows'] / arex['seconds']:.0f} mb_per_s={mb / arex['seconds']:.1f} "
        f"peak_mb={arex['peak_mb']:.0f} "
        f"peak_mb_at_2x={arex2['peak_mb']:.0f} baseline_peak_mb={baseline['peak_mb']:.0f} "
        f"baseline_rows_per_s={baseline['rows'] / baseline['seconds']:.0f}"
    )


if __name__ == "__main__":
    main()
