"""The conformance suite every sandbox backend must pass.

Each check is a plain function taking a `Harness` and raising AssertionError on failure, so the
same checks run under pytest (tests/sandbox/test_sandbox_conformance.py), from `arex sandbox check`, and in
scripts/conformance_mutations.py, which removes one protection at a time and shows its check failing.

The checks must hold on a busy machine: they judge by what happened (statuses, signals, CPU time
from the kernel, which processes are alive, rendezvous between commands), and wall-clock limits
appear only as generous backstops against a hang.

Each check must pass alone and in any order: it makes the state it looks at itself (its own files
and processes in the shared sandbox, under names no other check uses) and never relies on what an
earlier check left there. tests/sandbox/test_sandbox_conformance.py runs the suite both ways: all checks on
one shared sandbox, and each on a harness of its own in reverse order.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from arex.sandbox import Mount, Sandbox, SandboxConfig, SandboxError, cleaning, make_sandbox
from arex.sandbox.base import ArchiveTooLarge, RunLimits

RO_TARGET = "/mnt/arex-ro"
PATH_MAX = 4096


def suite_config(backend: str = "docker", mount_dir: str | None = None, **overrides) -> SandboxConfig:
    """The limits the suite checks against: small, so breaking them is quick."""
    base = dict(
        backend=backend,
        memory="256m",
        pids_limit=64,
        timeout_s=3,
        output_limit=4000,
        output_kill="2m",
        max_file_size="8m",
        disk="16m",  # above max_file_size, so the file size limit is what stops a single file
        scratch="16m",
        inodes=2000,
        mounts=[Mount(source=mount_dir, target=RO_TARGET)] if mount_dir else [],
    )
    base.update(overrides)
    return SandboxConfig(**base)


class Harness:
    """A shared sandbox for harmless checks, and fresh ones for checks that break things."""

    def __init__(self, config: SandboxConfig, factory: Callable[[SandboxConfig, str], Sandbox] = make_sandbox):
        self.config = config
        self.factory = factory
        self._shared: Sandbox | None = None

    @property
    def shared(self) -> Sandbox:
        if self._shared is None:  # kept only once started: a failed start is retried by the next check
            sandbox = self.factory(self.config, "conformance")
            sandbox.start()
            self._shared = sandbox
        return self._shared

    @contextlib.contextmanager
    def fresh(self, name: str = "conformance-fresh") -> Iterator[Sandbox]:
        sandbox = self.factory(self.config, name)
        sandbox.start()
        try:
            yield sandbox
        finally:
            sandbox.stop()

    def close(self) -> None:
        if self._shared is not None:
            self._shared.stop()
            self._shared = None


@contextlib.contextmanager
def readonly_source() -> Iterator[str]:
    """A world-writable host folder, so only the read-only flag can stop writes to it."""
    with tempfile.TemporaryDirectory(prefix="arex-ro-") as folder:
        Path(folder, "data.txt").write_text("read me\n")
        os.chmod(folder, 0o777)
        os.chmod(Path(folder, "data.txt"), 0o666)
        yield folder


# Helpers run inside the sandbox (python3 is in every image: the sandbox's init needs it).
ALIVE = r"""
import sys
alive = []
for pid in sys.argv[1:]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                alive.append(pid)
    except (OSError, IndexError):
        pass
print(" ".join(alive))
"""

OWN_PROCESSES = r"""
import os
me, uid, found = os.getpid(), os.getuid(), []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if int(pid) == me or os.stat(f"/proc/{pid}").st_uid != uid:
            continue
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            found.append(pid + " " + f.read().replace(b"\0", b" ").decode(errors="replace")[:60])
    except OSError:
        pass
print(found)
"""


def _alive(sb: Sandbox, pids: list[str]) -> list[str]:
    """Which of these pids are live processes (zombies are dead)."""
    r = sb.exec(["python3", "-c", ALIVE, *pids])
    assert r.ok, r
    return r.stdout.split()


def _own_processes(sb: Sandbox) -> str:
    """The user's processes other than the one asking, as seen from a new command."""
    r = sb.exec(["python3", "-c", OWN_PROCESSES])
    assert r.ok, r
    return r.stdout.strip()


# -- commands ------------------------------------------------------------------------------
def check_exit_code_zero(h: Harness) -> None:
    r = h.shared.exec("true")
    assert (r.status, r.exit_code, r.ok) == ("ok", 0, True), r


def check_exit_code_nonzero_is_a_result(h: Harness) -> None:
    r = h.shared.exec("exit 7")
    assert (r.status, r.exit_code, r.ok) == ("error", 7, False), r


def check_missing_program_is_a_result(h: Harness) -> None:
    r = h.shared.exec("no-such-program-xyz")
    assert r.exit_code == 127 and "not found" in r.stderr, r


def check_stdout_and_stderr_are_separate(h: Harness) -> None:
    r = h.shared.exec("echo to-out; echo to-err >&2")
    assert r.stdout == "to-out\n" and r.stderr == "to-err\n", r


def check_argv_commands_are_not_shell_parsed(h: Harness) -> None:
    r = h.shared.exec(["printf", "%s|", "a b", "$HOME", ";ls"])
    assert r.stdout == "a b|$HOME|;ls|", r


def check_stdin_is_passed(h: Harness) -> None:
    r = h.shared.exec("wc -c; cat", stdin=b"12345")
    assert r.stdout.split()[0] == "5", r


def check_env_and_cwd(h: Harness) -> None:
    h.shared.exec("mkdir -p sub")
    r = h.shared.exec("pwd; echo $ANSWER", cwd=h.config.workdir + "/sub", env={"ANSWER": "forty two"})
    assert r.stdout == f"{h.config.workdir}/sub\nforty two\n", r


def check_state_persists_between_commands(h: Harness) -> None:
    """A file and a background process of one command are there for the next (this very process,
    by its pid: not just any process another check may have left running)."""
    r = h.shared.exec("echo kept > state.txt; nohup sleep 300 >/dev/null 2>&1 & echo $! > state.pid")
    assert r.ok, r
    pid = h.shared.read_file("state.pid").decode().strip()
    try:
        r = h.shared.exec("cat state.txt")
        assert r.stdout == "kept\n", r
        assert _alive(h.shared, [pid]) == [pid], f"the background process {pid} of the earlier command is gone"
    finally:
        h.shared.exec(f"kill {pid} 2>/dev/null")


def check_non_utf8_output_is_kept(h: Harness) -> None:
    r = h.shared.exec("printf 'ok\\377\\376end'")
    assert r.ok and r.stdout.startswith("ok") and r.stdout.endswith("end"), r


def check_concurrent_commands(h: Harness) -> None:
    """Two commands that can only finish together (each waits for the other's file): if exec
    were serialised, the first would wait alone and fail."""
    h.shared.exec("rm -f meet-a meet-b")
    # Polled for up to a minute (a deadline, not a speed test): a busy machine may start the
    # second command late, but a serialised exec never starts it at all.
    meet = "touch meet-{0}; for i in $(seq 1200); do [ -e meet-{1} ] && echo met && exit 0; sleep 0.05; done; exit 1"
    results: dict[str, object] = {}

    def run(me: str, other: str) -> None:
        results[me] = h.shared.exec(meet.format(me, other), timeout=120)

    threads = [threading.Thread(target=run, args=pair) for pair in (("a", "b"), ("b", "a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(getattr(r, "stdout", None) == "met\n" for r in results.values()) and len(results) == 2, (
        f"two commands never ran at the same time (exec is serialised): {results}"
    )


# -- time limits ---------------------------------------------------------------------------
def check_timeout_status(h: Harness) -> None:
    """The configured timeout (3 s) ends a command that would sleep for 20: reported as a timeout,
    and killed, not just labelled, since its last line never ran. Judged by what happened, not by a
    clock read here: a busy machine makes the kill later, not the check fail."""
    r = h.shared.exec("sleep 20; echo not-killed")
    assert r.status == "timeout" and r.exit_code == 124, r
    assert "not-killed" not in r.stdout, f"the command ran to its end: {r}"


def _tree_outlives_timeout(h: Harness, tag: str, spawners: list[str]) -> None:
    """Start processes that each write their pid to a file, wait until all have, then hang until
    the timeout: every one of them must be dead when the result comes back."""
    pids_file = f"{h.config.workdir}/pids-{tag}"
    script = (
        f"rm -f {pids_file}\n"
        + "".join(spawner.replace("PIDS", pids_file) + "\n" for spawner in spawners)
        + f"until [ -f {pids_file} ] && [ $(wc -l < {pids_file}) -ge {len(spawners)} ]; do sleep 0.05; done; "
        "echo ready; sleep 60"
    )
    for timeout in (3, 8, 20):  # longer only if a busy machine had not started them all in time
        r = h.shared.exec(script, timeout=timeout)
        assert r.status == "timeout", r
        try:
            pids = h.shared.read_file(pids_file).decode().split()
        except FileNotFoundError:
            pids = []
        left = _alive(h.shared, pids)
        assert not left, f"descendants outlived the timeout: {left} of {pids}"
        if "ready" in r.stdout and len(pids) == len(spawners):
            return
    raise AssertionError(f"the descendants had not all started before a {timeout} s timeout: {r}, {pids}")


def check_timeout_kills_the_whole_tree(h: Harness) -> None:
    # A child, a grandchild in its own session, and a nohup'd background job.
    _tree_outlives_timeout(
        h,
        "tree",
        [
            "( echo $BASHPID >> PIDS; exec sleep 61 ) &",
            "setsid bash -c 'echo $$ >> PIDS; exec sleep 61' &",
            "nohup bash -c 'echo $$ >> PIDS; exec sleep 61' >/dev/null 2>&1 &",
        ],
    )


def check_timeout_kills_tree_without_marker(h: Harness) -> None:
    """Descendants that drop the whole environment, leave the session and are orphaned by a
    double fork (so their parent is no longer the command) still die with it."""
    _tree_outlives_timeout(
        h,
        "escape",
        [
            "env -i /usr/bin/setsid /usr/bin/nohup /bin/sh -c 'echo $$ >> PIDS; exec /bin/sleep 61' >/dev/null 2>&1 &",
            "( ( env -i /usr/bin/setsid /bin/sh -c 'echo $$ >> PIDS; exec /bin/sleep 62' "
            "</dev/null >/dev/null 2>&1 & ) & )",
            "( ( env -i /usr/bin/nohup /bin/sh -c 'echo $$ >> PIDS; exec /bin/sleep 63' "
            ">/dev/null 2>&1 & ) ; exit 0 ) &",
        ],
    )


def check_usable_after_timeout(h: Harness) -> None:
    h.shared.exec("sleep 30", timeout=1)
    r = h.shared.exec("echo alive")
    assert r.stdout == "alive\n", r


def check_isolated_runs_leave_nothing(h: Harness) -> None:
    """An isolated run starts with none of the user's processes and leaves none behind."""
    h.shared.exec("rm -f earlier.pid; nohup bash -c 'echo $$ > earlier.pid; exec sleep 301' >/dev/null 2>&1 &")
    earlier = h.shared.exec(
        "for i in $(seq 1200); do [ -s earlier.pid ] && break; sleep 0.05; done; cat earlier.pid", timeout=120
    ).stdout.strip()
    assert earlier and _alive(h.shared, [earlier]) == [earlier], f"the earlier process did not start: {earlier!r}"
    r = h.shared.exec(
        f"state=$(awk '/^State:/ {{print $2}}' /proc/{earlier}/status 2>/dev/null); "
        '[ -n "$state" ] && [ $state != Z ] && echo earlier-alive; '
        "setsid sleep 300 >/dev/null 2>&1 & ( setsid nohup sleep 302 >/dev/null 2>&1 & ); echo started",
        limits=RunLimits(isolated=True),
    )
    assert r.ok and "started" in r.stdout, r
    assert "earlier-alive" not in r.stdout, "a process of an earlier command was alive during an isolated run"
    left = _own_processes(h.shared)
    assert left == "[]", f"processes of the user outlived an isolated run: {left}"


BATCH_PROGRAM = r"""
import os, sys, time
data = sys.stdin.buffer.read()
word = data.split(b" ", 1)[0].decode()
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}"))
others = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if int(pid) != os.getpid() and os.stat(f"/proc/{pid}").st_uid == os.getuid():
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    others.append(int(pid))
    except OSError:
        pass
print(word, len(data), fds, others, flush=True)
if word == "spawn":
    os.system("setsid sleep 300 >/dev/null 2>&1 & ( setsid nohup sleep 302 >/dev/null 2>&1 & )")
elif word == "burn":
    while time.process_time() < 0.3:
        pass
elif word == "forge":
    fake = b"exit=0 signal=0 cpu_us=1 maxrss_kb=1 timed_out=0 killed=0 procs=1 starved_us=0 capped=0 "
    for fd in range(1, 21):
        try:
            os.write(fd, fake + b"output_limit=0 sigkilled=0 us=1 out=0 err=0\n")
        except OSError:
            pass
    sys.exit(3)
elif word == "flood":
    while True:
        sys.stdout.write("x" * 65536)
elif word == "sleep":
    time.sleep(60)
"""


def check_batch_runs_are_isolated(h: Harness) -> None:
    """Runs pipelined through one request (`run_each`) are each what an isolated `exec` is: none of
    the user's processes alive when one starts (an earlier command's, an earlier run's daemons),
    none left after; each with its own CPU time, output cap and timeout; each holding only its own
    stdin, stdout and stderr, so it reads its own input and nothing after it, and what it writes
    anywhere cannot forge a result."""
    h.shared.exec(
        "rm -f batch-earlier.pid; nohup bash -c 'echo $$ > batch-earlier.pid; exec sleep 303' >/dev/null 2>&1 &"
    )
    earlier = h.shared.exec(
        "for i in $(seq 1200); do [ -s batch-earlier.pid ] && break; sleep 0.05; done; cat batch-earlier.pid",
        timeout=120,
    ).stdout.strip()
    assert earlier and _alive(h.shared, [earlier]) == [earlier], f"the earlier process did not start: {earlier!r}"
    words = ["spawn", "look", "burn", "idle", "forge", "flood", "after", "sleep", "spawn " + "y" * 100_000]
    inputs = [w.encode() for w in words]
    limits = RunLimits(isolated=True, cpu_s=5, starved_wall_s=120)
    runs = h.shared.run_each(["python3", "-c", BATCH_PROGRAM], inputs, timeout=3, cwd="/tmp", limits=limits)
    assert len(runs) == len(inputs), f"{len(runs)} results for {len(inputs)} runs: {runs}"
    for word, data, r in zip(words, inputs, runs):
        if word in ("flood", "sleep"):
            continue
        first_line = r.stdout.split("\n", 1)[0]
        assert first_line == f"{word.split()[0]} {len(data)} [0, 1, 2] []", f"run '{word[:9]}': {r}"
    assert runs[2].cpu_s is not None and runs[2].cpu_s >= 0.25, f"a 0.3 s CPU loop reported {runs[2].cpu_s}"
    assert runs[3].cpu_s is not None and runs[3].cpu_s < 0.25, f"an idle run reported {runs[3].cpu_s} s of CPU"
    assert runs[4].exit_code == 3 and runs[4].cpu_s != 0.000001 and runs[4].memory_kb != 1, runs[4]
    assert runs[5].status == "output_limit", runs[5]
    assert runs[7].status == "timeout", runs[7]
    assert all(r.ok for i, r in enumerate(runs) if i not in (4, 5, 7)), runs
    left = _own_processes(h.shared)
    assert left == "[]", f"processes of the user outlived the runs: {left}"


# -- output limits -------------------------------------------------------------------------
def check_stdout_is_capped_with_marker(h: Harness) -> None:
    r = h.shared.exec("head -c 100000 /dev/zero | tr '\\0' a; echo; echo LAST-LINE")
    assert r.stdout_truncated and "output truncated" in r.stdout, r.stdout[:200]
    assert len(r.stdout) < h.config.output_limit + 200, len(r.stdout)
    assert r.stdout.rstrip().endswith("LAST-LINE"), "the tail of the output must be kept"


def check_stderr_is_capped_with_marker(h: Harness) -> None:
    r = h.shared.exec("head -c 100000 /dev/zero | tr '\\0' e >&2")
    assert r.stderr_truncated and "output truncated" in r.stderr, r.stderr[:200]
    assert len(r.stderr) < h.config.output_limit + 200, len(r.stderr)


def check_output_flood_is_stopped(h: Harness) -> None:
    r = h.shared.exec("yes flood", timeout=30)
    assert r.status == "output_limit", r.status  # not "timeout": the flood itself stopped it


# -- resource limits -----------------------------------------------------------------------
def check_out_of_memory_is_distinct(h: Harness) -> None:
    with h.fresh("conformance-oom") as sb:
        r = sb.exec("python3 -c 'b = bytearray(1024 * 1024 * 1024); print(len(b))'", timeout=30)
        assert r.status == "oom", r
        r2 = sb.exec("python3 -c 'import sys; sys.exit(137)'")
        assert r2.status == "error", "a plain exit code 137 is not an out-of-memory kill"
        assert sb.exec("echo alive").stdout == "alive\n", "sandbox unusable after OOM"


def check_memory_limit_can_be_tightened(h: Harness) -> None:
    with h.fresh("conformance-memset") as sb:
        assert sb.exec("python3 -c 'b = bytearray(160 * 1024 * 1024)'", timeout=30).ok, "160 MB must fit in 256 MB"
        sb.set_memory_limit(96 * 1024 * 1024)
        r = sb.exec("python3 -c 'b = bytearray(160 * 1024 * 1024)'", timeout=30)
        assert r.status == "oom", r


def check_pids_limit_caps_processes(h: Harness) -> None:
    code = (
        "import subprocess\n"
        "ps = []\n"
        "try:\n"
        "    for _ in range(300): ps.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError: pass\n"
        "print(len(ps))\n"
        "for p in ps: p.kill()\n"
    )
    with h.fresh("conformance-pids") as sb:
        r = sb.exec(["python3", "-c", code], timeout=60)
        started = int(r.stdout.strip() or 0)
        assert 0 < started < h.config.pids_limit, (
            f"{started} processes started under a pids limit of {h.config.pids_limit}"
        )


def check_fork_bomb_is_contained(h: Harness) -> None:
    """A fork bomb stays in its sandbox: while it runs, the host still starts processes; the
    timeout ends it (the command then holds the bomb's tree: `exec sleep` keeps it running); and
    afterwards the sandbox works, its files intact and none of the bomb left."""
    timeout = 5
    bombing, stop = threading.Event(), threading.Event()
    host: dict[str, list[str]] = {"during": [], "failed": []}

    def probe() -> None:  # counts host processes started and ended while the bomb ran
        while not stop.is_set():
            during = bombing.is_set()
            try:
                subprocess.run(["true"], check=True)
            except (OSError, subprocess.SubprocessError) as exc:
                host["failed"].append(repr(exc))
            else:
                if during and bombing.is_set():
                    host["during"].append("true")
            stop.wait(0.1)

    with h.fresh("conformance-forkbomb") as sb:
        sb.write_file("keep.txt", "files survive\n")
        watcher = threading.Thread(target=probe)
        watcher.start()
        try:
            bombing.set()
            r = sb.exec("bomb() { bomb | bomb & }; bomb; exec sleep 60", timeout=timeout)
            bombing.clear()
        finally:
            stop.set()
            watcher.join()
        assert r.status == "timeout", f"the timeout did not end the bomb: {r.status} {r.exit_code} {r.stdout[-200:]!r}"
        # A backstop against a kill that never catches up with the bomb, not a speed test: a
        # minute above the timeout, far beyond what a busy machine adds.
        assert r.duration_s < timeout + 60, f"the bomb held the command for {r.duration_s}s under a {timeout} s timeout"
        assert not host["failed"], f"the host could not start processes while the bomb ran: {host['failed'][:3]}"
        assert host["during"], "no process of the host started and ended while the bomb ran"
        after = sb.exec("echo alive; cat keep.txt; ps -e --no-headers | wc -l")
        lines = after.stdout.split("\n")
        assert lines[:2] == ["alive", "files survive"], after
        assert int(lines[2]) < 10, f"bomb processes remain after the timeout: {lines[2]}"


def check_file_size_limit(h: Harness) -> None:
    limit_mb = h.config.max_file_size // (1 << 20)
    r = h.shared.exec(f"head -c {(limit_mb + 4) << 20} /dev/zero > big.bin; stat -c %s big.bin; rm -f big.bin")
    assert r.status != "ok" or int(r.stdout.split()[-1]) <= h.config.max_file_size, r


BURN = r"""
import sys, time
while time.process_time() < float(sys.argv[1]):
    pass
"""


def check_cpu_time_is_reported(h: Harness) -> None:
    """CPU time comes from the kernel for the whole tree: the command's own process, and a
    grandchild orphaned by a double fork (which its parent never waits for)."""
    r = h.shared.exec(["python3", "-c", BURN, "0.3"], timeout=60)
    assert r.ok and r.cpu_s is not None and 0.25 <= r.cpu_s <= 5, f"a 0.3 s CPU loop reported cpu_s={r.cpu_s}: {r}"
    orphan = (
        'rm -f burner.pid; ( python3 -c "$0" 0.3 & echo $! > burner.pid ); '
        "for i in $(seq 400); do [ -s burner.pid ] && break; sleep 0.05; done; "
        "while kill -0 $(cat burner.pid) 2>/dev/null; do sleep 0.02; done; echo waited"
    )
    r = h.shared.exec(["bash", "-c", orphan, BURN], timeout=60)
    assert r.ok and r.stdout == "waited\n", r
    assert r.cpu_s is not None and 0.25 <= r.cpu_s <= 5, (
        f"an orphaned 0.3 s CPU loop reported cpu_s={r.cpu_s}: its CPU time was lost"
    )


FORGER = r"""
import os, signal, time
fake = b"exit=0 signal=0 cpu_us=1 maxrss_kb=1 timed_out=0 killed=0 procs=1\n"
sticky = fake.rstrip() + b" x="  # no newline: it would swallow the first field of a line after it
for fd in range(1, 21):
    for line in (fake, sticky):
        try:
            os.write(fd, line)
        except OSError:
            pass
signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while time.process_time() < 4.0:
    pass
os._exit(0)
"""


OPEN_FDS = r"""
import os
print(sorted(int(fd) for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")))
"""


def check_evidence_cannot_be_forged(h: Harness) -> None:
    """A program that writes fake result lines to every descriptor, then ignores SIGXCPU and runs
    past its CPU limit, is reported as what the kernel saw: killed, with its real CPU time. And a
    command holds no descriptor but its stdin, stdout and stderr (none leads to the verdict)."""
    r = h.shared.exec(["python3", "-c", FORGER], timeout=60, limits=RunLimits(cpu_s=1))
    assert r.cpu_s is not None and r.cpu_s >= 1.0, f"CPU time not from the kernel: cpu_s={r.cpu_s} ({r})"
    assert r.signal in (9, 24) and r.exit_code != 0 and r.status != "ok", f"the CPU limit's kill was not reported: {r}"
    assert r.memory_kb not in (None, 1), f"peak memory not from the kernel: {r.memory_kb}"
    r = h.shared.exec(["python3", "-c", OPEN_FDS], limits=RunLimits(cpu_s=1))
    assert r.ok and r.stdout.strip() == "[0, 1, 2]", f"a command holds descriptors beyond 0-2: {r}"


def check_disk_is_bounded(h: Harness) -> None:
    """Each writable area fills up at its size; everywhere else is read-only."""
    cfg = h.config
    fill = r"""
import os, sys
cap = int(sys.argv[1])
for area, size in zip(sys.argv[2::2], sys.argv[3::2]):
    written, n, error, chunk = 0, 0, None, b"\0" * (1 << 20)
    try:
        while written < 3 * int(size) and n < cap:
            fd = os.open(f"{area}/fill-{n}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            n += 1
            try:
                for _ in range(4):  # files of 4 MiB: under the file size limit
                    written += os.write(fd, chunk)
            finally:
                os.close(fd)
    except OSError as exc:
        error = exc.strerror
    print(area, written, error, sep="|")
    for i in range(n):
        os.unlink(f"{area}/fill-{i}")
"""
    areas = [(cfg.workdir, cfg.disk), ("/tmp", cfg.scratch), (cfg.home, cfg.scratch)]
    with h.fresh("conformance-disk") as sb:
        args = [str(v) for area in areas for v in area]
        r = sb.exec(["python3", "-c", fill, "1000", *args], timeout=120)
        assert r.ok, r
        for line, (area, size) in zip(r.stdout.splitlines(), areas):
            _, written, error = line.split("|")
            assert error == "No space left on device" and int(written) <= size, (
                f"{area} took {written} bytes (bound {size}) and said {error!r}"
            )
        probe = (
            "import sys\n"
            "for folder in sys.argv[1:]:\n"
            "    try:\n"
            "        open(folder + '/arex-probe', 'w').close(); print(folder, 'writable')\n"
            "    except OSError as exc:\n"
            "        print(folder, exc.strerror)\n"
        )
        folders = ["/", "/usr", "/var/tmp", "/opt", "/etc", "/usr/local/bin"]
        r = sb.exec(["python3", "-c", probe, *folders])
        verdicts = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        wrong = {k: v for k, v in verdicts.items() if v != "Read-only file system"}
        assert len(verdicts) == len(folders) and not wrong, f"not read-only: {wrong or r}"


def check_inodes_are_bounded(h: Harness) -> None:
    cfg = h.config
    make = r"""
import os, sys
for area in sys.argv[2:]:
    made, error = 0, None
    try:
        while made < 3 * int(sys.argv[1]):
            os.close(os.open(f"{area}/n-{made}", os.O_WRONLY | os.O_CREAT, 0o600))
            made += 1
    except OSError as exc:
        error = exc.strerror
    print(area, made, error, sep="|")
    for i in range(made):
        os.unlink(f"{area}/n-{i}")
"""
    areas = [cfg.workdir, "/tmp", cfg.home]
    with h.fresh("conformance-inodes") as sb:
        r = sb.exec(["python3", "-c", make, str(cfg.inodes), *areas], timeout=120)
        assert r.ok, r
        for line, area in zip(r.stdout.splitlines(), areas):
            _, made, error = line.split("|")
            assert error == "No space left on device" and int(made) <= cfg.inodes, (
                f"{area} took {made} files (bound {cfg.inodes}) and said {error!r}"
            )


# -- reuse: a used sandbox made clean (arex.sandbox.cleaning, the grading pool's check) ----------
SEAL = r"""
import os, sys
for d in sys.argv[1:]:
    os.makedirs(d + "/sealed/deep", exist_ok=True)
    with open(d + "/sealed/ballast", "wb") as f:
        f.write(b"x" * (2 << 20))
    os.chmod(d + "/sealed/ballast", 0o444)
    os.chmod(d + "/sealed/deep", 0o555)
    os.chmod(d + "/sealed", 0o555)
    os.setxattr(d, "user.arex-note", b"for the next user")
    os.chmod(d, 0o555)
print("sealed")
"""


def _sealed(sb: Sandbox) -> None:
    """What a hostile program leaves: its own tmpfs roots read-only over read-only folders and
    pages of data, each root tagged with an extended attribute."""
    cfg = sb.config
    r = sb.exec(["python3", "-c", SEAL, cfg.workdir, cfg.home, "/tmp"], limits=RunLimits(isolated=True))
    assert r.ok and "sealed" in r.stdout, r


def check_reuse_cleaning_restores_a_sealed_sandbox(h: Harness) -> None:
    """After the cleaning, every expected place is the empty folder of a fresh sandbox (owner, mode,
    no attributes), its filesystem holds no pages, and the cleaning's own check agrees."""
    with h.fresh("conformance-reuse") as sb:
        fresh = cleaning.inspect(sb, [], [])
        assert isinstance(fresh, dict), fresh
        _sealed(sb)
        report = cleaning.inspect(sb, [], [])
        assert isinstance(report, dict), report
        assert cleaning.problems(report, sb.config, fresh["places"]) == [], cleaning.problems(
            report, sb.config, fresh["places"]
        )
        probe = (
            "import os, sys\n"
            "for d in sys.argv[1:]:\n"
            "    s, v = os.stat(d), os.statvfs(d)\n"
            "    print(d, oct(s.st_mode), os.listdir(d), os.listxattr(d), v.f_blocks - v.f_bfree)"
        )
        r = sb.exec(["python3", "-c", probe, sb.config.workdir, sb.config.home, "/tmp"])
        want = [f"{sb.config.workdir} 0o40755 [] [] 0", f"{sb.config.home} 0o40755 [] [] 0", "/tmp 0o41777 [] [] 0"]
        assert r.stdout.splitlines() == want, f"not as fresh after cleaning: {r.stdout or r.stderr}"


def check_reuse_check_sees_a_sealed_sandbox(h: Harness) -> None:
    """The cleaning's check is not vacuous: what a sealed sandbox holds when nothing is restored or
    removed (the report of an inspection that only looks) is reported, place by place."""
    look_only = cleaning.INSPECT.replace("    restore(path, mode)\n", "    pass\n").replace('["rm", "-rf"', '["true"')
    assert look_only != cleaning.INSPECT
    with h.fresh("conformance-reuse-check") as sb:
        fresh = cleaning.inspect(sb, [], [])
        assert isinstance(fresh, dict), fresh
        _sealed(sb)
        report = cleaning.inspect(sb, [], [], script=look_only)
        assert isinstance(report, dict), report
        found = " | ".join(cleaning.problems(report, sb.config, fresh["places"]))
        for place in (sb.config.workdir, sb.config.home, "/tmp"):
            for what in (
                f"{place} is not the fresh folder",
                f"{place} carries extended attributes",
                f"{place}'s filesystem holds",
            ):
                assert what in found, f"the check missed {what!r}: {found or 'no problem reported'}"


# -- isolation -----------------------------------------------------------------------------
def check_only_loopback_network(h: Harness) -> None:
    r = h.shared.exec("ls /sys/class/net")
    assert r.stdout.split() == ["lo"], f"network interfaces present: {r.stdout.split()}"


def check_cannot_reach_host_services(h: Harness) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')"
        r = h.shared.exec(["python3", "-c", code])
        assert "CONNECTED" not in r.stdout and r.status == "error", r
    finally:
        server.close()


def check_no_name_resolution(h: Harness) -> None:
    r = h.shared.exec(["python3", "-c", "import socket; print(socket.gethostbyname('pypi.org'))"], timeout=15)
    assert r.status == "error" and "gaierror" in r.stderr, r


def check_user_is_not_root(h: Harness) -> None:
    r = h.shared.exec("id -u")
    assert r.stdout.strip() not in ("0", ""), r


# The most a sandbox may hold in its bounding set: what serving processes need to drop to the
# user (setuid, setgid) and end its processes (kill). Commands hold none of them.
SERVING_CAPS = (1 << 5) | (1 << 6) | (1 << 7)


def check_no_privileges(h: Harness) -> None:
    r = h.shared.exec("grep -E '^(Cap[A-Za-z]+|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in r.stdout.strip().splitlines())
    held = {name: int(fields[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb")}
    assert not any(held.values()) and fields["NoNewPrivs"] == "1", fields
    assert int(fields["CapBnd"], 16) & ~SERVING_CAPS == 0, (
        f"capabilities beyond the serving ones in the bounding set: {fields['CapBnd']}"
    )


REACH = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
me, reached = os.getuid(), {}
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        if os.stat(f"/proc/{pid}").st_uid == me:
            continue  # the user's own processes: the same trust as this one
    except OSError:
        continue
    ways = []
    try:
        os.listdir(f"/proc/{pid}/fd")
        ways.append("fd")
    except OSError:
        pass
    try:
        open(f"/proc/{pid}/mem", "rb").close()
        ways.append("mem")
    except OSError:
        pass
    try:
        os.kill(pid, 0)
        ways.append("signal")
    except PermissionError:
        pass
    except ProcessLookupError:
        continue
    for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(request, pid, 0, 0) == 0:
            ways.append(f"ptrace {request}")
            libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    reached[pid] = ways
print(json.dumps(reached))
"""


def check_serving_processes_are_out_of_reach(h: Harness) -> None:
    """Sandboxed code cannot open, read, signal or trace the processes that serve it (init, the
    command server, the runner): so it cannot forge their replies or stop them."""
    import json

    r = h.shared.exec(["python3", "-c", REACH])
    assert r.ok, r
    reached = {int(pid): ways for pid, ways in json.loads(r.stdout).items()}
    assert 1 in reached and len(reached) >= 2, (
        f"the serving processes run as the sandbox user (not out of its reach): {sorted(reached)}"
    )
    exposed = {pid: ways for pid, ways in reached.items() if ways}
    assert not exposed, f"serving processes in reach: {exposed}"


ATTACK = (
    "stop_all() { for p in /proc/[0-9]*; do p=${p#/proc/}; [ $p = $$ ] || kill -STOP $p 2>/dev/null; done; }; "
    "stop_all; pkill -9 -f 'pytho[n]'; kill -9 -1; stop_all; echo attack-over"
)


def check_server_survives_the_agent(h: Harness) -> None:
    """The agent stops and kills every process it can see; the command doing it ends normally,
    and later commands run, each exactly once."""
    with h.fresh("conformance-survive") as sb:
        sb.exec("nohup sleep 300 >/dev/null 2>&1 &")
        r = sb.exec(ATTACK, timeout=60)
        assert r.ok and r.stdout.endswith("attack-over\n"), f"the attacking command itself was cut short: {r}"
        for _ in range(3):
            assert sb.exec("echo alive", timeout=30).stdout == "alive\n"
        r = sb.exec("echo ran >> once.txt", timeout=30)
        assert r.ok, r
        assert sb.read_file("once.txt") == b"ran\n", f"a command ran more than once: {sb.read_file('once.txt')!r}"


def check_readonly_mount_is_readable(h: Harness) -> None:
    assert h.shared.exec(f"cat {RO_TARGET}/data.txt").stdout == "read me\n"


def check_readonly_mount_is_not_writable(h: Harness) -> None:
    r = h.shared.exec(f"echo x > {RO_TARGET}/new.txt; echo y >> {RO_TARGET}/data.txt; rm -f {RO_TARGET}/data.txt")
    after = h.shared.exec(f"ls {RO_TARGET}; cat {RO_TARGET}/data.txt")
    assert after.stdout == "data.txt\nread me\n", f"read-only mount was changed: {after.stdout!r} ({r.stderr})"
    try:
        h.shared.write_file(f"{RO_TARGET}/api.txt", "x")
    except PermissionError:
        pass
    else:
        raise AssertionError("write_file into a read-only mount succeeded")


def check_sandboxes_cannot_see_each_other(h: Harness) -> None:
    """Neither the files nor the processes of one sandbox are visible from another. The check
    starts the process it looks for itself (no other check's leftovers), and first sees it from
    its own sandbox, so the probe is known to find it."""
    h.shared.write_file("/tmp/secret-of-a.txt", "only a")
    probe = "find / -name 'secret-of-a*' 2>/dev/null; ps -e -o args | grep -c '[s]leep 304'"
    r = h.shared.exec("nohup sleep 304 >/dev/null 2>&1 & echo $! > seen.pid")
    assert r.ok, r
    pid = h.shared.read_file("seen.pid").decode().strip()
    try:
        # A walk of the whole root can outlast the suite's 3 s default on a loaded host: a generous backstop.
        mine = h.shared.exec(probe, timeout=120).stdout.split("\n")
        assert "/tmp/secret-of-a.txt" in mine and mine[-2] == "1", (
            f"the probe does not find the sandbox's own file and process: {mine}"
        )
        with h.fresh("conformance-other") as other:
            r = other.exec(probe, timeout=120)
            assert r.stdout.strip() == "0", f"second sandbox sees the first: {r.stdout}"
            other.write_file("/tmp/secret-of-b.txt", "only b")
            assert h.shared.exec("ls /tmp/secret-of-b.txt").status == "error"
    finally:
        h.shared.exec(f"kill {pid} 2>/dev/null")


# -- files ---------------------------------------------------------------------------------
def check_binary_file_roundtrip(h: Harness) -> None:
    data = bytes(range(256)) * 64 + os.urandom(4096)
    h.shared.write_file("bin/all-bytes.bin", data)
    assert h.shared.read_file("bin/all-bytes.bin") == data
    digest = h.shared.exec("sha256sum bin/all-bytes.bin").stdout.split()[0]
    assert digest == hashlib.sha256(data).hexdigest()


def check_non_ascii_names_roundtrip(h: Harness) -> None:
    name = "données/ünïcödé 文件 🙂.txt"
    h.shared.write_file(name, "contenu é\n")
    assert h.shared.read_file(name) == "contenu é\n".encode()
    listed = h.shared.exec("ls données").stdout
    assert "ünïcödé 文件 🙂.txt" in listed, listed


def check_written_files_belong_to_the_user(h: Harness) -> None:
    h.shared.write_file("deep/er/owned.txt", "v1")
    r = h.shared.exec("echo v2 >> deep/er/owned.txt && touch deep/er/new && rm deep/er/owned.txt && echo ok")
    assert r.stdout == "ok\n", r


def check_read_missing_file_raises(h: Harness) -> None:
    try:
        h.shared.read_file("does/not/exist.txt")
    except FileNotFoundError:
        return
    raise AssertionError("reading a missing file did not raise FileNotFoundError")


def check_read_file_size_cap(h: Harness) -> None:
    h.shared.exec("head -c 5000 /dev/zero > five-k.bin")
    try:
        h.shared.read_file("five-k.bin", max_bytes=1000)
    except ValueError:
        return
    raise AssertionError("read_file ignored max_bytes")


def check_read_file_does_not_follow_into_root_only_files(h: Harness) -> None:
    """read_file reads as the sandbox user: a link in the workspace to a file only root may read
    (the image's /etc/shadow) gives PermissionError, never the file's bytes."""
    r = h.shared.exec(
        "stat -c '%u %a %s' /etc/shadow && ln -sfn /etc/shadow shadow-link && ! cat /etc/shadow >/dev/null 2>&1"
    )
    fields = r.stdout.split()
    assert r.ok and fields[0] == "0" and int(fields[2]) > 0, (
        f"the image has no root-only, non-empty /etc/shadow to test with: {r}"
    )
    for path in ("shadow-link", "/etc/shadow"):
        try:
            data = h.shared.read_file(path)
        except PermissionError:
            continue
        raise AssertionError(f"read_file({path!r}) returned {len(data)} bytes of a file only root may read")


def _members(archive: Path) -> dict[str, tarfile.TarInfo]:
    """An archive's members by normalised name (read on the host, never extracted)."""
    with tarfile.open(archive, mode="r:") as tar:
        return {"/".join(p for p in m.name.split("/") if p not in ("", ".")): m for m in tar.getmembers()}


def check_folder_copy_roundtrip(h: Harness) -> None:
    """copy_in keeps bytes, names, modes and empty folders; the copy belongs to the user; and the
    archive of it holds the same bytes."""
    with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as spool:
        files = {
            "a.txt": b"alpha\n",
            "nested/deeper/b.bin": bytes(range(256)),
            "nested/ß-ñ/ç.txt": "ünï\n".encode(),
            "run.sh": b"#!/bin/sh\necho ran\n",
        }
        for rel, data in files.items():
            Path(src, rel).parent.mkdir(parents=True, exist_ok=True)
            Path(src, rel).write_bytes(data)
        os.chmod(Path(src, "run.sh"), 0o755)
        Path(src, "empty-dir").mkdir()
        h.shared.exec("rm -rf copied")
        h.shared.copy_in(src, "copied")
        assert h.shared.exec("./copied/run.sh").stdout == "ran\n", "executable bit lost on copy_in"
        assert h.shared.exec("touch copied/nested/by-agent").ok, "copied files not writable by the user"
        archive = Path(spool, "copied.tar")
        with archive.open("wb") as dest:
            size = h.shared.archive("copied", dest, max_bytes=10 << 20)
        assert size == archive.stat().st_size, (size, archive.stat().st_size)
        members = _members(archive)
        with tarfile.open(archive) as tar:
            for rel, data in files.items():
                assert members[rel].isreg() and tar.extractfile(members[rel]).read() == data, rel
        assert members["empty-dir"].isdir() and members["nested/by-agent"].isreg()
        assert members["run.sh"].mode & 0o111, "executable bit lost in the archive"


TREE = r"""
import os, sys
os.makedirs("sub/empty")
with open("a.txt", "w") as f:
    f.write("alpha\n")
with open("run.sh", "w") as f:
    f.write("#!/bin/sh\necho ran\n")
os.chmod("run.sh", 0o750)
os.symlink("/etc/hostname", "abs-link")
os.symlink("loop-b", "loop-a")
os.symlink("loop-a", "loop-b")
os.mkfifo("fifo")
with open(b"bin-\xff\xfe\x01-name", "wb") as f:
    f.write(bytes(range(256)))
with open("ünïcödé 文件 🙂.txt", "w") as f:
    f.write("contenu é\n")
top = os.open(".", os.O_RDONLY)
for _ in range(int(sys.argv[1])):  # one folder at a time: the whole path is over PATH_MAX
    os.mkdir("d" * 200)
    os.chdir("d" * 200)
with open("deep-file", "w") as f:
    f.write("deep\n")
os.fchdir(top)
"""

MANIFEST = r"""
import hashlib, os, stat, sys
top, rows = sys.argv[1].encode(), []
for folder, dirs, files, dfd in os.fwalk(top):
    for name in dirs + files:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        rel = os.path.join(folder, name)[len(top) + 1:]
        what = "-"
        if stat.S_ISREG(st.st_mode):
            fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
            with os.fdopen(fd, "rb") as f:
                what = hashlib.sha256(f.read()).hexdigest()
        elif stat.S_ISLNK(st.st_mode):
            what = os.readlink(name, dir_fd=dfd).hex()
        rows.append(f"{rel.hex()} {stat.S_IFMT(st.st_mode):o} {stat.S_IMODE(st.st_mode):o} {what}")
with open(sys.argv[2], "w") as f:
    f.write("\n".join(sorted(rows)) + "\n")
"""


def _manifest(sb: Sandbox, folder: str) -> list[str]:
    """Every entry below `folder`: name (hex), type, mode, sha256 or link target (hex)."""
    out = f"{sb.config.workdir}/manifest.txt"
    r = sb.exec(["python3", "-c", MANIFEST, folder, out], cwd=sb.config.workdir)
    assert r.ok, r
    return sb.read_file(out).decode().splitlines()


def check_archive_restore_roundtrip(h: Harness) -> None:
    """archive and restore keep a tree that tar-based copies get wrong: an absolute symlink and a
    symlink loop (kept as links, never followed), a FIFO (not opened), a path longer than PATH_MAX,
    binary and non-ASCII names. restore empties the folder first, and the result is the user's."""
    sb = h.shared
    levels = PATH_MAX // 201 + 2
    assert sb.exec("rm -rf rt-tree rt-back && mkdir rt-tree").ok
    r = sb.exec(["python3", "-c", TREE, str(levels)], cwd=f"{h.config.workdir}/rt-tree")
    assert r.ok, r
    before = _manifest(sb, "rt-tree")
    with tempfile.TemporaryDirectory() as spool:
        archive = Path(spool, "tree.tar")
        with archive.open("wb") as dest:
            sb.archive("rt-tree", dest, max_bytes=10 << 20)
        members = _members(archive)
        deep = [name for name in members if name.endswith("/deep-file")]
        assert members["abs-link"].issym() and members["abs-link"].linkname == "/etc/hostname", (
            "absolute link not kept as a link"
        )
        assert members["loop-a"].issym() and members["loop-b"].linkname == "loop-a", "link loop not kept as links"
        assert members["fifo"].isfifo(), "FIFO not kept as a FIFO"
        assert deep and len(deep[0]) > PATH_MAX, "the path longer than PATH_MAX is missing"
        assert "bin-\udcff\udcfe\x01-name" in members and "ünïcödé 文件 🙂.txt" in members, sorted(members)[:12]
        assert sb.exec("mkdir -p rt-back && echo stale > rt-back/stale.txt").ok
        sb.restore(archive, "rt-back")
    after = _manifest(sb, "rt-back")
    missing, extra = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    assert before == after, (
        f"restore changed the tree: lost {[m[:120] for m in missing]}, gained {[e[:120] for e in extra]}"
    )
    r = sb.exec(
        "./rt-back/run.sh && touch rt-back/sub/empty/by-agent && [ -p rt-back/fifo ] && readlink rt-back/abs-link"
    )
    assert r.stdout == "ran\n/etc/hostname\n", f"restored tree not usable by the user: {r}"


def check_archive_size_cap(h: Harness) -> None:
    h.shared.exec("rm -rf capped; mkdir -p capped && head -c 200000 /dev/urandom > capped/blob")
    with tempfile.TemporaryFile() as dest:
        try:
            h.shared.archive("capped", dest, max_bytes=50_000)
        except ArchiveTooLarge:
            dest.seek(0, os.SEEK_END)
            assert dest.tell() <= 50_000, f"{dest.tell()} bytes written past a 50000-byte cap"
            return
    raise AssertionError("archive ignored max_bytes")


def check_archive_of_missing_folder_raises(h: Harness) -> None:
    with tempfile.TemporaryFile() as dest:
        try:
            h.shared.archive("no/such/folder", dest, max_bytes=1 << 20)
        except FileNotFoundError:
            return
    raise AssertionError("archiving a missing folder did not raise FileNotFoundError")


def check_archive_of_a_locked_folder(h: Harness) -> None:
    """An agent may `chmod 000` its own workspace; archiving it must still work (its round kept)."""
    r = h.shared.exec(
        "chmod -R u+rwx locked 2>/dev/null; "
        "rm -rf locked && mkdir locked && echo kept > locked/file.txt && chmod 000 locked"
    )
    assert r.ok, r  # a folder made by this run, not one left by an earlier one
    with tempfile.TemporaryFile() as dest:
        h.shared.archive("locked", dest, max_bytes=1 << 20)
        dest.seek(0)
        with tarfile.open(fileobj=dest, mode="r:") as tar:
            names = [m.name for m in tar.getmembers()]
    assert "./file.txt" in names, f"locked folder archived without its file: {names}"


# -- lifecycle -----------------------------------------------------------------------------
def check_stop_removes_and_later_use_raises(h: Harness) -> None:
    sandbox = h.factory(h.config, "conformance-stop")
    sandbox.start()
    assert sandbox.exec("true").ok
    sandbox.stop()
    sandbox.stop()  # twice is fine
    try:
        sandbox.exec("true")
    except SandboxError:
        return
    raise AssertionError("exec on a stopped sandbox did not raise SandboxError")


def check_context_manager_cleans_up_on_error(h: Harness) -> None:
    sandbox = h.factory(h.config, "conformance-ctx")
    try:
        with sandbox:
            sandbox.write_file("x.txt", "x")
            raise KeyError("boom")
    except KeyError:
        pass
    try:
        sandbox.read_file("x.txt")
    except SandboxError:
        return
    raise AssertionError("sandbox still usable after its with-block raised")


CHECKS: dict[str, Callable[[Harness], None]] = {
    name.removeprefix("check_"): fn for name, fn in globals().items() if name.startswith("check_") and callable(fn)
}


def run_check(harness: Harness, name: str) -> str | None:
    """Run one check: None if it passed, else the failure message."""
    try:
        CHECKS[name](harness)
        return None
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the suite
        return f"{type(exc).__name__}: {exc}"


def run_suite(
    backend: str = "docker", only: list[str] | None = None, alone: bool = False, **overrides
) -> dict[str, str | None]:
    """Run the checks (`only`: these, in this order); returns name → None (passed) or the failure
    message. With `alone`, each check gets a harness of its own: a fresh shared sandbox and
    read-only folder, so nothing an earlier check did can make it pass or fail."""
    names = list(only) if only else list(CHECKS)
    outcome: dict[str, str | None] = {}
    for group in ([name] for name in names) if alone else [names]:
        with readonly_source() as folder:
            harness = Harness(suite_config(backend, folder, **overrides))
            try:
                for name in group:
                    outcome[name] = run_check(harness, name)
            finally:
                harness.close()
    return outcome
