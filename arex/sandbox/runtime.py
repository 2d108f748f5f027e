"""The files every sandbox mounts read-only at /.arex: its init, the command server, the runner,
the unpacker.

The runner (runner.c) is compiled once per source, as a static binary, by the backend (in
whatever has a compiler: the Docker backend uses a throwaway container of the base image), and
cached on the host under the arex cache folder, so it runs in any image. The folder is named by
the hash of all the files.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from arex.hashing import cache_dir

TARGET = "/.arex"
FILES = ("runner.c", "box/server.py", "box/init.py", "box/unpack.py")
RUNNER = "arex-run"


def _sources() -> dict[str, bytes]:
    package = resources.files("arex.sandbox")
    return {name: package.joinpath(name).read_bytes() for name in FILES}


def source_hash() -> str:
    digest = hashlib.sha256()
    for name, data in sorted(_sources().items()):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:20]


def main_command(agent_uid: int) -> list[str]:
    """The sandbox's first process: our init, which runs the server for the agent's uid."""
    return ["python3", "-I", "-S", "-u", f"{TARGET}/init.py", str(agent_uid)]


def runtime_dir(compile_runner: Callable[[Path], None]) -> Path:
    """The host folder to mount at /.arex, built on first use (one builder at a time).
    `compile_runner(folder)` turns folder/runner.c into folder/arex-run (a static binary)."""
    folder = cache_dir() / "runtime" / source_hash()
    if (folder / RUNNER).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / RUNNER).is_file():
            _build(compile_runner, folder)
    return folder


def _build(compile_runner: Callable[[Path], None], folder: Path) -> None:
    staging = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, data in _sources().items():
        (staging / Path(name).name).write_bytes(data)
    compile_runner(staging)
    for path in staging.iterdir():
        path.chmod(0o755 if path.name == RUNNER else 0o644)
    staging.chmod(0o755)
    os.replace(staging, folder)
