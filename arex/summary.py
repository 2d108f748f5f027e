"""The summary every long verb ends with (`build-envs`, `rollout`, `select`, `export`, `push`, `report`).

A verb builds one `Summary` (counts, seconds, paths, one `Outcome` per item) and hands it to
`print_summary`: a short table and headline for people, or, with `--json`, the same summary as
one JSON document on stdout and nothing else there (progress goes to stderr), so
`arex rollout ... --json | jq .counts` works. The exit code is the verb's either way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

GOOD = frozenset({"accepted", "skipped", "done", "kept", "written", "uploaded", "finished"})
"""Outcomes shown in green; `BAD` in red; any other in yellow."""
BAD = frozenset({"rejected", "error", "unreadable_record", "infra_failed", "teacher_error"})


class Outcome(BaseModel):
    """One item of a verb's work: a built source, a rollout, a trajectory's verdict, a shard, an uploaded file."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """What the item is: an env id, `env/key`, a shard's path, a file's path in the repo."""
    outcome: str
    """What became of it: accepted, rejected, done, kept, dropped, written, uploaded, ..."""
    detail: str = ""
    """Why, in words (a rejection's reason, a drop's reasons); empty when there is nothing to say."""
    fields: dict[str, str] = Field(default_factory=dict)
    """Other text about it (e.g. the source it was built from, the variant it ran in)."""
    numbers: dict[str, float | int | None] = Field(default_factory=dict)
    """Its figures (scores, rounds, rows, bytes, seconds)."""


class Summary(BaseModel):
    """What a long verb did, the same for people (a table) and for programs (`--json`)."""

    model_config = ConfigDict(extra="forbid")

    verb: str
    """The command: build-envs, rollout, select, export, push, report."""
    ok: bool = True
    """False when the verb exits non-zero for what it found (a rejected source, an unreadable record)."""
    message: str = ""
    """The one-line headline shown to people (e.g. "kept 2 of 3")."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Items by outcome and other totals, e.g. {"rollouts": 4, "finished": 4, "done": 3, "budget": 1}."""
    seconds: float = 0.0
    """Wall-clock time of this run."""
    paths: dict[str, str] = Field(default_factory=dict)
    """What it wrote, by name (store, report, card, ...)."""
    items: list[Outcome] = Field(default_factory=list)
    """One outcome per item, in order."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Verb-specific figures (a rollout's per-env means and teacher usage, an export's rows per config)."""


def item_table(items: list[Outcome]) -> Table:
    """The items as a rich table: id, text fields, outcome, numbers, detail."""
    text_keys = list(dict.fromkeys(k for item in items for k in item.fields))
    number_keys = list(dict.fromkeys(k for item in items for k in item.numbers))
    table = Table("item", *text_keys, "outcome", *number_keys, "detail")
    for item in items:
        color = "green" if item.outcome in GOOD else "red" if item.outcome in BAD else "yellow"
        numbers = [_number(item.numbers.get(k)) for k in number_keys]
        table.add_row(
            escape(item.id),
            *(escape(item.fields.get(k, "")) for k in text_keys),
            f"[{color}]{escape(item.outcome)}[/]",
            *numbers,
            escape(item.detail),
        )
    return table


def _number(value: float | int | None) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def print_summary(summary: Summary, console: Console, as_json: bool = False, show_items: bool = True) -> None:
    """Print `summary`: with `as_json`, the JSON document alone on stdout; otherwise the item table
    (unless `show_items` is False: the verb printed its own), the headline, the counts and the paths."""
    if as_json:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
        return
    if show_items and summary.items:
        console.print(item_table(summary.items))
    if summary.message:
        console.print(escape(summary.message), soft_wrap=True)
    counts = ", ".join(f"{k} {v}" for k, v in summary.counts.items())
    console.print(f"{summary.verb}: {escape(counts)}; {summary.seconds:.0f}s", soft_wrap=True)
    for name, path in summary.paths.items():
        console.print(f"{name}: {escape(path)}", soft_wrap=True)


def tally(outcomes: list[str]) -> dict[str, int]:
    """Outcome → how many, in first-seen order."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def build_summary(reports: list, out: Path, seconds: float) -> Summary:
    """`arex build-envs`: one item per source (env id, status, reason, gate scores)."""
    items = [
        Outcome(
            id=r.env_id or r.source,
            outcome=r.status,
            detail=r.reason,
            fields={"source": r.source},
            numbers={**r.scores, "seconds": round(r.seconds, 2)},
        )
        for r in reports
    ]
    counts = {"sources": len(reports), **tally([r.status for r in reports])}
    failed = sum(1 for r in reports if r.status in ("rejected", "error"))
    message = (
        f"built {counts.get('accepted', 0)}, unchanged {counts.get('skipped', 0)}, "
        f"rejected {failed} of {len(reports)} source(s)"
    )
    paths = {"envs": str(out), "report": str(out / "build-report.json"), "report_md": str(out / "build-report.md")}
    return Summary(
        verb="build-envs",
        ok=not failed,
        message=message,
        counts=counts,
        seconds=round(seconds, 2),
        paths=paths,
        items=items,
    )


def rollout_summary(batches: dict[str | None, dict], out: Path, seconds: float) -> Summary:
    """`arex rollout`: one item per rollout, from each batch's run summary (arex.rollout.batch.summarize);
    `batches` maps a variant's name (None for a plain run) to its summary."""
    items, endings, extra = (
        [],
        {},
        {
            "tokens": 0,
            "cost_usd": 0.0,
            "envs": {},
            "unreadable_records": [],
            "failures": [],
            "teacher_usage_this_run": {},
        },
    )
    for variant, batch in batches.items():
        for line in batch.get("results", []):
            fields = {"env": line["env"], "path": line["path"]} | ({"variant": variant} if variant else {})
            numbers = {"sample": line["sample"], "rounds": line["rounds"], "best": line["best"], "final": line["final"]}
            items.append(
                Outcome(
                    id=f"{variant + '/' if variant else ''}{line['env']}/{line['key']}",
                    outcome=line["status"],
                    detail="" if line["status"] == "done" else line.get("reason") or "",
                    fields=fields,
                    numbers=numbers,
                )
            )
        for status, n in batch["endings"].items():
            endings[status] = endings.get(status, 0) + n
        extra["tokens"] += batch["tokens"]
        extra["cost_usd"] = round(extra["cost_usd"] + batch["cost_usd"], 6)
        extra["envs"].update({(f"{variant}/{env}" if variant else env): stats for env, stats in batch["envs"].items()})
        extra["unreadable_records"] += batch.get("unreadable_records", [])
        extra["failures"] += [g | ({"variant": variant} if variant else {}) for g in batch.get("failures", [])]
        extra["teacher_usage_this_run"][variant or "store"] = batch.get("teacher_usage_this_run", {})
    counts = {
        "rollouts": sum(b["rollouts"] for b in batches.values()),
        "finished": sum(b.get("finished", 0) for b in batches.values()),
        **endings,
    }
    message = (
        f"endings: {', '.join(f'{k} {v}' for k, v in endings.items()) or 'none'}; "
        f"tokens {extra['tokens']}; cost ${extra['cost_usd']:.4f}"
    )
    if None in batches:
        paths = {"store": str(out), "trajectories": f"{out}/<env>/<key>.jsonl", "summary": str(out / "summary.json")}
    else:
        paths = {"store": str(out), "variants": str(out / "variants.json")} | {
            name: str(out / name) for name in batches
        }
        extra["variants"] = {
            name: {"rollouts": b["rollouts"], "finished": b.get("finished", 0), "endings": b["endings"]}
            for name, b in batches.items()
        }
    return Summary(
        verb="rollout",
        ok=not extra["unreadable_records"] and not extra["failures"],
        message=message,
        counts=counts,
        seconds=round(seconds, 2),
        paths=paths,
        items=items,
        extra=extra,
    )


def select_summary(selection, out: Path, seconds: float) -> Summary:
    """`arex select`: one item per trajectory (kept or dropped, with the reasons)."""
    verdicts = sorted([*selection.kept, *selection.dropped], key=lambda v: v.path)
    items = [
        Outcome(
            id=f"{v.env_id}/{v.key}",
            outcome="kept" if v.kept else "dropped",
            detail=", ".join(v.reasons),
            fields={"path": v.path},
            numbers=dict(v.scores),
        )
        for v in verdicts
    ]
    total = len(verdicts)
    counts = {"trajectories": total, "kept": len(selection.kept), "dropped": len(selection.dropped)}
    drops = {reason: row["count"] for reason, row in selection.drop_table().items()}
    paths = {"selection": str(out / "selection.json"), "kept": str(out / "kept.jsonl"), "drops": str(out / "drops.md")}
    return Summary(
        verb="select",
        message=f"kept {len(selection.kept)} of {total}",
        counts=counts,
        seconds=round(seconds, 2),
        paths=paths,
        items=items,
        extra={"drops": drops},
    )


def export_summary(stats, out: Path, seconds: float) -> Summary:
    """`arex export`: one item per shard written (its rows and bytes)."""
    items = [
        Outcome(id=path, outcome="written", numbers={"rows": s["rows"], "bytes": s["bytes"]})
        for path, s in sorted(stats.shards.items())
    ]
    counts = {
        "trajectories": stats.trajectories,
        "duplicates": len(stats.duplicates),
        "shards": len(stats.shards),
        "rows": sum(stats.rows.values()),
    }
    rows = ", ".join(f"{g} {n}" for g, n in stats.rows.items())
    message = (
        f"exported {stats.trajectories} trajectories ({len(stats.duplicates)} duplicates skipped): "
        f"{rows} rows in {len(stats.shards)} shard(s)"
    )
    paths = {"dataset": str(out), "card": str(out / "README.md"), "checksums": str(out / "checksums.json")}
    return Summary(
        verb="export",
        message=message,
        counts=counts,
        seconds=round(seconds, 2),
        paths=paths,
        items=items,
        extra={"rows": dict(stats.rows), "duplicates": list(stats.duplicates)},
    )


def push_plan_summary(files, folder: Path, repo_id: str, seconds: float) -> Summary:
    """`arex push --dry-run`: one item per file a push would upload; nothing was sent."""
    items = [Outcome(id=f.path, outcome="would upload", numbers={"bytes": f.size}) for f in files]
    total = sum(f.size for f in files)
    return Summary(
        verb="push",
        message=f"dry run: {len(files)} files ({total} bytes) checked; `arex push` without --dry-run uploads them "
        f"to {repo_id}",
        counts={"files": len(files), "bytes": total},
        seconds=round(seconds, 2),
        paths={"dataset": str(folder)},
        items=items,
        extra={"repo_id": repo_id, "dry_run": True},
    )


def push_summary(result, folder: Path, seconds: float) -> Summary:
    """`arex push`: one item per uploaded file."""
    items = [Outcome(id=f.path, outcome="uploaded", numbers={"bytes": f.size}) for f in result.files]
    counts = {"files": len(result.files), "bytes": result.total_bytes}
    paths = {"dataset": str(folder), "repo": result.repo_url, "commit": result.commit_url}
    extra = {"repo_id": result.repo_id, "revision": result.revision, "commit_id": result.commit_id}
    return Summary(
        verb="push",
        message=f"pushed {len(result.files)} files to {result.repo_url}",
        counts=counts,
        seconds=round(seconds, 2),
        paths=paths,
        items=items,
        extra=extra,
    )
