"""Build every bundled env from scratch, then again unchanged; the second build must be a fraction.

Run: python bench/env_rebuild.py
"From scratch" = a fresh output folder, a fresh arex cache, and a base image of this run's own (the
base image plus a label naming the run): every dependency, env and docs image is built FROM it,
so none is one an earlier run made (the first build installs the requirements again), and all of
them carry the run's label. At the end the run deletes exactly the images with its label, and no
other: not the images of earlier runs, nor those of a run beside it. The baseline is the first
build itself: the figure is how much of it an unchanged re-run redoes.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from arex.envs.build import build_envs  # noqa: E402
from arex.sandbox import SandboxConfig  # noqa: E402
from arex.sandbox.docker import docker_client  # noqa: E402

RUN_LABEL = "arex.bench-run"


class BenchImages:
    """`with BenchImages() as base:` a base image of this run's own (`base`: its tag); on exit, the
    images carrying the run's label (that base, and every image built FROM it) are deleted."""

    def __init__(self, base: str = "arex-base:latest"):
        self.parent = base
        self.run = f"env-rebuild-{uuid.uuid4().hex[:12]}"
        self.tag = f"arex-bench-base:{self.run}"
        self.client = docker_client()

    def __enter__(self) -> str:
        with tempfile.TemporaryDirectory(prefix="arex-bench-base-") as context:
            (Path(context) / "Dockerfile").write_text(f"FROM {self.parent}\nLABEL {RUN_LABEL}={self.run}\n")
            self.client.images.build(path=context, tag=self.tag, rm=True, forcerm=True, pull=False)
        return self.tag

    def mine(self) -> list:
        return self.client.images.list(all=True, filters={"label": f"{RUN_LABEL}={self.run}"})

    def __exit__(self, *exc) -> None:
        self.removed = 0
        # children before their parents: the newest first, then again for any left behind
        for _ in range(3):
            images = sorted(self.mine(), key=lambda i: i.attrs.get("Created", ""), reverse=True)
            if not images:
                return
            for image in images:
                try:
                    self.client.images.remove(image.id, force=True)
                    self.removed += 1
                except docker.errors.APIError:  # a child still there, or gone with a sibling tag
                    pass


def main() -> None:
    sources = sorted(p for p in (ROOT / "envs").iterdir() if p.is_dir())
    with tempfile.TemporaryDirectory(prefix="arex-bench-") as tmp:
        os.environ["AREX_CACHE"] = str(Path(tmp) / "cache")
        out = Path(tmp) / "envs"
        run = BenchImages()
        with run as base:
            sandbox = SandboxConfig(image=base)
            t0 = time.monotonic()
            first = build_envs(sources, out, sandbox, concurrency=2)
            first_s = time.monotonic() - t0
            t0 = time.monotonic()
            second = build_envs(sources, out, sandbox, concurrency=2)
            second_s = time.monotonic() - t0
    print(f"built FROM {base} (this run's own); deleted the {run.removed} image(s) this run made, no other")
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
