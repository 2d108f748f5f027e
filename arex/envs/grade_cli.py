"""`arex grade ENV FILE`: grade one file against a judge env and show every test's verdict.

For the user debugging an env (not the agent): hidden tests are listed by name with their verdict,
CPU time and memory. The judge itself still keeps a hidden test's checker message and stderr out
of its results, so only the judge's own words (a limit exceeded, an exit code) show for those.
ENV is a built env (task.yaml with its tests) or a problem source arex can build (an arex folder,
a Kattis or Frontier-CS package): a source is laid out as the build would, without its gates.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from arex.errors import UserInputError
from arex.sandbox import SandboxConfig
from arex.specs import GradeResult, JudgeSpec


class TestLine(BaseModel):
    """One test's outcome as `arex grade` shows it."""

    name: str
    sample: bool
    verdict: str
    cpu_s: float | None
    memory_mb: float | None
    message: str


class GradeReport(BaseModel):
    """What `arex grade` prints (`--json` prints this model)."""

    env: str
    env_id: str
    file: str
    language: str
    laid_out_from_source: bool
    """ENV was a problem source, not a built env: graded without the build's gates."""
    time_limit_s: float
    memory_mb: int
    public_score: float | None
    """None when no sample was graded (the problem has none)."""
    held_out_score: float | None
    """None with --samples-only (no hidden test was graded)."""
    held_out_raw: float | None
    compile_log: str | None
    infra_error: str | None
    tests: list[TestLine]


def grade_file(env: Path, file: Path, language: str | None, samples_only: bool, sandbox: SandboxConfig) -> GradeReport:
    """Grade `file` against the judge env (or problem source) `env`. UserInputError, in one
    sentence, for a missing env or file, an env that is not a judge env, or an unknown language."""
    from arex.grading.judge import Judge

    if not file.is_file():
        raise UserInputError(f"File '{file}' does not exist (or is not a file): give the source file to grade.")
    lang = _language(file, language)
    source = file.read_text(encoding="utf-8", errors="replace")
    with _judge_env(env) as (env_dir, spec, from_source):
        try:
            result = Judge(env_dir, spec, sandbox).grade(source, lang, samples_only=samples_only)
        except (RuntimeError, FileNotFoundError) as exc:  # a checker that does not compile or is missing: the env's
            raise UserInputError(f"Env '{env}' cannot grade submissions: {str(exc).splitlines()[0]}") from None
    return _report(env, file, lang, spec, from_source, samples_only, result)


def _language(file: Path, language: str | None) -> str:
    from arex.grading.languages import language_for, language_named

    try:
        return language_named(language).name if language else language_for(file.name).name
    except ValueError as exc:
        hint = "" if language else " Name it with --lang."
        raise UserInputError(f"{exc}{hint}") from None


@contextmanager
def _judge_env(env: Path) -> Iterator[tuple[Path, JudgeSpec, bool]]:
    """(env folder, its spec, whether it was laid out from a source) for a built env or a source."""
    from arex.envs.judge_build import write_env
    from arex.envs.judge_sources import SourceError, load
    from arex.specs import DEFAULT_KIND, KINDS, SpecError, kind_named, load_task_spec, read_spec_yaml, source_kind

    if not env.is_dir():
        raise UserInputError(
            f"Env '{env}' does not exist (or is not a folder): "
            "give a built env folder (from arex build-envs) or a problem folder."
        )
    task = env / "task.yaml"
    raw = read_spec_yaml(task) if task.is_file() else {}
    kind = raw.get("kind", DEFAULT_KIND) if raw else source_kind(env)  # a source: the kind that claims it
    # `arex grade` runs a judge over a spec's tests: a kind whose spec is no JudgeSpec has none.
    if not (isinstance(kind, str) and kind in KINDS and issubclass(kind_named(kind, task).spec_model, JudgeSpec)):
        raise UserInputError(f"Env '{env}' is an {kind} env: arex grade grades judge envs (problems with tests) only.")
    if "tests" in raw:  # built: task.yaml lists its tests
        yield env, load_task_spec(task, JudgeSpec), False
        return
    try:
        problems = load(env)
    except SourceError as exc:
        why = str(exc).removeprefix(f"{env}: ")
        raise UserInputError(f"Env '{env}' is neither a built env nor a problem source arex reads: {why}") from None
    except SpecError as exc:
        raise UserInputError(str(exc)) from None
    if len(problems) != 1:
        raise UserInputError(
            f"'{env}' holds {len(problems)} problems: "
            f"build it first (arex build-envs {env} --out DIR) and grade one env folder."
        )
    with tempfile.TemporaryDirectory(prefix="arex-grade-") as tmp:
        dest = Path(tmp) / problems[0].spec.id
        write_env(problems[0], dest)
        yield dest, problems[0].spec, True


def _report(
    env: Path, file: Path, language: str, spec: JudgeSpec, from_source: bool, samples_only: bool, result: GradeResult
) -> GradeReport:
    details = result.details
    tests = [
        TestLine(
            name=t["name"],
            sample=t["sample"],
            verdict=t["verdict"],
            cpu_s=t.get("time_s"),
            memory_mb=round(t["memory_kb"] / 1024, 1) if t.get("memory_kb") is not None else None,
            message=t.get("message") or "",
        )
        for t in details.get("tests", [])
    ]
    return GradeReport(
        env=str(env),
        env_id=spec.id,
        file=str(file),
        language=language,
        laid_out_from_source=from_source,
        time_limit_s=spec.time_limit_s,
        memory_mb=spec.memory_mb,
        public_score=result.public_score,
        held_out_score=None if samples_only else result.held_out_score,
        held_out_raw=None if samples_only else result.held_out_raw,
        compile_log=details.get("compile_log"),
        infra_error=result.infra_error,
        tests=tests,
    )


def render(report: GradeReport, console) -> None:
    """The report as a table and two summary lines (rich console)."""
    from rich.markup import escape
    from rich.table import Table

    origin = " (laid out from its source, without the build's gates)" if report.laid_out_from_source else ""
    console.print(
        f"{escape(report.file)} ({report.language}) on env {escape(report.env_id)}{escape(origin)}: "
        f"time limit {report.time_limit_s:g} s CPU, memory {report.memory_mb} MB"
    )
    if report.compile_log is not None:
        console.print("[red]compile error[/red]:\n" + escape(report.compile_log.rstrip()))
    colors = {
        "AC": "green",
        "WA": "red",
        "TLE": "yellow",
        "MLE": "yellow",
        "RE": "red",
        "OLE": "yellow",
        "CE": "red",
        "JE": "magenta",
    }
    table = Table("test", "kind", "verdict", "CPU s", "memory MB", "message")
    for t in report.tests:
        cpu = f"{t.cpu_s:.3f}" if t.cpu_s is not None else "-"
        memory = f"{t.memory_mb:.1f}" if t.memory_mb is not None else "-"
        message = t.message if t.verdict != "CE" else "see the compile error above"
        table.add_row(
            escape(t.name),
            "sample" if t.sample else "hidden",
            f"[{colors.get(t.verdict, 'white')}]{t.verdict}[/]",
            cpu,
            memory,
            escape(message[:200]),
        )
    console.print(table)
    samples = [t for t in report.tests if t.sample]
    hidden = [t for t in report.tests if not t.sample]
    public = (
        "none (no sample tests)"
        if report.public_score is None
        else f"{report.public_score:.3f} ({sum(t.verdict == 'AC' for t in samples)}/{len(samples)} samples AC)"
    )
    passed = sum(t.verdict == "AC" for t in hidden)
    held = (
        "not graded (--samples-only)"
        if report.held_out_score is None
        else f"{report.held_out_score:.3f} (raw {report.held_out_raw:g}; {passed}/{len(hidden)} hidden AC)"
    )
    console.print(f"public score: {public}")
    console.print(f"held-out score: {held}")
    if report.infra_error:
        console.print(f"[magenta]judge error[/magenta]: {escape(report.infra_error)}")
