"""Concurrency: 16 rollouts of arex's default length (rollout.rounds: 10 rounds) against a teacher
with 300 ms latency per reply, run one at a time and then all at once.

Run: python bench/concurrency.py
speedup = serial time / concurrent time for the same 16 rollouts (ideal: 16). Grading draws on the
batch's pooled grading containers (arex/grading/pool.py). Each batch runs in a process of its own,
as `arex rollout` does, timed from its start to its summary; the scripted teacher stays in this
process (a real teacher is never in arex's process, nor competes for its interpreter lock).
cpu_s_per_round: host CPU seconds per rollout round of the batch's process (children included)
plus the Docker daemons (dockerd, containerd, containerd-shim*, runc), the latter polled from
/proc while the batch runs so a shim that exits with its container still counts (up to its last
poll). The CPU the graded programs and in-sandbox commands take is not in it.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

from _common import SOLUTION, proc_cpu, tiny_env

from arex.envs.runtime import load_env
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

# Rollouts of arex's default length (rollout.rounds). B_N, B_ROUNDS and B_LAT override the count,
# the rounds and the latency for experiments; the benchmark is the default.
ROLLOUTS, ROUNDS, LATENCY = (
    int(os.environ.get("B_N", 16)),
    int(os.environ.get("B_ROUNDS", RolloutConfig().rounds)),
    float(os.environ.get("B_LAT", 0.3)),
)


def commands(n: int) -> list[str]:
    return [f"cat > solution.py <<'EOF'\n{SOLUTION}EOF"] if n == 3 else ["cat solution.py"]


DAEMONS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc")


def daemon_cpu() -> dict[int, float]:
    """CPU seconds (user + system, reaped children included) of each Docker daemon process now."""
    seen = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name in DAEMONS or name.startswith("containerd-shim"):
            seen[int(pid)] = proc_cpu(int(pid))
    return seen


class CpuMeter:
    """The Docker daemons' CPU over a `with` block (polled: a shim that exits with its container
    still counts, up to its last poll)."""

    def __enter__(self) -> "CpuMeter":
        self.start, self.last, self.done = daemon_cpu(), {}, threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self) -> None:
        while True:
            self.last.update(daemon_cpu())
            if self.done.wait(0.5):
                return

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        self.docker = sum(cpu - self.start.get(pid, 0.0) for pid, cpu in self.last.items())


def batch(env_dir: Path, store: Path, concurrency: int, base_url: str, rounds: int, results) -> None:
    """The batch, in a process of its own (as `arex rollout` runs): the teacher is never in arex's process."""
    teacher, env = TeacherConfig(model="scripted-teacher", track_cost=False, concurrency=ROLLOUTS), load_env(env_dir)
    cpu, started = own_cpu(), time.monotonic()  # interpreter start-up and imports stay out of both figures
    summary = asyncio.run(
        run_batch([env], teacher, RolloutConfig(rounds=rounds), SandboxConfig(), store, ROLLOUTS, concurrency, base_url)
    )
    results.put((summary, time.monotonic() - started, own_cpu() - cpu))


def own_cpu() -> float:
    """This process's CPU seconds, its reaped children's included."""
    return sum(
        getattr(resource.getrusage(who), f)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for f in ("ru_utime", "ru_stime")
    )


def timed(env, store: Path, concurrency: int, rounds: int = ROUNDS) -> tuple[float, dict]:
    with ScriptedServer(RoundScript(commands), model="scripted-teacher", latency_s=LATENCY) as server:
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        with CpuMeter() as cpu:
            child = context.Process(target=batch, args=(env.dir, store, concurrency, server.base_url, rounds, results))
            child.start()
            summary, seconds, arex_cpu = results.get()
            child.join()
        rounds = sum(r["rounds"] for r in summary["results"])
        info = {
            "peak_in_flight": server.stats["max_in_flight"],
            "calls": server.stats["requests"],
            "cpu_arex": arex_cpu,
            "cpu_docker": cpu.docker,
            "rounds": rounds,
        }
        return seconds, {**info, **summary["endings"]}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        root = Path(tmp)
        env = tiny_env(root)
        serial_s, serial = timed(env, root / "serial", 1)
        concurrent_s, concurrent = timed(env, root / "concurrent", ROLLOUTS)
    print(f"{ROLLOUTS} rollouts x {ROUNDS} rounds, {LATENCY * 1000:.0f} ms per teacher reply")
    print(
        f"{'mode':12} {'seconds':>9} {'teacher calls':>14} {'peak in flight':>15} {'arex cpu s':>11} "
        f"{'docker cpu s':>13} {'cpu s/round':>12} endings"
    )
    per_round = {}
    for name, seconds, info in (("serial", serial_s, serial), ("concurrent", concurrent_s, concurrent)):
        endings = {
            k: v for k, v in info.items() if k not in ("peak_in_flight", "calls", "cpu_arex", "cpu_docker", "rounds")
        }
        per_round[name] = (info["cpu_arex"] + info["cpu_docker"]) / max(1, info["rounds"])
        print(
            f"{name:12} {seconds:9.1f} {info['calls']:14} {info['peak_in_flight']:15} {info['cpu_arex']:11.1f} "
            f"{info['cpu_docker']:13.1f} {per_round[name]:12.3f} {endings}"
        )
    speedup = serial_s / concurrent_s
    print(
        f"serial_s={serial_s:.2f} concurrent_s={concurrent_s:.2f} speedup={speedup:.2f} "
        f"cpu_s_per_round={per_round['concurrent']:.3f} serial_cpu_s_per_round={per_round['serial']:.3f}"
    )


if __name__ == "__main__":
    main()
