"""Draft every bundled ML env from its repository alone: how many are accepted, and how fast.

Run: python bench/draft_env.py
Each of envs/ml-* is copied into a fresh git repository without its arex.yaml, then
`draft_env` with the heuristic drafter (budget 3) drafts, builds and revises it, into a fresh
output folder and a fresh arex cache. Docker images (dependencies, env images) are reused when
they exist: the figure is the drafting and gating, not pip installs.
"""

from __future__ import annotations

import os
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


def main() -> None:
    envs = sorted(p for p in (ROOT / "envs").iterdir() if p.is_dir() and p.name.startswith("ml-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="arex-bench-draft-") as tmp:
        os.environ["AREX_CACHE"] = str(Path(tmp) / "cache")
        drafter = HeuristicDrafter()
        for env in envs:
            repo = repo_without_spec(env, Path(tmp) / "repos" / env.name)
            started = time.monotonic()
            result = draft_env(str(repo), Path(tmp) / "drafts", Path(tmp) / "built", drafter, budget=3)
            rows.append(
                (
                    env.name,
                    time.monotonic() - started,
                    result.accepted,
                    len(result.attempts),
                    result.attempts[-1].reason if result.attempts else result.stopped,
                )
            )
    print(f"{'repository':22} {'seconds':>8} {'accepted':>9} {'attempts':>9}  last reason")
    for name, seconds, accepted, attempts, reason in rows:
        print(f"{name:22} {seconds:8.1f} {'yes' if accepted else 'no':>9} {attempts:9d}  {(reason or '-')[:100]}")
    total = sum(r[1] for r in rows)
    print(f"drafted={len(rows)} accepted={sum(r[2] for r in rows)} seconds_per_env={total / max(1, len(rows)):.1f}")


if __name__ == "__main__":
    main()
