"""Containers that crashed arex processes left behind: found by label, removed on request."""

from __future__ import annotations

import docker
import docker.errors

from arex.record.storage import owner_alive
from arex.sandbox.docker.client import LABEL, OWNER_LABEL, OWNER_START_LABEL, STORE_LABEL, docker_client


def owner_gone(container) -> bool:
    """Is the arex process that made `container` gone (or its pid now another process)?"""
    labels = container.labels or {}
    owner = labels.get(OWNER_LABEL, "")
    start, _, boot = labels.get(OWNER_START_LABEL, "").partition("@")
    return not (owner.isdigit() and owner_alive(int(owner), start or None, boot or None))


def orphans(client: docker.DockerClient, all_owners: bool = False, store: str | None = None) -> list:
    """arex sandbox containers whose owning process is gone (or all of them); with `store`, only
    those of runs on that trajectory store (its absolute path)."""
    filters = {"label": [LABEL] + ([f"{STORE_LABEL}={store}"] if store else [])}
    # ignore_removed: a container removed between the listing and its inspection (a pool closing,
    # another run's sandbox ending) is gone, which is what we want, not an error.
    return [
        c for c in client.containers.list(all=True, filters=filters, ignore_removed=True) if all_owners or owner_gone(c)
    ]


def prune(all_owners: bool = False, store: str | None = None) -> list[str]:
    """Remove arex sandbox containers left by crashed processes (or all of them); with `store`, only
    those of runs on that trajectory store. Returns their names."""
    removed = []
    for container in orphans(docker_client(), all_owners, store):
        try:
            container.remove(force=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: its removal is already under way
                raise
    return removed
