"""What killed arex runs leave in a sandbox backend, found by the folder they were writing to.

While a run works on a folder (a rollout's trajectory store, the `--out` of `build-envs` or
`select`), `$AREX_STORE` holds that folder's absolute path and every sandbox it starts carries it
as a label (arex.sandbox.docker.client.labels). The next run on the same folder removes the
sandboxes of runs on it whose process is gone (`Sandbox.cleanup`, by owner: never a live run's,
never anything arex did not start); `arex sandbox prune` removes those of every folder.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from arex.record.storage import STORE_ENV
from arex.sandbox import SandboxError, backend_class

log = logging.getLogger(__name__)


class FolderLabel:
    """`AREX_STORE` set to `folder` (absolute) for the block; the previous value back after."""

    def __init__(self, folder: Path):
        self.value = str(Path(folder).resolve())

    def __enter__(self) -> None:
        self.before = os.environ.get(STORE_ENV)
        os.environ[STORE_ENV] = self.value

    def __exit__(self, *exc) -> None:
        if self.before is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = self.before


def remove_leftovers(folder: Path, backend: str, notify: Callable[[str], None] | None = None) -> list[str]:
    """Remove the sandboxes that killed runs on `folder` left (their owners are gone); their names."""
    try:
        removed = backend_class(backend).cleanup(store=str(Path(folder).resolve()))
    except SandboxError:
        return []  # no engine: the first sandbox start says how to fix that
    if removed:
        (notify or log.warning)(f"removed {len(removed)} sandbox(es) left by killed runs on {folder}")
    return removed


@contextmanager
def working_on(folder: Path, backend: str, notify: Callable[[str], None] | None = None) -> Iterator[None]:
    """For a run writing to `folder`: what killed runs on it left is removed first, and the
    sandboxes started in the block carry its label."""
    remove_leftovers(folder, backend, notify)
    with FolderLabel(folder):
        yield
