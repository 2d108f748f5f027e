"""The heuristic drafter: deterministic rules for the common case (a table shipped in the repository
or written by a preparation script; a script that reads train/test CSVs and writes a submission).

`survey` reads the repository once; a `Plan` holds the choices a revision can change (target,
metric, the repository's script or the generic wrapper, files to remove, requirements). A draft is
`compose(survey, plan)`. A revision's plan is replayed from the earlier attempts' reasons, so the
drafter keeps no state beyond a cache of surveys.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from arex.drafting.base import Attempt, Draft, DraftError, Guess, clip
from arex.drafting.baseline import wrapper_run
from arex.drafting.compose import WRAPPER, module_name, statement_path
from arex.drafting.inspect import IMPORT_TO_PYPI, local_modules, pypi_names, scan_script
from arex.drafting.requirements import WRAPPER_PACKAGES, Requirements, drafted_requirements, preflight_change
from arex.drafting.statement import write_statement
from arex.drafting.survey import Survey, survey
from arex.drafting.target import CLASSIFICATION, ID_NAME, metric_confidence, metric_options
from arex.sandbox import SandboxConfig

Pinner = Callable[..., list[str]]


class Plan(BaseModel):
    """The choices a revision changes."""

    target: int = 0
    metric: int = 0
    wrapper: bool = False
    remove: list[str] = Field(default_factory=list)
    requirements: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    """Packages left out (pip cannot install them), from the drafter's list and the repository's file."""
    loosen: list[str] = Field(default_factory=list)
    """Packages whose version pins are dropped (a conflict, or no version near the pin installs)."""
    relax: bool = False
    """`requirements_relax`: an exact pin with no wheel moves to the nearest version that has one."""
    no_scrub: list[str] = Field(default_factory=list)
    scrub: list[str] = Field(default_factory=list)
    """Installed package files the leak gate found holding the labels (e.g. a dataset a library
    ships in its tests), deleted from the image as `package/relative/path`."""
    submission_columns: list[str] = Field(default_factory=list)
    revisions: list[str] = Field(default_factory=list)
    """What each revision changed and why, one sentence each (shown as guesses)."""


class HeuristicDrafter:
    """Drafts from file names, column statistics and string literals; runs only the repository's
    preparation script (in a sandbox, no network) and nothing else."""

    name = "heuristic"

    def __init__(self, sandbox: SandboxConfig | None = None, pin: bool = True, package_sources: bool = False) -> None:
        self.sandbox = sandbox or SandboxConfig()
        self.pin = pin
        self.package_sources = package_sources
        """The user's `build.package_sources`: the repository's requirement lines may choose an index or URL."""
        self._surveys: dict[Path, Survey] = {}
        self.progress: Callable[[str], None] = lambda line: None
        """Told each slow step as it starts (`arex draft-env` prints it)."""
        self._pins: dict[tuple[str, ...], list[str]] = {}

    def draft(self, repo: Path, attempts: list[Attempt]) -> Draft:
        repo = repo.resolve()
        if repo not in self._surveys:
            self.progress(
                "reading the repository (tables, scripts, notebooks; a preparation script runs if no table ships)"
            )
            self._surveys[repo] = survey(repo, self.sandbox, self.pinned, self.package_sources)
        found = self._surveys[repo]
        plan = Plan()
        for attempt in attempts:
            if attempt.reason is not None:
                plan = revise(found, plan, attempt.reason)
        draft = compose(found, plan, self.pinned, self.package_sources)
        # The build's requirements preflight, run first: what it would reject is revised here,
        # without spending a build of the budget (pip dry runs: seconds, cached on disk).
        for _ in range(PREFLIGHT_REVISIONS if self.pin else 0):
            if draft.spec.get("requirements_file"):
                self.progress(f"requirements preflight of the draft ({draft.spec['requirements_file']}, pip dry run)")
            reason = preflight_draft(draft, repo, self.sandbox.image, self.package_sources)
            revised = None if reason is None else _requirements_rejected(found, plan, reason)
            revised = revised or (None if reason is None else _no_distribution(found, plan, reason))
            if revised is None:
                break
            plan = revised
            draft = compose(found, plan, self.pinned, self.package_sources)
        return draft

    def pinned(self, names: list[str], context: list[str] | tuple[str, ...] = ()) -> list[str]:
        """`names` pinned to the versions pip picks for the base image beside the `context` lines
        (the repository's own requirements), when arex can resolve pins."""
        key = (tuple(names), tuple(context))
        if key not in self._pins:
            if self.pin and names:
                self.progress(f"resolving versions of {', '.join(names)} (pip dry run)")
            self._pins[key] = pin_requirements(names, self.sandbox.image, list(context)) if self.pin else list(names)
        return self._pins[key]


PREFLIGHT_REVISIONS = 6


def preflight_draft(draft: Draft, repo: Path, image: str, package_sources: bool = False) -> str | None:
    """The build's requirements preflight of a draft that installs the repository's requirements
    file on `image`: None when they resolve (or when the preflight cannot run: the build then says
    why), else the build's reason."""
    from arex.drafting.prepare import deps_spec
    from arex.envs.judge_sources import SourceError
    from arex.envs.ml_images import normalise_requirements, requirement_lines, settle
    from arex.sandbox import SandboxError

    spec = draft.spec
    file = spec.get("requirements_file")
    if not file:  # the draft's own list: its pins were resolved on the image already
        return None
    try:
        if file in draft.add:
            given = list(spec.get("requirements", ())) + draft.add[file].splitlines()
            lines = normalise_requirements(given, "requirement", package_sources)
        else:
            lines = requirement_lines(deps_spec(spec.get("requirements", []), file), repo, package_sources)
        where = "the spec's requirements" + (f" and {file}" if file else "")
        settle(lines, image, (), bool(spec.get("requirements_relax")), where)
    except SourceError as exc:
        return str(exc)
    except (SandboxError, ValueError):
        return None
    return None


def pin_requirements(names: list[str], image: str, context: list[str] | None = None) -> list[str]:
    """Exact pins for the loose names, resolved together with `context` (so a pin never conflicts
    with the repository's own); a name pip cannot install (an import name that is no PyPI package)
    is dropped; when the context itself does not resolve, the names stay unpinned (pip then picks
    versions that fit the repository's pins at build time, and the preflight names what fails)."""
    from arex.envs.judge_sources import SourceError

    try:
        from arex.envs.ml_images import resolve_pins  # type: ignore[attr-defined]
    except ImportError:  # not in this arex yet: unpinned
        return list(names)
    kept = list(names)
    for _ in range(len(names)):
        loose = [n for n in kept if not re.search(r"[=<>~!@ ]", n)]
        try:
            pins = resolve_pins(loose + list(context or ()), image) if loose else {}
        except SourceError as exc:
            culprit = next((n for n in loose if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", str(exc))), None)
            if culprit is None:
                return list(names)
            kept.remove(culprit)
            continue
        return [f"{n}=={pins[n]}" if pins.get(n) else n for n in kept]
    return list(names)


# -- one draft -------------------------------------------------------------------------------------
def compose(found: Survey, plan: Plan, pinned: Pinner, package_sources: bool = False) -> Draft:
    target, t_conf, t_why = found.targets[plan.target]
    use_run = found.run_script is not None and not plan.wrapper
    column = found.table.column(target)
    assert column is not None
    hints = found.hints.get(target)
    options = metric_options(
        column, found.table.rows, bool(use_run and found.run_script and found.run_script.uses_proba), hints
    )
    metric, direction, m_why = options[min(plan.metric, len(options) - 1)]
    id_column, id_conf, id_why = choose_id(found, target, plan, use_run)
    m_conf = metric_confidence(m_why, hints)
    guesses = [g for g in found.guesses if g.field != "requirements_file"] + [
        Guess(field="data.target", value=target, confidence=t_conf, why=t_why),
        Guess(field="metric.name", value=f"{metric} ({direction})", confidence=m_conf, why=m_why),
        Guess(field="data.id_column", value=id_column, confidence=id_conf, why=id_why),
    ]
    add: dict[str, str] = {}
    if use_run:
        run, files, g = _repo_run(found, plan, id_column)
    else:
        run, files, g = wrapper_run(found, id_column, target, metric, add)
    guesses += g
    train, test, sub, sub_columns = files
    needs = _requirements(found, plan, use_run, pinned, package_sources, add)
    data: dict = {
        "table": found.table_path,
        "target": target,
        "id_column": id_column,
        "train_file": train,
        "test_file": test,
        "split": {"seed": 0, "test_fraction": 0.3, "public_fraction": 0.5, "stratify": metric in CLASSIFICATION},
    }
    if found.prepare_script:
        data = {"prepare": f"python3 {found.prepare_script}", **data}
    title = found.facts.readme_title or found.facts.root.name
    spec: dict = {
        "id": env_slug(found.facts.root.name),
        "title": title[:120],
        "statement": statement_path(found.facts.files),
        "requirements": needs.requirements,
    }
    if needs.requirements_file:
        spec["requirements_file"] = needs.requirements_file
    if needs.added is not None:
        add[needs.requirements_file] = needs.added  # type: ignore[index]
    if plan.relax:
        spec["requirements_relax"] = True
    spec |= {
        "run": run,
        "submission": {"file": sub, "id_column": sub_columns[0], "prediction_column": sub_columns[1]},
        "metric": {"name": metric, "direction": direction},
        "data": data,
        "time_limit_s": 300,
        "protected": list(dict.fromkeys([p for p in (found.prepare_script, train, test) if p])),
    }
    scrub = [e for e in dict.fromkeys(found.scrub + plan.scrub) if e not in plan.no_scrub]
    if scrub:
        spec["scrub"] = scrub
    if found.probes:
        spec["leak_probes"] = list(found.probes)
    add[spec["statement"]], misleading, g = write_statement(spec, found, found.remove + plan.remove)
    if found.table_add is not None:
        add[found.table_path] = found.table_add
    guesses += g + needs.guesses
    remove = list(dict.fromkeys(found.remove + plan.remove + misleading))
    if remove:
        guesses.append(
            Guess(
                field="remove",
                value=", ".join(remove),
                confidence="medium",
                why="other copies of the labelled table (or files the leak gate found)",
            )
        )
    guesses += [
        Guess(field="revision", value=str(i + 1), confidence="medium", why=text)
        for i, text in enumerate(plan.revisions)
    ]
    return Draft(spec=spec, add=add, remove=tuple(remove), guesses=tuple(guesses))


def _requirements(
    found: Survey, plan: Plan, use_run: bool, pinned: Pinner, package_sources: bool, add: dict[str, str]
) -> Requirements:
    """The repository's requirements file as the run needs it, and the packages the draft adds
    (the wrapper's, those a revision found missing), never a second pin of one the file pins."""
    imports = run_imports(found, None if use_run else add.get(WRAPPER))
    # Without a requirements file: what the run imports (a web app's Flask or ORM beside it is no
    # requirement of training), the wrapper's packages, and what a revision found missing.
    own = pypi_names(imports, local_modules(found.facts)) + (WRAPPER_PACKAGES if not use_run else [])
    own = list(dict.fromkeys(own + plan.requirements))
    needs = drafted_requirements(found.facts, own, imports, pinned, (plan.loosen, plan.dropped), package_sources)
    if found.facts.requirements_file:
        return needs
    names = sorted(set(own) - set(plan.dropped))
    bare = [r.split("==")[0] for r in needs.requirements]
    source = "the third-party modules the run imports (its script and the repository's modules it imports)" + (
        " (and the wrapper's)" if not use_run else ""
    )
    pins = (
        "pinned to the versions pip resolves for the base image"
        if needs.requirements != bare
        else "unpinned: pip takes the newest at build time"
    )
    if len(bare) < len(names):
        pins += f"; left out (pip cannot install them): {', '.join(n for n in names if n not in bare)}"
    value = ", ".join(needs.requirements) or "(none)"
    needs.guesses = [Guess(field="requirements", value=value, confidence="medium", why=f"{source}; {pins}")]
    return needs


def run_imports(found: Survey, wrapper: str | None) -> list[str]:
    """The modules the run imports: its script's (or the added wrapper's), the preparation
    script's, and those of the repository's own modules they import, transitively."""
    scripts = {module_name(s.path): s for s in found.facts.scripts}
    scripts |= {Path(s.path).stem: s for s in found.facts.scripts if Path(s.path).stem not in scripts}
    start = scan_script(WRAPPER, wrapper).imports if wrapper is not None else []
    prepare = scripts.get(module_name(found.prepare_script)) if found.prepare_script else None
    for script in (found.run_script if wrapper is None else None, prepare):
        start += script.imports if script is not None else []
    out: list[str] = []
    queue, seen = list(start), set()
    while queue:
        module = queue.pop(0)
        if module in out:
            continue
        out.append(module)
        local = scripts.get(module) or scripts.get(module.split(".")[0])
        if local is not None and local.path not in seen:
            seen.add(local.path)
            queue += local.imports
    return out


def _repo_run(found: Survey, plan: Plan, id_column: str) -> tuple[str, tuple[str, str, str, list[str]], list[Guess]]:
    script = found.run_script
    assert script is not None and found.train_literal and found.test_literal and found.submission_literal
    columns = plan.submission_columns or script.submission_columns[:2]
    read = bool(columns)
    why_columns = (
        f"{script.path} writes these columns" if columns else "the default columns (the script's could not be read)"
    )
    columns = columns if len(columns) == 2 else [id_column, "prediction"]
    guesses = [
        Guess(
            field="run",
            value=f"python3 {script.path}",
            confidence="high",
            why=(
                f"{script.path} reads {found.train_literal} and {found.test_literal} "
                f"and writes {found.submission_literal}"
            ),
        ),
        Guess(
            field="data.train_file",
            value=found.train_literal,
            confidence="high",
            why=f"the path {script.path} reads its training rows from",
        ),
        Guess(
            field="data.test_file",
            value=found.test_literal,
            confidence="high",
            why=f"the path {script.path} reads the rows to predict from",
        ),
        Guess(
            field="submission",
            value=f"{found.submission_literal}: {columns[0]},{columns[1]}",
            confidence="high" if read else "low",
            why=why_columns,
        ),
    ]
    return (
        f"python3 {script.path}",
        (found.train_literal, found.test_literal, found.submission_literal, columns),
        guesses,
    )


def choose_id(found: Survey, target: str, plan: Plan, use_run: bool) -> tuple[str, str, str]:
    """The row id: the column the run script writes ids from, else a unique id-like column, else
    a new one the build numbers."""
    table = found.table
    written = plan.submission_columns or (found.run_script.submission_columns if use_run and found.run_script else [])
    if written and written[0] != target:
        column = table.column(written[0])
        if column is None or column.unique:
            return (
                written[0],
                "high",
                f"the run script writes its ids from {written[0]!r}"
                + ("" if column else "; the build numbers the rows"),
            )
    for column in table.columns:
        if (
            column.name != target
            and column.unique
            and ID_NAME.match(column.name)
            and (column.integer or not column.numeric)
        ):
            return column.name, "medium", f"{column.name!r} is unique in every row and named like an id"
    name = "id" if table.column("id") is None else "arex_id"
    return name, "low", f"no unique id-like column: the build adds {name!r} numbering the rows"


def env_slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().removesuffix(".git")).strip("-")
    return slug[:60] or "ml-env"


# -- revising from a gate's reason ------------------------------------------------------------------
def revise(found: Survey, plan: Plan, reason: str) -> Plan:
    """The plan for the next attempt, changed where a rule knows what the reason means; else DraftError."""
    rules = (_leak, _scrub_missing, _missing_module, _no_distribution, _requirements_rejected)
    for rule in rules + (_submission_columns, _no_target, _no_headroom):
        revised = rule(found, plan, reason)
        if revised is not None:
            return revised
    if "gate 'no-op clearly worse' failed" in reason:
        return _next_metric(found, plan)
    if any(
        f"gate '{g}' failed" in reason
        for g in ("baseline runs", "baseline deterministic", "mutation changes the score")
    ):
        return _escalate(found, plan, reason.split(":")[0])
    # No rule knows this reason: the budget is better spent on the next thing to try than on stopping.
    return _escalate(found, plan, f"no rule for the reason ({clip(reason, 200)})")


def _with(plan: Plan, why: str, **changes) -> Plan:
    return plan.model_copy(update={**changes, "revisions": plan.revisions + [why]})


def _next_metric(found: Survey, plan: Plan) -> Plan:
    target = found.targets[plan.target][0]
    column = found.table.column(target)
    use_run = found.run_script is not None and not plan.wrapper
    options = metric_options(
        column,  # type: ignore[arg-type]
        found.table.rows,
        bool(use_run and found.run_script and found.run_script.uses_proba),
        found.hints.get(target),
    )
    if plan.metric + 1 < len(options):
        return _with(
            plan,
            (
                f"the no-op scored as well as the baseline with {options[plan.metric][0]}: "
                f"trying {options[plan.metric + 1][0]}"
            ),
            metric=plan.metric + 1,
        )
    return _escalate(found, plan, "gate 'no-op clearly worse' failed with every metric")


def _escalate(found: Survey, plan: Plan, what: str) -> Plan:
    """The repository's script → the generic wrapper → the next candidate target."""
    if not plan.wrapper and found.run_script is not None:
        return _with(
            plan,
            f"{what}: training with the generated {WRAPPER} instead of {found.run_script.path}",
            wrapper=True,
            metric=0,
        )
    if plan.target + 1 < len(found.targets):
        nxt = found.targets[plan.target + 1][0]
        return _with(plan, f"{what}: trying the target {nxt!r}", target=plan.target + 1, metric=0)
    raise DraftError(
        f"{what}, and the heuristic drafter has tried every target it found ({', '.join(t[0] for t in found.targets)})"
    )


def _leak(found: Survey, plan: Plan, reason: str) -> Plan | None:
    if "gate 'private labels unreachable' failed" not in reason:
        return None
    paths = [m.rstrip(".") for m in re.findall(r"/workspace/([^\s'\",;:()]+)", reason)]
    new = [p for p in dict.fromkeys(paths) if p in found.facts.files and p not in plan.remove + found.remove]
    # A library's own copy of the dataset (scikit-learn ships Titanic among its OpenML test files).
    installed = [m.rstrip(".") for m in re.findall(r"/(?:dist|site)-packages/([^\s'\",;:()]+)", reason)]
    scrub = [p for p in dict.fromkeys(installed) if p not in plan.scrub + found.scrub]
    if not new and not scrub:
        raise DraftError(
            f"the leak gate failed and names no repository or package file to leave out: {clip(reason, 300)}"
        )
    what = [f"removed {', '.join(new)}"] * bool(new) + [f"scrubbed {', '.join(scrub)} from the image"] * bool(scrub)
    return _with(
        plan,
        f"the leak gate found labelled rows: {'; '.join(what)}",
        remove=plan.remove + new,
        scrub=plan.scrub + scrub,
    )


def _scrub_missing(found: Survey, plan: Plan, reason: str) -> Plan | None:
    missing = [m for m in re.findall(r"scrub: (\S+) does not exist in the image", reason) if m not in plan.no_scrub]
    return (
        _with(plan, f"{', '.join(missing)} is not in the image: not scrubbed", no_scrub=plan.no_scrub + missing)
        if missing
        else None
    )


def _missing_module(found: Survey, plan: Plan, reason: str) -> Plan | None:
    modules = re.findall(r"No module named '([\w.]+)'", reason)
    names = [IMPORT_TO_PYPI.get(m, IMPORT_TO_PYPI.get(m.split(".")[0], m.split(".")[0])) for m in modules]
    new = [n for n in dict.fromkeys(names) if n not in plan.requirements and n not in plan.dropped]
    return (
        _with(plan, f"the run lacked {', '.join(new)}: added to the requirements", requirements=plan.requirements + new)
        if new
        else None
    )


def _no_distribution(found: Survey, plan: Plan, reason: str) -> Plan | None:
    names = re.findall(r"No matching distribution found for ([\w.-]+)", reason)
    names += [
        m for m in re.findall(r"\): ([\w.-]+)\S* in .*? cannot be installed .*?versions that install: none", reason)
    ]
    new = [n for n in names if n not in plan.dropped]
    return (
        _with(
            plan, f"pip has no {', '.join(new)} (an import name, not a PyPI name?): dropped", dropped=plan.dropped + new
        )
        if new
        else None
    )


def _requirements_rejected(found: Survey, plan: Plan, reason: str) -> Plan | None:
    """A requirements preflight failed: relax the exact pins, then unpin what it names, then leave it out."""
    change = preflight_change(reason, plan.relax, plan.loosen, plan.dropped)
    if change is None:
        return None
    what, names, why = change
    if what == "relax":
        return _with(plan, f"{why} (requirements_relax)", relax=True)
    if what == "loosen":
        return _with(plan, why, loosen=plan.loosen + names.split(","))
    return _with(plan, why, dropped=plan.dropped + [names])


def _no_headroom(found: Survey, plan: Plan, reason: str) -> Plan | None:
    """The baseline scores the metric's best: the next candidate target, if any (a perfect score on
    the first guess often means a column derived from the label, or the wrong label)."""
    if "gate 'baseline leaves headroom' failed" not in reason:
        return None
    if plan.target + 1 < len(found.targets):
        nxt = found.targets[plan.target + 1][0]
        return _with(plan, f"the baseline already scores the best: trying the target {nxt!r}", target=plan.target + 1)
    raise DraftError(f"{clip(reason, 300)}; the drafter has no other target to try")


def _submission_columns(found: Survey, plan: Plan, reason: str) -> Plan | None:
    match = re.search(r"has no '[^']*' column \(columns found: ([^)]*)\)", reason)
    if not match or plan.wrapper or plan.submission_columns:
        return None
    columns = [c.strip() for c in match.group(1).split(",")]
    if len(columns) != 2:
        return None
    return _with(
        plan, f"the submission has the columns {columns[0]},{columns[1]}: the spec says so", submission_columns=columns
    )


def _no_target(found: Survey, plan: Plan, reason: str) -> Plan | None:
    if "has no target column" not in reason:
        return None
    return _escalate(found, plan.model_copy(update={"wrapper": True}), "the table lacks the target")
