"""The unshare backend: each sandbox is a process tree on this host, isolated by Linux namespaces
(mount, PID, network, IPC, UTS), in a read-only root filesystem exported from the same image as
Docker's, with the same tmpfs areas, cgroup limits, capabilities and no-new-privileges, and the
same init, command server and runner inside (so every command behaves as with Docker).

The host starts launch.py (as root), which builds the sandbox and execs arex's init as its PID 1;
the command server's stdio is one end of a socket pair whose other end only this process holds.
Out-of-memory kills are read from the sandbox's memory cgroup (its oom_kill count). Leftovers of a
killed arex process are found by their state records (state.py) and removed by `cleanup`. (When
the owner dies, the server's stream closes and init ends on writing to it, which ends the whole
namespace; cgroups and state stay for `cleanup`, and it also kills a sandbox still running.)
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from pathlib import Path

from arex.record.storage import proc_start
from arex.sandbox.base import JUDGE_AREA, Finding, SandboxConfig, SandboxError
from arex.sandbox.execd import ExecServer
from arex.sandbox.execd import text as execd_text
from arex.sandbox.runtime import TARGET, main_command
from arex.sandbox.served import ServedSandbox
from arex.sandbox.unshare import rootfs as rootfs_mod
from arex.sandbox.unshare import state
from arex.sandbox.unshare.cgroups import Cgroups
from arex.sandbox.unshare.diagnose import diagnose

LAUNCHER = str(Path(__file__).with_name("launch.py"))
START_TIMEOUT_S = 120.0  # a backstop against a launcher that hangs, far above a start on a busy host
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

_live: "weakref.WeakSet[UnshareSandbox]" = weakref.WeakSet()


@atexit.register
def stop_live() -> None:
    """Stop every sandbox of this backend this process started and has not stopped."""
    for sandbox in list(_live):
        sandbox.stop()


class _StreamServer(ExecServer):
    """The server on a plain socket: its replies come unframed (Docker's attach stream frames them)."""

    def _frames(self):
        while True:
            chunk = self._raw.recv(1 << 20)
            if not chunk:
                return
            yield chunk


class UnshareSandbox(ServedSandbox):
    def __init__(self, config: SandboxConfig, name: str = "sandbox"):
        super().__init__(config, name)
        self._id: str | None = None
        self._folder: Path | None = None
        self._groups: Cgroups | None = None
        self._shim: subprocess.Popen | None = None
        self._server: _StreamServer | None = None
        self._memory = config.memory + config.files_bytes
        self._oom_seen = 0
        self._lock = threading.Lock()

    @property
    def id(self) -> str | None:
        return self._id

    @classmethod
    def diagnose(cls, image: str) -> list[Finding]:
        return diagnose(image)

    @classmethod
    def cleanup(cls, store: str | None = None, all_owners: bool = False) -> list[str]:
        return state.cleanup(store, all_owners)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._shim is not None:
            return
        cfg = self.config
        if cfg.network:  # host networking would reach the host's services; a bridge is Docker's to give
            raise SandboxError(
                "The unshare sandbox backend has no network but loopback; use the docker backend for sandbox.network."
            )
        rootfs = rootfs_mod.resolve(cfg.image)
        for mount in cfg.mounts:
            if not Path(mount.source).exists():
                raise SandboxError(f"Mount source '{mount.source}' does not exist (mount target {mount.target}).")
        runtime = rootfs_mod.runtime_dir(rootfs)
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name)[:60]
        self._id = f"arex-{label}-{uuid.uuid4().hex[:10]}"
        folder = state.boxes_dir() / self._id
        folder.mkdir(parents=True)
        record = {"id": self._id, "name": self.name, **state.owner_fields()}
        state.write(folder, record)  # first: from here on a leftover of this process can be found
        self._folder = folder
        _live.add(self)
        try:
            self._groups = Cgroups.create(self._id, self._memory, cfg.cpus, cfg.pids_limit)
            record.update(cgroups=[str(p) for p in self._groups.paths], cgroup_version=self._groups.version)
            state.write(folder, record)
            self._launch(self._spec(rootfs, runtime, folder), record)
        except BaseException:
            self.stop()
            raise
        if cfg.seed:
            self._seed(cfg.seed)

    def _spec(self, rootfs: rootfs_mod.RootFs, runtime: Path, folder: Path) -> dict:
        """What launch.py builds: the isolation and limits of the filesystem live here, in one place."""
        cfg = self.config
        uid, gid = cfg.uid_gid

        def area(size: int, mode: str) -> str:  # exec allowed: compiled programs run from the workdir and /tmp
            return f"size={size},nr_inodes={cfg.inodes},uid={uid},gid={gid},mode={mode}"

        tmpfs = [
            [cfg.workdir, area(cfg.disk, "0755")],
            [cfg.home, area(cfg.scratch, "0755")],
            ["/tmp", area(cfg.scratch, "1777")],
        ]
        if cfg.judge_area:  # only the judge's uid may enter; the sandbox user can neither read nor fill it
            judge = cfg.judge_uid
            tmpfs.append([JUDGE_AREA, f"size={cfg.judge_area},nr_inodes=4096,uid={judge},gid={judge},mode=0700"])
        hostname = uuid.uuid4().hex[:12]
        files = {"hosts": HOSTS, "hostname": hostname + "\n", "resolv.conf": ""}  # no name server: no lookups
        for name, text in files.items():
            (folder / name).write_text(text)
        binds = [[str(runtime), TARGET, True]] + [[str(folder / name), f"/etc/{name}", True] for name in files]
        binds += [[str(Path(m.source).resolve()), m.target, m.read_only] for m in cfg.mounts]
        (folder / "mnt").mkdir()
        env = {"PATH": rootfs_mod.DEFAULT_PATH, "HOSTNAME": hostname, **rootfs.env, **cfg.env}
        env.setdefault("HOME", "/root")  # init and server run as root; commands get the agent's HOME
        return {
            "rootfs": str(rootfs.path),
            "staging": str(folder / "mnt"),
            "hostname": hostname,
            "tmpfs": tmpfs,
            "binds": binds,
            "env": env,
            "argv": main_command(uid),
            "cgroup_procs": [str(p / "cgroup.procs") for p in self._groups.paths],
        }

    def _launch(self, spec: dict, record: dict) -> None:
        folder = self._folder
        (folder / "spec.json").write_text(json.dumps(spec))
        host_end, box_end = socket.socketpair()
        status_read, status_write = os.pipe()
        try:
            with open(folder / "log", "wb") as log:  # the serving processes' stderr, for _dead's message
                self._shim = subprocess.Popen(
                    [sys.executable, "-I", "-S", LAUNCHER, str(folder / "spec.json"), str(status_write)],
                    stdin=box_end,
                    stdout=box_end,
                    stderr=log,
                    pass_fds=(status_write,),
                    cwd="/",
                    env={"LANG": "C.UTF-8"},
                    start_new_session=True,  # a Ctrl-C of arex's terminal is not the sandbox's
                )
        except OSError as exc:
            host_end.close()
            raise SandboxError(f"Cannot start the sandbox launcher: {exc}") from None
        finally:
            box_end.close()
            os.close(status_write)
        try:
            lines = _read_all(status_read, START_TIMEOUT_S).splitlines()
        finally:
            os.close(status_read)
        pid = next((int(line.split()[1]) for line in lines if line.startswith("pid ")), None)
        errors = [line.removeprefix("error ") for line in lines if line.startswith("error ")]
        if errors or pid is None:
            host_end.close()
            why = "; ".join(errors) or f"the launcher ended without starting it ({self._log_tail()})"
            raise SandboxError(f"Could not start a sandbox from '{self.config.image}': {why}")
        record.update(
            init_pid=pid, init_start=proc_start(pid), shim_pid=self._shim.pid, shim_start=proc_start(self._shim.pid)
        )
        state.write(folder, record)
        self._server = _StreamServer(host_end)

    def _seed(self, seed: str) -> None:
        reply = self._helper(["cp", "-a", "--no-preserve=ownership", f"{seed}/.", self.config.workdir])
        if reply["exit_code"] != 0:
            self.stop()
            raise SandboxError(
                f"Image '{self.config.image}' has no usable workspace at {seed}: "
                f"{execd_text(reply['err'])[0].strip()[:300]}"
            )

    def set_memory_limit(self, memory: int) -> None:
        self._require()
        if memory == self._memory:
            return
        try:
            self._groups.set_memory(memory)
        except OSError as exc:
            raise self._dead("memory limit update", exc) from None
        self._memory = memory

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
            shim, self._shim = self._shim, None
            groups, self._groups = self._groups, None
            folder, self._folder = self._folder, None
            _live.discard(self)
        if server is not None:
            server.close()
        if shim is not None:
            _end_shim(shim)
        gone = True
        if groups is not None:
            gone = groups.kill_all()
            groups.remove()
        if folder is not None and gone:  # else kept: `cleanup` (arex sandbox prune) retries later
            shutil.rmtree(folder, ignore_errors=True)

    def _require(self):
        if self._shim is None or self._server is None:
            raise SandboxError(f"Sandbox '{self.name}' is not running; call start() or use it as a context manager.")
        return self._shim

    def _log_tail(self) -> str:
        try:
            text = (self._folder / "log").read_text(errors="replace").strip() if self._folder else ""
        except OSError:
            text = ""
        return text[-500:] or "no message"

    def _dead(self, what: str, exc: Exception) -> SandboxError:
        shim = self._shim
        status = "removed" if shim is None else ("running" if shim.poll() is None else f"ended with {shim.returncode}")
        return SandboxError(
            f"Sandbox '{self.name}' failed during {what} (sandbox {status}): {exc} [{self._log_tail()}]"
        )

    # -- out-of-memory kills, from the memory cgroup's count ----------------------------------
    def _oom_mark(self) -> int:
        groups = self._groups
        return groups.oom_kills() if groups is not None else 0

    def _oom_since(self, mark: int) -> bool:
        groups = self._groups
        if groups is None:
            return False
        count = groups.oom_kills()
        with self._lock:
            if count > max(mark, self._oom_seen):
                self._oom_seen = count  # each kill marks one command, never a later one
                return True
        return False


def _end_shim(shim: subprocess.Popen) -> None:
    """SIGTERM makes the shim SIGKILL the sandbox's PID 1 (its own child: never a reused pid), and the
    kernel then kills every process of the namespace; the shim ends when PID 1 is reaped."""
    if shim.poll() is None:
        try:
            shim.send_signal(signal.SIGTERM)
        except OSError:
            pass
    try:
        shim.wait(timeout=30)
    except subprocess.TimeoutExpired:
        shim.kill()
        shim.wait()


def _read_all(fd: int, timeout: float) -> str:
    """Everything written to `fd` until every writer has closed it (or `timeout` seconds)."""
    data, deadline = b"", time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data.decode(errors="replace") + "\nerror the sandbox did not start in time"
        chunk = os.read(fd, 65536)
        if not chunk:
            return data.decode(errors="replace")
        data += chunk
