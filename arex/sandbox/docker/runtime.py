"""The sandbox runtime (arex.sandbox.runtime) for Docker: the runner compiled in a throwaway
container of the base image, which has a compiler."""

from __future__ import annotations

import functools
from pathlib import Path

import docker
import docker.errors

from arex.sandbox import runtime
from arex.sandbox.base import SandboxError
from arex.sandbox.docker.client import labels

BUILDER_IMAGE = "arex-base:latest"


def runtime_dir(client: docker.DockerClient) -> Path:
    """The host folder to mount at /.arex (built once per source hash)."""
    return runtime.runtime_dir(functools.partial(_compile, client))


def _compile(client: docker.DockerClient, folder: Path) -> None:
    command = ["gcc", "-O2", "-static", "-o", f"/out/{runtime.RUNNER}", "/out/runner.c"]
    try:
        client.containers.run(
            BUILDER_IMAGE,
            command,
            volumes={str(folder): {"bind": "/out", "mode": "rw"}},
            network_disabled=True,
            remove=True,
            labels=labels("runner-compile"),  # a killed process's container is found and removed by owner
        )
    except docker.errors.ImageNotFound:
        raise SandboxError(
            f"The base image '{BUILDER_IMAGE}' is missing (it compiles the sandbox runner); "
            "build it with: bash scripts/build_base_image.sh"
        ) from None
    except docker.errors.ContainerError as exc:
        raise SandboxError(
            f"The sandbox runner does not compile: {exc.stderr.decode(errors='replace')[-2000:]}"
        ) from None
