"""PNG copies of the report's curves (`curves/<env>.png`), for slides and papers: the same numbers
as the page's SVG charts, drawn by matplotlib."""

from __future__ import annotations

import re
from pathlib import Path

from arex.report.stats import Report

CURVES = "curves"


def png_name(env: str) -> str:
    """A file name for `env` that is safe on every filesystem."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", env) + ".png"


def write_pngs(report: Report, out: Path) -> list[Path]:
    """One figure per env: best held-out so far (mean ± spread) and the fraction still improving,
    one line per variant."""
    import matplotlib

    matplotlib.use("Agg")  # no display; chosen before pyplot is imported
    import matplotlib.pyplot as plt

    (out / CURVES).mkdir(parents=True, exist_ok=True)
    written = []
    for env in report.envs:
        fig, (best_ax, still_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
        for variant in report.variants:
            for stats in (e for e in variant.envs if e.env == env and e.best_curve):
                xs = [p.round for p in stats.best_curve]
                means = [p.mean for p in stats.best_curve]
                best_ax.plot(xs, means, marker="o", label=variant.name)
                best_ax.fill_between(
                    xs,
                    [m - p.spread for m, p in zip(means, stats.best_curve)],
                    [m + p.spread for m, p in zip(means, stats.best_curve)],
                    alpha=0.15,
                )
                still_ax.plot(xs, stats.improving[: len(xs)], marker="o", label=variant.name)
        best_ax.set(title=f"{env}: best held-out so far", xlabel="round", ylabel="best held-out score")
        still_ax.set(title=f"{env}: rollouts still improving", xlabel="round", ylabel="fraction", ylim=(0, 1.05))
        best_ax.legend(fontsize="small")
        fig.tight_layout()
        path = out / CURVES / png_name(env)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
