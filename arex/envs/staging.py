"""The folders an env is built in, inside `build-envs --out`, before it is moved into place.

A staging folder's name carries its owner (pid and start tick, arex.record.storage.proc_start):
`.<env id>-staging-<pid>-<start>-<random>`. A build that is killed leaves its folder behind; the
next `build-envs` on the same `--out` deletes the folders whose owner is gone, and only those (a
build running beside it keeps its own; nothing arex did not name so is touched).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from arex.record.storage import owner_alive, proc_start

_NAME = re.compile(r"^\.[^/]+-staging-(\d+)-(\d+)-[a-z0-9_]{8}$")


@contextmanager
def staging(out: Path, env_id: str) -> Iterator[Path]:
    """A new folder in `out` to build `env_id` in, deleted at the end of the block (a kill leaves
    it for `remove_stale`)."""
    out.mkdir(parents=True, exist_ok=True)
    owner = f"{os.getpid()}-{proc_start(os.getpid()) or 0}"
    folder = Path(tempfile.mkdtemp(prefix=f".{env_id}-staging-{owner}-", dir=out))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale(out: Path) -> list[str]:
    """Delete the staging folders in `out` whose builds are gone; their names."""
    removed = []
    try:
        entries = list(out.iterdir()) if out.is_dir() else []
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or entry.is_symlink() or not entry.is_dir():
            continue
        pid, start = int(match.group(1)), match.group(2)
        if not owner_alive(pid, None if start == "0" else start):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed
