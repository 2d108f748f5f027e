"""The trajectory store under concurrent runs, kills, damaged records, a full disk and a read-only
folder: one run per store (a lock), a killed run's lock and containers cleaned up by the next run,
one unreadable record not stopping the others, and write errors as one sentence naming the path.

Runs on the `tally` env kind and the process sandbox of tests/loop_kit.py (no Docker), with
real processes for the concurrent and killed runs; the container clean-up test needs Docker. The
disk-full and read-only tests mount a small tmpfs (root only; skipped otherwise)."""

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from loop_kit import TEACHER, cli_rollout, climbing, process_sandbox, select_cli
from repo_paths import TESTS

from arex.record.storage import (
    LOCK_NAME,
    STORE_ENV,
    DiskFull,
    OutputError,
    Owner,
    StoreLock,
    StoreLocked,
    boot_id,
    proc_start,
)
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tally_env):
    return tally_env


# One `arex rollout` batch in its own process, as the CLI runs it (SIGTERM exits through `finally`).
RUNNER = """
import asyncio, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from loop_kit import TEACHER, TallyEnv
from arex.envs import runtime
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.sandbox.base import BACKENDS
runtime.KINDS["tally"] = TallyEnv
BACKENDS["process"] = "process_sandbox:ProcessSandbox"
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # as arex's CLI does
backend, env_dir, store, url, rounds = sys.argv[2:7]
env = runtime.load_env(Path(env_dir))
asyncio.run(run_batch([env], TEACHER, RolloutConfig(rounds=int(rounds)), SandboxConfig(backend=backend), Path(store), 1, 1, url))
print("finished", flush=True)
"""  # noqa: E501


def start_run(backend: str, env, store: Path, url: str, rounds: int = 2) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(TESTS), backend, str(env.dir), str(store), url, str(rounds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stalling(script, marker: str):
    """`script`, but a request whose last message contains `marker` waits until released."""
    reached, release = threading.Event(), threading.Event()

    def reply(request, index):
        if marker in request["messages"][-1]["content"]:
            reached.set()
            release.wait(120)
        return script(request, index)

    return reply, reached, release


def batch(env, store: Path, url: str, rounds: int = 2, samples: int = 1, sandbox=None):
    return asyncio.run(
        run_batch([env], TEACHER, RolloutConfig(rounds=rounds), sandbox or process_sandbox(), store, samples, 1, url)
    )


# -- one run per store ---------------------------------------------------------------------------
def test_a_second_run_on_a_store_in_use_stops_before_any_teacher_call_and_a_killed_runs_lock_is_taken_over(
    env, tmp_path, caplog
):
    store = tmp_path / "store"
    script = RoundScript(climbing)
    reply, reached, release = stalling(script, "Round 2 of 2")
    with ScriptedServer(reply, model="scripted-teacher") as server:
        first = start_run("process", env, store, server.base_url)
        try:
            assert reached.wait(120), (
                first.stderr.read() if first.poll() is not None else "the first run never reached round 2"
            )
            before = len(server.requests)
            with pytest.raises(StoreLocked) as info:
                batch(env, store, server.base_url)
            message = str(info.value)
            assert f"pid {first.pid} on host {socket.gethostname()}" in message and str(store / LOCK_NAME) in message
            assert len(server.requests) == before  # no teacher call, nothing written by the second run
            first.kill()  # SIGKILL: no clean-up at all
            first.wait(30)
        finally:
            release.set()
            if first.poll() is None:
                first.kill()
        with caplog.at_level(logging.WARNING, logger="arex"):
            summary = batch(env, store, server.base_url)
    assert summary["endings"] == {"done": 1}
    taken = [r.getMessage() for r in caplog.records if "stale lock" in r.getMessage()]
    assert len(taken) == 1 and f"pid {first.pid}" in taken[0] and str(store / LOCK_NAME) in taken[0]
    [path] = (store / env.id).glob("*.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["round"] for x in lines if x["type"] == "round_end"] == [1, 2] and sum(
        x["type"] == "end" for x in lines
    ) == 1
    assert not (store / LOCK_NAME).exists()  # released when the run ended


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_lock_is_released_on_ctrl_c_and_sigterm(env, tmp_path, caplog, sig):
    store = tmp_path / "store"
    reply, reached, release = stalling(RoundScript(climbing), "Round 2 of 2")
    with ScriptedServer(reply, model="scripted-teacher") as server:
        run = start_run("process", env, store, server.base_url)
        try:
            assert reached.wait(120)
            assert (store / LOCK_NAME).is_file()
            run.send_signal(sig)
            run.wait(300)  # a backstop only: on a loaded host the run's shutdown can take a while
        finally:
            release.set()
            if run.poll() is None:
                run.kill()
        assert run.returncode != 0
        assert not (store / LOCK_NAME).exists(), run.stderr.read()
        with caplog.at_level(logging.WARNING, logger="arex"):
            assert batch(env, store, server.base_url)["endings"] == {"done": 1}
    assert not [r for r in caplog.records if "lock" in r.getMessage()]  # nothing stale to take over


def test_the_lock_is_released_when_the_batch_fails(env, tmp_path, monkeypatch):
    import arex.rollout.batch

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(arex.rollout.batch, "summarize", broken)
    store = tmp_path / "store"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        with pytest.raises(RuntimeError, match="boom"):
            batch(env, store, server.base_url, rounds=1)
    assert not (store / LOCK_NAME).exists() and STORE_ENV not in os.environ


def test_the_owner_named_in_the_lock_is_checked_by_pid_and_start_tick(tmp_path):
    """flock is the lock; the pid check guards where flock is not shared (network file systems)
    and a pid reused by another process does not keep a lock alive."""
    store = tmp_path / "store"
    store.mkdir()
    lock = store / LOCK_NAME
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live = Owner(sleeper.pid, socket.gethostname(), time.time(), proc_start(sleeper.pid), boot_id())
        lock.write_text(json.dumps(asdict(live)))
        with pytest.raises(StoreLocked, match=f"pid {sleeper.pid} on host"):
            StoreLock(store).acquire()
        lock.write_text(json.dumps(asdict(replace(live, proc_start="1"))))  # same pid, another process
        said: list[str] = []
        with StoreLock(store, said.append):
            assert json.loads(lock.read_text())["pid"] == os.getpid()
        assert len(said) == 1 and "stale lock" in said[0] and f"pid {sleeper.pid}" in said[0]
        lock.write_text(json.dumps(asdict(replace(live, host="elsewhere"))))
        with pytest.raises(StoreLocked, match=f"another host.*elsewhere.*delete the lock file {lock}"):
            StoreLock(store).acquire()
        lock.write_text("{not json")
        said.clear()
        with StoreLock(store, said.append):
            pass
        assert len(said) == 1 and "unreadable lock file" in said[0]
        exited = subprocess.Popen([sys.executable, "-c", "pass"])  # exited, not yet reaped: a zombie
        while (proc_start(exited.pid) is not None) and Path(f"/proc/{exited.pid}/stat").read_text().rpartition(")")[
            2
        ].split()[0] != "Z":
            time.sleep(0.01)
        lock.write_text(json.dumps(asdict(replace(live, pid=exited.pid, proc_start=proc_start(exited.pid)))))
        said.clear()
        with StoreLock(store, said.append):
            pass
        exited.wait()
        assert len(said) == 1 and f"pid {exited.pid}" in said[0]
    finally:
        sleeper.kill()
    with StoreLock(store):  # two runs in one process are refused too
        with pytest.raises(StoreLocked, match=f"pid {os.getpid()}"):
            StoreLock(store).acquire()
    assert not lock.exists()


def test_bad_counts_are_refused_before_the_store_is_touched(env, tmp_path):
    for samples, concurrency in ((0, 1), (1, 0), (-1, 1)):
        with pytest.raises(Exception, match="expects an integer of at least 1") as info:
            asyncio.run(
                run_batch(
                    [env],
                    TEACHER,
                    RolloutConfig(rounds=1),
                    process_sandbox(),
                    tmp_path / "store",
                    samples,
                    concurrency,
                    "http://127.0.0.1:9/v1",
                )
            )
        assert info.value.exit_code == 2
    assert not (tmp_path / "store").exists()


# -- one unreadable record -----------------------------------------------------------------------
def test_one_unreadable_record_does_not_stop_the_others_and_the_cli_exits_non_zero(env, tmp_path):
    store = tmp_path / "store"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        first = cli_rollout(env, store, server.base_url, "--samples", "2", "--rounds", "2")
        assert first.exit_code == 0, first.output
        paths = {load(p).header.sample: p for p in (store / env.id).glob("*.jsonl")}
        damaged = paths[0]
        lines = damaged.read_text().splitlines()
        lines.insert(3, json.dumps({"type": "note"}))  # JSON, but not a record line: load() refuses it
        damaged.write_text("\n".join(lines) + "\n")
        before = damaged.read_bytes()
        calls = len(server.requests)
        result = cli_rollout(env, store, server.base_url, "--samples", "3", "--rounds", "2")
    assert result.exit_code == 2, result.output
    assert len(server.requests) > calls  # sample 2 ran
    out = " ".join(result.output.split())
    assert "│ tally │ 2 " in result.output  # the table of the readable ones, then the endings and the reasons
    assert "unreadable_record 1" in out and "done 2" in out
    assert f"unreadable_record: {damaged}, line 4" in out
    assert out.endswith("Repair or move them away, then re-run to redo them.")
    assert damaged.read_bytes() == before  # nothing written to it
    summary = json.loads((store / "summary.json").read_text())
    assert summary["endings"] == {"done": 2, "unreadable_record": 1}
    assert (
        summary["unreadable_records"][0]["path"] == str(damaged)
        and "line 4" in summary["unreadable_records"][0]["reason"]
    )
    assert {load(p).header.sample for p in (store / env.id).glob("*.jsonl") if p != damaged} == {1, 2}


# -- a full disk, a read-only folder ---------------------------------------------------------------
@contextmanager
def tmpfs(folder: Path, size: str):
    """A tmpfs of `size` mounted at `folder` for the block; skips the test where mounting is not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True)


def fill(folder: Path, room: int) -> None:
    """Fill the file system of `folder`, then free `room` bytes."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - room))


@pytest.mark.parametrize("room_kib", [8, 48, 100])  # the disk fills writing the record, or a workspace snapshot
def test_disk_full_during_a_rollout_is_one_sentence_and_the_rerun_loses_nothing(env, tmp_path, room_kib):
    with tmpfs(tmp_path / "disk", "1m") as disk:
        store = disk / "store"
        fill(disk, room_kib << 10)
        with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
            with pytest.raises(DiskFull) as info:
                batch(env, store, server.base_url, rounds=12)
            message = str(info.value)
            assert (
                message.startswith("disk full: could not write ")
                and str(store) in message
                and "re-run the same command to resume" in message
            )
            [path] = (store / env.id).glob("*.jsonl")
            kept = load(path)  # what was written is a readable record (a cut last line at most)
            assert len(kept.rounds) < 12
            assert kept.end is None or kept.end.status == "infra_failed"  # redone by a re-run
            assert not (store / LOCK_NAME).exists()
            remount(disk, "size=32m")
            summary = batch(env, store, server.base_url, rounds=12)
        assert summary["endings"] == {"done": 1}
        record = load(path)
        assert [r.number for r in record.rounds] == list(range(1, 13)) and record.held_out[-1] == 1.3
        assert sum(json.loads(x)["type"] == "round_start" for x in path.read_text().splitlines()) == 12


def test_a_read_only_store_is_one_sentence(env, tmp_path):
    with tmpfs(tmp_path / "ro", "1m") as folder:
        (folder / "store").mkdir()
        remount(folder, "ro")
        with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
            result = cli_rollout(env, folder / "store", server.base_url, "--rounds", "1")
            assert len(server.requests) == 0
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.output.startswith(
            f"arex: {folder / 'store' / LOCK_NAME} cannot be written (Read-only file system)"
        )
        with pytest.raises(OutputError):
            batch(env, folder / "new-store", "http://127.0.0.1:9/v1")


def test_select_on_a_full_disk_or_a_read_only_folder_is_one_sentence_and_resumes(env, tmp_path):
    store = tmp_path / "store"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        batch(env, store, server.base_url, rounds=2, samples=2)
    with tmpfs(tmp_path / "disk", "256k") as disk:
        out = disk / "selected"
        fill(disk, 0)
        result = select_cli(store, env.dir.parent, out)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        text = " ".join(result.output.split())
        assert f"arex: disk full: could not write {out}" in text and "re-run the same command to continue" in text
        (disk / "filler").unlink()
        result = select_cli(store, env.dir.parent, out)
        assert result.exit_code == 0, result.output
        assert "kept 2 of 2" in " ".join(result.output.split())
        remount(disk, "ro")
        result = select_cli(store, env.dir.parent, disk / "elsewhere")
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert f"{disk / 'elsewhere'} cannot be written (Read-only file system)" in " ".join(result.output.split())


# -- containers a killed run left ------------------------------------------------------------------
KILLED_WITH_A_SANDBOX = """
import os, signal
from arex.sandbox import SandboxConfig, make_sandbox
box = make_sandbox(SandboxConfig(), "unrelated")
box.start()
print(box.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.docker
def test_a_rerun_removes_the_containers_of_a_killed_run_on_its_store_and_doctor_reports_the_others(env, tmp_path):
    import docker

    from arex.sandbox import SandboxConfig
    from arex.sandbox.docker import OWNER_LABEL, STORE_LABEL, docker_client
    from arex.sandbox.docker.diagnose import check_leftovers

    client = docker_client()
    store = tmp_path / "store"
    other = subprocess.run(  # a sandbox of another, killed, arex process with no store
        [sys.executable, "-c", KILLED_WITH_A_SANDBOX],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != STORE_ENV},
    )
    unrelated = other.stdout.split()[0]
    try:
        reply, reached, release = stalling(RoundScript(climbing), "Round 2 of 2")
        with ScriptedServer(reply, model="scripted-teacher") as server:
            killed = start_run("docker", env, store, server.base_url)
            try:
                assert reached.wait(180), killed.stderr.read() if killed.poll() is not None else "never reached round 2"
                killed.kill()
                killed.wait(30)
            finally:
                release.set()
                if killed.poll() is None:
                    killed.kill()
            left = client.containers.list(all=True, filters={"label": f"{STORE_LABEL}={store.resolve()}"})
            assert left and all(c.labels[OWNER_LABEL] == str(killed.pid) for c in left)
            summary = batch(env, store, server.base_url, sandbox=SandboxConfig())
        assert summary["endings"] == {"done": 1}
        assert client.containers.list(all=True, filters={"label": f"{STORE_LABEL}={store.resolve()}"}) == []
        client.containers.get(unrelated)  # another run's leftover stays, and doctor reports it
        finding = check_leftovers(client)
        assert not finding.ok and finding.fix == "arex sandbox prune"
    finally:
        try:
            client.containers.get(unrelated).remove(force=True)
        except docker.errors.NotFound:
            pass
