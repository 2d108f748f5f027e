"""The arex command line: one function per verb; what a verb does lives in its stage's package.

Errors end here, in one place (`handle_errors`): an `ArexError` (the user's to fix) prints
`arex: <message>` on stderr and exits with its code; Ctrl-C exits 130; anything else is a bug in
arex and shows its traceback. The stages are imported inside the commands, so `arex --help` loads
none of them.
"""

from __future__ import annotations

import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional

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
EvalSetOpt = typer.Option(
    None,
    "--eval-set",
    help=(
        "An evaluation set to keep out (repeatable; adds to decontamination.eval_sets): a benchmark folder "
        "(Frontier-CS, MLE-bench competitions), built envs, or a text file of ids and URLs."
    ),
)
JsonOpt = typer.Option(
    False, "--json", help="Print only the summary, as JSON, on stdout (progress goes to stderr); same exit code."
)


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
    # A signal mask is inherited across exec: a parent that had SIGINT or SIGTERM blocked (seen under the
    # parallel test suite) would leave arex deaf to Ctrl-C and to its own stop; arex must always hear both.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


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
    findings = run_doctor(cfg.sandbox.image, cfg.sandbox.backend)
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
def sandbox_prune(
    config: Optional[List[str]] = ConfigOpt,
    all_: bool = typer.Option(False, "--all", help="Also remove sandboxes of arex processes still running."),
) -> None:
    """Remove the sandboxes crashed arex processes left behind (of the configured backend)."""
    from arex.sandbox import backend_class

    removed = backend_class(_config(config).sandbox.backend).cleanup(all_owners=all_)
    console.print(f"removed {len(removed)} sandbox(es)" + (": " + ", ".join(removed) if removed else ""))


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
    sources: List[Path] = typer.Argument(
        ...,
        help=(
            "Problem folders (arex, Kattis, Frontier-CS), CodeContests .json/.jsonl files, "
            "ML repository folders with arex.yaml, or ML source YAMLs."
        ),
    ),
    out: Path = typer.Option(..., "--out", help="Folder the built envs and build-report.{json,md} go into."),
    concurrency: int = typer.Option(2, help="Sources built at once."),
    config: Optional[List[str]] = ConfigOpt,
    as_json: bool = JsonOpt,
    draft_skills: bool = typer.Option(
        False,
        "--draft-skills",
        help=(
            "Then the teacher writes task skills for each accepted env (teacher: config), "
            "each checked before it is kept."
        ),
    ),
    eval_sets: Optional[List[Path]] = EvalSetOpt,
) -> None:
    """Turn problem sources into validated envs; every rejection is reported with its reason.

    An ML source is a repository folder with arex.yaml, or a YAML naming a repository, e.g.
    `arex build-envs house.yaml --out envs` where house.yaml holds `repo: https://github.com/you/house-prices.git`,
    `commit: main` and `spec: house.arex.yaml` (id, run, metric, data, requirements, ...).
    Every spec key, including requirements_relax and build_from_source, is described in docs/ml-spec.md.
    A line per source started and finished goes to stderr. Ctrl-C or SIGTERM: no source starts any more,
    the running ones finish, the report covers what is done; a second one aborts the running ones.
    """
    from arex.envs.build import build_envs
    from arex.summary import build_summary, print_summary

    if concurrency < 1:
        raise UserInputError(f"--concurrency expects an integer of at least 1, got {concurrency}")
    cfg = _config(config)
    # A missing source among others is one rejected row ("no such file or folder"): the batch goes
    # on. If none exists, it is surely a mistyped command: say so at once.
    if all(not s.exists() for s in sources):
        raise UserInputError(f"Source(s) not found: {', '.join(str(s) for s in sources)}")
    started = time.monotonic()

    def progress(line: str) -> None:  # a line per source started and finished, on stderr (a log, if redirected)
        err.print(f"arex: {line}", soft_wrap=True, markup=False, highlight=False)

    decontam = _decontaminator(cfg, eval_sets)
    with (err if as_json else console).status(f"building {len(sources)} source(s) into {out} ..."):
        reports = build_envs(
            sources,
            out,
            cfg.sandbox,
            concurrency,
            package_sources=cfg.build.package_sources,
            progress=progress,
            decontam=decontam,
        )
    if draft_skills:  # resumes: an env with drafted skills is not drafted again
        from arex.envs.skills_draft import draft_skills as draft

        draft(
            reports,
            out,
            cfg.teacher,
            cfg.sandbox.workdir,
            lambda line: (err if as_json else console).print(f"arex: {line}", soft_wrap=True, markup=False),
        )
    summary = build_summary(reports, out, time.monotonic() - started)
    if not as_json:
        table = Table("env", "source", "status", "scores", "reason", "s")
        colors = {"accepted": "green", "skipped": "cyan", "rejected": "red", "error": "red"}
        for r in reports:
            scores = ", ".join(f"{k.split(':')[0]} {v:.2f}" for k, v in r.scores.items())
            table.add_row(
                escape(r.env_id or "-"),
                escape(r.source),
                f"[{colors[r.status]}]{r.status}[/]",
                escape(scores),
                escape(r.reason),
                f"{r.seconds:.1f}",
            )
        console.print(table)
    print_summary(summary, console, as_json, show_items=False)
    if not summary.ok:
        raise typer.Exit(1)


def _decontaminator(cfg: ArexConfig, eval_sets: Optional[List[Path]]):
    """The evaluation sets of `decontamination.eval_sets` and `--eval-set`, indexed (a line on stderr
    for each: its items, what of it could not be read); None if none are named."""
    from arex.envs.decontam import load_decontaminator

    decontam = load_decontaminator(eval_sets or [], cfg.decontamination)
    for line in decontam.describe() if decontam else []:
        err.print(f"arex: {line}", soft_wrap=True, markup=False, highlight=False)
    return decontam


@app.command("draft-env")
def draft_env_command(
    source: str = typer.Argument(
        ..., help="A git repository URL or a local folder (a git working tree is built as it is)."
    ),
    out: Path = typer.Option(
        Path("drafts"), "--out", help="Folder the drafted <id>.yaml, its added files and <id>.draft.{md,json} go into."
    ),
    envs_out: Path = typer.Option(
        Path("built-envs"), "--envs-out", help="Folder the env is built into (as build-envs --out)."
    ),
    drafter: str = typer.Option(
        "heuristic", "--drafter", help="Who drafts: heuristic (rules, no model) or model (the teacher in a sandbox)."
    ),
    budget: int = typer.Option(
        3, "--budget", help="Builds at most: a rejected draft is revised from the gate's reason."
    ),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Draft an ML env source for a repository, build it, and revise it from the gates' reasons."""
    from arex.drafting import DraftError, make_drafter
    from arex.drafting.base import clip
    from arex.drafting.run import draft_env

    if budget < 1:
        raise UserInputError(f"--budget expects an integer of at least 1, got {budget}")
    cfg = _config(config)

    def show(number: int, attempt, report) -> None:
        outcome = (
            "[green]accepted[/]" if attempt.reason is None else f"[red]rejected[/]: {escape(clip(attempt.reason, 600))}"
        )
        console.print(f"attempt {number}: {outcome} ({report.seconds:.0f}s)", soft_wrap=True)

    try:
        result = draft_env(
            source,
            out,
            envs_out,
            make_drafter(drafter, cfg),
            budget,
            cfg.sandbox,
            on_attempt=show,
            package_sources=cfg.build.package_sources,
            # each stage as it starts, a plain line even when stderr is no terminal (a log, CI)
            progress=lambda line: err.print(f"arex: {line}", soft_wrap=True, markup=False, highlight=False),
        )
    except DraftError as exc:
        raise UserInputError(f"cannot draft {source}: {exc}") from None
    if result.stopped:
        console.print(f"the drafter stopped: {escape(result.stopped)}", soft_wrap=True)
    table = Table("field", "value", "confidence", "why")
    for g in result.attempts[-1].draft.guesses if result.attempts else ():
        table.add_row(escape(g.field), escape(clip(g.value, 80)), g.confidence, escape(g.why))
    console.print(table)
    from arex.drafting.target import low_confidence_target

    note = low_confidence_target(result.attempts[-1].draft.guesses) if result.attempts else None
    if note:  # the guess a user must check, not only a row of the table and the report
        console.print(f"[yellow]warning[/]: {escape(note)} ({result.source_yaml})", soft_wrap=True)
    status = "[green]accepted[/]" if result.accepted else "[red]not accepted[/]"
    console.print(
        f"{status} after {len(result.attempts)} attempt(s) in {result.seconds:.0f}s; source: {result.source_yaml}; "
        f"report: {result.report}"
    )
    if not result.accepted:
        raise typer.Exit(1)


@app.command()
def rollout(
    ctx: typer.Context,
    envs: Path = typer.Option(..., "--envs", help="Folder of built envs (from build-envs), or one env folder."),
    out: str = typer.Option(
        "rollouts",
        "--out",
        help=(
            "Trajectory store (one JSONL per rollout): a folder, or an fsspec URL such as s3://bucket/prefix "
            "(pip install 'arex[cloud]')."
        ),
    ),
    samples: int = typer.Option(1, "--samples", help="Rollouts per env."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Rounds per rollout (default: rollout.rounds)."),
    concurrency: int = typer.Option(
        4, "--concurrency", help="Rollouts at once (with --variants: in all variants together)."
    ),
    variants: Optional[Path] = typer.Option(
        None,
        "--variants",
        help=(
            "YAML mapping variant names to overrides (-c syntax); each runs into its own store <out>/<name>/ "
            "(see configs/variants/ablation.yaml)."
        ),
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where rollouts run: local (this process) or ray (a Ray cluster; pip install 'arex[ray]').",
    ),
    address: Optional[str] = typer.Option(
        None,
        "--address",
        help="With --executor ray: the cluster, auto (default: the one `ray start` set up here) or HOST:PORT.",
    ),
    config: Optional[List[str]] = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run the teacher for many rounds against each env; resumable (re-run to continue)."""
    from arex.record.url_store import is_url
    from arex.summary import rollout_summary
    from arex.variants import check_unchanged, guard_store

    cfg, runner, plan = _batch_options(samples, concurrency, rounds, config, executor, address, variants)
    found = _built_envs(envs)
    if plan is not None and is_url(out):
        raise UserInputError(
            f"--variants does not take a URL --out ({out}) yet; "
            f"run each variant as its own `arex rollout --out {out}/<name>`"
        )
    out = _store_folder(ctx, out, write=True)
    guard_store(out, plan is not None)
    if plan is not None:
        check_unchanged(out, plan, variants)
    shown = err if as_json else console  # with --json, stdout carries the summary only
    started = time.monotonic()
    batches = _run_batches(found, cfg, plan, variants, out, samples, concurrency, runner, shown)
    _print_rollout(rollout_summary(batches, out, time.monotonic() - started), as_json)


def _batch_options(samples: int, concurrency: int, rounds, config, executor: str, address, variants):
    """The options `arex rollout` and `arex eval` share, checked: the config, the executor, the variants."""
    from arex.config import load_config
    from arex.rollout.executors import make_executor
    from arex.variants import load_variants

    for name, value in (("--samples", samples), ("--concurrency", concurrency)):
        if value < 1:
            raise UserInputError(f"{name} expects an integer of at least 1, got {value}")
    cfg = load_config(config or [], options=[("rollout.rounds", rounds, "--rounds")] if rounds is not None else [])
    runner = make_executor(executor, address)
    if variants is not None and not runner.runs_variants:
        raise UserInputError(
            f"--executor {executor} does not run --variants yet; run each variant as its own command, "
            "or use --executor local"
        )
    plan = load_variants(variants, config or [], rounds) if variants is not None else None
    return cfg, runner, plan


def _run_batches(found, cfg, plan, variants, out: Path, samples: int, concurrency: int, runner, shown) -> dict:
    """The rollouts of `arex rollout` and `arex eval`: one batch, or the variants of `plan`, on the
    configured teacher (or the bundled local one); each batch's run summary by variant name (None: no variants)."""
    import asyncio

    from arex.rollout.batch import run_batch
    from arex.variants import run_variants

    try:
        with _teacher_url([v.config for v in plan] if plan else [cfg], shown) as (base_url, fit):
            if plan is None:
                run = run_batch(
                    found, fit(cfg.teacher), cfg.rollout, cfg.sandbox, out, samples, concurrency, base_url, shown,
                    executor=runner,
                )  # fmt: skip
                return {None: asyncio.run(run)}
            plan = [replace(v, config=v.config.model_copy(update={"teacher": fit(v.config.teacher)})) for v in plan]
            return asyncio.run(run_variants(found, plan, out, samples, concurrency, base_url, shown, variants))
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: finished rounds are kept in {out}; re-run the same command to resume"
        ) from None


def _store_folder(ctx: typer.Context, value: str, write: bool) -> Path:
    """--out/--store as a local folder until the command ends: a path as given; a URL as its local
    mirror, brought up to date (and the URL locked, to write): arex.record.url_store."""
    from arex.record.url_store import opened

    notify = lambda line: err.print(f"arex: {line}", soft_wrap=True, markup=False)  # noqa: E731
    return ctx.with_resource(opened(value, write, notify))


def _built_envs(envs: Path) -> list:
    """The built envs in `envs`; UserInputError saying how to build them if there are none."""
    from arex.envs.runtime import list_envs

    if not envs.is_dir():
        raise UserInputError(f"--envs {envs} is not a folder; build envs first: arex build-envs envs/* --out {envs}")
    found = list_envs(envs)
    if not found:
        raise UserInputError(
            f"No built envs in {envs} (folders with task.yaml); run: arex build-envs envs/* --out {envs}"
        )
    return found


@contextmanager
def _teacher_url(configs: list[ArexConfig], shown: Console) -> Iterator[tuple[Optional[str], Callable]]:
    """The teacher's base_url for the configs that run without one (the first's, if all have one),
    and what a config's teacher settings become on it; if one has none, the bundled local teacher,
    started for the block and stopped after it, and its fit (arex.teacher.local: its one slot,
    timeouts at its measured speed)."""
    without = [c for c in configs if c.teacher.base_url is None]
    if not without:
        yield configs[0].teacher.base_url, lambda teacher: teacher
        return
    from arex.teacher.local import LocalTeacher

    shown.print("no teacher.base_url configured: starting the bundled local teacher ...")
    local = LocalTeacher(without[0].teacher.local, model_alias=without[0].teacher.model).start()
    fitted = local.fit(without[0].teacher)
    shown.print(
        f"local teacher ready: {fitted.concurrency} call(s) at a time, {fitted.timeout_s:.0f} s per attempt "
        f"(measured {local.speed.generate_tps:.1f} tokens/s)"
    )
    try:
        yield local.base_url, local.fit
    finally:
        local.stop()


def _print_rollout(summary, as_json: bool) -> None:
    """The rollout's end: per-env means (per variant), the summary; RecordError for unreadable records,
    else Unfinished (its reasons grouped) if rollouts ended infra_failed or teacher_error."""
    from arex.summary import print_summary

    if not as_json:
        table = Table("env", "rollouts", "first", "best", "final", "improvement")
        for env_id, stats in summary.extra["envs"].items():
            table.add_row(
                escape(env_id),
                str(stats["rollouts"]),
                f"{stats['mean_first']:.4g}",
                f"{stats['mean_best']:.4g}",
                f"{stats['mean_final']:.4g}",
                f"{stats['mean_improvement']:+.4g}",
            )
        console.print(table)
    print_summary(summary, console, as_json, show_items=False)
    _raise_unfinished(summary, as_json)


def _raise_unfinished(summary, as_json: bool) -> None:
    """RecordError for unreadable records, else Unfinished (its reasons grouped) if rollouts ended
    infra_failed or teacher_error; nothing if every rollout finished."""
    from arex.rollout.batch import UNREADABLE
    from arex.rollout.endings import unfinished

    failed = unfinished(summary.extra["failures"], summary.counts["rollouts"])
    unreadable = summary.extra["unreadable_records"]
    if unreadable:
        from arex.record.trajectory import RecordError

        for problem in unreadable:
            (err if as_json else console).print(f"[red]{UNREADABLE}[/red]: {escape(problem['reason'])}", soft_wrap=True)
        raise RecordError(
            f"{len(unreadable)} record(s) could not be read and were left as they are (reasons above); "
            "the other rollouts ran. Repair or move them away, then re-run to redo them."
            + (f"\n{failed}" if failed is not None else "")
        )
    if failed is not None:
        raise failed


@app.command("eval")
def eval_command(
    benchmark: str = typer.Argument(..., help="The benchmark: frontier-cs or mle-bench."),
    folder: Path = typer.Argument(..., help="The benchmark as it ships (Frontier-CS: the clone or algorithmic/)."),
    data: Optional[Path] = typer.Option(None, "--data", help="The benchmark's data folder, where it needs one."),
    problems: Optional[str] = typer.Option(None, "--problems", help="Only these problem ids, comma-separated."),
    out: Path = typer.Option(Path("eval"), "--out", help="Envs, rollouts (the store), eval.json and eval.md."),
    samples: int = typer.Option(1, "--samples", help="Rollouts per problem (the score's spread is over them)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Rounds per rollout (default: rollout.rounds)."),
    concurrency: int = typer.Option(4, "--concurrency", help="Rollouts at once."),
    variants: Optional[Path] = typer.Option(None, "--variants", help="Variants file, as `arex rollout --variants`."),
    executor: str = typer.Option("local", "--executor", help="Where rollouts run: local or ray."),
    address: Optional[str] = typer.Option(None, "--address", help="With --executor ray: the cluster."),
    config: Optional[List[str]] = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run a model on a benchmark under its own protocol and report its score; resumable (re-run to continue)."""
    from arex.eval import make_benchmark
    from arex.eval.base import Source
    from arex.eval.run import ENVS, evaluate, prepare, show
    from arex.summary import rollout_summary
    from arex.variants import check_unchanged, guard_store

    cfg, runner, plan = _batch_options(samples, concurrency, rounds, config, executor, address, variants)
    bench = make_benchmark(benchmark)
    if plan is not None and any(v.name == ENVS for v in plan):
        raise UserInputError(f"{variants}: the variant name '{ENVS}' is the eval's envs folder; choose another")
    if not folder.is_dir():
        raise UserInputError(f"the benchmark folder {folder} does not exist or is not a folder")
    guard_store(out, plan is not None)
    if plan is not None:
        check_unchanged(out, plan, variants)
    notify = lambda line: err.print(f"arex: {line}", soft_wrap=True, markup=False)  # noqa: E731
    only = tuple(p.strip() for p in (problems or "").split(",") if p.strip())
    items, found = prepare(bench, Source(folder, out / ENVS, data, only, cfg.sandbox, notify))
    shown = err if as_json else console
    started = time.monotonic()
    batches = _run_batches(found, cfg, plan, variants, out, samples, concurrency, runner, shown)
    result = evaluate(bench, items, found, batches, out, folder)
    show(result, console, as_json)
    _raise_unfinished(rollout_summary(batches, out, time.monotonic() - started), as_json)


@app.command("grade")
def grade_command(
    env: Path = typer.Argument(
        ..., help="A built judge env folder (from build-envs), or a problem folder arex can build."
    ),
    file: Path = typer.Argument(..., help="The source file to grade."),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="Language (cpp17, c11, java, python3, pypy3); default: from the file's extension."
    ),
    samples_only: bool = typer.Option(False, "--samples-only", help="Grade the sample tests only."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    config: Optional[List[str]] = ConfigOpt,
) -> None:
    """Grade one file against a judge env and show every test's verdict, hidden ones included."""
    from arex.envs.grade_cli import grade_file, render

    report = grade_file(env, file, lang, samples_only, _config(config).sandbox)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        render(report, console)
    if report.infra_error:
        raise typer.Exit(1)


@app.command("select")
def select_command(
    ctx: typer.Context,
    store: str = typer.Option(
        "rollouts",
        "--store",
        help="Trajectory store written by `arex rollout --out`: a folder or its URL (read into a local mirror).",
    ),
    envs: Path = typer.Option(..., "--envs", help="The built envs the trajectories ran on (re-grading needs them)."),
    out: Path = typer.Option(Path("selected"), "--out", help="Where selection.json, kept.jsonl, drops.md go."),
    concurrency: int = typer.Option(2, "--concurrency", help="Trajectories checked (re-graded) at once."),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where re-grading runs: local (this machine) or ray (a Ray cluster; pip install 'arex[ray]').",
    ),
    address: Optional[str] = typer.Option(
        None, "--address", help="With --executor ray: the cluster, auto (default) or HOST:PORT."
    ),
    config: Optional[List[str]] = ConfigOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Keep or drop whole trajectories; scores are re-checked by re-grading. Resumable."""
    from arex.record.storage import write_error
    from arex.rollout.executors import make_executor
    from arex.selection.selector import select
    from arex.summary import print_summary, select_summary

    if concurrency < 1:
        raise UserInputError(f"--concurrency expects an integer of at least 1, got {concurrency}")
    from arex.variants import read_record

    store = _store_folder(ctx, store, write=False)
    if read_record(store):
        names = ", ".join(str(store / v.name) for v in read_record(store))
        raise UserInputError(f"{store} holds variants (variants.json); select each variant's store on its own: {names}")
    cfg = _config(config)
    if cfg.select.llm_judge.enabled and not cfg.teacher.base_url:
        raise UserInputError("select.llm_judge.enabled needs teacher.base_url (start one with `arex teacher serve`)")

    shown = err if as_json else console  # with --json, stdout carries the summary only

    def show(verdict) -> None:
        mark = (
            "[green]kept[/green]" if verdict.kept else f"[yellow]dropped[/yellow] {escape(', '.join(verdict.reasons))}"
        )
        shown.print(f"{verdict.env_id}/{verdict.key}: {mark}")

    started = time.monotonic()
    try:
        selection = select(
            store,
            envs,
            out,
            cfg.select,
            cfg.sandbox,
            cfg.teacher,
            on_verdict=show,
            concurrency=concurrency,
            executor=make_executor(executor, address),
        )
    except OSError as exc:  # disk full, a read-only --out: verdicts already judged stay cached
        raise write_error(
            exc,
            out,
            f"verdicts judged so far are kept in {out / 'verdicts.jsonl'}; re-run the same command to continue",
        ) from None
    if not as_json:
        table = Table("drop reason", "trajectories", "ids")
        for reason, row in selection.drop_table().items():
            table.add_row(
                reason, str(row["count"]), escape(", ".join(row["ids"][:4]) + (" ..." if row["count"] > 4 else ""))
            )
        console.print(table)
    print_summary(select_summary(selection, out, time.monotonic() - started), console, as_json, show_items=False)


@app.command("export")
def export_command(
    selection: Path = typer.Option(Path("selected"), "--selection", help="Folder written by `arex select`."),
    out: Path = typer.Option(
        Path("dataset"), "--out", help="Dataset folder: parquet shards, checksums.json, README.md (card)."
    ),
    envs: Optional[Path] = typer.Option(
        None, "--envs", help="Built envs, for the canary leak check (default: the ones `arex select` used)."
    ),
    config: Optional[List[str]] = ConfigOpt,
    as_json: bool = JsonOpt,
    eval_sets: Optional[List[Path]] = EvalSetOpt,
) -> None:
    """Write the kept trajectories as SFT parquet shards and a dataset card (replaces only an earlier export)."""
    from arex.dataset.config import config_folder
    from arex.dataset.export import export, kept_records
    from arex.summary import export_summary, print_summary

    cfg = _config(config)
    kept = kept_records(selection)  # kept.jsonl and selection.json, checked
    chosen = kept.report
    envs = envs or (Path(chosen["envs"]) if chosen and isinstance(chosen.get("envs"), str) else None)
    if envs is None or not envs.is_dir():
        raise UserInputError(
            f"no built envs to check the trajectories against (canaries): pass --envs DIR (got {envs})"
        )
    started = time.monotonic()
    decontamination = _export_decontamination(cfg, eval_sets, envs)
    with (err if as_json else console).status(f"exporting to {out} ..."):
        stats = export(kept, out, cfg.export, envs, chosen, decontamination)  # the card is written before the swap
    summary = export_summary(stats, out, time.monotonic() - started)
    summary.paths["shards"] = f"{out}/<{'|'.join(config_folder(g) for g in stats.rows)}>/*.parquet"
    print_summary(summary, console, as_json, show_items=False)


def _export_decontamination(cfg: ArexConfig, eval_sets: Optional[List[Path]], envs: Path):
    """What export checks each env against (the built env in `envs`), and what build-envs already
    refused or flagged there (its build-report.json); None when there is neither."""
    import json

    from arex.dataset.export import Decontamination

    decontam = _decontaminator(cfg, eval_sets)
    try:
        built = json.loads((envs / "build-report.json").read_text(encoding="utf-8")).get("envs", [])
        at_build = [{"env": e["env_id"] or e["source"], "overlaps": e["overlaps"]} for e in built if e.get("overlaps")]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        at_build = []  # no report (envs built elsewhere) or an older one: nothing recorded at build
    if decontam is None and not at_build:
        return None

    def check(env_id: str) -> list[dict]:
        folder = envs / env_id
        found = decontam.check_env(folder) if (folder / "task.yaml").is_file() else decontam.check_named(env_id)
        return [o.to_json() for o in found]

    names = [s.name for s in decontam.sets] if decontam else []
    return Decontamination(names, check if decontam else None, at_build)


@app.command("report")
def report_command(
    ctx: typer.Context,
    store: str = typer.Argument(
        ...,
        help=(
            "Trajectory store from `arex rollout --out`, a folder or its URL (with variants.json: "
            "one store per variant in <store>/<variant>/)."
        ),
    ),
    selection: Optional[Path] = typer.Option(
        None,
        "--selection",
        help="Folder written by `arex select` (or one holding <variant>/selection.json), for the drops table.",
    ),
    out: Path = typer.Option(
        Path("report"), "--out", help="Folder for report.html, report.json and the trajectory pages (trajectories/)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Write a self-contained HTML run report (curves, stage-wise table, endings, drops) and a page per trajectory."""
    from arex.report import report_summary, write_report
    from arex.summary import print_summary

    started = time.monotonic()
    result = write_report(_store_folder(ctx, store, write=False), out, selection)
    print_summary(report_summary(result, time.monotonic() - started), console, as_json, show_items=False)


@app.command("train-check")
def train_check_command(
    dataset: Path = typer.Argument(..., help="Folder written by `arex export`."),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="Local tokenizer folder or .gguf file (never downloaded)."),
    config: Optional[str] = typer.Option(
        None, "--config", help="Which rows (default: token rows, else calls, else the first config)."
    ),
    steps: int = typer.Option(
        0, "--steps", help="Also run this many SFT steps of a tiny model on the CPU and check the loss falls."
    ),
    model: Optional[Path] = typer.Option(
        None, "--model", help="Model for --steps: local folder or .gguf (default: the bundled SmolLM2-135M)."
    ),
    rows: int = typer.Option(200, "--rows", help="How many rows to check."),
    chat_template: Optional[str] = typer.Option(
        None, "--chat-template", help="Render under this template: one TRL ships (qwen2_5: tool-aware) or a .jinja."
    ),
) -> None:
    """Check an export trains as intended: a sample with the trained tokens highlighted, lengths, optional steps."""
    from arex.dataset.train_check import run

    run(console, dataset, tokenizer, config, steps, model, rows, chat_template)


@app.command("push")
def push_command(
    dataset: Path = typer.Option(Path("dataset"), "--dataset", help="Folder written by `arex export`."),
    repo_id: str = typer.Option(..., "--repo-id", help="Hub dataset repo, e.g. you/arex-trajectories."),
    token: Optional[str] = typer.Option(None, "--token", help="Hub token (default: $HF_TOKEN or the stored login)."),
    endpoint: Optional[str] = typer.Option(
        None, "--endpoint", help="Hub URL (default: $HF_ENDPOINT or huggingface.co)."
    ),
    private: bool = typer.Option(False, "--private", help="Create the repo private."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the folder and list what would be uploaded."),
    as_json: bool = JsonOpt,
) -> None:
    """Upload the shards and the card to a Hugging Face dataset repo, in one commit."""
    from arex.dataset.push import plan, push
    from arex.summary import print_summary, push_plan_summary, push_summary

    started = time.monotonic()
    if dry_run:
        files = plan(dataset)
        print_summary(push_plan_summary(files, dataset, repo_id, time.monotonic() - started), console, as_json)
        return
    with (err if as_json else console).status(f"uploading {dataset} to {repo_id} ..."):
        result = push(dataset, repo_id, token=token, endpoint=endpoint, private=private)
    print_summary(push_summary(result, dataset, time.monotonic() - started), console, as_json, show_items=False)


@teacher_app.command("serve")
def teacher_serve(
    config: Optional[List[str]] = ConfigOpt,
    port: Optional[int] = typer.Option(
        None, help="Port on 127.0.0.1 (default: teacher.local.port; 0 picks a free one)."
    ),
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
