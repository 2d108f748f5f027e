"""The Docker engine client, the labels every arex container carries, and build-log helpers."""

from __future__ import annotations

import os
import threading

import docker
import docker.errors
import requests.exceptions

from arex.record.storage import STORE_ENV, boot_id, proc_start
from arex.sandbox.base import SandboxError

LABEL = "arex.sandbox"
OWNER_LABEL = "arex.owner_pid"
OWNER_START_LABEL = "arex.owner_start"
"""The owner's start tick and boot id (arex.record.storage.proc_start): a pid reused by another
process is not taken for the owner."""
STORE_LABEL = "arex.store"
"""The folder the owner was writing to ($AREX_STORE: a rollout's trajectory store, the --out of
build-envs or select; arex.sandbox.leftovers): a later run on the same folder removes the
containers a killed run left."""
FIX_ENGINE = "start it with: bash scripts/setup.sh (or: nohup dockerd --bridge=none --iptables=false &)"


def build_log_tail(exc, limit: int) -> str:
    """The last `limit` characters of a failed image build's log (a docker BuildError), for the
    one error that names what failed."""
    lines = [str(chunk.get("stream") or chunk.get("error") or "").rstrip() for chunk in exc.build_log]
    return "\n".join(line for line in lines if line)[-limit:]


def docker_client(pool: int = 10) -> docker.DockerClient:
    """A client for the local engine, or SandboxError saying how to start one."""
    try:
        client = docker.from_env(timeout=120, max_pool_size=pool)
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SandboxError(f"Docker engine is not reachable ({exc.__class__.__name__}); {FIX_ENGINE}") from None


_shared_client: tuple[int, docker.DockerClient] | None = None
_shared_lock = threading.Lock()


def sandbox_client() -> docker.DockerClient:
    """One client per process for all sandboxes: a new one costs a connection and a ping each.
    Its pool is large because every running sandbox may hold a connection at once."""
    global _shared_client
    with _shared_lock:
        if _shared_client is None or _shared_client[0] != os.getpid():
            _shared_client = (os.getpid(), docker_client(pool=64))
        return _shared_client[1]


def labels(name: str) -> dict[str, str]:
    """Who owns a container: this process (pid, start tick, boot id) and its store, if any."""
    owner = f"{proc_start(os.getpid()) or ''}@{boot_id() or ''}"
    found = {LABEL: "1", OWNER_LABEL: str(os.getpid()), OWNER_START_LABEL: owner, "arex.name": name}
    if os.environ.get(STORE_ENV):
        found[STORE_LABEL] = os.environ[STORE_ENV]
    return found
