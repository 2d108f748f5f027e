"""Image operations (arex.sandbox.images.Images) on the Docker engine."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import BinaryIO

import docker.errors
import requests.exceptions

from arex.sandbox.base import SandboxError
from arex.sandbox.docker.client import build_log_tail, docker_client, labels
from arex.sandbox.images import ImageBuildFailed, Images


class DockerImages(Images):
    def id(self, name: str) -> str | None:
        try:
            return docker_client().images.get(name).id
        except docker.errors.ImageNotFound:
            return None

    def user(self, name: str) -> str:
        return docker_client().images.get(name).attrs.get("Config", {}).get("User") or ""

    def built_on(self, name: str, kinds: tuple[str, ...]) -> str | None:
        client = docker_client()
        try:
            layers = client.images.get(name).attrs["RootFS"]["Layers"]
        except (docker.errors.ImageNotFound, KeyError):
            return None
        best: tuple[int, str] | None = None
        for image in client.images.list(filters={"label": "arex.managed=1"}):
            own = image.attrs.get("RootFS", {}).get("Layers", [])
            if image.labels.get("arex.kind") in kinds and len(own) < len(layers) and layers[: len(own)] == own:
                if best is None or len(own) > best[0]:
                    best = (len(own), image.id)
        return best[1] if best else None

    def build(
        self, context: Path, tag: str, *, network: bool, labels: dict[str, str], buildargs: dict[str, str] | None = None
    ) -> None:
        try:
            docker_client().images.build(
                path=str(context),
                tag=tag,
                network_mode="host" if network else "none",
                rm=True,
                forcerm=True,
                pull=False,
                labels=labels,
                buildargs=buildargs or {},
            )
        except docker.errors.BuildError as exc:
            raise ImageBuildFailed(exc.msg, build_log_tail(exc, 1500)) from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"image build of '{tag}' failed in the engine: {exc.explanation or exc}") from None

    def run(
        self,
        image: str,
        command: list[str],
        *,
        files: dict[str, bytes],
        env: dict[str, str],
        timeout: float,
        name: str = "run-once",
    ) -> tuple[int, str, str]:
        client = docker_client()
        try:
            container = client.containers.create(
                image,
                command,
                network_mode="host",
                environment=env,
                user="0",
                working_dir="/",
                labels=labels(name),
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"a container of {image} could not start: {exc.explanation or exc}") from None
        try:
            container.put_archive("/", _tar(files))
            container.start()
            code = container.wait(timeout=timeout).get("StatusCode", 1)
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
            return code, out, err
        except requests.exceptions.RequestException:
            raise TimeoutError(f"a command in a container of {image} did not finish within {timeout:.0f} s") from None
        finally:
            container.remove(force=True)

    def save(self, name: str, dest: BinaryIO) -> None:
        for chunk in docker_client().images.get(name).save(named=True):
            dest.write(chunk)

    def load(self, source: BinaryIO) -> None:
        docker_client().images.load(source)


def _tar(files: dict[str, bytes]) -> bytes:
    """An archive of `files` by absolute path, to put at the root (the engine makes missing parent
    folders; existing ones, e.g. /tmp, keep their mode)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
