"""The unshare backend (arex/sandbox/unshare): every conformance check, each alone, and its own
parts (a missing rootfs, leftovers of a killed owner, stop)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

from arex.record.storage import owner_alive
from arex.sandbox import SandboxConfig, SandboxError, make_sandbox
from arex.sandbox.conformance import CHECKS, run_suite
from arex.sandbox.unshare import UnshareSandbox, state

pytestmark = pytest.mark.docker

# A killed arex process: it starts a sandbox with a background process in it and dies by SIGKILL,
# so neither stop() nor the atexit hook runs. A forked holder keeps the server's stream open, as
# Docker's engine does for a container: otherwise the closed stream ends init (its GONE line hits a
# closed socket) and the sandbox's processes die by themselves, leaving only cgroups and state.
ORPHAN = """
import os, signal, time
from arex.sandbox import SandboxConfig, make_sandbox
sb = make_sandbox(SandboxConfig(backend="unshare"), "orphan")
sb.start()
assert sb.exec("nohup sleep 300 >/dev/null 2>&1 &").ok
holder = os.fork()
if holder == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(600)
    os._exit(0)
print(sb.id, holder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="session")
def rootfs() -> str:
    """The base image's rootfs, made by the script once (it is a no-op when already made)."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "export_rootfs.sh"), "arex-base:latest"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("check", list(reversed(CHECKS)))
def test_unshare_backend(rootfs, check):
    """Each check once, on a harness of its own, last check first (as for Docker)."""
    outcome = run_suite("unshare", only=[check], alone=True)
    assert outcome == {check: None}, outcome[check]


def test_missing_rootfs_says_how_to_make_it(tmp_path):
    for image, hint in (
        (str(tmp_path / "nowhere"), "export_rootfs.sh <docker image>"),
        ("no-such-image:v1", "bash scripts/export_rootfs.sh no-such-image:v1"),
    ):
        sandbox = make_sandbox(SandboxConfig(backend="unshare", image=image))
        with pytest.raises(SandboxError, match="No root filesystem") as raised:
            sandbox.start()
        assert hint in str(raised.value)
        sandbox.stop()  # nothing to stop: still fine


def test_network_is_refused_clearly():
    """No silent fallback: host networking would reach the host's services, so network=True is an error."""
    with pytest.raises(SandboxError, match="no network but loopback"):
        make_sandbox(SandboxConfig(backend="unshare", network=True)).start()


def _gone(record: dict) -> list[str]:
    """What is left of a recorded sandbox: its folder, cgroups, PID 1 (empty if nothing)."""
    left = [p for p in record["cgroups"] if Path(p).exists()]
    if (state.boxes_dir() / record["id"]).exists():
        left.append("its state folder")
    if owner_alive(record["init_pid"], record["init_start"]):
        left.append(f"its PID 1 ({record['init_pid']})")
    return left


def test_cleanup_removes_a_dead_owners_sandbox(rootfs, tmp_path):
    store = str(tmp_path / "store")
    env = {**os.environ, "AREX_STORE": store}
    done = subprocess.run([sys.executable, "-c", ORPHAN], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr
    sid, holder = done.stdout.split()
    try:
        record = state.read(state.boxes_dir() / sid)
        assert record and record["store"] == store
        assert owner_alive(record["init_pid"], record["init_start"]), "the orphan's sandbox is not running"
        with make_sandbox(SandboxConfig(backend="unshare"), "alive-owner") as mine:
            assert sid not in UnshareSandbox.cleanup(store=str(tmp_path / "another-store"))
            removed = UnshareSandbox.cleanup(store=store)
            assert sid in removed and mine.id not in removed, removed
            assert mine.exec("echo still-here").stdout == "still-here\n", "cleanup touched a live owner's sandbox"
            assert mine.id not in UnshareSandbox.cleanup(), "cleanup removed the sandbox of a live owner"
        assert _gone(record) == [], _gone(record)
    finally:
        os.kill(int(holder), signal.SIGKILL)


def test_stop_leaves_nothing(rootfs):
    sandbox = make_sandbox(SandboxConfig(backend="unshare"), "stop-twice")
    sandbox.start()
    assert sandbox.exec("nohup sleep 300 >/dev/null 2>&1 &").ok
    record = state.read(state.boxes_dir() / sandbox.id)
    sandbox.stop()
    sandbox.stop()
    assert _gone(record) == [], _gone(record)
    with pytest.raises(SandboxError):
        sandbox.exec("true")


KEYRING = """
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
add_key = {"x86_64": 248, "aarch64": 217}[platform.machine()]
print(libc.syscall(add_key, b"user", b"note", b"for the next sandbox", 20, -4), ctypes.get_errno())
"""


def test_no_user_namespace_nor_keyring(rootfs):
    """As under Docker's seccomp profile: no new namespace (a user namespace gives the agent
    capabilities over its own mounts), and no key in the per-uid keyring another sandbox shares."""
    with make_sandbox(SandboxConfig(backend="unshare"), "seccomp") as sandbox:
        r = sandbox.exec("unshare --user --map-root-user true")
        assert r.status == "error" and "Operation not permitted" in r.stderr, r
        r = sandbox.exec(["python3", "-c", KEYRING])
        assert r.stdout.split() == ["-1", "1"], f"add_key was not refused with EPERM: {r}"
        assert sandbox.exec(["python3", "-c", "import threading; t = threading.Thread(target=print); t.start()"]).ok
