"""What the host keeps of each running unshare sandbox, so one left by a killed arex process can
be found and removed: a folder per sandbox under the cache (`unshare/boxes/<id>/`) holding
`state.json` (the owner's pid, start tick and boot id, its store, the shim's and PID 1's host pids
with their start ticks, the cgroups), the generated /etc files and the overlay's mount point.
The same facts Docker's sandboxes keep in their labels (arex/sandbox/docker).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from arex.hashing import cache_dir
from arex.record.storage import STORE_ENV, boot_id, owner_alive, proc_start
from arex.sandbox.unshare.cgroups import Cgroups


def boxes_dir() -> Path:
    return cache_dir() / "unshare" / "boxes"


def owner_fields() -> dict[str, str]:
    """Who owns a new sandbox: this process (pid, start tick, boot id) and its store, if any."""
    return {
        "owner_pid": str(os.getpid()),
        "owner_start": f"{proc_start(os.getpid()) or ''}@{boot_id() or ''}",
        "store": os.environ.get(STORE_ENV, ""),
    }


def write(folder: Path, record: dict) -> None:
    staging = folder / "state.json.tmp"
    staging.write_text(json.dumps(record))
    os.replace(staging, folder / "state.json")  # a reader sees a whole record or none


def read(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return None


def owner_gone(record: dict) -> bool:
    owner = record.get("owner_pid", "")
    start, _, boot = record.get("owner_start", "").partition("@")
    return not (owner.isdigit() and owner_alive(int(owner), start or None, boot or None))


def kill_recorded(record: dict) -> None:
    """SIGKILL the sandbox's PID 1 (the kernel then kills its whole namespace) and its shim, each
    only if its pid still names the process recorded (same start tick), never a reused pid."""
    for key in ("init", "shim"):
        pid, start = record.get(f"{key}_pid"), record.get(f"{key}_start")
        if pid and start and proc_start(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def remove(folder: Path, record: dict | None) -> bool:
    """Kill what is left of a sandbox and remove its cgroups and folder; False if a process of
    it would not die (the folder is then kept for a later try)."""
    if record is not None:
        kill_recorded(record)
        groups = Cgroups(record.get("cgroups", []), record.get("cgroup_version", 1))
        if not groups.kill_all():
            return False
        groups.remove()
    shutil.rmtree(folder, ignore_errors=True)
    return True


def cleanup(store: str | None = None, all_owners: bool = False) -> list[str]:
    """Remove the unshare sandboxes whose owning process is gone (or all of them); with `store`,
    only those of runs on that trajectory store. Returns their ids."""
    removed = []
    root = boxes_dir()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        record = read(folder)
        if record is None and not all_owners:
            continue  # being created right now (its record is written first thing), or unknown
        if record is not None and store and record.get("store") != store:
            continue
        if record is not None and not (all_owners or owner_gone(record)):
            continue
        if remove(folder, record):
            removed.append(folder.name)
    return removed
