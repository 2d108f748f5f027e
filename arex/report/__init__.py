"""`arex report STORE`: a self-contained HTML run report and one page per trajectory.

Writes into `out/`:
- `report.html`: the stage-wise table (variant × each rollout's best held-out score, per env and
  overall), best-so-far curves and the fraction of rollouts still improving per round (per env,
  one series per variant), tokens and cost per round, endings, and selection drops when a
  selection folder is given; charts are inline SVG, the page has no script and loads nothing;
- `report.json`: the same numbers (`arex.report.stats.Report`);
- `curves/<env>.png`: the curves as PNG images (`pngs.py`);
- `trajectories/<variant>/<env>/<key>.html`: each trajectory's viewer page (`viewer.py`).

Records are read through `arex.record.trajectory.load` only; every string from them is escaped.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from arex import __version__
from arex.record.storage import write_error
from arex.record.trajectory import Trajectory
from arex.report.page import report_page
from arex.report.pngs import CURVES, write_pngs
from arex.report.stats import (
    Drop,
    Report,
    SelectionStats,
    TrajectoryRow,
    Unreadable,
    VariantStats,
    ending_of,
    endings,
    env_stats,
    score_of,
    spend,
)
from arex.report.store import Loaded, load_variant, read_selections, variants_of
from arex.report.viewer import trajectory_page
from arex.summary import Outcome, Summary

PAGES = "trajectories"


@dataclass
class ReportResult:
    report: Report
    html: Path
    json: Path
    pages: list[Path]
    pngs: list[Path]


def page_path(variant: str, t: Trajectory) -> str:
    """The viewer page of `t`, relative to report.html: named after the record's own folder and file."""
    return f"{PAGES}/{variant}/{t.path.parent.name}/{t.path.stem}.html"


def variant_stats(loaded: Loaded) -> VariantStats:
    name = loaded.variant.name
    by_env: dict[str, list[Trajectory]] = {}
    for t in loaded.trajectories:
        by_env.setdefault(t.header.env_id, []).append(t)
    rows = [
        TrajectoryRow(
            env=t.header.env_id,
            key=t.header.key,
            sample=t.header.sample,
            rounds=len(t.rounds),
            held_out=t.held_out,
            best=max(t.held_out) if t.rounds else None,
            status=ending_of(t)[0],
            page=page_path(name, t),
        )
        for t in loaded.trajectories
    ]
    return VariantStats(
        name=name,
        overrides=loaded.variant.overrides,
        store=str(loaded.store),
        rollouts=len(loaded.trajectories),
        envs=[env_stats(env, ts) for env, ts in sorted(by_env.items())],
        overall=score_of([max(t.held_out) for t in loaded.trajectories if t.rounds]),
        spend=spend(loaded.trajectories),
        endings=endings(loaded.trajectories),
        trajectories=rows,
        unreadable=[Unreadable(path=str(p), reason=r) for p, r in loaded.unreadable],
    )


def build(store: Path, selection: Path | None = None) -> tuple[Report, list[Loaded]]:
    """The report's numbers, and the records they came from."""
    variants = variants_of(store)
    loaded = [load_variant(v, folder) for v, folder in variants]
    stats = [variant_stats(one) for one in loaded]
    selections = None
    if selection is not None:
        selections = [
            SelectionStats(
                path=s.path,
                variant=s.variant,
                total=s.total,
                kept=s.kept,
                drops=[
                    Drop(variant=s.variant, reason=r, count=row.get("count", 0), ids=row.get("ids", []))
                    for r, row in sorted(s.drops.items())
                ],
            )
            for s in read_selections(selection, variants)
        ]
    envs = sorted({e.env for v in stats for e in v.envs})
    return Report(arex_version=__version__, store=str(store), variants=stats, envs=envs, selections=selections), loaded


def write_report(store: Path, out: Path, selection: Path | None = None) -> ReportResult:
    """Write report.html, report.json and the trajectory pages into `out` (pages of an earlier
    report there are replaced)."""
    report, loaded = build(store, selection)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if (out / "report.json").is_file() and (out / PAGES).is_dir():
            shutil.rmtree(out / PAGES)  # ours: an earlier report's pages
        pages = []
        for one in loaded:
            for t in one.trajectories:
                path = out / page_path(one.variant.name, t)
                path.parent.mkdir(parents=True, exist_ok=True)
                depth = "../" * (path.relative_to(out).as_posix().count("/"))
                path.write_text(trajectory_page(t, one.variant.name, f"{depth}report.html"), encoding="utf-8")
                pages.append(path)
        (out / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (out / "report.html").write_text(report_page(report), encoding="utf-8")
        pngs = write_pngs(report, out)
    except OSError as exc:
        raise write_error(exc, out) from None
    return ReportResult(report=report, html=out / "report.html", json=out / "report.json", pages=pages, pngs=pngs)


def report_summary(result: ReportResult, seconds: float) -> Summary:
    """`arex report`'s summary (`arex.summary`): one item per variant (rollouts, final score)."""
    items = [
        Outcome(
            id=v.name,
            outcome="written",
            fields={"store": v.store},
            numbers={"rollouts": v.rollouts, "final_mean": v.overall.mean, "final_spread": v.overall.spread},
        )
        for v in result.report.variants
    ]
    unreadable = sum(len(v.unreadable) for v in result.report.variants)
    counts = {"variants": len(items), "trajectories": len(result.pages), "unreadable": unreadable}
    paths = {
        "report": str(result.html),
        "numbers": str(result.json),
        "pages": str(result.html.parent / PAGES),
        "curves": str(result.html.parent / CURVES),
    }
    message = f"report of {len(result.pages)} trajectories in {len(items)} variant(s): {result.html}"
    return Summary(verb="report", message=message, counts=counts, seconds=round(seconds, 2), paths=paths, items=items)
