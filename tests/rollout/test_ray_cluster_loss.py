"""`arex rollout --executor ray` when the cluster itself goes: nothing at the address is said at once,
and a run whose only node dies ends with its summary.json and a message (Ray would end the driver
process 60 s after losing its head, silently), exiting 6. The cluster is a head node in a process of
its own (its Ray processes removed by it), the driver a real `arex rollout` process; the rollouts run
the `tally` test kind on the `process` backend, registered in Ray's workers by a setup hook."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from polling import deadline_poll
from reliability_kit import _Process, make_tally_env
from repo_paths import TESTS

from arex.errors import UserInputError
from arex.record.trajectory import load
from arex.rollout.endings import Unfinished
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.ray

HEAD = """
import sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 80 << 20})
print(cluster.address, flush=True)
sys.stdin.readline()  # the test says when: the node dies as a lost machine would (no graceful stop)
cluster.remove_node(cluster.head_node, allow_graceful=False)
print("removed", flush=True)
sys.stdin.readline()
"""


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_auto_naming_a_dead_cluster_is_said_at_once(monkeypatch):
    """`--address auto` (the default) reads RAY_ADDRESS, or the cluster `ray start` set up here last:
    one that is gone is named at once, where ray.init waits two minutes."""
    import ray

    from arex.rollout.ray_executor import RayExecutor

    assert not ray.is_initialized()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port()}")
    with pytest.raises(UserInputError, match=r"no Ray cluster answers at --address auto \(.*\)"):
        RayExecutor("auto").connect()


class Head:
    """A one-node Ray cluster in a process of its own: `kill()` removes its node as a crash would."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.address = self.proc.stdout.readline().strip()
        assert self.address, "the head node did not start"

    def kill(self) -> None:
        if self.proc.poll() is None and not getattr(self, "killed", False):
            self.killed = True
            self.proc.stdin.write("kill\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline().strip() == "removed"

    def close(self) -> None:
        self.kill()
        self.proc.stdin.close()
        self.proc.wait(60)


def test_the_only_node_dying_mid_run_still_writes_the_summary_and_says_so(tmp_path):
    envs, store = tmp_path / "envs", tmp_path / "store"
    make_tally_env(envs, "tally-a")
    held, release = threading.Event(), threading.Event()
    script = RoundScript(lambda n: [f"echo {n + 1} > answer.txt"])

    def hold_round_2(request, index):
        if any("Round 2 of" in str(m.get("content")) for m in request["messages"]):
            held.set()
            release.wait(120)  # until the node is gone
        return script(request, index)

    head = Head()
    try:
        with ScriptedServer(hold_round_2, model="scripted-teacher") as server:
            hook = {
                "worker_process_setup_hook": "loop_kit.register_tally_kind",
                "env_vars": {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])},
            }
            args = ["cli", "rollout", "--envs", str(envs), "--out", str(store), "--samples", "2"]
            args += ["--executor", "ray", "--address", head.address]
            for key, value in {
                "teacher.base_url": server.base_url,
                "teacher.model": "scripted-teacher",
                "teacher.track_cost": "false",
                "sandbox.backend": "process",
                "rollout.rounds": "3",
            }.items():
                args += ["-c", f"{key}={value}"]
            environ = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": hook})}
            driver = _Process(args, tmp_path / "driver.out", environ)
            try:
                deadline_poll(lambda: held.is_set() or driver.poll() is not None, 180, "a rollout to reach round 2")
                assert driver.poll() is None, (tmp_path / "driver.out").read_text()[-3000:]
                head.kill()
                code = driver.wait(180)  # Ray ends the driver 60 s after losing the head: well before this
            finally:
                release.set()
                if driver.poll() is None:
                    driver.proc.kill()
                    driver.wait(30)
    finally:
        head.close()
    out = (tmp_path / "driver.out").read_text()
    assert code == Unfinished.exit_code, out[-3000:]
    assert "2 of 2 rollout(s) did not finish" in out and "infra_failed x2: node lost" in out, out[-3000:]
    summary = json.loads((store / "summary.json").read_text())
    assert summary["endings"] == {"infra_failed": 2} and len(summary["nodes_lost"]) >= 1
    assert all(g["status"] == "infra_failed" and g["redone"] for g in summary["failures"])
    records = [load(Path(path)) for path in sorted((store / "tally-a").glob("*.jsonl"))]
    assert all(r.end is None for r in records)  # open, to be resumed
    assert sorted(len(r.rounds) for r in records)[-1] == 1  # the one held in round 2 kept its round 1
