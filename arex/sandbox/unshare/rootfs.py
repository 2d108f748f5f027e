"""The root filesystems unshare sandboxes start from, and the runtime mounted at /.arex.

`sandbox.image` names a folder: an absolute path, or an image name, which means the folder
scripts/export_rootfs.sh makes from that Docker image under the cache (`rootfs/<name>`, the
name's `/` and `:` turned into `_`). The folder holds `rootfs/` (the image's files, exported with
their owners) and `config.json` (the image's config: its environment); a folder without `rootfs/`
is taken as the root filesystem itself.

The runner is compiled once per source hash, statically, by the rootfs's own gcc in a chroot (no
Docker engine needed), and cached under the cache folder beside Docker's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from arex.hashing import cache_dir
from arex.sandbox.base import SandboxError
from arex.sandbox.runtime import FILES, source_hash

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Docker's, for images without one
EXPORT = "scripts/export_rootfs.sh"


@dataclass(frozen=True)
class RootFs:
    path: Path
    env: dict[str, str]


def folder_for(image: str) -> Path:
    if os.path.isabs(image):
        return Path(image)
    return cache_dir() / "rootfs" / re.sub(r"[^A-Za-z0-9._-]", "_", image)


def resolve(image: str) -> RootFs:
    """The rootfs named by `image`, or SandboxError saying how to make it."""
    folder = folder_for(image)
    root = folder / "rootfs" if (folder / "rootfs").is_dir() else folder
    if not (root / "usr").is_dir():
        how = f"bash {EXPORT} {image}" if not os.path.isabs(image) else f"bash {EXPORT} <docker image> {image}"
        raise SandboxError(
            f"No root filesystem for sandbox image '{image}' at {root} (the unshare backend runs sandboxes "
            f"from an exported image); make it with: {how}"
        )
    if any(c in str(root.resolve()) for c in ",:"):  # overlayfs options separate layers with them
        raise SandboxError(
            f"The root filesystem's path {root.resolve()} holds ',' or ':'; move it (overlayfs cannot take it)."
        )
    env = {"PATH": DEFAULT_PATH}
    try:
        config = json.loads((folder / "config.json").read_text()) or {}
        env.update(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    except (OSError, ValueError):
        pass
    return RootFs(root.resolve(), env)


def runtime_dir(rootfs: RootFs) -> Path:
    """The host folder to mount at /.arex, built on first use (one builder at a time)."""
    folder = cache_dir() / "unshare" / "runtime" / source_hash()
    if (folder / "arex-run").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "arex-run").is_file():
            _build(rootfs, folder)
    return folder


def _build(rootfs: RootFs, folder: Path) -> None:
    staging = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    package = resources.files("arex.sandbox")
    for name in FILES:
        (staging / Path(name).name).write_bytes(package.joinpath(name).read_bytes())
    # The staging folder is bound over the rootfs's /tmp in a mount namespace of its own, so the
    # shared rootfs is never written and the bind vanishes with the compiler.
    script = 'mount --bind "$1" "$2/tmp" && exec chroot "$2" gcc -O2 -static -o /tmp/arex-run /tmp/runner.c'
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "arex-build",
        str(staging),
        str(rootfs.path),
    ]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=600, env={"PATH": DEFAULT_PATH, "TMPDIR": "/tmp"}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"Cannot compile the sandbox runner in {rootfs.path}: {exc}") from None
    if done.returncode != 0 or not (staging / "arex-run").is_file():
        raise SandboxError(
            f"The sandbox runner does not compile with {rootfs.path}'s gcc (it needs gcc and static libc): "
            f"{done.stderr[-2000:]}"
        )
    for path in staging.iterdir():
        path.chmod(0o755 if path.name == "arex-run" else 0o644)
    staging.chmod(0o755)
    os.replace(staging, folder)
