"""Writing to the stores: the lock that keeps two runs off one trajectory store, and OS write
errors (disk full, read-only folder) as one sentence naming the path.

The lock is a file in the store (`rollout.lock`) holding its owner: pid, host, start time, and
the process's start tick and boot id, so a pid reused by another process is not taken for the
owner. The owner holds an exclusive `flock` on it while it runs; the kernel drops that lock when
the process dies, even by SIGKILL. A second run finds the lock held and stops with one sentence
naming the owner and the lock file. A lock whose owner is gone (flock free, and the pid named in
the file dead or now another process) is taken over, and the caller is told so. The pid check
also guards file systems where flock is not shared between clients; a lock written on another
host is never taken over (its owner cannot be checked from here).

Ownership of a path is decided under the flock and checked against the path's inode, so a run
that releases (unlinks) the lock while another opens it cannot leave two owners.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from arex.errors import ArexError, UserInputError

LOCK_NAME = "rollout.lock"
STORE_ENV = "AREX_STORE"
"""Set to the absolute path of the folder a run writes to (a rollout's trajectory store, the --out
of build-envs or select) while it runs: Docker sandboxes carry it as a label, so a later run on
the same folder removes what a killed one left (arex.sandbox.leftovers)."""


class StoreLocked(UserInputError):
    """Another live arex run holds the store's lock."""


class OutputError(UserInputError):
    """An output folder or file cannot be written (read-only, no permission, not a folder)."""


class DiskFull(ArexError):
    """The disk (or the user's quota) filled up while arex was writing."""


_FULL = {errno.ENOSPC, errno.EDQUOT}
_DENIED = {errno.EACCES, errno.EPERM}


def write_error(exc: OSError, path: Path | str, kept: str = "") -> ArexError:
    """The one-sentence error for `exc`, raised writing `path` (or the file the OS names).
    `kept` says what is kept and how to go on (e.g. "finished rounds are kept; re-run to resume")."""
    target = exc.filename or path
    tail = f"; {kept}" if kept else ""
    if exc.errno in _FULL:
        return DiskFull(f"disk full: could not write {target} ({exc.strerror}); free space on that disk{tail}")
    if exc.errno == errno.EROFS:
        return OutputError(f"{target} cannot be written ({exc.strerror}); choose a writable folder{tail}")
    if exc.errno in _DENIED:
        return OutputError(
            f"{target} is not accessible ({exc.strerror}); choose another folder or fix its permissions{tail}"
        )
    return OutputError(f"{target}: {exc.strerror or exc}{tail}")


# -- who is alive -------------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat from field 3 (the state) on, or None (no such process, or no /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def proc_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (/proc/<pid>/stat field 22), or None
    if there is no such process (or no /proc). With the boot id it names one process for good."""
    fields = _stat(pid)
    return fields[19] if fields else None


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False


def owner_alive(pid: int, start: str | None = None, boot: str | None = None) -> bool:
    """Is the process that recorded (pid, start tick, boot id) on this host still running?
    A pid now used by another process (a different start tick, or an earlier boot) is not."""
    if pid <= 0 or not pid_alive(pid):
        return False
    if boot and boot_id() not in (None, boot):
        return False
    fields = _stat(pid)
    if fields is None:  # no /proc: the pid is all we can check
        return True
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by its parent
        return False
    return not start or fields[19] == start


# -- the store lock -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    started_at: float
    proc_start: str | None = None
    boot_id: str | None = None
    command: str = ""

    @classmethod
    def me(cls) -> "Owner":
        return cls(
            os.getpid(), socket.gethostname(), time.time(), proc_start(os.getpid()), boot_id(), " ".join(sys.argv)[:300]
        )

    @classmethod
    def parse(cls, text: str) -> "Owner | None":
        try:
            raw = json.loads(text)
            return cls(
                int(raw["pid"]),
                str(raw["host"]),
                float(raw["started_at"]),
                raw.get("proc_start"),
                raw.get("boot_id"),
                str(raw.get("command", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return f"pid {self.pid} on host {self.host}, started {started}"

    def alive(self) -> bool | None:
        """True or False on this host; None (unknown) for an owner on another host."""
        if self.host != socket.gethostname():
            return None
        return owner_alive(self.pid, self.proc_start, self.boot_id)


class StoreLock:
    """`with StoreLock(store, notify):` — hold the store's lock for the block (released on exit,
    exceptions, Ctrl-C and SIGTERM; the kernel releases it on SIGKILL). StoreLocked if another
    run holds it; `notify` gets one line when a stale lock is taken over."""

    def __init__(self, store: Path, notify: Callable[[str], None] | None = None):
        self.store = Path(store)
        self.path = self.store / LOCK_NAME
        self.notify = notify or (lambda line: None)
        self._fd: int | None = None

    def __enter__(self) -> "StoreLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        try:
            self.store.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(
                f"the trajectory store {self.store} is a file, not a folder; choose another --out"
            ) from None
        except OSError as exc:
            raise write_error(exc, self.store) from None
        for _ in range(20):  # another run released (unlinked) the file between our open and flock
            fd = self._open()
            try:
                if self._claim(fd):
                    self._fd, fd = fd, None
                    return
            finally:
                if fd is not None:
                    os.close(fd)
        raise StoreLocked(
            f"the trajectory store {self.store} is being locked and released again and again by other runs; "
            f"lock file: {self.path}"
        )

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise write_error(exc, self.path) from None

    def _claim(self, fd: int) -> bool:
        """Take the lock on `fd` if it is free and still the file at our path; False to retry."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._locked(Owner.parse(_read(fd))) from None
        try:
            if os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                return False
        except FileNotFoundError:
            return False
        text = _read(fd)
        previous = Owner.parse(text)
        if previous is not None and previous.pid != os.getpid():
            alive = previous.alive()
            if alive is None:
                raise StoreLocked(
                    f"the trajectory store {self.store} is locked by a run on another host ({previous.describe()}), "
                    "which cannot be checked from here; "
                    f"if that run is over, delete the lock file {self.path} and re-run"
                )
            if alive:  # flock not shared (a network file system), but the owner is running
                raise self._locked(previous)
        mine = Owner.me()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(asdict(mine)) + "\n").encode(), 0)
        except OSError as exc:
            raise write_error(exc, self.path) from None
        if previous is not None and previous.pid != os.getpid():
            self.notify(f"took over the stale lock {self.path} of a run that is gone ({previous.describe()})")
        elif previous is None and text.strip():
            self.notify(f"took over the unreadable lock file {self.path}")
        return True

    def _locked(self, owner: Owner | None) -> StoreLocked:
        who = owner.describe() if owner else "owner not yet written"
        return StoreLocked(
            f"the trajectory store {self.store} is in use by another arex rollout ({who}); "
            f"wait for it to finish or stop it, or pass another --out (lock file: {self.path})"
        )

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                os.unlink(self.path)
        except OSError:
            pass  # gone already, or a read-only store by now: the flock below is what counts
        finally:
            os.close(fd)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Give an OSError raised while writing `path` the file's name (a failed write() carries none)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
