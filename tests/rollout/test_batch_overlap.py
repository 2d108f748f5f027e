"""A batch keeps the slow engine work off its rollouts' path: the first rollouts' agent sandboxes
start while the teacher's identity is asked, and a finished rollout's sandbox is removed in a
worker thread while the event loop goes on serving the others' teacher calls.

Both are checked by events, not by time: the patched identity call waits (with a generous
deadline) for the sandboxes to start, which would never happen if they started only after it; the
patched removal waits for a callback it schedules on the event loop, which would never run if the
removal blocked the loop."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from polling import deadline_poll

from arex.envs.runtime import load_env
from arex.sandbox.base import SandboxConfig

pytestmark = pytest.mark.docker

DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from arex.envs.build import build_envs

    root = tmp_path_factory.mktemp("overlap")
    src = root / "src" / "overlap"
    (src / "private" / "tests").mkdir(parents=True)
    for name, (question, answer) in {"s1": ("4 5\n", "9\n"), "h1": ("10 -3\n", "7\n")}.items():
        (src / "private" / "tests" / f"{name}.in").write_text(question)
        (src / "private" / "tests" / f"{name}.ans").write_text(answer)
    (src / "solutions").mkdir()
    (src / "solutions" / "ok.py").write_text("x, y = map(int, input().split())\nprint(x + y)\n")
    (src / "workspace").mkdir()
    (src / "workspace" / "solution.py").write_text("print(1)\n")
    (src / "statement.md").write_text("Read two integers; print their sum.\n")
    (src / "task.yaml").write_text(
        "id: overlap\ntitle: overlap\ntime_limit_s: 2.0\nstarter: solution.py\n"
        "solutions:\n  - {path: solutions/ok.py, expected: accepted}\n"
    )
    [report] = build_envs([src], root / "envs")
    assert report.status == "accepted", report.reason
    return load_env(root / "envs" / "overlap")


def _batch(env, store: Path, rollouts: int, concurrency: int) -> dict:
    from arex.rollout.batch import run_batch
    from arex.rollout.config import RolloutConfig
    from arex.teacher.client import TeacherConfig
    from arex.teacher.scripted import RoundScript, ScriptedServer

    teacher = TeacherConfig(model="scripted-teacher", track_cost=False)
    with ScriptedServer(RoundScript(lambda n: ["cat solution.py"]), model="scripted-teacher", latency_s=0.05) as server:
        return asyncio.run(
            run_batch(
                [env], teacher, RolloutConfig(rounds=1), SandboxConfig(), store, rollouts, concurrency, server.base_url
            )
        )


def _left(before: set[str]) -> list[str]:
    from arex.sandbox.docker import docker_client

    return [
        c.name
        for c in docker_client().containers.list(all=True, filters={"label": f"arex.owner_pid={os.getpid()}"})
        if c.id not in before
    ]


def _ours() -> set[str]:
    from arex.sandbox.docker import docker_client

    return {c.id for c in docker_client().containers.list(all=True, filters={"label": f"arex.owner_pid={os.getpid()}"})}


def _record_starts(monkeypatch) -> list[str]:
    """The names of the sandboxes started from now on (a start, not a no-op on a started one)."""
    from arex.sandbox.docker import DockerSandbox

    started: list[str] = []
    real_start = DockerSandbox.start

    def start(self) -> None:
        fresh = self.id is None
        real_start(self)
        if fresh:
            started.append(self.name)

    monkeypatch.setattr(DockerSandbox, "start", start)
    return started


async def _until(check) -> None:
    """Wait on the event loop until `check()` holds, or DEADLINE_S passed (the caller's assert then fails)."""
    deadline = time.monotonic() + DEADLINE_S
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


def test_the_first_rollouts_sandboxes_start_while_the_identity_is_asked(env, tmp_path, monkeypatch):
    from arex.teacher.client import TeacherClient

    started, real_identity = _record_starts(monkeypatch), TeacherClient.identity

    async def identity(self):
        await _until(lambda: sum(n.startswith("rollout-") for n in started) >= 3)
        seen.append(sorted(n for n in started if n.startswith("rollout-")))
        return await real_identity(self)

    seen: list[list[str]] = []
    monkeypatch.setattr(TeacherClient, "identity", identity)
    before = _ours()
    summary = _batch(env, tmp_path / "store", rollouts=4, concurrency=3)
    assert summary["endings"] == {"done": 4}
    # The three rollouts that run first had their sandboxes up before the identity came back; the
    # fourth waited for a place, so its sandbox was not among them.
    assert seen == [["rollout-overlap-0", "rollout-overlap-1", "rollout-overlap-2"]]
    # each started once
    assert sorted(n for n in started if n.startswith("rollout-")) == [f"rollout-overlap-{i}" for i in range(4)]
    assert _left(before) == []


def test_a_sandbox_is_removed_off_the_event_loop(env, tmp_path, monkeypatch):
    from arex.rollout import agent
    from arex.sandbox.docker import DockerSandbox

    loops: list[asyncio.AbstractEventLoop] = []
    real_run, real_stop = agent.Rollout.run, DockerSandbox.stop
    removals: list[tuple[str, bool, bool]] = []  # (name, on the loop's thread, the loop ran meanwhile)

    async def run(self):
        loops.append(asyncio.get_running_loop())
        return await real_run(self)

    def stop(self) -> None:
        if self.name.startswith("rollout-") and self.id is not None:
            loop, served = loops[0], threading.Event()
            loop.call_soon_threadsafe(served.set)  # runs only if the loop is free while we remove
            removals.append((self.name, threading.get_ident() == loop._thread_id, served.wait(DEADLINE_S)))  # noqa: SLF001 - the loop's own thread
        real_stop(self)

    monkeypatch.setattr(agent.Rollout, "run", run)
    monkeypatch.setattr(DockerSandbox, "stop", stop)
    before = _ours()
    summary = _batch(env, tmp_path / "store", rollouts=2, concurrency=2)
    assert summary["endings"] == {"done": 2}
    assert sorted(removals) == [("rollout-overlap-0", False, True), ("rollout-overlap-1", False, True)]
    assert _left(before) == []


def test_sandboxes_started_ahead_are_removed_when_the_batch_cannot_begin(env, tmp_path, monkeypatch):
    """The identity call fails after the first sandboxes started: the batch fails with that error
    and removes every sandbox it started (none was taken by a rollout)."""
    from arex.teacher.client import TeacherClient

    started = _record_starts(monkeypatch)

    async def identity(self):
        await _until(lambda: len(started) >= 2)
        raise RuntimeError("identity probe failed on purpose")

    monkeypatch.setattr(TeacherClient, "identity", identity)
    before = _ours()
    with pytest.raises(RuntimeError, match="on purpose"):
        _batch(env, tmp_path / "store", rollouts=2, concurrency=2)
    assert sorted(started) == ["rollout-overlap-0", "rollout-overlap-1"]
    deadline_poll(lambda: not _left(before), DEADLINE_S, "the sandboxes started ahead to be removed")
