"""The files every sandbox mounts read-only at /.arex: its init, the command server, the runner,
the unpacker.

The runner (runner.c) is compiled once per source, as a static binary, in a throwaway container
of the base image (which has a compiler), and cached on the host under the arex cache folder, so
it runs in any image. The folder is named by the hash of all the files.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from importlib import resources
from pathlib import Path

import docker.errors

from arex.hashing import cache_dir
from arex.sandbox.base import SandboxError

TARGET = "/.arex"
FILES = ("runner.c", "box/server.py", "box/init.py", "box/unpack.py")
BUILDER_IMAGE = "arex-base:latest"


def _sources() -> dict[str, bytes]:
    package = resources.files("arex.sandbox")
    return {name: package.joinpath(name).read_bytes() for name in FILES}


def source_hash() -> str:
    digest = hashlib.sha256()
    for name, data in sorted(_sources().items()):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:20]


def main_command(agent_uid: int) -> list[str]:
    """The container's command: our init, which runs the server for the agent's uid."""
    return ["python3", "-I", "-S", "-u", f"{TARGET}/init.py", str(agent_uid)]


def runtime_dir(client) -> Path:
    """The host folder to mount at /.arex, built on first use (one builder at a time)."""
    folder = cache_dir() / "runtime" / source_hash()
    if (folder / "arex-run").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "arex-run").is_file():
            _build(client, folder)
    return folder


def _build(client, folder: Path) -> None:
    staging = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, data in _sources().items():
        (staging / Path(name).name).write_bytes(data)
    try:
        client.containers.run(
            BUILDER_IMAGE, ["gcc", "-O2", "-static", "-o", "/out/arex-run", "/out/runner.c"],
            volumes={str(staging): {"bind": "/out", "mode": "rw"}}, network_disabled=True, remove=True,
        )
    except docker.errors.ImageNotFound:
        raise SandboxError(f"The base image '{BUILDER_IMAGE}' is missing (it compiles the sandbox runner); build it with: bash scripts/build_base_image.sh") from None
    except docker.errors.ContainerError as exc:
        raise SandboxError(f"The sandbox runner does not compile: {exc.stderr.decode(errors='replace')[-2000:]}") from None
    for path in staging.iterdir():
        path.chmod(0o755 if path.name == "arex-run" else 0o644)
    staging.chmod(0o755)
    os.replace(staging, folder)
