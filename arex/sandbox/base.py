"""The sandbox interface: where agent commands and grading runs happen.

A sandbox is one long-lived, isolated machine per session of work: `start()`, then any number of
`exec()` / file calls, then `stop()`. A command that fails returns an `ExecResult` describing the
failure (exit code, timeout, out of memory); broken infrastructure (engine gone, image missing,
container died) raises `SandboxError`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arex.errors import ArexError

if TYPE_CHECKING:
    from arex.sandbox.images import Images

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)


def parse_size(value: int | str) -> int:
    """'512m' → bytes. Plain integers are bytes; k/m/g/t are powers of 1024."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use bytes or a number with k/m/g, e.g. '512m')")
    number, unit = match.groups()
    return int(float(number) * 1024 ** "_kmgt".index(unit.lower() or "_"))


SHM_BYTES = 64 << 20  # Docker's default /dev/shm
JUDGE_AREA = "/.arex-judge"
"""The private folder of `SandboxConfig.judge_area`: mode 0700, owned by the judge's uid."""
JUDGE_UID = 1001

BACKENDS: dict[str, str] = {
    "docker": "arex.sandbox.docker:DockerSandbox",
    "unshare": "arex.sandbox.unshare:UnshareSandbox",
}
"""Sandbox backends by the short name `sandbox.backend` takes → "module:Class" implementing
Sandbox, imported only when a sandbox is made (`arex.sandbox.make_sandbox`): reading a config
does not load the Docker SDK."""


class Mount(BaseModel):
    """A host folder made visible inside the sandbox."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    source: str
    """Host path of the folder (must exist)."""
    target: str
    """Absolute path inside the sandbox."""
    read_only: bool = True
    """Mount read-only (the default: skills, tests and data must not be changed by the agent)."""


class SandboxConfig(BaseModel):
    """How sandboxes are created. The defaults are the safe ones: no network, not root, limits on."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    backend: str = "docker"
    """Sandbox backend by short name (see arex.sandbox.base.BACKENDS)."""
    image: str = "arex-base:latest"
    """Image the sandbox starts from (built locally by scripts/build_base_image.sh)."""
    user: str = "1000:1000"
    """uid:gid every command runs as. Must not be root."""
    workdir: str = "/workspace"
    """Working directory for commands that do not name one (writable, `disk` bytes)."""
    seed: str | None = None
    """A folder of the image whose contents are copied into the workdir at start. The workdir is a
    fresh, bounded tmpfs that hides whatever the image has there, so env images keep their
    starting workspace here instead."""
    home: str = "/home/arex"
    """The user's home folder (writable, `scratch` bytes); /tmp is another `scratch` bytes."""
    disk: int = Field(default=parse_size("512m"))
    """Bytes the workdir can hold. Everything else but `home` and /tmp is read-only, so this bounds
    what a sandbox can write. The space is memory (tmpfs): the sandbox's memory limit is `memory`
    plus these sizes, so full folders never starve its processes."""
    scratch: int = Field(default=parse_size("128m"))
    """Bytes each of /tmp and `home` can hold."""
    inodes: int = Field(default=200_000, ge=1)
    """Files and folders each writable area can hold."""
    network: bool = False
    """Allow network access. Off by default: tasks must not fetch anything at run time."""
    memory: int = Field(default=parse_size("1g"))
    """Memory for processes (no swap), e.g. '512m' or '2g'; exceeding it is an 'oom' result. The
    container's limit adds the writable folders' sizes (see `disk`)."""
    cpus: float = Field(default=1.0, gt=0)
    """CPU limit in cores."""
    pids_limit: int = Field(default=256, ge=1)
    """Maximum number of processes and threads alive at once (contains fork bombs)."""
    max_file_size: int = Field(default=parse_size("1g"))
    """Largest file a command may write (RLIMIT_FSIZE)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Default wall-clock limit per command; on expiry the whole process tree is killed."""
    output_limit: int = Field(default=32_000, ge=1)
    """Bytes of stdout and of stderr kept per command (head and tail, with a truncation marker)."""
    output_kill: int = Field(default=parse_size("64m"))
    """A command printing more than this many bytes is killed ('output_limit' status)."""
    mounts: tuple[Mount, ...] = ()
    """Host folders to mount (read-only unless said otherwise)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set for every command."""
    judge_area: int = Field(default=0, ge=0)
    """Bytes of a private folder (JUDGE_AREA, a tmpfs) that only `judge_uid` can open; 0: none.
    Grading containers of interactive problems hold an interactor and its test's data there,
    beside a submission that must not read them."""

    @field_validator("memory", "max_file_size", "output_kill", "disk", "scratch", mode="before")
    @classmethod
    def _size(cls, value: int | str) -> int:
        return parse_size(value)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(f"unknown sandbox backend {value!r}; known backends: {', '.join(sorted(BACKENDS))}")
        return value

    @field_validator("user")
    @classmethod
    def _not_root(cls, value: str) -> str:
        if value.split(":")[0] in ("0", "root"):
            raise ValueError("sandboxes never run commands as root; use an unprivileged uid such as '1000:1000'")
        if not all(part.isdigit() for part in value.split(":")):
            raise ValueError("give the user as numeric uid:gid, e.g. '1000:1000'")
        return value

    @property
    def files_bytes(self) -> int:
        """What the writable folders can hold in all: the workdir, home, /tmp and /dev/shm."""
        return self.disk + 2 * self.scratch + SHM_BYTES + self.judge_area

    @property
    def uid_gid(self) -> tuple[int, int]:
        uid, _, gid = self.user.partition(":")
        return int(uid), int(gid or uid)

    @property
    def judge_uid(self) -> int:
        """The uid interactors run as: never the agent's (it must not reach their data)."""
        return JUDGE_UID if self.uid_gid[0] != JUDGE_UID else JUDGE_UID + 1


class RunLimits(BaseModel):
    """Per-command limits for graded programs, enforced by the kernel in the command's own process
    tree. Evidence of what the program used comes back in ExecResult (cpu_s, memory_kb, signal)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_s: int | None = None
    """CPU seconds per process (RLIMIT_CPU: SIGXCPU at the limit, SIGKILL one second later)."""
    stack: int | None = None
    """Stack size in bytes (RLIMIT_STACK)."""
    address_space: int | None = None
    """Virtual memory in bytes (RLIMIT_AS)."""
    starved_wall_s: float | None = None
    """Hard wall-clock cap, above the command's timeout: time the program waited runnable for a CPU
    (another load on the host) extends its timeout up to this. The timeout then only stops programs
    that sleep or block, and a busy host cannot turn a run within its CPU limit into a timeout."""
    isolated: bool = False
    """Nothing of the command outlives it, nor of anything before it: every process of the user
    is killed before it starts and after it ends (grading runs)."""


ExecStatus = Literal["ok", "error", "timeout", "oom", "output_limit"]


class ExecResult(BaseModel):
    """What one command did. `status` is 'ok' only for exit code 0."""

    model_config = ConfigDict(frozen=True)

    status: ExecStatus
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    cpu_s: float | None = None
    """CPU time of the command's whole process tree, from the kernel (wait4), as seen by a process
    the command cannot reach."""
    memory_kb: int | None = None
    """Peak resident memory of the largest process of the tree."""
    signal: int | None = None
    """The signal that ended the command's main process, if one did."""
    starved_s: float | None = None
    """How long the command's tree waited runnable for a CPU (the kernel's run_delay, summed over its
    life by the runner): time the host's other load took, which extends the timeout (RunLimits)."""
    starved: bool = False
    """The timeout fired at the hard cap (`RunLimits.starved_wall_s`), the deadline having been moved
    that far by the wait for a CPU: the host's load ran out the clock, not the command. Nothing is
    known of what the command would have done; the caller runs it again or reports the host."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class InteractResult(BaseModel):
    """What an interactive run did (Sandbox.interact): the program's own evidence, as for exec
    (its stdout went to the interactor, so `program.stdout` is empty), and the interactor's."""

    model_config = ConfigDict(frozen=True)

    program: ExecResult
    interactor_exit: int
    """The interactor's exit code (128 + signal if a signal ended it; 137 if it was still running at the end)."""
    interactor_signal: int | None = None
    interactor_cpu_s: float | None = None
    interactor_memory_kb: int | None = None
    interactor_output: str = ""
    """The interactor's stderr (after its staging step, anything it prints there)."""
    first: Literal["program", "interactor"] | None = None
    """Whose main process ended first. Neither side can see the other's end before the runner has
    recorded it, so a program that fails because the interactor hung up is seen to end second."""


def truncated_text(head: bytes, tail: bytes, total: int) -> tuple[str, bool]:
    """Kept head and tail of a stream of `total` bytes → text, with a visible marker if bytes were dropped."""
    if total <= len(head) + len(tail):
        return (head + tail).decode("utf-8", "replace"), False
    marker = f"\n[... arex: output truncated, {total - len(head) - len(tail)} bytes not shown ...]\n"
    return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), True


def ends_batch(r: "ExecResult", stop: tuple[float, int] | None) -> bool:
    """Does a run end a batch of `Sandbox.run_each` (see there)?"""
    if r.starved or r.signal == 9 or r.status == "oom":
        return True
    if stop is None:
        return False
    return r.status != "ok" or bool(r.signal) or (r.cpu_s or 0) > stop[0] or (r.memory_kb or 0) > stop[1]


class ArchiveTooLarge(ValueError):
    """A folder's archive is over the caller's cap (raised by `Sandbox.archive`): the agent's doing,
    caught by its callers (so it is no ArexError)."""


class SandboxError(ArexError, RuntimeError):
    """Broken infrastructure (engine unreachable, image missing, container gone). Not the agent's
    fault; the user's to fix (start Docker, build the image)."""

    exit_code = 4


@dataclass
class Finding:
    """One line of `arex doctor`: what was checked, whether it is fine, and the command that fixes it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


class Sandbox(ABC):
    """A running, isolated machine. Use as a context manager so it is always removed.

    The class methods are the backend's lifecycle hooks, called without a sandbox: `diagnose`
    (doctor), `cleanup` (what dead runs left), `images` (building images from a recipe)."""

    @classmethod
    def diagnose(cls, image: str) -> list[Finding]:
        """What `arex doctor` checks for this backend (its engine, `image`, leftovers)."""
        return []

    @classmethod
    def cleanup(cls, store: str | None = None, all_owners: bool = False) -> list[str]:
        """Remove the sandboxes of arex processes that are gone (all of them with `all_owners`);
        with `store` (an absolute path), only those of runs on that trajectory store. Their names.
        Raises SandboxError if the backend's engine cannot be reached."""
        return []

    @classmethod
    def images(cls) -> "Images | None":
        """The backend's image builder, or None if it runs only the images its config names."""
        return None

    def __init__(self, config: SandboxConfig, name: str = "sandbox"):
        self.config = config
        self.name = name

    @abstractmethod
    def start(self) -> None:
        """Create and start the sandbox. Raises SandboxError if it cannot."""

    @abstractmethod
    def exec(
        self,
        command: str | list[str],
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        stdin: bytes | str | None = None,
        limits: RunLimits | None = None,
    ) -> ExecResult:
        """Run a command (a string goes through bash -c) as the sandbox user and wait for it, at most
        `timeout` seconds; `limits` for graded programs."""

    def run_each(
        self,
        command: list[str],
        stdins: list[bytes],
        *,
        timeout: float,
        cwd: str,
        limits: RunLimits,
        stop: tuple[float, int] | None = None,
    ) -> list[ExecResult]:
        """Run `command` once per input, in order, each run isolated and limited exactly as
        `exec(command, timeout, cwd, stdin=..., limits=limits)` runs it (`limits.isolated` required).
        The results of the runs made: every one, or up to and including the first stopped at its
        hard cap (`starved`), killed by SIGKILL, or, with `stop` (CPU seconds, memory KB), failed
        (exit status, signal, timeout, output, CPU or memory over those). The caller runs the rest
        again from there. Backends may pipeline the runs (one round trip for many, ServedSandbox);
        this default runs them one by one."""
        if not limits.isolated:
            raise ValueError("run_each runs isolated runs only (RunLimits.isolated)")
        results: list[ExecResult] = []
        for stdin in stdins:
            r = self.exec(list(command), timeout=timeout, cwd=cwd, stdin=stdin, limits=limits)
            results.append(r)
            if ends_batch(r, stop):
                break
        return results

    @abstractmethod
    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """Return a file's bytes. FileNotFoundError if missing; ValueError if over `max_bytes`."""

    @abstractmethod
    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Create or replace a file (parents created), owned by the sandbox user."""

    @abstractmethod
    def copy_in(self, host_dir: str | Path, sandbox_dir: str) -> None:
        """Copy a host folder's contents into `sandbox_dir` (created if missing)."""

    @abstractmethod
    def archive(self, sandbox_dir: str, dest: BinaryIO, max_bytes: int) -> int:
        """Write a tar of a sandbox folder's contents (made inside, as the sandbox user) to `dest`;
        return its size. ArchiveTooLarge if over `max_bytes`, FileNotFoundError if no such folder.
        The host never unpacks it: read members with arex.record.snapshots, or `restore` it in a sandbox."""

    @abstractmethod
    def restore(self, archive: str | Path, sandbox_dir: str) -> None:
        """Empty `sandbox_dir`, then unpack a tar from `archive` into it, inside the sandbox as the
        sandbox user (so nothing in the archive can reach beyond what that user may write)."""

    @abstractmethod
    def set_memory_limit(self, memory: int) -> None:
        """Set the whole sandbox's memory limit (bytes, files in its writable folders included),
        e.g. a graded program's limit after compiling."""

    def interact(
        self,
        program: list[str],
        interactor: list[str],
        *,
        stdin: bytes,
        timeout: float,
        cwd: str,
        limits: RunLimits,
        interactor_limits: RunLimits,
    ) -> InteractResult:
        """Run `program` as the sandbox user and `interactor` as `config.judge_uid`, each under its
        own limits, the program's stdout piped to the interactor's stdin and back; `stdin` reaches
        the interactor on its fd 3 (to stage its files in JUDGE_AREA). Both are killed at the end,
        and every process of both users before and after (the run is always isolated)."""
        raise SandboxError(f"The '{self.config.backend}' sandbox backend cannot run interactive problems.")

    def judge_exec(self, command: list[str], timeout: float = 60.0, stdin: bytes | None = None) -> ExecResult:
        """Run a command as `config.judge_uid` in JUDGE_AREA (staging, collecting and wiping an
        interactor's files, where the sandbox user cannot look)."""
        raise SandboxError(f"The '{self.config.backend}' sandbox backend cannot run interactive problems.")

    @abstractmethod
    def stop(self) -> None:
        """Remove the sandbox and everything in it. Safe to call twice."""

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
