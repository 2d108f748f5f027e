"""`arex rollout`: env × sample rollouts, concurrently, resumable, with a live progress line.

Work is keyed by a hash of (env spec, teacher model and sampling, rollout config, sample): a
re-run skips finished rollouts, resumes unfinished ones from their last complete round and redoes
infrastructure failures.

One run at a time per store: `run_batch` holds the store's lock (arex.record.storage) from before the
first rollout until the summary is written, and removes the sandbox containers that killed runs
on the same store left behind. A record that cannot be read is left untouched and counted as
`unreadable_record`; the other rollouts go on. Disk full or a read-only store stops the batch
with one sentence naming the path (finished rounds are kept).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from arex.envs.runtime import Env
from arex.envs.skills import catalogue
from arex.errors import UserInputError
from arex.grading.pool import GradingPools, SandboxesAhead
from arex.hashing import json_sha256
from arex.record.storage import StoreLock, write_error
from arex.record.trajectory import RecordError, RoundEnd, load
from arex.record.url_store import publish_file
from arex.rollout.agent import Rollout
from arex.rollout.config import RolloutConfig, Slot
from arex.rollout.endings import failures
from arex.rollout.sandboxes import agent_config, start_ahead
from arex.sandbox import Sandbox, SandboxConfig
from arex.sandbox.leftovers import FolderLabel as StoreLabel
from arex.sandbox.leftovers import remove_leftovers
from arex.specs import TeacherIdentity
from arex.teacher.client import TeacherClient, TeacherConfig

UNREADABLE = "unreadable_record"
"""The status of a rollout whose record cannot be read (damaged, not UTF-8, a newer schema): it is
left as it is, and the batch exits non-zero after the others."""
KEPT = "finished rounds are kept; re-run the same command to resume"
AHEAD = 2
"""Agent sandboxes started ahead at once for rollouts waiting for the concurrency limit."""
log = logging.getLogger("arex")


def _hash(obj) -> str:
    return json_sha256(obj, sort_keys=True, default=str)[:16]


BUNDLED_CONTENT = {"prompts": "4efd1181e7a71805", "skills": "d5bbc1a7aa43300b"}
"""`RolloutConfig.content()` of the bundled prompts and skills when content joined the key: left out
of it where it is this, so rollouts made before keep their keys. Do not update it when editing them."""


def config_hash(teacher: TeacherConfig, rollout: RolloutConfig) -> str:
    sampling = teacher.model_dump(include={"model", "temperature", "top_p", "max_tokens", "seed", "stop", "extra_body"})
    if teacher.cache_breakpoints:  # other request bytes: a rollout is not resumed with and without marks
        sampling["cache_breakpoints"] = True
    # Settings added later are left out at their defaults, so the keys of rollouts made before they existed hold;
    # the grading cap changes no trajectory: always left out.
    later = {
        "action_format": "text", "feedback": "full", "general_skills": True, "task_skills": True, "docs": True,
        "reflection_words": 150, "reflection_tokens": None,
    }  # fmt: skip
    left_out = {k for k, v in later.items() if getattr(rollout, k) == v} | {"grading_containers"}
    keyed: dict = {"teacher": sampling, "rollout": rollout.model_dump(exclude=left_out)}
    content = {k: v for k, v in rollout.content().items() if BUNDLED_CONTENT.get(k) != v}
    if content:
        keyed["content"] = content
    return _hash(keyed)


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
    spent: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Tokens and cost so far by rollout key (each rollout's latest figures)."""

    def note_round(self, key: str, env: str, tokens: int, cost: float, best: float) -> None:
        """Rollout `key` of `env` finished a round: its spend so far and its best held-out score."""
        self.rounds += 1
        self.spent[key] = (tokens, cost)
        self.tokens = sum(t for t, _ in self.spent.values())
        self.cost = sum(c for _, c in self.spent.values())
        self.best[env] = max(self.best.get(env, best), best)

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
    limit: asyncio.Semaphore | None = None,
    progress: Progress | None = None,
    executor=None,
) -> dict:
    """Run every (env, sample) rollout; returns the run summary (also written to out/summary.json).
    StoreLocked if another run works on `out`; DiskFull / OutputError if `out` cannot be written.

    `limit` and `progress` are for a caller running several batches in one event loop (variants,
    arex.variants): the rollouts of all of them share `limit` (and the caller's thread pool), and
    `progress` is filled for the caller to draw (pass no console then). That caller also labels
    the sandboxes with its own store and removes the leftovers of killed runs (`StoreLabel`,
    `remove_leftovers`): one label for the whole run, not one per batch.

    `executor` (arex.rollout.executors, e.g. Ray) runs the rollouts elsewhere under this same lock;
    None runs them here, in this event loop."""
    for name, value in (("samples", samples), ("concurrency", concurrency)):
        if not isinstance(value, int) or value < 1:
            raise UserInputError(f"--{name} expects an integer of at least 1, got {value!r}")
    rollout_config.load_prompts()  # a broken prompts file or skill fails here, before any work
    catalogue(rollout_config.skills_path())

    def notify(line: str) -> None:
        if console is not None:
            console.print(f"arex: {line}", soft_wrap=True, markup=False)
        else:
            log.warning(line)

    label = StoreLabel(out) if limit is None else nullcontext()  # a variant's batch runs under its run's label
    with StoreLock(out, notify), label:
        if limit is None:
            remove_leftovers(out, sandbox_config.backend, notify)
        shared = (limit, progress)
        run = _run_locked if executor is None else executor.run_locked
        return await run(
            envs, teacher_config, rollout_config, sandbox_config, out, samples, concurrency, base_url, console, shared
        )


def _prepare(envs: list[Env], rollout_config: RolloutConfig, sandbox_config: SandboxConfig) -> None:
    """Make sure of the agent sandboxes' images (a judge env's docs image takes ~10 s to build the
    first time) before any sandbox starts from them. Grading containers start later, once the
    agent sandboxes are up (Rollout._warm_grading): a grading is a round away."""
    for env in {env.kind: env for env in envs}.values():
        agent_config(env, rollout_config, sandbox_config)


async def _teacher(
    config: TeacherConfig, base_url: str | None, begun: asyncio.Future
) -> tuple[TeacherClient, TeacherIdentity]:
    """The batch's teacher client and the teacher's identity, once `begun` (the sandboxes' start) is
    done too. The client is made in a worker thread: the first one of a process imports its HTTP
    stack (~0.15 s), which the sandboxes' start need not wait for. On a failure, `begun` is waited
    for (what it started is then known to be removed) and the client closed."""
    teacher = None
    try:
        teacher = await asyncio.to_thread(TeacherClient, config, base_url=base_url)
        identity, _ = await asyncio.gather(teacher.identity(), begun)
        return teacher, identity
    except BaseException:
        await asyncio.wait([begun])
        if teacher is not None:
            await teacher.close()
        raise


def record_path(out: Path, env: Env, key: str) -> Path:
    """Where rollout `key` of `env` keeps its record in the store `out`."""
    return out / env.id / f"{key}.jsonl"


def _plan(
    env: Env, sample: int, rollout_config: RolloutConfig, sandbox_config: SandboxConfig, out: Path, chash: str
) -> tuple[str, Callable[[], Sandbox | None]]:
    """(rollout key, what starts the rollout's agent sandbox ahead, in a worker thread)."""
    key = rollout_key(env, chash, sample)
    return key, functools.partial(start_ahead, env, rollout_config, sandbox_config, record_path(out, env, key), sample)


async def _run_locked(
    envs,
    teacher_config,
    rollout_config,
    sandbox_config,
    out: Path,
    samples: int,
    concurrency: int,
    base_url,
    console,
    shared=(None, None),
) -> dict:
    # Grading containers shared by the rollouts of each env; agent sandboxes started ahead for waiting rollouts.
    # At most one grading container per two rollouts at once (a grading is a small part of a round), unless set.
    pools, ahead = GradingPools(cap=rollout_config.grading_containers or -(-concurrency // 2)), SandboxesAhead(AHEAD)
    chash = config_hash(teacher_config, rollout_config)
    jobs = [(env, s) for env in envs for s in range(samples)]
    limit, progress = shared
    if limit is None:  # else the caller shares its limit and thread pool among batches
        # Sandbox and grading calls block; give every running rollout its own threads for them.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * concurrency + 4))
        limit = asyncio.Semaphore(concurrency)
    first = [] if shared[0] is not None else jobs[:concurrency]  # with a shared limit, who runs first is not known

    async def begin() -> None:
        await asyncio.to_thread(_prepare, envs, rollout_config, sandbox_config)
        ahead.first([_plan(env, s, rollout_config, sandbox_config, out, chash) for env, s in first])

    # The agent images get ready and the first rollouts' sandboxes start, while the teacher client is made and
    # asked its identity.
    try:
        teacher, identity = await _teacher(teacher_config, base_url, asyncio.ensure_future(begin()))
    except BaseException:
        ahead.close()
        pools.close()
        raise
    progress = progress or Progress(total=0)
    progress.total = len(jobs)
    started = time.monotonic()

    def on_round(rollout: Rollout, end: RoundEnd) -> None:
        progress.note_round(rollout.key, rollout.env.id, rollout.ledger.tokens, rollout.ledger.cost, end.best.held_out)

    async def one(env: Env, sample: int) -> dict:
        key, plan = _plan(env, sample, rollout_config, sandbox_config, out, chash)
        path = record_path(out, env, key)
        result = {"env": env.id, "sample": sample, "key": key, "path": str(path)}
        if limit.locked():  # it waits: its sandbox may be started meanwhile
            ahead.want(key, plan)
        async with limit:
            # The rollout owns its sandbox's start from here (it removes the sandbox if unused).
            slot = Slot(path, sample, key, chash)
            rollout = Rollout(env, teacher, identity, rollout_config, sandbox_config, slot, pools, ahead.take(key))
            rollout.on_round = on_round
            try:
                end = await rollout.run()
            except RecordError as exc:  # nothing was written to it; the others go on
                progress.done += 1
                return {**result, "status": UNREADABLE, "reason": str(exc), "rounds": 0, "tokens": 0, "cost_usd": 0.0}
            except OSError as exc:  # the record could not be written: disk full, read-only
                raise write_error(exc, path, KEPT) from None
        progress.done += 1
        return {**result, **end.model_dump(exclude={"type"})}

    try:
        results = await gather([one(env, s) for env, s in jobs], progress, console)
    finally:
        ahead.close()
        pools.close()
        await teacher.close()
    return write_summary(summarize(results, out, time.monotonic() - started, teacher.usage.model_dump()), out)


def write_summary(summary: dict, out: Path) -> dict:
    """Write out/summary.json whole or not at all: a full disk leaves the previous one as it was."""
    try:
        (out / "summary.json.tmp").write_text(json.dumps(summary, indent=2))
        os.replace(out / "summary.json.tmp", out / "summary.json")
    except OSError as exc:
        raise write_error(exc, out / "summary.json", KEPT) from None
    publish_file(out / "summary.json")  # a store at a URL: uploaded too
    return summary


async def gather(coros: list, progress: Progress, console: Console | None) -> list:
    """Run every rollout; with a console, redraw the progress table while they run. The first
    rollout to raise (disk full, a read-only store) stops the others, which keep what they finished."""
    tasks = [asyncio.create_task(c) for c in coros]
    live = (
        Live(progress.table(), console=console, refresh_per_second=4, transient=False) if console is not None else None
    )
    try:
        if live is not None:
            live.start()
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(
                pending, timeout=0.25 if live else None, return_when=asyncio.FIRST_EXCEPTION
            )
            if live is not None:
                live.update(progress.table())
            failed = [t for t in done if not t.cancelled() and t.exception() is not None]
            if failed:
                raise failed[0].exception()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if live is not None:
            live.stop()
            if not console.is_terminal:  # off a terminal, Live leaves its last table without a line end
                console.line()
    return [t.result() for t in tasks]


def summarize(results: list[dict], out: Path, seconds: float, usage: dict) -> dict:
    """The run summary: endings, per-env means, totals, and one line per rollout (`results`:
    env, sample, key, path, status, rounds, best and final held-out score, as read back from its
    record, and why it ended); `finished` counts the records that end with an `end` line; `failures`
    groups the rollouts that ended infra_failed or teacher_error by reason (arex.rollout.endings)."""
    endings: dict[str, int] = {}
    per_env: dict[str, dict] = {}
    unreadable: list[dict] = []
    lines: list[dict] = []
    for r in results:
        endings[r["status"]] = endings.get(r["status"], 0) + 1
        line = {k: r.get(k) for k in ("env", "sample", "key", "path", "status", "reason")} | {
            "finished": False,
            "rounds": 0,
            "best": None,
            "final": None,
        }
        lines.append(line)
        if r["status"] == UNREADABLE:
            unreadable.append({"path": r["path"], "reason": r["reason"]})
            continue
        try:
            record = load(Path(r["path"]))
        except RecordError as exc:  # changed on disk since its rollout ended
            unreadable.append({"path": r["path"], "reason": str(exc)})
            continue
        line["finished"] = record.end is not None
        if not record.rounds:
            continue
        line.update(rounds=len(record.rounds), best=max(record.held_out), final=record.held_out[-1])
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
        "finished": sum(1 for line in lines if line["finished"]),
        "endings": endings,
        "tokens": sum(r.get("tokens", 0) for r in results),
        "cost_usd": round(sum(r.get("cost_usd", 0.0) for r in results), 6),
        "seconds": round(seconds, 2),
        "teacher_usage_this_run": usage,
        "envs": per_env,
        "unreadable_records": unreadable,
        "failures": failures(results),
        "results": lines,
    }
