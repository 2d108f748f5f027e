"""Commands and files of a sandbox whose command server (box/server.py) answers on one stream:
everything but how the sandbox is made and how its out-of-memory kills are seen. Every backend
that runs arex's init, server and runner (docker/, unshare/) extends `ServedSandbox`, so a command
behaves the same in each.
"""

from __future__ import annotations

import base64
import posixpath
import tarfile
import tempfile
import time
import uuid
from abc import abstractmethod
from pathlib import Path
from typing import BinaryIO

from arex.sandbox.base import (
    JUDGE_AREA,
    ArchiveTooLarge,
    ExecResult,
    InteractResult,
    RunLimits,
    Sandbox,
    SandboxError,
    truncated_text,
)
from arex.sandbox.execd import ExecServer, ServerGone
from arex.sandbox.execd import text as execd_text
from arex.sandbox.runtime import TARGET

_FORK_FAILED = "Resource temporarily unavailable"  # fork() = EAGAIN, as bash and python report it
_CHUNK = 1 << 20
# Runner exit codes for file operations (runner.c, read_file / write_file).
_MISSING, _FOLDER, _NOT_REGULAR, _READ_ONLY = 2, 3, 4, 5


def _starvation(reply: dict) -> dict:
    """ExecResult's starved_s and starved from the runner's line (runner.c: starved_us, capped)."""
    fields = reply.get("result") or {}
    starved_us = fields.get("starved_us")
    return {
        "starved_s": int(starved_us) / 1e6 if starved_us is not None else None,
        "starved": reply.get("killed") == "timeout" and fields.get("capped") == "1",
    }


def _kept(data: bytes, keep: int) -> tuple[str, bool]:
    """A run's stream as the server keeps it (box/server.py Capture: head and tail of `keep` bytes)."""
    if len(data) <= keep:
        return truncated_text(data, b"", len(data))
    half = keep // 2
    return truncated_text(data[:half], data[len(data) - (keep - half) :], len(data))


class _Runs:
    """The runner's batch stream (runner.c, -B), parsed as it comes: per run, a line of fields, then
    the bytes of its stdout and its stderr."""

    def __init__(self):
        self._pending = bytearray()
        self.done: list[tuple[dict, bytes, bytes]] = []
        self.broken = ""

    def add(self, chunk: bytes) -> None:
        self._pending += chunk
        while (end := self._pending.find(b"\n")) >= 0 and not self.broken:
            try:
                fields = dict(item.split("=", 1) for item in self._pending[:end].decode().split())
                out, err = int(fields["out"]), int(fields["err"])
            except (ValueError, KeyError):  # only the runner (root) writes here: a broken runtime
                self.broken = bytes(self._pending[:end][:200]).decode(errors="replace")
                return
            if len(self._pending) < end + 1 + out + err:
                return
            body = bytes(self._pending[end + 1 : end + 1 + out + err])
            del self._pending[: end + 1 + out + err]
            self.done.append((fields, body[:out], body[out:]))


class ServedSandbox(Sandbox):
    """A sandbox served by box/server.py over `self._server`. Subclasses provide `_require()`
    (SandboxError when not running), `_dead(what, exc)`, `_oom_mark()` and `_oom_since(mark)`."""

    _server: ExecServer | None = None

    @abstractmethod
    def _require(self):
        """SandboxError unless the sandbox is running."""

    @abstractmethod
    def _dead(self, what: str, exc: Exception) -> SandboxError:
        """The error saying the sandbox died during `what`."""

    @abstractmethod
    def _oom_mark(self):
        """What `_oom_since` compares against, taken when a command starts."""

    @abstractmethod
    def _oom_since(self, mark) -> bool:
        """Did the kernel OOM-kill a process of this sandbox since `mark` (each kill counted once)?"""

    # -- commands --------------------------------------------------------------------------
    def _runner_options(self, cwd: str, timeout: float, limits: RunLimits | None) -> list[str]:
        uid, gid = self.config.uid_gid
        options = [
            "-u",
            str(uid),
            "-g",
            str(gid),
            "-d",
            cwd,
            "-t",
            f"{timeout:.3f}",
            "-f",
            str(self.config.max_file_size),
        ]
        if limits is not None:
            for flag, value in (
                ("-c", limits.cpu_s),
                ("-s", limits.stack),
                ("-m", limits.address_space),
                ("-T", limits.starved_wall_s),
            ):
                if value is not None:
                    options += [flag, str(value)]
            if limits.isolated:
                options += ["-k", "-K"]
        return options

    def _request(
        self, argv, runner, *, timeout, stdin=None, keep=None, kill_at=None, cwd=None, env=None, **extra
    ) -> dict:
        """Send one request to the server; ServerGone if it died meanwhile, SandboxError if the
        sandbox itself is gone."""
        self._require()
        cfg = self.config
        request = {
            "id": uuid.uuid4().hex,
            "argv": list(argv),
            "runner": runner,
            "cwd": cwd or cfg.workdir,
            "env": {**cfg.env, **(env or {})},
            "timeout": timeout,
            "keep": keep or cfg.output_limit,
            "kill_at": kill_at or cfg.output_kill,
            "stdin": base64.b64encode(stdin).decode() if stdin is not None else None,
            **extra,
        }
        on_chunk, feed = request.pop("on_chunk", None), request.pop("feed", None)
        request["stdin_stream"] = feed is not None
        try:
            return self._server.run(request, wait_s=timeout + 120, on_chunk=on_chunk, feed=feed)
        except ServerGone as exc:
            if self._server is None or not self._server.alive:
                raise self._dead("a command", exc) from None
            raise

    def exec(
        self, command, timeout=None, cwd=None, env=None, stdin=None, limits: RunLimits | None = None
    ) -> ExecResult:
        cfg = self.config
        timeout = cfg.timeout_s if timeout is None else timeout
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        if isinstance(stdin, str):
            stdin = stdin.encode()
        cwd = cwd or cfg.workdir
        started_ns, mark = time.time_ns(), self._oom_mark()
        try:
            runner = self._runner_options(cwd, timeout, limits)
            longest = max(timeout, (limits.starved_wall_s or 0) if limits else 0)
            reply = self._request(argv, runner, timeout=longest, stdin=stdin, cwd=cwd, env=env)
        except ServerGone as exc:  # the server died mid-command (the OOM killer): the command's failure
            self._sweep()
            return ExecResult(
                status="error",
                exit_code=137,
                stdout="",
                stderr=f"[arex: {exc}]",
                duration_s=round((time.time_ns() - started_ns) / 1e9, 4),
            )
        stdout, out_cut = execd_text(reply["out"])
        stderr, err_cut = execd_text(reply["err"])
        status, code = self._status(reply, mark)
        if _FORK_FAILED in stderr:
            self._sweep()  # it ran into the pids limit and may have left a process storm behind
        return ExecResult(
            status=status,
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            duration_s=reply["seconds"],
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            cpu_s=reply["cpu_s"],
            memory_kb=reply["maxrss_kb"],
            signal=reply["signal"],
            **_starvation(reply),
        )

    def run_each(self, command, stdins, *, timeout, cwd, limits, stop=None) -> list[ExecResult]:
        """Pipelined: one request runs the runner in batch mode (runner.c, -B), which runs the
        command once per input exactly as an isolated `exec` would (sweeps, limits, tree kill, its
        own wait for a CPU, the output cap per run) and streams each run's result back as it ends."""
        if not limits.isolated:
            raise ValueError("run_each runs isolated runs only (RunLimits.isolated)")
        cfg = self.config
        runner = [*self._runner_options(cwd, timeout, limits), "-B", "-O", str(cfg.output_kill)]
        if stop is not None:
            runner += ["-S", f"{round(stop[0] * 1e6)}:{stop[1]}"]
        frames = b"".join(b"%d\n%b" % (len(stdin), stdin) for stdin in stdins)
        runs = _Runs()
        started_ns, mark = time.time_ns(), self._oom_mark()
        try:
            self._request(
                list(command),
                runner,
                timeout=max(timeout, limits.starved_wall_s or 0),  # the longest wait for one run's result
                stdin=frames,
                cwd=cwd,
                keep=1 << 16,
                kill_at=1 << 62,  # the runner caps each run's output itself
                stream_out=True,
                on_chunk=runs.add,
            )
        except ServerGone as exc:  # the server died mid-run (the OOM killer): that run's failure
            self._sweep()
            seconds = round((time.time_ns() - started_ns) / 1e9, 4)
            failed = ExecResult(status="error", exit_code=137, stdout="", stderr=f"[arex: {exc}]", duration_s=seconds)
            return [self._batch_result(f, out, err, mark) for f, out, err in runs.done] + [failed]
        if runs.broken:
            raise SandboxError(f"Sandbox '{self.name}': the runner's batch stream is malformed: {runs.broken!r}")
        return [self._batch_result(f, out, err, mark) for f, out, err in runs.done]

    def _batch_result(self, fields: dict, out: bytes, err: bytes, mark) -> ExecResult:
        """One run of a batch as `exec` reports it. Only the batch's last run can have been killed by
        SIGKILL (the runner stops there), so the OOM mark taken before the batch is that run's."""
        killed = "timeout" if fields["timed_out"] == "1" else None
        killed = "output_limit" if fields["output_limit"] == "1" else killed  # as the server: the flood first
        reply = {"exit_code": int(fields["exit"]), "signal": int(fields["signal"]) or None, "killed": killed}
        status, code = self._status(reply, mark)
        keep = self.config.output_limit
        stdout, out_cut = _kept(out, keep)
        stderr, err_cut = _kept(err, keep)
        return ExecResult(
            status=status,
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            duration_s=round(int(fields["us"]) / 1e6, 4),
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            cpu_s=int(fields["cpu_us"]) / 1e6,
            memory_kb=int(fields["maxrss_kb"]),
            signal=reply["signal"],
            **_starvation({"killed": killed, "result": fields}),
        )

    def _status(self, reply: dict, mark) -> tuple[str, int]:
        """A command's status and exit code from the server's reply (killed, ok, oom or error)."""
        code, killed = reply["exit_code"], reply["killed"]
        if killed:
            return killed, (124 if killed == "timeout" else 137)
        if code == 0:
            return "ok", code
        if reply["signal"] == 9 and self._oom_since(mark):
            return "oom", code
        return "error", code

    def interact(self, program, interactor, *, stdin, timeout, cwd, limits, interactor_limits) -> InteractResult:
        cfg = self.config
        if not cfg.judge_area:
            raise SandboxError(
                f"Sandbox '{self.name}' has no judge area (judge_area=0), so it cannot run an interactor."
            )
        spec = (
            f"{len(interactor)}:{cfg.judge_uid}:{interactor_limits.cpu_s or 0}:{interactor_limits.address_space or 0}"
        )
        runner = [*self._runner_options(cwd, timeout, limits), "-K", "-I", spec]  # always isolated
        keep = max(cfg.output_limit, 1 << 16)
        started_ns, mark = time.time_ns(), self._oom_mark()
        try:
            reply = self._request(
                [*interactor, *program],
                runner,
                timeout=max(timeout, limits.starved_wall_s or 0),
                stdin=stdin,
                cwd=cwd,
                keep=keep,
            )
        except ServerGone as exc:  # the server died mid-run (the OOM killer): the program's failure
            self._sweep()
            seconds = round((time.time_ns() - started_ns) / 1e9, 4)
            return InteractResult(
                program=ExecResult(
                    status="error", exit_code=137, stdout="", stderr=f"[arex: {exc}]", duration_s=seconds
                ),
                interactor_exit=137,
            )
        fields = reply.get("result") or {}
        stderr, err_cut = execd_text(reply["err"])
        status, code = self._status(reply, mark)
        program = ExecResult(
            status=status,
            exit_code=code,
            stdout="",
            stderr=stderr,
            duration_s=reply["seconds"],
            stderr_truncated=err_cut,
            cpu_s=reply["cpu_s"],
            memory_kb=reply["maxrss_kb"],
            signal=reply["signal"],
            **_starvation(reply),
        )
        first = {"command": "program", "interactor": "interactor"}.get(fields.get("first", ""))
        return InteractResult(
            program=program,
            interactor_exit=int(fields.get("ia_exit", 137)),
            interactor_signal=int(fields.get("ia_signal", 0)) or None,
            interactor_cpu_s=int(fields.get("ia_cpu_us", 0)) / 1e6,
            interactor_memory_kb=int(fields.get("ia_maxrss_kb", 0)),
            interactor_output=execd_text(reply["out"])[0],
            first=first,
        )

    def judge_exec(self, command, timeout=60.0, stdin=None) -> ExecResult:
        uid = str(self.config.judge_uid)
        reply = self._helper(list(command), ["-u", uid, "-g", uid], stdin=stdin, cwd=JUDGE_AREA, timeout=timeout)
        stdout, out_cut = execd_text(reply["out"])
        stderr, err_cut = execd_text(reply["err"])
        code = 124 if reply["killed"] == "timeout" else reply["exit_code"]
        return ExecResult(
            status="ok" if code == 0 else ("timeout" if code == 124 else "error"),
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            duration_s=reply["seconds"],
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    def _sweep(self) -> None:
        """Kill every process of the sandbox user (the runner's -K, with nothing to run)."""
        try:
            self._request(["true"], self._runner_options("/", 30, RunLimits(isolated=True)), timeout=30)
        except ServerGone:
            pass

    def _helper(
        self, argv, runner_extra=(), *, stdin=None, feed=None, on_chunk=None, cwd="/", timeout=300.0, kill_at=None
    ) -> dict:
        """A helper command as the sandbox user (file reads and writes, tar); its reply."""
        runner = self._runner_options(cwd, timeout, None) + list(runner_extra)
        extra = {"stream_out": on_chunk is not None, "on_chunk": on_chunk, "feed": feed}
        # The server may be killed mid-request (by the OOM killer, the only thing in the box that
        # can) and replaced: a helper that streams nothing has no side effect to fear twice.
        attempts = 1 if on_chunk is not None or feed is not None else 2
        for attempt in range(attempts):
            try:
                return self._request(
                    argv,
                    runner,
                    timeout=timeout,
                    stdin=stdin,
                    cwd=cwd,
                    keep=1 << 16,
                    kill_at=kill_at or (1 << 62),
                    **extra,
                )
            except ServerGone as exc:
                failure = exc
        raise SandboxError(f"Sandbox '{self.name}': {failure}") from None

    # -- files (all as the sandbox user, inside the sandbox) -------------------------------------
    def write_file(self, path: str, data, mode: int = 0o644) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        path = posixpath.join(self.config.workdir, path)
        chunks = lambda: (data[i : i + _CHUNK] for i in range(0, len(data), _CHUNK))  # noqa: E731
        reply = self._helper([], ["-W", path, "-o", f"{mode:o}"], feed=chunks)
        if reply["exit_code"] == _READ_ONLY:
            raise PermissionError(f"'{path}' is read-only in sandbox '{self.name}'.")
        if reply["exit_code"] != 0:
            raise PermissionError(
                f"Cannot write '{path}' in sandbox '{self.name}': {execd_text(reply['err'])[0].strip()}"
            )

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        path = posixpath.join(self.config.workdir, path)
        cap = max_bytes if max_bytes is not None else 1 << 30
        parts: list[bytes] = []
        reply = self._helper([], ["-R", path, "-n", str(cap)], on_chunk=parts.append)
        code = reply["exit_code"]
        if code == _MISSING:
            raise FileNotFoundError(f"No file '{path}' in sandbox '{self.name}'.")
        if code == _FOLDER:
            raise IsADirectoryError(f"'{path}' is a folder in sandbox '{self.name}'.")
        if code == _NOT_REGULAR:
            raise FileNotFoundError(f"'{path}' in sandbox '{self.name}' is not a regular file.")
        if code != 0:
            raise PermissionError(
                f"Cannot read '{path}' in sandbox '{self.name}': {execd_text(reply['err'])[0].strip()}"
            )
        data = b"".join(parts)
        if len(data) > cap:
            raise ValueError(f"'{path}' is over the {cap}-byte cap.")
        return data

    def copy_in(self, host_dir, sandbox_dir: str) -> None:
        host_dir = Path(host_dir)
        if not host_dir.is_dir():
            raise FileNotFoundError(f"Host folder '{host_dir}' does not exist.")
        with tempfile.TemporaryFile() as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
                for child in sorted(host_dir.iterdir()):
                    tar.add(child, arcname=child.name)
            spool.seek(0)
            self._unpack(spool, posixpath.join(self.config.workdir, sandbox_dir), empty_first=False)

    def restore(self, archive, sandbox_dir: str) -> None:
        with open(archive, "rb") as source:
            self._unpack(source, posixpath.join(self.config.workdir, sandbox_dir), empty_first=True)

    def _unpack(self, source: BinaryIO, sandbox_dir: str, empty_first: bool) -> None:
        """Unpacked inside the sandbox as its user (never on the host), fed in chunks. Not by GNU
        tar, which cannot extract names longer than PATH_MAX (box/unpack.py can)."""
        script = 'mkdir -p -- "$1" && cd -- "$1" || exit 3\n'
        if empty_first:
            script += "chmod -R u+rwX . 2>/dev/null; find . -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +\n"
        script += f"exec python3 -I -S {TARGET}/unpack.py"
        reply = self._helper(
            ["sh", "-c", script, "arex-unpack", sandbox_dir], feed=lambda: iter(lambda: source.read(_CHUNK), b"")
        )
        err = execd_text(reply["err"])[0]
        if reply["exit_code"] != 0 and "Read-only file system" in err:
            raise PermissionError(f"'{sandbox_dir}' is read-only in sandbox '{self.name}'.")
        if reply["exit_code"] != 0:
            raise SandboxError(f"Sandbox '{self.name}': unpacking into '{sandbox_dir}' failed: {err.strip()[-500:]}")

    def archive(self, sandbox_dir: str, dest: BinaryIO, max_bytes: int) -> int:
        sandbox_dir = posixpath.join(self.config.workdir, sandbox_dir)
        size = [0]

        def take(chunk: bytes) -> None:
            size[0] += len(chunk)
            if size[0] <= max_bytes:
                dest.write(chunk)

        # Links, FIFOs and devices are stored as what they are (tar never follows or opens them).
        # The folder is made readable by its owner first: `chmod 000 .` must not lose the round.
        script = 'chmod u+rx -- "$1" 2>/dev/null; exec tar -C "$1" --sort=name --hard-dereference -cf - .'
        reply = self._helper(
            ["sh", "-c", script, "arex-archive", sandbox_dir], on_chunk=take, kill_at=max_bytes + (1 << 16)
        )
        err = execd_text(reply["err"])[0]
        if size[0] > max_bytes or reply["killed"] == "output_limit":
            raise ArchiveTooLarge(f"'{sandbox_dir}' archives to more than {max_bytes} bytes.")
        if reply["exit_code"] != 0 and ("Cannot open" in err or "Cannot chdir" in err) and size[0] == 0:
            raise FileNotFoundError(f"No folder '{sandbox_dir}' in sandbox '{self.name}': {err.strip()[:200]}")
        if reply["exit_code"] > 2 or size[0] == 0:
            raise SandboxError(f"Sandbox '{self.name}': archiving '{sandbox_dir}' failed: {err.strip()[-500:]}")
        return size[0]  # exit 1/2: some file unreadable or changing, the agent's doing; the rest is kept
