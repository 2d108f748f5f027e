"""What a killed `arex build-envs` leaves behind, and who removes it (issue 31, "Nothing left
behind"): its containers and its staging folder in `--out` stay after a SIGKILL; the next
build into the same `--out` removes them, and only them (not a live build's staging folder, not
a folder arex did not name)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from polling import deadline_poll
from repo_paths import REPO

from arex.envs.build import build_envs
from arex.envs.staging import staging
from arex.sandbox import SandboxConfig

pytestmark = pytest.mark.docker


def _containers(client, pid: int) -> list:
    # ignore_removed: a container the build removes between the listing and its inspection is gone
    return client.containers.list(all=True, filters={"label": [f"arex.owner_pid={pid}"]}, ignore_removed=True)


def _staging_folders(out: Path) -> list[str]:
    """The folders the env pair-sums is built in before it is moved into place."""
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".pair-sums-")) if out.is_dir() else []


def test_the_next_build_removes_what_a_killed_build_left(tmp_path):
    client = docker.from_env()
    out = tmp_path / "envs"
    child = subprocess.Popen(
        [sys.executable, "-m", "arex.cli", "build-envs", str(REPO / "envs" / "judge-pair-sums"), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # killed once it has a container of its own (the gates run) and its staging folder
        deadline_poll(lambda: _containers(client, child.pid) and _staging_folders(out), 600, "the build's gates")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(60)
        left = [c.name for c in _containers(client, child.pid)]
        staged = _staging_folders(out)
        assert left and staged  # a SIGKILL leaves them: what the next build must remove
        (out / ".mine").mkdir()  # a folder arex did not make
        with staging(out, "beside") as live:  # a build still running (this process) into the same --out
            reports = build_envs([tmp_path / "missing"], out, SandboxConfig())  # the next build: quick
            assert live.is_dir()
        assert [r.status for r in reports] == ["rejected"]
        assert _containers(client, child.pid) == [] and _staging_folders(out) == []
        assert (out / ".mine").is_dir()
    finally:
        if child.poll() is None:
            child.kill()
        for container in _containers(client, child.pid):  # ours only, by owner pid
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
