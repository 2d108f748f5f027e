"""`arex report STORE`: a self-contained HTML run report and one page per trajectory.

Writes into `out/`:
- `report.html`: the stage-wise table (variant × each rollout's best held-out score, per env and
  overall), best-so-far curves and the fraction of rollouts still improving per round (per env,
  one series per variant), tokens and cost per round (cached share, acting and reflection output),
  each variant's cost per round and per kept trajectory, endings, and selection drops when a
  selection folder is given; charts are inline SVG, the page has no script and loads nothing;
- `report.json`: the same numbers (`arex.report.stats.Report`);
- `curves/<env>.png`: the curves as PNG images (`pngs.py`);
- `trajectories/<variant>/<env>/<key>.html`: each trajectory's viewer page (`viewer.py`).

Records are read through `arex.record.trajectory.load` only; every string from them is escaped.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from arex import __version__
from arex.record.storage import write_error
from arex.record.trajectory import Trajectory
from arex.report.page import report_page
from arex.report.pngs import CURVES, write_pngs
from arex.report.stats import (
    Anchors,
    Drop,
    Report,
    SelectionStats,
    TrajectoryRow,
    Unreadable,
    VariantStats,
    anchors_of,
    cost,
    ending_of,
    endings,
    env_stats,
    final,
    scaling,
    score_of,
    scores,
    spend,
)
from arex.report.store import Loaded, load_variant, read_evaluation, read_selections, variants_of
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


def _by_env(trajectories: list[Trajectory]) -> dict[str, list[Trajectory]]:
    by_env: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_env.setdefault(t.header.env_id, []).append(t)
    return by_env


def _verdicts(selections: list[SelectionStats] | None) -> dict[tuple[str | None, str], tuple[str, list[str]]]:
    """(variant, trajectory key) -> ('kept' or 'dropped', drop reasons), from the selections given."""
    out: dict[tuple[str | None, str], tuple[str, list[str]]] = {}
    for s in selections or []:
        for key in s.kept_ids:
            out[(s.variant, key)] = ("kept", [])
        for drop in s.drops:
            for key in drop.ids:
                out[(s.variant, key)] = ("dropped", [*out.get((s.variant, key), ("", []))[1], drop.reason])
    return out


def variant_stats(loaded: Loaded, anchors: dict[str, Anchors], verdicts: dict | None = None) -> VariantStats:
    name = loaded.variant.name
    by_env = _by_env(loaded.trajectories)
    rows = []
    for t in loaded.trajectories:
        verdict = (verdicts or {}).get((name, t.header.key)) or (verdicts or {}).get((None, t.header.key))
        rows.append(
            TrajectoryRow(
                env=t.header.env_id,
                key=t.header.key,
                sample=t.header.sample,
                rounds=len(t.rounds),
                held_out=scores(t),
                best=final(t),
                status=ending_of(t)[0],
                selection=verdict[0] if verdict else "",
                drop_reasons=verdict[1] if verdict else [],
                page=page_path(name, t),
            )
        )
    normalised = [anchors[t.header.env_id].normalise(final(t)) for t in loaded.trajectories if t.rounds]
    judged = any(r.selection for r in rows)  # kept: None unless a selection judged this variant's rollouts
    kept = sum(r.selection == "kept" for r in rows) if judged else None
    return VariantStats(
        name=name,
        overrides=loaded.variant.overrides,
        store=str(loaded.store),
        rollouts=len(loaded.trajectories),
        envs=[env_stats(env, ts, anchors[env]) for env, ts in sorted(by_env.items())],
        overall=score_of([n for n in normalised if n is not None]),
        scaling=scaling(by_env, anchors),
        spend=spend(loaded.trajectories),
        cost=cost(loaded.trajectories, kept),
        endings=endings(loaded.trajectories),
        trajectories=rows,
        unreadable=[Unreadable(path=str(p), reason=r) for p, r in loaded.unreadable],
    )


def build(store: Path, selection: Path | None = None) -> tuple[Report, list[Loaded]]:
    """The report's numbers, and the records they came from."""
    variants = variants_of(store)
    loaded = [load_variant(v, folder) for v, folder in variants]
    selections = None
    if selection is not None:
        selections = [
            SelectionStats(
                path=s.path,
                variant=s.variant,
                total=s.total,
                kept=s.kept,
                kept_ids=_kept_ids(Path(s.path)),
                drops=[
                    Drop(variant=s.variant, reason=r, count=row.get("count", 0), ids=row.get("ids", []))
                    for r, row in sorted(s.drops.items())
                ],
            )
            for s in read_selections(selection, variants)
        ]
    # Each env is normalised once, over every variant's rollouts, so that variants share one scale.
    every = _by_env([t for one in loaded for t in one.trajectories if t.rounds])
    anchors = {t.header.env_id: Anchors() for one in loaded for t in one.trajectories}
    anchors.update({env: anchors_of(ts) for env, ts in every.items()})
    verdicts = _verdicts(selections)
    stats = [variant_stats(one, anchors, verdicts) for one in loaded]
    envs = sorted({e.env for v in stats for e in v.envs})
    report = Report(
        arex_version=__version__,
        store=str(store),
        variants=stats,
        envs=envs,
        selections=selections,
        evaluation=read_evaluation(store),
    )
    return report, loaded


def _kept_ids(path: Path) -> list[str]:
    """The kept trajectory keys of a selection.json (read_selections checked the file)."""
    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("kept_ids", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


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
