"""The conformance suite every sandbox backend must pass.

Each check is a plain function taking a `Harness` and raising AssertionError on failure, so the
same checks run under pytest (tests/test_sandbox_conformance.py), from `arex sandbox check`, and in
scripts/conformance_mutations.py, which removes one limit at a time and shows its check failing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from arex.sandbox import Mount, Sandbox, SandboxConfig, SandboxError, make_sandbox

RO_TARGET = "/mnt/arex-ro"


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
        if self._shared is None:
            self._shared = self.factory(self.config, "conformance")
            self._shared.start()
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
    h.shared.exec("echo kept > state.txt; nohup sleep 300 >/dev/null 2>&1 &")
    r = h.shared.exec("cat state.txt; pgrep -x sleep >/dev/null && echo still-running")
    assert r.stdout == "kept\nstill-running\n", r


def check_non_utf8_output_is_kept(h: Harness) -> None:
    r = h.shared.exec("printf 'ok\\377\\376end'")
    assert r.ok and r.stdout.startswith("ok") and r.stdout.endswith("end"), r


def check_concurrent_commands(h: Harness) -> None:
    results = []
    threads = [threading.Thread(target=lambda: results.append(h.shared.exec("sleep 1; echo done"))) for _ in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.stdout for r in results] == ["done\n", "done\n"], results
    assert time.monotonic() - started < 1.9, "two 1 s commands took the sum of their times: exec is serialised"


# -- time limits ---------------------------------------------------------------------------
def check_timeout_status(h: Harness) -> None:
    started = time.monotonic()
    r = h.shared.exec("sleep 8")
    elapsed = time.monotonic() - started
    assert r.status == "timeout" and r.exit_code == 124, r
    assert elapsed < h.config.timeout_s + 3, f"timeout took {elapsed:.1f}s"


def check_timeout_kills_the_whole_tree(h: Harness) -> None:
    # A child, a grandchild in its own session, and a nohup'd background job.
    script = (
        "(sleep 6; touch child-survived) & "
        "setsid bash -c 'sleep 6; touch setsid-survived' & "
        "nohup bash -c 'sleep 6; touch nohup-survived' >/dev/null 2>&1 & "
        "sleep 60"
    )
    h.shared.exec("rm -f *-survived")
    r = h.shared.exec(script, timeout=1.5)
    assert r.status == "timeout", r
    left = h.shared.exec("ps -eo args | grep -c '[s]leep 6'")
    assert left.stdout.strip() == "0", f"processes of the timed-out command still run: {left.stdout}"
    time.sleep(6)
    survived = h.shared.exec("ls *-survived 2>/dev/null")
    assert survived.stdout == "", f"descendants outlived the timeout: {survived.stdout}"


def check_usable_after_timeout(h: Harness) -> None:
    h.shared.exec("sleep 30", timeout=1)
    r = h.shared.exec("echo alive")
    assert r.stdout == "alive\n", r


# -- output limits -------------------------------------------------------------------------
def check_stdout_is_capped_with_marker(h: Harness) -> None:
    r = h.shared.exec("head -c 100000 /dev/zero | tr '\\0' a; echo; echo LAST-LINE")
    assert r.stdout_truncated and "output truncated" in r.stdout, r.stdout[:200]
    assert len(r.stdout) < h.config.output_limit + 200, len(r.stdout)
    assert r.stdout.rstrip().endswith("LAST-LINE"), "the tail of the output must be kept"


def check_stderr_is_capped_with_marker(h: Harness) -> None:
    r = h.shared.exec("head -c 100000 /dev/zero | tr '\\0' e >&2")
    assert r.stderr_truncated and "output truncated" in r.stderr and len(r.stderr) < h.config.output_limit + 200


def check_output_flood_is_stopped(h: Harness) -> None:
    started = time.monotonic()
    r = h.shared.exec("yes flood", timeout=20)
    assert r.status == "output_limit", r.status
    assert time.monotonic() - started < 15


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
        assert 0 < started < h.config.pids_limit, f"{started} processes started under a pids limit of {h.config.pids_limit}"


def check_fork_bomb_is_contained(h: Harness) -> None:
    latencies = []
    stop = threading.Event()

    def probe() -> None:  # the host must stay responsive while the bomb runs
        while not stop.is_set():
            t0 = time.monotonic()
            subprocess.run(["true"], check=True)
            latencies.append(time.monotonic() - t0)
            time.sleep(0.2)

    with h.fresh("conformance-forkbomb") as sb:
        sb.write_file("keep.txt", "files survive\n")
        watcher = threading.Thread(target=probe)
        watcher.start()
        try:
            r = sb.exec("bomb() { bomb | bomb & }; bomb", timeout=5)
        finally:
            stop.set()
            watcher.join()
        assert r.duration_s < 10, f"the bomb held the command for {r.duration_s}s under a 5 s timeout"
        assert latencies and max(latencies) < 2.0, f"host stalled: slowest probe {max(latencies):.2f}s"
        after = sb.exec("echo alive; cat keep.txt; ps -e --no-headers | wc -l")
        lines = after.stdout.split("\n")
        assert lines[:2] == ["alive", "files survive"], after
        assert int(lines[2]) < 10, f"bomb processes remain after the timeout: {lines[2]}"


def check_file_size_limit(h: Harness) -> None:
    limit_mb = h.config.max_file_size // (1 << 20)
    r = h.shared.exec(f"head -c {(limit_mb + 4) << 20} /dev/zero > big.bin; stat -c %s big.bin; rm -f big.bin")
    assert r.status != "ok" or int(r.stdout.split()[-1]) <= h.config.max_file_size, r


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


def check_no_privileges(h: Harness) -> None:
    r = h.shared.exec("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in r.stdout.strip().splitlines())
    assert int(fields["CapEff"], 16) == 0 and fields["NoNewPrivs"] == "1", fields


PIPES_IN_REACH = r"""
import os
me, found = os.getpid(), []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == me:
        continue
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if any(v.startswith(b"AREX_EXEC_ID=") for v in f.read().split(b"\0")):
                continue  # a sandboxed command: the same trust as this one
    except OSError:
        pass
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        continue  # out of reach, as it should be
    if any(link.startswith(("pipe:", "socket:")) for link in links):
        found.append(pid + " " + open(f"/proc/{pid}/cmdline", "rb").read()[:40].decode(errors="replace"))
print(found)
"""


def check_serving_processes_are_out_of_reach(h: Harness) -> None:
    """Sandboxed code cannot open the pipes of the processes that serve it (and so forge their replies)."""
    r = h.shared.exec(["python3", "-c", PIPES_IN_REACH])
    assert r.ok and r.stdout.strip() == "[]", r


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
    h.shared.write_file("/tmp/secret-of-a.txt", "only a")
    with h.fresh("conformance-other") as other:
        r = other.exec("find / -name 'secret-of-a*' 2>/dev/null; ps -e -o args | grep -c '[s]leep 300'")
        assert r.stdout.strip() == "0", f"second sandbox sees the first: {r.stdout}"
        other.write_file("/tmp/secret-of-b.txt", "only b")
        assert h.shared.exec("ls /tmp/secret-of-b.txt").status == "error"


# -- files ---------------------------------------------------------------------------------
def check_binary_file_roundtrip(h: Harness) -> None:
    data = bytes(range(256)) * 64 + os.urandom(4096)
    h.shared.write_file("bin/all-bytes.bin", data)
    assert h.shared.read_file("bin/all-bytes.bin") == data
    digest = h.shared.exec("sha256sum bin/all-bytes.bin").stdout.split()[0]
    import hashlib

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


def check_folder_copy_roundtrip(h: Harness) -> None:
    with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as dst:
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
        h.shared.copy_in(src, "copied")
        assert h.shared.exec("./copied/run.sh").stdout == "ran\n", "executable bit lost on copy_in"
        assert h.shared.exec("touch copied/nested/by-agent").ok, "copied files not writable by the user"
        h.shared.copy_out("copied", dst)
        for rel, data in files.items():
            assert Path(dst, rel).read_bytes() == data, rel
        assert Path(dst, "empty-dir").is_dir() and Path(dst, "nested/by-agent").exists()
        assert os.access(Path(dst, "run.sh"), os.X_OK)


def check_copy_out_size_cap(h: Harness) -> None:
    h.shared.exec("mkdir -p capped && head -c 200000 /dev/urandom > capped/blob")
    with tempfile.TemporaryDirectory() as dst:
        try:
            h.shared.copy_out("capped", dst, max_bytes=50_000)
        except ValueError:
            return
    raise AssertionError("copy_out ignored max_bytes")


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


def run_suite(backend: str = "docker", only: list[str] | None = None, **overrides) -> dict[str, str | None]:
    """Run the checks; returns name → None (passed) or the failure message."""
    outcome: dict[str, str | None] = {}
    with readonly_source() as folder:
        harness = Harness(suite_config(backend, folder, **overrides))
        try:
            for name, check in CHECKS.items():
                if only and name not in only:
                    continue
                try:
                    check(harness)
                    outcome[name] = None
                except Exception as exc:  # noqa: BLE001 - every failure is reported, none stops the suite
                    outcome[name] = f"{type(exc).__name__}: {exc}"
        finally:
            harness.close()
    return outcome
