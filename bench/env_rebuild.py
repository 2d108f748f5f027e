"""Build every bundled env from scratch, then again unchanged; the second build must be a fraction.

Run: python bench/env_rebuild.py
"From scratch" = a fresh output folder, a fresh arex cache, and no arex dependency or env images
(they are removed first, so the first build installs the requirements again). The baseline is the
first build itself: the figure is how much of it an unchanged re-run redoes.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from arex.envs.build import build_envs  # noqa: E402
from arex.sandbox.docker import docker_client  # noqa: E402


def remove_images() -> int:
    client = docker_client()
    removed = 0
    for kind in ("env", "deps"):
        for image in client.images.list(filters={"label": f"arex.kind={kind}"}):
            for tag in image.tags or [image.id]:
                try:
                    client.images.remove(tag, force=True)
                    removed += 1
                except Exception:  # noqa: BLE001 - already gone with a sibling tag
                    pass
    return removed


def main() -> None:
    sources = sorted(p for p in (ROOT / "envs").iterdir() if p.is_dir())
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        os.environ["AREX_CACHE"] = str(Path(tmp) / "cache")
        out = Path(tmp) / "envs"
        removed = remove_images()
        t0 = time.monotonic()
        first = build_envs(sources, out, concurrency=2)
        first_s = time.monotonic() - t0
        t0 = time.monotonic()
        second = build_envs(sources, out, concurrency=2)
        second_s = time.monotonic() - t0
    print(f"removed {removed} arex image tag(s) before the first build")
    print(f"{'env':22} {'first build':>14} {'second build':>14}")
    for a, b in zip(first, second):
        print(
            f"{a.env_id or a.source:22} {a.status + f' {a.seconds:6.1f}s':>14} {b.status + f' {b.seconds:6.2f}s':>14}"
        )
    print(f"{'total':22} {first_s:13.1f}s {second_s:13.2f}s")
    bad = [r.env_id for r in first if r.status != "accepted"] + [r.env_id for r in second if r.status != "skipped"]
    if bad:
        print(f"unexpected statuses: {bad}")
    print(f"first_s={first_s:.2f} second_s={second_s:.3f} ratio={second_s / first_s:.4f}")


if __name__ == "__main__":
    main()
