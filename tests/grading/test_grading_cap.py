"""`rollout.grading_containers`: the most grading containers an env's pool keeps alive in a batch.

A batch of four rollouts of one env is run with all four first gradings asking for a lease at the
same moment (a gate holds each until the four have arrived), while a thread polls Docker for the
env's grading containers: with the cap set to 1 there is never more than one; by default (one per
two rollouts in flight) there are two. A bad value is one sentence naming the key.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from arex.config import ConfigError, load_config
from arex.envs.build import build_envs
from arex.envs.runtime import load_env
from arex.grading.pool import GradingPool
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import SandboxConfig
from arex.sandbox.docker import docker_client
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

ROLLOUTS = 4
GATE_S = 120.0  # deadline for the four first gradings to meet (the agent sandboxes start meanwhile)
# Each rollout submits its own text every round (random bytes read in its sandbox), so no grading
# is skipped as already graded in the batch.
WRITE = 'echo "a, b = map(int, input().split()); print(a + b)  # $(od -An -N8 -tx8 /dev/urandom)" > solution.py'


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("cap")
    src = root / "src" / "capped"
    (src / "private" / "tests").mkdir(parents=True)
    for name, (a, b) in {"sample-1": (1, 2), "main-1": (3, 4)}.items():
        (src / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (src / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    (src / "solutions").mkdir()
    (src / "solutions" / "ok.py").write_text("a, b = map(int, input().split())\nprint(a + b)\n")
    (src / "workspace").mkdir()
    (src / "workspace" / "solution.py").write_text("print(0)\n")
    (src / "statement.md").write_text("Print a + b.\n")
    (src / "task.yaml").write_text(
        "id: capped\ntitle: capped\ntime_limit_s: 2.0\nstarter: solution.py\n"
        "solutions:\n  - {path: solutions/ok.py, expected: accepted}\n"
    )
    [report] = build_envs([src], root / "envs")
    assert report.status == "accepted", report.reason
    return load_env(root / "envs" / "capped")


class Gate:
    """Holds the first `parties` lease requests until all have arrived, then lets every request
    through: the first gradings of all rollouts then want a container at once."""

    def __init__(self, parties: int):
        self.parties, self.arrived, self.opened = parties, 0, threading.Event()
        self.lock = threading.Lock()
        self.timed_out = False
        self.pools: set[GradingPool] = set()

    def wrap(self, real):
        def lease(pool: GradingPool):
            with self.lock:
                self.pools.add(pool)
                self.arrived += 1
                if self.arrived >= self.parties:
                    self.opened.set()
            if not self.opened.wait(GATE_S):
                self.timed_out = True
            return real(pool)

        return lease


class Watch:
    """Follows the engine's events for this process's grading containers of env `name`: the most
    alive at once. Events, not polling: a container alive between two polls is never missed."""

    def __init__(self, name: str):
        self.filters = {
            "label": [f"arex.owner_pid={os.getpid()}", f"arex.name=judge-{name}"],
            "type": "container",
            "event": ["start", "die"],
        }
        self.most, self.polls, self.alive = 0, 0, set()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for event in self.stream:
            self.polls += 1  # events seen
            if event.get("status") == "start":
                self.alive.add(event["id"])
            else:
                self.alive.discard(event["id"])
            self.most = max(self.most, len(self.alive))

    def __enter__(self) -> "Watch":
        self.stream = docker_client().events(filters=self.filters, decode=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()
        self.thread.join()


def _batch(env, rollout: RolloutConfig, out: Path, monkeypatch) -> tuple[dict, Gate, Watch]:
    gate = Gate(ROLLOUTS)
    monkeypatch.setattr(GradingPool, "lease", gate.wrap(GradingPool.lease))
    teacher = TeacherConfig(model="scripted-teacher", track_cost=False)
    with (
        ScriptedServer(RoundScript(lambda n: [WRITE]), model="scripted-teacher", latency_s=0.05) as server,
        Watch(env.id) as watch,
    ):
        summary = asyncio.run(
            run_batch([env], teacher, rollout, SandboxConfig(), out, ROLLOUTS, ROLLOUTS, server.base_url)
        )
    return summary, gate, watch


def _graded_all(summary: dict, gate: Gate) -> None:
    assert summary["endings"] == {"done": ROLLOUTS}, summary
    # 2 rounds each, the first ones at once
    assert not gate.timed_out and gate.arrived >= ROLLOUTS * 2, (
        gate.timed_out,
        gate.arrived,
    )


@pytest.mark.docker
def test_a_cap_of_one_keeps_one_grading_container_however_many_gradings_wait(env, tmp_path, monkeypatch):
    summary, gate, watch = _batch(env, RolloutConfig(rounds=2, grading_containers=1), tmp_path / "store", monkeypatch)
    _graded_all(summary, gate)
    [pool] = gate.pools
    assert pool.cap == 1 and pool.started == 1 and pool.replaced == 0, (pool.cap, pool.started, pool.failures)
    assert watch.polls > 0 and watch.most == 1, (watch.polls, watch.most)


@pytest.mark.docker
def test_the_default_cap_is_one_container_per_two_rollouts_in_flight(env, tmp_path, monkeypatch):
    summary, gate, watch = _batch(env, RolloutConfig(rounds=2), tmp_path / "store", monkeypatch)
    _graded_all(summary, gate)
    [pool] = gate.pools
    assert pool.cap == 2 and pool.started == 2 and pool.replaced == 0, (pool.cap, pool.started, pool.failures)
    assert watch.most == 2, (watch.polls, watch.most)  # four gradings wanted one at once: two, never more


def test_a_bad_cap_is_one_sentence_naming_the_key(tmp_path):
    for value, words in (("0", "greater than or equal to 1"), ("many", "expects an integer")):
        with pytest.raises(ConfigError) as info:
            load_config([f"rollout.grading_containers={value}"])
        message = str(info.value)
        assert "'rollout.grading_containers'" in message and words in message and "\n" not in message, message
    config = tmp_path / "small.yaml"
    config.write_text("rollout:\n  grading_containers: -2\n")
    with pytest.raises(ConfigError, match=r"'rollout.grading_containers' \(set by .*small.yaml\) cannot be -2"):
        load_config([str(config)])
    assert load_config(["rollout.grading_containers=3"]).rollout.grading_containers == 3
