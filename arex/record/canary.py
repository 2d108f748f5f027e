"""Canary strings: a random-looking marker stored in every env's private data.

If a canary shows up in a trajectory, private data (hidden tests, labels, reference solutions)
reached the agent or the feedback. Selection and export refuse to go on: a dataset built on a leak
cannot be trusted, and the fix is in the env or the grader, not in the data.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from arex.errors import ArexError
from arex.hashing import text_sha256
from arex.record.snapshots import iter_files

CANARY_FILE = "private/canary.txt"
PREFIX = "arex-canary-"


class LeakError(ArexError, RuntimeError):
    """A canary string was found where only public data may be: private data reached the agent or
    its feedback. The message names the file, the line and the env; nothing was selected or exported."""

    exit_code = 3


def make_canary(seed: str) -> str:
    """Deterministic per env build (so a rebuild keeps it), unguessable without the private data."""
    return PREFIX + text_sha256(f"arex canary\0{seed}")[:32]


def env_canaries(env_dir: Path) -> list[str]:
    path = Path(env_dir) / CANARY_FILE
    if not path.is_file():
        return []
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) >= 16]


class Canaries:
    """The canaries of a set of envs, searched in one pass per text (thousands of envs, millions of lines)."""

    def __init__(self, by_canary: dict[str, str]):
        self.by_canary = by_canary  # canary → env id
        self._prefixed = all(c.startswith(PREFIX) for c in by_canary)
        self._pattern = re.compile("|".join(map(re.escape, sorted(by_canary)))) if by_canary else None

    @classmethod
    def of_envs(cls, env_dirs) -> Canaries:
        return cls({c: Path(d).name for d in env_dirs for c in env_canaries(d)})

    def __bool__(self) -> bool:
        return self._pattern is not None

    def find(self, text: str) -> str | None:
        """The env id whose canary occurs in `text`, if any."""
        if self._pattern is None or (self._prefixed and PREFIX not in text):
            return None
        match = self._pattern.search(text)
        return self.by_canary[match.group()] if match else None


def _leak(where: str, env_id: str, what: str) -> LeakError:
    return LeakError(
        f"{where}: the private-data canary of env '{env_id}' appears in {what}. "
        "Private data reached the agent or its feedback: fix the env or grader, rebuild, and re-run the rollouts; "
        "nothing was selected or exported."
    )


def scan_file(path: Path, canaries: Canaries) -> None:
    """Raise LeakError naming the file, the line and the env if any canary occurs in it."""
    if not canaries:
        return
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            env_id = canaries.find(line)
            if env_id is not None:
                raise _leak(f"{path}:{number}", env_id, "this trajectory")


def scan_archive(archive: Path, canaries: Canaries, max_member_bytes: int = 8 << 20) -> None:
    """Scan the regular files of a workspace snapshot (what the agent wrote), read from the archive
    without unpacking it. Members over `max_member_bytes` (datasets, models) are skipped to bound
    the time per snapshot; a corrupt archive raises ValueError (SnapshotError)."""
    if not canaries:
        return
    for member, data in iter_files(archive, max_member_bytes):
        env_id = canaries.find(member)
        if env_id is not None:
            raise _leak(f"{archive} (member name {member!r})", env_id, "a file name in this workspace snapshot")
        text = data.decode("utf-8", errors="replace")
        if canaries.find(text) is None:  # one pass over the whole member; lines only to say where
            continue
        for number, line in enumerate(io.StringIO(text, newline=None), 1):
            env_id = canaries.find(line)
            if env_id is not None:
                raise _leak(f"{archive} (member {member!r}, line {number})", env_id, "this workspace snapshot")
