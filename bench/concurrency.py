"""Concurrency: 16 rollouts of 5 rounds against a teacher with 300 ms latency per reply, run one
at a time and then all at once.

Run: python bench/concurrency.py
speedup = serial time / concurrent time for the same 16 rollouts (ideal: 16).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from _common import SOLUTION, tiny_env

from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

# B_N and B_LAT override the count and the latency for quick experiments; the benchmark is the default.
ROLLOUTS, ROUNDS, LATENCY = int(os.environ.get("B_N", 16)), 5, float(os.environ.get("B_LAT", 0.3))


def commands(n: int) -> list[str]:
    return [f"cat > solution.py <<'EOF'\n{SOLUTION}EOF"] if n == 3 else ["cat solution.py"]


def timed(env, store: Path, concurrency: int) -> tuple[float, dict]:
    with ScriptedServer(RoundScript(commands), model="scripted-teacher", latency_s=LATENCY) as server:
        teacher = TeacherConfig(model="scripted-teacher", track_cost=False, concurrency=ROLLOUTS)
        started = time.monotonic()
        summary = asyncio.run(run_batch([env], teacher, RolloutConfig(rounds=ROUNDS), SandboxConfig(), store, ROLLOUTS, concurrency, server.base_url))
        return time.monotonic() - started, {"peak_in_flight": server.stats["max_in_flight"], "calls": server.stats["requests"], **summary["endings"]}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        root = Path(tmp)
        env = tiny_env(root)
        serial_s, serial = timed(env, root / "serial", 1)
        concurrent_s, concurrent = timed(env, root / "concurrent", ROLLOUTS)
    print(f"{ROLLOUTS} rollouts x {ROUNDS} rounds, {LATENCY * 1000:.0f} ms per teacher reply")
    print(f"{'mode':12} {'seconds':>9} {'teacher calls':>14} {'peak in flight':>15} endings")
    for name, seconds, info in (("serial", serial_s, serial), ("concurrent", concurrent_s, concurrent)):
        endings = {k: v for k, v in info.items() if k not in ("peak_in_flight", "calls")}
        print(f"{name:12} {seconds:9.1f} {info['calls']:14} {info['peak_in_flight']:15} {endings}")
    print(f"serial_s={serial_s:.2f} concurrent_s={concurrent_s:.2f} speedup={serial_s / concurrent_s:.2f}")


if __name__ == "__main__":
    main()
