"""Shared by the rollout benchmarks: a tiny, quickly graded judge env built from scratch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arex.envs.build import build_envs  # noqa: E402
from arex.envs.runtime import Env, load_env  # noqa: E402

SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"


def tiny_env(root: Path) -> Env:
    """'sum-two' in arex's own format (Python, three tests), built and validated."""
    src = root / "src" / "sum-two"
    (src / "private" / "tests").mkdir(parents=True, exist_ok=True)
    (src / "solutions").mkdir(exist_ok=True)
    (src / "workspace").mkdir(exist_ok=True)
    (src / "task.yaml").write_text(
        "id: sum-two\ntitle: Sum of two\ntime_limit_s: 1.0\nstarter: solution.py\n"
        "solutions:\n  - {path: solutions/ok.py, expected: accepted}\n"
    )
    (src / "statement.md").write_text("Read two integers a and b; print a + b.\n")
    (src / "solutions" / "ok.py").write_text(SOLUTION)
    (src / "workspace" / "solution.py").write_text("print(0)\n")
    for name, (a, b) in {"sample-1": (1, 2), "main-1": (3, 4), "main-2": (10, -5)}.items():
        (src / "private" / "tests" / f"{name}.in").write_text(f"{a} {b}\n")
        (src / "private" / "tests" / f"{name}.ans").write_text(f"{a + b}\n")
    [report] = build_envs([src], root / "envs")
    if report.status not in ("accepted", "skipped"):
        raise SystemExit(f"bench env did not build: {report.reason}")
    return load_env(root / "envs" / "sum-two")


def proc_cpu(pid: int, children: bool = True) -> float:
    """CPU seconds (user + system) of a process now, its reaped children's too unless `children`
    is False; 0 once it is gone. `/proc/<pid>/stat`, read past the command name (which may hold spaces)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cgroup_cpu(container_id: str) -> float | None:
    """CPU seconds of a container's cgroup (v1 cpuacct or v2 cpu.stat); None if neither is found."""
    for path in (
        f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat",
    ):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        return int(text) / 1e9 if path.endswith("usage") else int(text.split()[1]) / 1e6
    return None
