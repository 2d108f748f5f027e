"""A rollout's agent sandbox, its whole life: started ahead by the batch or by the rollout itself,
its workspace put in place (the env's, or the last kept round's when resuming), handed to the
loop when it is up, removed off the event loop when the rollout ends.

The loop sees only `AgentSandbox`: `begin()` when it wants one (its first teacher call overlaps
the start), `await get()` before a command or a grading, `await end()` in its `finally`.
Starts are counted process-wide (`starting`): an agent sandbox is on its rollout's critical path,
so grading warm-ups (needed a round later) wait until none is starting.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from arex.envs.runtime import Env
from arex.envs.skills import SkillSet, skill_set
from arex.grading.pool import stop_started
from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import load
from arex.rollout.config import RolloutConfig
from arex.rollout.endings import redone
from arex.sandbox import Sandbox, SandboxConfig, make_sandbox

WARM_WAIT_S, WARM_POLL_S = 2.0, 0.02
_starting = [0]
_counting = threading.Lock()


def skills_of(env: Env, config: RolloutConfig) -> SkillSet:
    """General skills (rollout.general_skills) and the env's own (rollout.task_skills), each mounted read-only."""
    return skill_set(
        config.skills_path() if config.general_skills else None,
        env.dir if config.task_skills else None,
        config.skills_target,
    )


def agent_config(env: Env, config: RolloutConfig, sandbox: SandboxConfig) -> SandboxConfig:
    """The agent sandbox's config of a rollout of `env`."""
    ss = skills_of(env, config)
    return env.sandbox_config(sandbox, ss.general_dir, ss.general_target, ss.task_dir, ss.task_target)


def sandbox_name(env: Env, sample: int) -> str:
    return f"rollout-{env.id}-{sample}"


def start_ahead(env: Env, config: RolloutConfig, sandbox: SandboxConfig, path: Path, sample: int) -> Sandbox | None:
    """The agent sandbox of a rollout still waiting to run, started now (blocking), or None if its
    record is finished (it will need none)."""
    try:
        previous = load(path)
        if not redone(previous.end):
            return None
    except Exception:  # noqa: BLE001 - the rollout itself reports an unreadable record
        return None
    box = make_sandbox(agent_config(env, config, sandbox), sandbox_name(env, sample))
    with starting():
        box.start()
    return box


@contextmanager
def starting() -> Iterator[None]:
    """Count an agent sandbox start (in any thread): grading containers wait for none to be left."""
    with _counting:
        _starting[0] += 1
    try:
        yield
    finally:
        with _counting:
            _starting[0] -= 1


async def none_starting() -> None:
    """Until no agent sandbox of this process is starting, at most WARM_WAIT_S."""
    for _ in range(int(WARM_WAIT_S / WARM_POLL_S)):
        if not _starting[0]:
            return
        await asyncio.sleep(WARM_POLL_S)


class AgentSandbox:
    """One rollout's agent sandbox. `ahead`: its start by the batch (it may still be running; None
    if there was none); the rollout owns it from here and removes it if it ends without it."""

    def __init__(self, env: Env, config: SandboxConfig, sample: int, ahead: "asyncio.Future[Sandbox | None] | None"):
        self.env, self.config, self.sample = env, config, sample
        self._ahead, self._ready, self._then, self.box = ahead, None, None, None

    def begin(self, restore: Callable[[], Path | None], then: Callable[[], None] | None = None) -> None:
        """Start it in the background; `restore()` names the archive to restore (resuming), if any;
        `then()` runs once it is up and no other sandbox is starting (the rollout warms a grading
        container so: one round away, on the rollout's path). `cancel_then` before what it uses closes."""
        self._ready = asyncio.ensure_future(self._start(restore))
        self._then = asyncio.ensure_future(self._after_start(then)) if then is not None else None

    async def _after_start(self, then: Callable[[], None]) -> None:
        try:
            await self.get()
        except Exception:  # noqa: BLE001 - the loop reports a start that failed
            return
        await none_starting()
        then()

    def cancel_then(self) -> None:
        if self._then is not None:
            self._then.cancel()

    async def get(self) -> Sandbox:
        """The started sandbox (SandboxError if it could not start). Shielded: a caller cancelled
        while waiting never cancels the start (its thread would go on creating the container)."""
        await asyncio.shield(self._ready)
        return self.box

    async def _start(self, restore: Callable[[], Path | None]) -> None:
        with starting():  # until its workspace is in place
            self.box = await self._adopt()
            if self.box is None:  # none started ahead, or that start failed: this one reports why
                self.box = make_sandbox(self.config, sandbox_name(self.env, self.sample))
                await asyncio.to_thread(self.box.start)
            archive = restore()
            if archive is not None:  # resuming: as the last kept round left it
                await asyncio.to_thread(self.box.restore, archive, self.config.workdir)
            else:
                await asyncio.to_thread(self.env.prepare, self.box)

    async def _adopt(self) -> Sandbox | None:
        """The sandbox started ahead, once up; None if there was none or its start failed (the
        rollout then starts its own, which reports the failure)."""
        if self._ahead is None:
            return None
        try:
            return await asyncio.shield(self._ahead)
        except asyncio.CancelledError:
            self.discard()
            raise
        except Exception:  # noqa: BLE001 - see the docstring
            return None

    def discard(self) -> None:
        """Remove the sandbox started ahead, once its start ends: the rollout will not use it."""
        if self._ahead is not None:
            self._ahead.add_done_callback(stop_started)

    async def end(self) -> None:
        """Wait for a start still under way (its thread may still create the container), then
        remove the sandbox, or the one started ahead if the rollout never wanted it."""
        if self._ready is None:
            self.discard()
            return
        if not self._ready.done():
            await asyncio.wait([self._ready])
        if not self._ready.cancelled():
            self._ready.exception()  # seen: a start that failed before any command is the ending's cause or moot
        await self._remove()

    async def _remove(self) -> None:
        """Remove the sandbox in a worker thread: a removal takes ~0.1 s of the engine, and rollouts
        ending together must not stall the event loop the others' teacher calls run on. A task
        cancelled again meanwhile removes it itself before going on (stop() is idempotent)."""
        box, self.box = self.box, None
        if box is None:
            return
        removal = asyncio.ensure_future(asyncio.to_thread(box.stop))
        try:
            await asyncio.shield(removal)
        except asyncio.CancelledError:
            box.stop()
            raise


def archive_to_restore(store: SnapshotStore, last: str | None, rounds_done: int) -> Path | None:
    """The archive a resumed rollout's sandbox starts from: its last kept round's, if any."""
    return store.path(last) if rounds_done and last else None
