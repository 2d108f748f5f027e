"""Draft every bundled ML env from its repository alone: how many are accepted, how fast, and what
the leak scan costs with the dependency image's index against reading every file (the old scan).

Run: python bench/draft_env.py [--no-baseline]
Each of envs/ml-* is copied into a fresh git repository without its arex.yaml, then
`draft_env` with the heuristic drafter (budget 3) drafts, builds and revises it, into a fresh
output folder and a fresh arex cache. Docker images (dependencies, env images) are reused when
they exist, and so is the leak index of a dependency image (kept in the user's arex cache, like
the images; an index this run builds is reported apart): the figure is the drafting and gating,
not pip installs. The baseline: each accepted env's last leak scan run again reading every file
of its image, in the same run; its draft time is the draft's with that scan's time in place of the
indexed one. The machine may be busy: compare CPU-seconds and ratios.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import git

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arex.drafting.heuristic import HeuristicDrafter  # noqa: E402
from arex.drafting.run import draft_env  # noqa: E402
from arex.envs.leak_probe import SCAN_LOG, run_scan  # noqa: E402
from arex.hashing import cache_dir  # noqa: E402
from arex.sandbox import make_sandbox  # noqa: E402


def repo_without_spec(env: Path, dest: Path) -> Path:
    """The env's files, less arex.yaml, committed to a new git repository."""
    shutil.copytree(env, dest, ignore=shutil.ignore_patterns("arex.yaml"))
    repo = git.Repo.init(dest)
    repo.git.add("-A")
    repo.git.commit(
        "-m",
        "bench",
        author="bench <bench@example.com>",
        env={"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"},
    )
    return dest


def full_scan(entry: dict) -> dict:
    """The old scan (every file of the image) of a scan the draft ran: the same image, sandbox and probe."""
    with make_sandbox(entry["config"], "bench-full-scan") as box:
        report = run_scan(box, entry["probe"], full=True)
    return {"cpu": report.cpu_seconds, "seconds": report.seconds, "files": report.files, "leaks": len(report.leaks)}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def draft_one(env: Path, tmp: Path, drafter: HeuristicDrafter, baseline: bool) -> dict:
    repo = repo_without_spec(env, tmp / "repos" / env.name)
    SCAN_LOG.clear()
    started, cpu = time.monotonic(), children_cpu()
    result = draft_env(str(repo), tmp / "drafts", tmp / "built", drafter, budget=3)
    row = {
        "name": env.name,
        "seconds": time.monotonic() - started,
        "host_cpu": children_cpu() - cpu,
        "accepted": result.accepted,
        "attempts": len(result.attempts),
        "reason": result.attempts[-1].reason if result.attempts else result.stopped,
    }
    scans = [e for e in SCAN_LOG if "probe" in e]
    row["index_built"] = [e for e in SCAN_LOG if "index_built" in e]
    row["scan_cpu"] = sum(e["cpu_seconds"] for e in scans)
    row["scan_seconds"] = sum(e["seconds"] for e in scans)
    row["scans"] = len(scans)
    row["read"] = scans[-1]["files"] if scans else 0
    row["full"] = full_scan(scans[-1]) if baseline and scans and result.accepted else None
    return row


def main() -> None:
    baseline = "--no-baseline" not in sys.argv[1:]
    envs = sorted(p for p in (ROOT / "envs").iterdir() if p.is_dir() and p.name.startswith("ml-"))
    persistent = cache_dir() / "leak-index"
    persistent.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="arex-bench-draft-") as tmp:
        os.environ["AREX_CACHE"] = str(Path(tmp) / "cache")
        (Path(tmp) / "cache").mkdir()
        (Path(tmp) / "cache" / "leak-index").symlink_to(persistent)  # the index outlives the run, as images do
        drafter = HeuristicDrafter()
        for env in envs:
            rows.append(draft_one(env, Path(tmp), drafter, baseline))
    report(rows)


def report(rows: list[dict]) -> None:
    print(
        f"{'repository':20} {'seconds':>8} {'accepted':>8} {'tries':>5} {'scans':>5} {'scan cpu':>9} {'read':>6}"
        f" {'full cpu':>9} {'full read':>9} {'full s':>7}  last reason"
    )
    for r in rows:
        full = r["full"] or {}
        print(
            f"{r['name']:20} {r['seconds']:8.1f} {'yes' if r['accepted'] else 'no':>8} {r['attempts']:5d}"
            f" {r['scans']:5d} {r['scan_cpu']:9.1f} {r['read']:6d} {full.get('cpu', float('nan')):9.1f}"
            f" {full.get('files', 0):9d} {full.get('seconds', float('nan')):7.1f}  {(r['reason'] or '-')[:80]}"
        )
    for r in rows:
        for built in r["index_built"]:
            print(f"index of {built['index_built'][:19]} built during {r['name']} (a one-off per dependency image)")
    n = max(1, len(rows))
    total = sum(r["seconds"] for r in rows)
    scan_cpu = sum(r["scan_cpu"] for r in rows)
    compared = [r for r in rows if r["full"]]
    line = (
        f"drafted={len(rows)} accepted={sum(r['accepted'] for r in rows)} seconds_per_env={total / n:.1f}"
        f" leak_scan_cpu_s_per_env={scan_cpu / n:.1f}"
    )
    if compared:
        # the old draft: the same run with the full scan's time in place of the indexed scan's (last scan)
        old = sum(r["seconds"] - r["scan_seconds"] / r["scans"] + r["full"]["seconds"] for r in compared)
        new = sum(r["seconds"] for r in compared)
        full_cpu = sum(r["full"]["cpu"] for r in compared) / len(compared)
        indexed_cpu = sum(r["scan_cpu"] / r["scans"] for r in compared) / len(compared)
        line += (
            f" full_scan_cpu_s_per_env={full_cpu:.1f} scan_cpu_ratio={indexed_cpu / max(full_cpu, 1e-9):.3f}"
            f" draft_seconds_ratio={new / max(old, 1e-9):.3f}"
        )
    print(line)


if __name__ == "__main__":
    main()
