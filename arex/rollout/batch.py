"""`arex rollout`: env × sample rollouts, concurrently, resumable, with a live progress line.

Work is keyed by a hash of (env spec, teacher model and sampling, rollout config, sample): a
re-run skips finished rollouts, resumes unfinished ones from their last complete round and redoes
infrastructure failures.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from arex.envs.runtime import Env
from arex.hashing import json_sha256
from arex.rollout.agent import Rollout
from arex.rollout.config import RolloutConfig
from arex.rollout.skills import catalogue
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherClient, TeacherConfig
from arex.trajectory import RoundEnd, load


def _hash(obj) -> str:
    return json_sha256(obj, sort_keys=True, default=str)[:16]


def config_hash(teacher: TeacherConfig, rollout: RolloutConfig) -> str:
    sampling = teacher.model_dump(include={"model", "temperature", "top_p", "max_tokens", "seed", "stop", "extra_body"})
    return _hash({"teacher": sampling, "rollout": rollout.model_dump()})


def rollout_key(env: Env, chash: str, sample: int) -> str:
    return _hash({"env": env.spec_hash, "config": chash, "sample": sample})


@dataclass
class Progress:
    total: int
    done: int = 0
    rounds: int = 0
    tokens: int = 0
    cost: float = 0.0
    best: dict[str, float] = field(default_factory=dict)

    def table(self) -> Table:
        table = Table("rollouts done", "rounds", "tokens", "cost $", "best held-out by env")
        best = ", ".join(f"{k} {v:.4g}" for k, v in sorted(self.best.items())) or "-"
        table.add_row(f"{self.done}/{self.total}", str(self.rounds), str(self.tokens), f"{self.cost:.4f}", best)
        return table


async def run_batch(
    envs: list[Env],
    teacher_config: TeacherConfig,
    rollout_config: RolloutConfig,
    sandbox_config: SandboxConfig,
    out: Path,
    samples: int = 1,
    concurrency: int = 4,
    base_url: str | None = None,
    console: Console | None = None,
) -> dict:
    """Run every (env, sample) rollout; returns the run summary (also written to out/summary.json)."""
    rollout_config.load_prompts()  # a broken prompts file or skill fails here, before any work
    catalogue(rollout_config.skills_path())
    teacher = TeacherClient(teacher_config, base_url=base_url)
    identity = await teacher.identity()
    chash = config_hash(teacher_config, rollout_config)
    jobs = [(env, s) for env in envs for s in range(samples)]
    # Sandbox and grading calls block; give every running rollout its own threads for them.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * max(1, concurrency) + 4))
    progress = Progress(total=len(jobs))
    limit = asyncio.Semaphore(max(1, concurrency))
    started = time.monotonic()

    def on_round(rollout: Rollout, end: RoundEnd) -> None:
        progress.rounds += 1
        progress.tokens = sum(r.tokens for r in live_rollouts)
        progress.cost = sum(r.cost for r in live_rollouts)
        best = end.best.held_out
        progress.best[rollout.env.id] = max(progress.best.get(rollout.env.id, best), best)

    live_rollouts: list[Rollout] = []

    async def one(env: Env, sample: int) -> dict:
        key = rollout_key(env, chash, sample)
        path = out / env.id / f"{key}.jsonl"
        async with limit:
            rollout = Rollout(env, teacher, identity, rollout_config, sandbox_config, path, sample, key, chash)
            rollout.on_round = on_round
            live_rollouts.append(rollout)
            end = await rollout.run()
        progress.done += 1
        return {"env": env.id, "sample": sample, "key": key, "path": str(path), **end.model_dump(exclude={"type"})}

    try:
        results = await _gather([one(env, s) for env, s in jobs], progress, console)
    finally:
        await teacher.close()
    summary = summarize(results, out, time.monotonic() - started, teacher.usage.model_dump())
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


async def _gather(coros: list, progress: Progress, console: Console | None) -> list:
    """Run every rollout; with a console, redraw the progress table while they run."""
    if console is None:
        return await asyncio.gather(*coros)
    with Live(progress.table(), console=console, refresh_per_second=4, transient=False) as live:
        tasks = [asyncio.create_task(c) for c in coros]
        while not all(t.done() for t in tasks):
            live.update(progress.table())
            await asyncio.sleep(0.25)
        live.update(progress.table())
        return [t.result() for t in tasks]


def summarize(results: list[dict], out: Path, seconds: float, usage: dict) -> dict:
    endings: dict[str, int] = {}
    per_env: dict[str, dict] = {}
    for r in results:
        endings[r["status"]] = endings.get(r["status"], 0) + 1
        record = load(Path(r["path"]))
        if not record.rounds:
            continue
        held = record.held_out
        env = per_env.setdefault(r["env"], {"rollouts": 0, "first": [], "best": [], "final": []})
        env["rollouts"] += 1
        env["first"].append(held[0])
        env["best"].append(max(held))
        env["final"].append(held[-1])
    for stats in per_env.values():
        for key in ("first", "best", "final"):
            values = stats.pop(key)
            stats[f"mean_{key}"] = sum(values) / len(values)
        stats["mean_improvement"] = stats["mean_best"] - stats["mean_first"]
    return {
        "rollouts": len(results),
        "endings": endings,
        "tokens": sum(r.get("tokens", 0) for r in results),
        "cost_usd": round(sum(r.get("cost_usd", 0.0) for r in results), 6),
        "seconds": round(seconds, 2),
        "teacher_usage_this_run": usage,
        "envs": per_env,
    }
