"""A sandbox backend without isolation, for the fast test tier only: commands run as local
processes in a temporary folder that stands in for the sandbox's root. It implements the whole
`Sandbox` interface, so the rollout loop and the env protocol run on it unchanged; it keeps
nothing out (the agent is not an adversary here). Registered as backend "process" by the tests
that use it; never by arex itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import BinaryIO

from arex.sandbox.base import ArchiveTooLarge, ExecResult, RunLimits, Sandbox, SandboxError, truncated_text


class ProcessSandbox(Sandbox):
    root: Path | None = None

    def start(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="arex-process-"))
        for folder in (self.config.workdir, self.config.home, "/tmp"):
            self.path(folder).mkdir(parents=True, exist_ok=True)
        for mount in self.config.mounts:
            target = self.path(mount.target)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(Path(mount.source).resolve())

    def path(self, inside: str) -> Path:
        """The host path of a path inside the sandbox (relative paths are under the workdir)."""
        if self.root is None:
            raise SandboxError(f"sandbox {self.name} is not started")
        inside = inside if inside.startswith("/") else f"{self.config.workdir}/{inside}"
        return self.root / inside.lstrip("/")

    def exec(
        self, command, timeout=None, cwd=None, env=None, stdin=None, limits: RunLimits | None = None
    ) -> ExecResult:
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        environment = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.path(self.config.home)),
            **self.config.env,
            **(env or {}),
        }
        data = stdin.encode() if isinstance(stdin, str) else stdin
        try:
            done = subprocess.run(
                argv,
                cwd=self.path(cwd or self.config.workdir),
                env=environment,
                input=data,
                capture_output=True,
                timeout=timeout or self.config.timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            return ExecResult(
                status="timeout",
                exit_code=-9,
                stdout=(exc.stdout or b"").decode(errors="replace"),
                stderr="",
                duration_s=float(timeout or 0),
            )
        limit = self.config.output_limit
        out, out_cut = truncated_text(
            done.stdout[: limit // 2],
            done.stdout[-limit // 2 :] if len(done.stdout) > limit // 2 else b"",
            len(done.stdout),
        )
        err, err_cut = truncated_text(
            done.stderr[: limit // 2],
            done.stderr[-limit // 2 :] if len(done.stderr) > limit // 2 else b"",
            len(done.stderr),
        )
        status = "ok" if done.returncode == 0 else "error"
        return ExecResult(
            status=status,
            exit_code=done.returncode,
            stdout=out,
            stderr=err,
            duration_s=0.0,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
        )

    def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        data = self.path(path).read_bytes()
        if max_bytes is not None and len(data) > max_bytes:
            raise ValueError(f"{path} is over {max_bytes} bytes")
        return data

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        target = self.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        target.chmod(mode)

    def copy_in(self, host_dir, sandbox_dir: str) -> None:
        shutil.copytree(host_dir, self.path(sandbox_dir), dirs_exist_ok=True)

    def archive(self, sandbox_dir: str, dest: BinaryIO, max_bytes: int) -> int:
        folder = self.path(sandbox_dir)
        if not folder.is_dir():
            raise FileNotFoundError(sandbox_dir)
        start = dest.tell()
        with tarfile.open(fileobj=dest, mode="w:") as tar:
            for path in sorted(folder.rglob("*")):
                tar.add(path, arcname=f"./{path.relative_to(folder).as_posix()}", recursive=False)
        size = dest.tell() - start
        if size > max_bytes:
            raise ArchiveTooLarge(f"{sandbox_dir} archives to {size} bytes, over {max_bytes}")
        return size

    def restore(self, archive, sandbox_dir: str) -> None:
        folder = self.path(sandbox_dir)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")  # archives this test backend made itself

    def set_memory_limit(self, memory: int) -> None:
        """No limits here: nothing to set."""

    def stop(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
