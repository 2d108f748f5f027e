"""PNG copies of the report's curves (`curves/<env>.png`), for slides and papers: the same numbers
as the page's SVG charts, drawn by matplotlib."""

from __future__ import annotations

import re
from pathlib import Path

from arex.report.stats import Report

CURVES = "curves"
SCALING = "test-time-scaling.png"
"""The headline figure's file (an env named so would be `test-time-scaling_.png`: see png_name)."""


def png_name(env: str) -> str:
    """A file name for `env` that is safe on every filesystem."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", env) + ".png"
    return name if name != SCALING else name[:-4] + "_.png"


def _scaling_png(report: Report, path: Path, plt) -> Path:
    """The test-time scaling curve: normalised best so far by round, 95% band, one line per variant."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for variant in (v for v in report.variants if v.scaling):
        xs = [p.round for p in variant.scaling]
        means = [p.mean for p in variant.scaling]
        ax.plot(xs, means, marker="o", label=variant.name)
        ax.fill_between(xs, [m - p.ci for m, p in zip(means, variant.scaling)],
                        [m + p.ci for m, p in zip(means, variant.scaling)], alpha=0.2)  # fmt: skip
    ax.set(title="test-time scaling", xlabel="round", ylabel="normalised best held-out so far")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_pngs(report: Report, out: Path) -> list[Path]:
    """One figure per env: best held-out so far (mean ± spread) and the fraction still improving,
    one line per variant."""
    import matplotlib

    matplotlib.use("Agg")  # no display; chosen before pyplot is imported
    import matplotlib.pyplot as plt

    (out / CURVES).mkdir(parents=True, exist_ok=True)
    written = [_scaling_png(report, out / CURVES / SCALING, plt)] if any(v.scaling for v in report.variants) else []
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
        if best_ax.get_legend_handles_labels()[0]:  # an env with no graded round has no line
            best_ax.legend(fontsize="small")
        fig.tight_layout()
        path = out / CURVES / png_name(env)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
