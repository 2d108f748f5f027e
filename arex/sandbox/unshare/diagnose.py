"""What `arex doctor` checks for the unshare backend: root, cgroups, the rootfs, leftovers."""

from __future__ import annotations

import os
import shutil

from arex.sandbox.base import Finding, SandboxError
from arex.sandbox.unshare import cgroups, rootfs, state


def diagnose(image: str) -> list[Finding]:
    return [check_privileges(), check_cgroups(), check_rootfs(image), check_leftovers()]


def check_privileges() -> Finding:
    if os.geteuid() != 0:
        return Finding(
            "unshare backend",
            False,
            "it makes namespaces, mounts and cgroups: arex must run as root",
            "run arex as root, or set sandbox.backend: docker",
        )
    missing = [tool for tool in ("unshare", "chroot") if shutil.which(tool) is None]
    if missing:
        return Finding(
            "unshare backend",
            False,
            f"missing {', '.join(missing)} (it compiles the runner)",
            "apt-get install -y util-linux coreutils",
        )
    return Finding("unshare backend", True, "running as root, with unshare and chroot")


def check_cgroups() -> Finding:
    try:
        version = cgroups.version()
    except SandboxError as exc:
        return Finding("cgroups", False, str(exc), "mount the cgroup hierarchy (v1: memory, pids, cpu; or v2)")
    return Finding("cgroups", True, f"cgroup v{version} at {cgroups.ROOT}")


def check_rootfs(image: str) -> Finding:
    try:
        found = rootfs.resolve(image)
    except SandboxError as exc:
        return Finding("root filesystem", False, str(exc), f"bash {rootfs.EXPORT} {image}")
    return Finding("root filesystem", True, f"{image}: {found.path}")


def check_leftovers() -> Finding:
    folder = state.boxes_dir()
    dead = (
        [p.name for p in folder.iterdir() if (r := state.read(p)) is None or state.owner_gone(r)]
        if folder.is_dir()
        else []
    )
    if dead:
        return Finding(
            "leftover sandboxes",
            False,
            f"{len(dead)} sandbox(es) of arex processes that are gone",
            "arex sandbox prune",
        )
    return Finding("leftover sandboxes", True, "none")
