"""The cgroups of one unshare sandbox: memory (no swap, OOM kills counted), pids and CPU limits.

cgroup v1 (one hierarchy per controller, as on this host) and v2 (one unified hierarchy) are both
handled; which one the host has is detected from /sys/fs/cgroup. Every sandbox gets a group
`arex-unshare/<id>` under each hierarchy's root, as Docker's cgroupfs driver makes `docker/<id>`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from arex.sandbox.base import SandboxError

ROOT = Path(os.environ.get("AREX_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "arex-unshare"
PERIOD_US = 100_000
V1_CONTROLLERS = ("memory", "pids", "cpu")


def version() -> int:
    """1 or 2, from what is mounted; SandboxError if neither has the memory and pids controllers."""
    if (ROOT / "memory" / "memory.limit_in_bytes").is_file() and (ROOT / "pids").is_dir():
        return 1
    if (ROOT / "cgroup.controllers").is_file():
        return 2
    raise SandboxError(
        f"No usable cgroup hierarchy at {ROOT} (the unshare sandbox needs the memory and pids controllers)."
    )


class Cgroups:
    """The groups of one sandbox, by their folders; `paths` is what a state record keeps."""

    def __init__(self, paths: list[str], v: int):
        self.paths = [Path(p) for p in paths]
        self.version = v

    @classmethod
    def create(cls, sandbox_id: str, memory: int, cpus: float, pids: int) -> "Cgroups":
        v = version()
        if v == 1:
            paths = [ROOT / c / PARENT / sandbox_id for c in V1_CONTROLLERS]
        else:
            _enable_v2_controllers()
            paths = [ROOT / PARENT / sandbox_id]
        groups = cls([str(p) for p in paths], v)
        try:
            for path in paths:
                path.mkdir(parents=True, exist_ok=True)
            groups.set_memory(memory)
            groups._limit_cpu_and_pids(cpus, pids)
        except OSError as exc:
            groups.remove()
            raise SandboxError(
                f"Cannot set up the sandbox's cgroups under {ROOT} ({exc}); the unshare backend runs as root."
            ) from None
        return groups

    def _file(self, controller: str, name: str) -> Path:
        if self.version == 2:
            return self.paths[0] / name
        return self.paths[V1_CONTROLLERS.index(controller)] / name

    def _limit_cpu_and_pids(self, cpus: float, pids: int) -> None:
        quota = max(1000, int(cpus * PERIOD_US))
        if self.version == 1:
            _write(self._file("cpu", "cpu.cfs_period_us"), PERIOD_US)
            _write(self._file("cpu", "cpu.cfs_quota_us"), quota)
        else:
            _write(self._file("cpu", "cpu.max"), f"{quota} {PERIOD_US}")
        _write(self._file("pids", "pids.max"), pids)

    def set_memory(self, memory: int) -> None:
        """Memory and memory+swap both at `memory`: no swap, as Docker's memswap_limit."""
        if self.version == 2:
            _write(self._file("memory", "memory.max"), memory)
            swap = self._file("memory", "memory.swap.max")
            if swap.exists():
                _write(swap, 0)
            return
        limit, memsw = (
            self._file("memory", "memory.limit_in_bytes"),
            self._file("memory", "memory.memsw.limit_in_bytes"),
        )
        if not memsw.exists():  # the kernel accounts no swap: a zero swappiness keeps pages in memory
            _write(self._file("memory", "memory.swappiness"), 0)
            _write(limit, memory)
            return
        # memsw may never be below the memory limit: raise memsw first, lower it last.
        current = int(limit.read_text())
        order = [(memsw, memory), (limit, memory)] if memory > current else [(limit, memory), (memsw, memory)]
        for path, value in order:
            _write(path, value)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this sandbox so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in self._file("memory", name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.paths:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(found)

    def kill_all(self, wait_s: float = 30.0) -> bool:
        """SIGKILL every process of the sandbox until none is left; False if some outlived `wait_s`."""
        kill_file = self.paths[0] / "cgroup.kill"
        deadline = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            if self.version == 2 and kill_file.exists():
                _write(kill_file, 1, quiet=True)
            for pid in pids:  # a pid listed in the group is the sandbox's (v1 has no cgroup.kill)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        """Remove the groups (their processes must be gone); a group still busy is left for cleanup."""
        for path in self.paths:
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: the last process is still exiting
                    time.sleep(0.02)


def _enable_v2_controllers() -> None:
    """v2 only lets a group limit what its parent delegates: enable memory, pids and cpu down to
    arex-unshare/ (the parent holds no process, so the no-internal-process rule holds)."""
    parent = ROOT / PARENT
    parent.mkdir(exist_ok=True)
    for folder in (ROOT, parent):
        available = set((folder / "cgroup.controllers").read_text().split())
        missing = {"memory", "pids", "cpu"} - available
        if missing:
            raise SandboxError(f"cgroup v2 at {folder} lacks the {', '.join(sorted(missing))} controller(s).")
        _write(folder / "cgroup.subtree_control", "+memory +pids +cpu", quiet=True)


def _write(path: Path, value, quiet: bool = False) -> None:
    try:
        path.write_text(str(value))
    except OSError:
        if not quiet:
            raise
