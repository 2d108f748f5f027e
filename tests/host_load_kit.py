"""Host load for tests that judge what arex does on a busy machine: other containers busy on every
CPU, weighted far above the sandboxes, as when many rollouts share a host. (Plain host processes
would not do: the kernel shares CPUs between cgroups first, so a container keeps its share however
many processes run outside it.)"""

from __future__ import annotations

import os
import subprocess


class HostLoad:
    """`with HostLoad():` starts the hog containers; leaving removes them (only those)."""

    def __init__(self, containers: int = 2, weight: int = 8192):
        loops = " & ".join(["while :; do :; done"] * (os.cpu_count() or 1))
        self.ids = [
            subprocess.run(
                [
                    "docker",
                    "run",
                    "-d",
                    "--rm",
                    "--network",
                    "none",
                    "--cpu-shares",
                    str(weight),
                    "--label",
                    "arex.test=host-load",
                    "--entrypoint",
                    "sh",
                    "arex-base:latest",
                    "-c",
                    loops,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            for _ in range(containers)
        ]

    def __enter__(self) -> "HostLoad":
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["docker", "rm", "-f", *self.ids], capture_output=True)
