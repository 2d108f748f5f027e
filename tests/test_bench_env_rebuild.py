"""bench/env_rebuild.py deletes only the images it made (issue 31, "Nothing left behind"): it used
to force-remove every image labelled as an arex env or dependency image on the engine, including
those of other runs. Now it builds FROM a base image of its own and deletes exactly the images
carrying its run's label."""

from __future__ import annotations

import importlib.util
import tempfile
import uuid
from pathlib import Path

import docker
import pytest
from repo_paths import REPO

pytestmark = pytest.mark.docker


def _bench():
    spec = importlib.util.spec_from_file_location("env_rebuild", REPO / "bench" / "env_rebuild.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(client, parent: str, tag: str, labels: str) -> None:
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "Dockerfile").write_text(f"FROM {parent}\nLABEL {labels}\n")
        client.images.build(path=context, tag=tag, rm=True, pull=False)


def _exists(client, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def test_the_env_rebuild_bench_deletes_only_the_images_it_made():
    client = docker.from_env()
    other = f"arex-test-other-run:{uuid.uuid4().hex[:8]}"  # another run's env image, beside the bench
    _build(client, "arex-base:latest", other, "arex.managed=1 arex.kind=env arex.env=other")
    try:
        run = _bench().BenchImages()
        with run as base:
            made = f"arex-test-bench-deps:{uuid.uuid4().hex[:8]}"  # as a dependency image is: FROM the base
            _build(client, base, made, "arex.managed=1 arex.kind=deps")
            assert {i.id for i in run.mine()} == {client.images.get(base).id, client.images.get(made).id}
        assert not _exists(client, base) and not _exists(client, made) and run.removed == 2
        assert _exists(client, other)
    finally:
        if _exists(client, other):
            client.images.remove(other, force=True)
