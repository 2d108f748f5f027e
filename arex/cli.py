"""The arex command line: one small function per verb, no logic of its own.

Errors end here, in one place (`handle_errors`): an `ArexError` (the user's to fix) prints
`arex: <message>` on stderr and exits with its code; Ctrl-C exits 130; anything else is a bug in
arex and shows its traceback. The stages are imported inside the commands, so `arex --help` loads
none of them.
"""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from arex.errors import ArexError, Interrupted, UserInputError

if TYPE_CHECKING:
    from arex.config import ArexConfig

console = Console()
err = Console(stderr=True)


@contextmanager
def handle_errors() -> Iterator[None]:
    """The CLI's one error handler: an ArexError prints its message, one paragraph, and exits
    with its code; Ctrl-C exits 130 with one line; anything else propagates (a traceback: a bug)."""
    try:
        yield
    except ArexError as exc:
        err.print(Text(f"arex: {str(exc).strip() or type(exc).__name__}", style="red"), soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err.print(Text("arex: interrupted", style="red"), soft_wrap=True)
        raise typer.Exit(Interrupted.exit_code) from None


class _ArexGroup(TyperGroup):
    """The root command group: every command runs inside `handle_errors` (also under CliRunner,
    which calls the group, not `main`)."""

    def invoke(self, ctx):
        with handle_errors():
            return super().invoke(ctx)


# Plain (click) help: rich help pulls in markdown and pygments, and doubles `arex --help`'s time.
_PLAIN = {"rich_markup_mode": None, "no_args_is_help": True}
app = typer.Typer(
    cls=_ArexGroup,
    help="arex: synthesize long-horizon self-improvement trajectories for training LLM agents.",
    pretty_exceptions_show_locals=False,  # a bug's traceback must not print config values (API keys)
    **_PLAIN,
)
sandbox_app = typer.Typer(help="Manage sandboxes.", **_PLAIN)
config_app = typer.Typer(help="Inspect configuration.", **_PLAIN)
teacher_app = typer.Typer(help="The teacher model.", **_PLAIN)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(teacher_app, name="teacher")
app.add_typer(config_app, name="config")

ConfigOpt = typer.Option(None, "-c", "--config", help="YAML file or key=value override; repeat to stack (later wins).")


def main() -> None:
    """The `arex` entry point: the command line, with its one error handler."""
    app()


def _config(items: Optional[List[str]]) -> ArexConfig:
    """The configuration from `-c` items; a ConfigError goes to the handler."""
    from arex.config import load_config

    return load_config(items or [])


@app.callback()
def _main() -> None:
    # SIGTERM runs the same cleanup as Ctrl-C: `finally` blocks remove sandboxes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@config_app.command("show")
def config_show(config: Optional[List[str]] = ConfigOpt) -> None:
    """Print the resolved configuration as YAML."""
    import yaml

    console.print(yaml.safe_dump(_config(config).model_dump(mode="json"), sort_keys=False), end="")


@app.command()
def doctor(config: Optional[List[str]] = ConfigOpt) -> None:
    """Check the engine, base image, local teacher and disk; print the fix for each problem."""
    from arex.doctor import run_doctor

    cfg = _config(config)
    findings = run_doctor(cfg.sandbox.image)
    table = Table(show_header=True, header_style="bold")
    for column in ("check", "status", "detail"):
        table.add_column(column)
    for f in findings:
        table.add_row(f.name, "[green]ok[/green]" if f.ok else "[red]PROBLEM[/red]", escape(f.detail))
    console.print(table)
    problems = [f for f in findings if not f.ok]
    for f in problems:
        console.print(f"[bold]{f.name}[/bold]: fix with\n  {escape(f.fix)}", soft_wrap=True)
    if problems:
        raise typer.Exit(1)
    console.print("[green]All checks passed.[/green]")


@sandbox_app.command("prune")
def sandbox_prune(all_: bool = typer.Option(False, "--all", help="Also remove sandboxes of arex processes still running.")) -> None:
    """Remove sandbox containers left behind by crashed arex processes."""
    from arex.sandbox.docker import prune

    removed = prune(all_owners=all_)
    console.print(f"removed {len(removed)} sandbox container(s)" + (": " + ", ".join(removed) if removed else ""))


@sandbox_app.command("check")
def sandbox_check(
    config: Optional[List[str]] = ConfigOpt,
    only: Optional[List[str]] = typer.Option(None, "--only", help="Run just these checks (repeatable)."),
) -> None:
    """Run the sandbox conformance suite against the configured backend."""
    from arex.sandbox.conformance import CHECKS, run_suite

    cfg = _config(config)
    unknown = [name for name in only or [] if name not in CHECKS]
    if unknown:
        raise UserInputError(f"Unknown check(s): {', '.join(unknown)}. Known: {', '.join(CHECKS)}")
    outcome = run_suite(cfg.sandbox.backend, only=only)
    table = Table("check", "result")
    for name, failure in outcome.items():
        table.add_row(name, "[green]pass[/green]" if failure is None else f"[red]FAIL[/red] {escape(failure[:200])}")
    console.print(table)
    failed = sum(1 for v in outcome.values() if v is not None)
    console.print(f"{len(outcome) - failed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


@app.command("build-envs")
def build_envs_command(
    sources: List[Path] = typer.Argument(..., help="Problem folders (arex, Kattis, Frontier-CS) or CodeContests .json/.jsonl files."),
    out: Path = typer.Option(..., "--out", help="Folder the built envs and build-report.{json,md} go into."),
    concurrency: int = typer.Option(2, help="Sources built at once."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Turn problem sources into validated envs; every rejection is reported with its reason."""
    from arex.envs.build import build_envs

    if concurrency < 1:
        raise UserInputError(f"--concurrency expects an integer of at least 1, got {concurrency}")
    cfg = _config(config)
    # A missing source among others is one rejected row ("no such file or folder"): the batch goes
    # on. If none exists, it is surely a mistyped command: say so at once.
    if all(not s.exists() for s in sources):
        raise UserInputError(f"Source(s) not found: {', '.join(str(s) for s in sources)}")
    reports = build_envs(sources, out, cfg.sandbox, concurrency)
    table = Table("env", "source", "status", "scores", "reason", "s")
    colors = {"accepted": "green", "skipped": "cyan", "rejected": "red", "error": "red"}
    for r in reports:
        scores = ", ".join(f"{k.split(':')[0]} {v:.2f}" for k, v in r.scores.items())
        table.add_row(escape(r.env_id or "-"), escape(r.source), f"[{colors[r.status]}]{r.status}[/]", escape(scores), escape(r.reason), f"{r.seconds:.1f}")
    console.print(table)
    console.print(f"report: {out / 'build-report.json'} and {out / 'build-report.md'}")
    if any(r.status in ("rejected", "error") for r in reports):
        raise typer.Exit(1)


@app.command()
def rollout(
    envs: Path = typer.Option(..., "--envs", help="Folder of built envs (from build-envs), or one env folder."),
    out: Path = typer.Option(Path("rollouts"), "--out", help="Trajectory store (one JSONL per rollout)."),
    samples: int = typer.Option(1, "--samples", help="Rollouts per env."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Rounds per rollout (default: rollout.rounds)."),
    concurrency: int = typer.Option(4, "--concurrency", help="Rollouts at once."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Run the teacher for many rounds against each env; resumable (re-run to continue)."""
    import asyncio

    from arex.config import load_config
    from arex.envs.runtime import list_envs
    from arex.rollout.batch import UNREADABLE, run_batch

    for name, value in (("--samples", samples), ("--concurrency", concurrency)):
        if value < 1:
            raise UserInputError(f"{name} expects an integer of at least 1, got {value}")
    cfg = load_config(config or [], options=[("rollout.rounds", rounds, "--rounds")] if rounds is not None else [])
    if not envs.is_dir():
        raise UserInputError(f"--envs {envs} is not a folder; build envs first: arex build-envs envs/* --out {envs}")
    found = list_envs(envs)
    if not found:
        raise UserInputError(f"No built envs in {envs} (folders with task.yaml); run: arex build-envs envs/* --out {envs}")
    local = None
    base_url = cfg.teacher.base_url
    if base_url is None:
        from arex.teacher.local import LocalTeacher

        console.print("no teacher.base_url configured: starting the bundled local teacher ...")
        local = LocalTeacher(cfg.teacher.local, model_alias=cfg.teacher.model).start()
        base_url = local.base_url
    try:
        summary = asyncio.run(run_batch(found, cfg.teacher, cfg.rollout, cfg.sandbox, out, samples, concurrency, base_url, console))
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: finished rounds are kept in {out}; re-run the same command to resume") from None
    finally:
        if local is not None:
            local.stop()
    table = Table("env", "rollouts", "first", "best", "final", "improvement")
    for env_id, stats in summary["envs"].items():
        table.add_row(env_id, str(stats["rollouts"]), f"{stats['mean_first']:.4g}", f"{stats['mean_best']:.4g}", f"{stats['mean_final']:.4g}", f"{stats['mean_improvement']:+.4g}")
    console.print(table)
    endings = ", ".join(f"{k} {v}" for k, v in summary["endings"].items())
    console.print(f"endings: {endings}; tokens {summary['tokens']}; cost ${summary['cost_usd']:.4f}; {summary['seconds']:.0f}s")
    console.print(f"trajectories: {out}/<env>/<key>.jsonl; summary: {out / 'summary.json'}")
    unreadable = summary.get("unreadable_records", [])
    if unreadable:
        from arex.trajectory import RecordError

        for problem in unreadable:
            console.print(f"[red]{UNREADABLE}[/red]: {escape(problem['reason'])}", soft_wrap=True)
        raise RecordError(f"{len(unreadable)} record(s) could not be read and were left as they are (reasons above); the other rollouts ran. Repair or move them away, then re-run to redo them.")


@app.command("grade")
def grade_command(
    env: Path = typer.Argument(..., help="A built judge env folder (from build-envs), or a problem folder arex can build."),
    file: Path = typer.Argument(..., help="The source file to grade."),
    lang: Optional[str] = typer.Option(None, "--lang", help="Language (cpp17, c11, java, python3, pypy3); default: from the file's extension."),
    samples_only: bool = typer.Option(False, "--samples-only", help="Grade the sample tests only."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Grade one file against a judge env and show every test's verdict, hidden ones included."""
    from arex.grading.grade_cli import grade_file, render

    report = grade_file(env, file, lang, samples_only, _config(config).sandbox)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        render(report, console)
    if report.infra_error:
        raise typer.Exit(1)


@app.command("select")
def select_command(
    store: Path = typer.Option(Path("rollouts"), "--store", help="Trajectory store written by `arex rollout --out`."),
    envs: Path = typer.Option(..., "--envs", help="The built envs the trajectories ran on (re-grading needs them)."),
    out: Path = typer.Option(Path("selected"), "--out", help="Where selection.json, kept.jsonl, drops.md go."),
    concurrency: int = typer.Option(2, "--concurrency", help="Trajectories checked (re-graded) at once."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Keep or drop whole trajectories; scores are re-checked by re-grading. Resumable."""
    from arex.select import select
    from arex.storage import write_error

    if concurrency < 1:
        raise UserInputError(f"--concurrency expects an integer of at least 1, got {concurrency}")
    cfg = _config(config)
    if cfg.select.llm_judge.enabled and not cfg.teacher.base_url:
        raise UserInputError("select.llm_judge.enabled needs teacher.base_url (start one with `arex teacher serve`)")

    def show(verdict) -> None:
        mark = "[green]kept[/green]" if verdict.kept else f"[yellow]dropped[/yellow] {escape(', '.join(verdict.reasons))}"
        console.print(f"{verdict.env_id}/{verdict.key}: {mark}")

    try:
        selection = select(store, envs, out, cfg.select, cfg.sandbox, cfg.teacher, on_verdict=show, concurrency=concurrency)
    except OSError as exc:  # disk full, a read-only --out: verdicts already judged stay cached
        raise write_error(exc, out, f"verdicts judged so far are kept in {out / 'verdicts.jsonl'}; re-run the same command to continue") from None
    table = Table("drop reason", "trajectories", "ids")
    for reason, row in selection.drop_table().items():
        table.add_row(reason, str(row["count"]), escape(", ".join(row["ids"][:4]) + (" ..." if row["count"] > 4 else "")))
    console.print(table)
    console.print(f"kept {len(selection.kept)} of {len(selection.kept) + len(selection.dropped)}; report: {out / 'selection.json'}, kept set: {out / 'kept.jsonl'}")


@app.command("export")
def export_command(
    selection: Path = typer.Option(Path("selected"), "--selection", help="Folder written by `arex select`."),
    out: Path = typer.Option(Path("dataset"), "--out", help="Dataset folder: parquet shards, checksums.json, README.md (card)."),
    envs: Optional[Path] = typer.Option(None, "--envs", help="Built envs, for the canary leak check (default: the ones `arex select` used)."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Write the kept trajectories as SFT parquet shards and a dataset card (replaces only an earlier export)."""
    from arex.export import export, kept_records
    from arex.export_config import config_folder

    cfg = _config(config)
    kept = kept_records(selection)  # kept.jsonl and selection.json, checked
    chosen = kept.report
    envs = envs or (Path(chosen["envs"]) if chosen and isinstance(chosen.get("envs"), str) else None)
    if envs is None or not envs.is_dir():
        raise UserInputError(f"no built envs to check the trajectories against (canaries): pass --envs DIR (got {envs})")
    stats = export(kept, out, cfg.export, envs, chosen)  # the card is written before the swap
    rows = ", ".join(f"{g} {n}" for g, n in stats.rows.items())
    console.print(f"exported {stats.trajectories} trajectories ({len(stats.duplicates)} duplicates skipped): {rows} rows in {len(stats.shards)} shard(s)")
    console.print(f"shards: {out}/<{'|'.join(config_folder(g) for g in stats.rows)}>/*.parquet; card: {out / 'README.md'}")


@app.command("train-check")
def train_check_command(
    dataset: Path = typer.Argument(..., help="Folder written by `arex export`."),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="Local tokenizer folder or .gguf file (never downloaded)."),
    config: Optional[str] = typer.Option(None, "--config", help="Which rows (default: token rows, else calls, else the first config)."),
    steps: int = typer.Option(0, "--steps", help="Also run this many SFT steps of a tiny model on the CPU and check the loss falls."),
    model: Optional[Path] = typer.Option(None, "--model", help="Model for --steps: local folder or .gguf (default: the bundled SmolLM2-135M)."),
    rows: int = typer.Option(200, "--rows", help="How many rows to check."),
) -> None:
    """Check an export trains as intended: a sample with the trained tokens highlighted, lengths, optional steps."""
    from arex.train_check import run

    run(console, dataset, tokenizer, config, steps, model, rows)


@app.command("push")
def push_command(
    dataset: Path = typer.Option(Path("dataset"), "--dataset", help="Folder written by `arex export`."),
    repo_id: str = typer.Option(..., "--repo-id", help="Hub dataset repo, e.g. you/arex-trajectories."),
    token: Optional[str] = typer.Option(None, "--token", help="Hub token (default: $HF_TOKEN or the stored login)."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Hub URL (default: $HF_ENDPOINT or huggingface.co)."),
    private: bool = typer.Option(False, "--private", help="Create the repo private."),
) -> None:
    """Upload the shards and the card to a Hugging Face dataset repo, in one commit."""
    from arex.push import push

    result = push(dataset, repo_id, token=token, endpoint=endpoint, private=private)
    console.print(f"pushed {len(result.files)} files to {result.repo_url}")


@teacher_app.command("serve")
def teacher_serve(
    config: Optional[List[str]] = ConfigOpt,
    port: Optional[int] = typer.Option(None, help="Port on 127.0.0.1 (default: teacher.local.port; 0 picks a free one)."),
) -> None:
    """Serve the bundled local teacher (SmolLM2-135M-Instruct) on 127.0.0.1 until Ctrl-C."""
    import time

    from arex.teacher.local import LocalTeacher, LocalTeacherFailed

    cfg = _config(config)
    local = cfg.teacher.local if port is None else cfg.teacher.local.model_copy(update={"port": port})
    teacher = LocalTeacher(local, model_alias=cfg.teacher.model)
    teacher.start()
    try:
        console.print(f"local teacher ready (model '{cfg.teacher.model}'); Ctrl-C stops it")
        print(f"base_url={teacher.base_url}", flush=True)
        while teacher.process is not None and teacher.process.poll() is None:
            time.sleep(0.5)
        if teacher.process is not None:
            raise LocalTeacherFailed(f"the local teacher exited on its own; see {teacher.log_path}")
    except KeyboardInterrupt:
        pass
    finally:
        teacher.stop()
        console.print("local teacher stopped")


if __name__ == "__main__":
    main()
