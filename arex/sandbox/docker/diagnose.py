"""What `arex doctor` checks of the Docker backend: the engine, the image, the engine's disk, and
containers crashed runs left."""

from __future__ import annotations

import shutil
from pathlib import Path

import docker
import docker.errors

from arex.sandbox.base import Finding, SandboxError
from arex.sandbox.docker.client import STORE_LABEL, docker_client
from arex.sandbox.docker.leftovers import orphans

ENGINE_ROOT = Path("/var/lib/docker")
MIN_FREE_GIB = 5.0


def diagnose(image: str) -> list[Finding]:
    engine, client = check_engine()
    return [engine, check_base_image(client, image), check_engine_disk(), check_leftovers(client)]


def check_engine() -> tuple[Finding, docker.DockerClient | None]:
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        fix = "apt-get install -y docker.io && bash scripts/setup.sh"
        return Finding("docker engine", False, "Docker is not installed.", fix), None
    try:
        client = docker_client()
    except SandboxError:
        detail = "No Docker engine answers on this machine (the daemon is stopped)."
        fix = (
            "nohup dockerd --bridge=none --iptables=false >/var/log/arex-dockerd.log 2>&1 &"
            "   (or: bash scripts/setup.sh)"
        )
        return Finding("docker engine", False, detail, fix), None
    version = client.version().get("Version", "?")
    return Finding("docker engine", True, f"Docker {version} answers"), client


def check_base_image(client: docker.DockerClient | None, image: str) -> Finding:
    if client is None:
        return Finding(
            "base image", False, f"cannot check '{image}' without an engine", "start the engine first (see above)"
        )
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        return Finding("base image", False, f"image '{image}' is missing", "bash scripts/build_base_image.sh")
    size_mb = found.attrs.get("Size", 0) / 1e6
    return Finding("base image", True, f"{image} present ({size_mb:.0f} MB)")


def check_engine_disk() -> Finding:
    if not ENGINE_ROOT.exists():
        return Finding("engine disk space", True, f"{ENGINE_ROOT} not on this machine")
    free = shutil.disk_usage(ENGINE_ROOT).free / 2**30
    if free < MIN_FREE_GIB:
        detail = f"only {free:.1f} GiB free on {ENGINE_ROOT} (need {MIN_FREE_GIB:.0f})"
        return Finding("engine disk space", False, detail, "arex sandbox prune --all && docker image prune -f")
    return Finding("engine disk space", True, f"{free:.0f} GiB free on {ENGINE_ROOT}")


def check_leftovers(client: docker.DockerClient | None) -> Finding:
    if client is None:
        return Finding("leftover sandboxes", True, "not checked (no engine)")
    left = orphans(client)
    if not left:
        return Finding("leftover sandboxes", True, "none")
    stores = sorted({c.labels.get(STORE_LABEL) for c in left if c.labels.get(STORE_LABEL)})
    detail = f"{len(left)} container(s) left by crashed arex runs"
    if stores:  # a re-run of `arex rollout` on its store removes these by itself
        detail += f" (stores: {', '.join(stores)})"
    return Finding("leftover sandboxes", False, detail, "arex sandbox prune")
