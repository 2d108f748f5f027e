"""The Docker backend: the only place arex imports the docker SDK.

`sandbox.py` is the sandbox (a container and the command server in it); `client.py` the engine
client and the labels every container carries; `runtime.py` compiles the runner; `images.py`
builds and moves images; `leftovers.py` finds and removes what crashed runs left; `diagnose.py`
is what `arex doctor` checks.
"""

from arex.sandbox.docker.client import (
    LABEL,
    OWNER_LABEL,
    OWNER_START_LABEL,
    STORE_LABEL,
    build_log_tail,
    docker_client,
    labels,
    sandbox_client,
)
from arex.sandbox.docker.leftovers import orphans, owner_gone, prune
from arex.sandbox.docker.sandbox import DockerSandbox

__all__ = [
    "LABEL",
    "OWNER_LABEL",
    "OWNER_START_LABEL",
    "STORE_LABEL",
    "DockerSandbox",
    "build_log_tail",
    "docker_client",
    "labels",
    "orphans",
    "owner_gone",
    "prune",
    "sandbox_client",
]
