"""The heuristic drafter's reading of a repository, done once for all attempts: the table (shipped,
or written by a preparation script run in a sandbox), the run script and its file literals, the
requirements, the candidate targets and metrics, and what to remove or scrub."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from arex.drafting.base import DraftError, Guess
from arex.drafting.inspect import (
    RepoFacts,
    ScriptInfo,
    TableInfo,
    csv_text,
    inspect_repo,
    is_submission,
    local_modules,
    pypi_names,
    read_table,
)
from arex.drafting.prepare import PACKAGED_DATA, deps_spec, existing_scrub, prepare_candidates, run_prepare
from arex.drafting.requirements import preparation_requirements
from arex.drafting.target import (
    TARGET_NAMES,
    Layout,
    TaskHints,
    kaggle_layout,
    target_candidates,
    task_hints,
)
from arex.sandbox import SandboxConfig

RUN_NAMES = ("train", "main", "baseline", "run", "solution", "model", "predict", "fit")


class Survey(BaseModel):
    """What the drafter read from the repository, and what it decided once for all attempts."""

    facts: RepoFacts
    table: TableInfo
    table_path: str
    """data.table: the shipped table, the prepared one, or a CSV conversion added by the draft."""
    table_add: str | None = None
    """The converted table's text (when the shipped one is not UTF-8 comma-separated CSV)."""
    prepare_script: str | None = None
    run_script: ScriptInfo | None = None
    train_literal: str | None = None
    test_literal: str | None = None
    submission_literal: str | None = None
    requirements: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)
    scrub: list[str] = Field(default_factory=list)
    probes: list[str] = Field(default_factory=list)
    targets: list[tuple[str, str, str]] = Field(default_factory=list)
    """Candidate targets, best first: (column, confidence, why)."""
    layout: Layout = Field(default_factory=Layout)
    """A competition's unlabelled test table and sample submission beside the labelled table."""
    hints: dict[str, TaskHints] = Field(default_factory=dict)
    """Per candidate target: the metrics and the kind of task the repository names."""
    guesses: list[Guess] = Field(default_factory=list)


# -- the survey ----------------------------------------------------------------------------------
def survey(repo: Path, sandbox: SandboxConfig, pinned, package_sources: bool = False) -> Survey:
    facts = inspect_repo(repo)
    run, train, test, sub = find_run_script(facts)
    requirements = (
        []
        if facts.requirements_file
        else pypi_names(
            # and the library of a notebook's model, which the generated baseline may build
            [m for s in facts.scripts for m in s.imports]
            + [ln.split()[1] for nb in facts.notebooks for m in nb.code.models for ln in m[0].splitlines()],
            local_modules(facts),
        )
    )
    guesses = _requirements_guess(facts)
    shipped = [t for t in facts.tables if not t.note and (t.path != test or train == t.path)]
    if shipped:
        table = _pick_table(shipped, train, facts.scripts + facts.notebooks)
        found = Survey(facts=facts, table=table, table_path=table.path, requirements=requirements, guesses=guesses)
        why = (
            f"{table.path}: of {len(shipped)} shipped tables, the run script's, "
            f"else read (not written) by a script, label-like, largest ({table.rows} rows)"
        ) + (f"; over the read cap: {table.sampled}" if table.sampled else "")
        found.guesses.append(Guess(field="data.table", value=table.path, confidence="high", why=why))
        clash = Path(table.path).name in {"labels.csv", "train.csv", "test.csv"} | {
            Path(p).name for p in (train, test) if p
        }
        # no run script, but code reading the table: the training rows go where it reads (baseline.wrapper_paths)
        clash = clash or (run is None and reads_table(facts, table.path))
        if not table.plain_csv or clash:
            _convert(found, repo, clash)
    else:
        found = _prepared(facts, repo, run, requirements, sandbox, pinned, package_sources)
        found.guesses = guesses + found.guesses
    found.run_script, found.train_literal, found.test_literal, found.submission_literal = run, train, test, sub
    found.layout = kaggle_layout(found.table, facts.tables)
    found.targets = target_candidates(found.table, run, facts, found.layout)
    if not found.targets:
        raise DraftError(
            f"table {found.table_path} has no column that could be the target "
            f"(columns: {', '.join(found.table.names[:10])})"
        )
    found.hints = {name: task_hints(facts, name) for name, _, _ in found.targets}
    found.remove += [t.path for t in facts.tables if _duplicates(t, found)]
    return found


def _requirements_guess(facts: RepoFacts) -> list[Guess]:
    if facts.requirements_file:
        return [
            Guess(
                field="requirements_file",
                value=facts.requirements_file,
                confidence="high",
                why="the repository ships it",
            )
        ]
    return []


def _pick_table(tables: list[TableInfo], train_literal: str | None, scripts: list[ScriptInfo]) -> TableInfo:
    """The run script's training file; else, best first: not an output of the repository's own
    scripts (result tables), not a competition's unlabelled test table (its columns are another
    table's less a few), read by a script or notebook, holding a column named like a label, the largest."""
    named = [t for t in tables if t.path == train_literal]
    if named:
        return named[0]
    written = {Path(w).name for s in scripts for w in s.written}
    read = {Path(lit).name for s in scripts for lit in s.literals if lit not in s.written}

    def rank(t: TableInfo) -> tuple:
        name = Path(t.path).name
        labelled = any(c.name.lower() in TARGET_NAMES for c in t.columns)
        unlabelled = "test" in Path(t.path).stem.lower() and any(set(t.names) < set(o.names) for o in tables)
        return (name not in written, not unlabelled, name in read, labelled, t.rows * len(t.columns), t.path)

    return max(tables, key=rank)


def _convert(found: Survey, repo: Path, clash: bool) -> None:
    """A table the build cannot read as it is (TSV, JSON, parquet, xlsx), or one named like a file
    of the workspace (train.csv: the leak gate flags any file named like the table), becomes an
    added CSV under another name; the original is removed so it does not reach the workspace."""
    original = found.table
    names = original.names if original.header_from else None  # a headerless table gets its header
    found.table_add = csv_text(original.path, (repo / original.path).read_bytes(), names)
    found.table_path = f"arex_data/{Path(original.path).stem}_table.csv"
    found.remove.append(original.path)
    found.guesses = [g for g in found.guesses if g.field != "data.table"]
    why = (
        f"{original.path} is named like a file of the agent's workspace"
        if clash
        else f"{original.path} is {original.format} (delimiter {original.delimiter!r})"
    ) + (f", without a header row (column names: {original.header_from})" if original.header_from else "")
    found.guesses.append(
        Guess(
            field="data.table",
            value=found.table_path,
            confidence="medium",
            why=f"{why}: the draft adds its {original.rows} rows as {found.table_path} (CSV)",
        )
    )


def _prepared(
    facts: RepoFacts,
    repo: Path,
    run: ScriptInfo | None,
    requirements: list[str],
    sandbox: SandboxConfig,
    pinned,
    package_sources: bool = False,
) -> Survey:
    """No table shipped: run each preparation candidate (in the dependency image, no network) until
    one writes a table."""
    from arex.envs.ml_images import deps_image

    candidates = prepare_candidates(facts, run.path if run else None)
    if not candidates:
        raise DraftError(
            "the repository ships no table (csv, tsv, xlsx, parquet, json) "
            "and has no script that looks like it writes one (make_data.py, prepare.py, ...)"
            + "".join(f"; {t.path} could not be read: {t.note}" for t in facts.tables if t.note)
        )
    needs = preparation_requirements(facts, requirements, pinned, package_sources)  # C1's: web-app lines left out
    deps = deps_image(deps_spec(*needs), repo, sandbox.image, package_sources)
    errors = []
    for script in candidates[:3]:
        prepared = run_prepare(repo, script.path, deps, sandbox)
        if prepared.table is None:
            errors.append(f"{script.path}: {prepared.error}")
            continue
        table = read_table(prepared.table, prepared.blob)
        if table.note or not table.plain_csv:
            errors.append(
                f"{script.path} wrote {prepared.table}, which is not UTF-8 comma-separated CSV "
                f"({table.note or table.format})"
            )
            continue
        text = (repo / script.path).read_text(encoding="utf-8", errors="replace")
        loaders = [name for name in PACKAGED_DATA if re.search(rf"\b{name}\b", text)]
        scrub = existing_scrub([e for name in loaders for e in PACKAGED_DATA[name]], deps, sandbox)
        probes = [f"python3 -c 'from sklearn.datasets import {name}; {name}()'" for name in loaders]
        found = Survey(
            facts=facts,
            table=table,
            table_path=prepared.table,
            prepare_script=script.path,
            requirements=requirements,
            scrub=scrub,
            probes=probes,
        )
        found.guesses += [
            Guess(
                field="data.prepare",
                value=prepared.command,
                confidence="high",
                why=f"{script.path} ran without network in the dependency image and wrote {prepared.table}",
            ),
            Guess(
                field="data.table",
                value=prepared.table,
                confidence="high",
                why=f"the largest table {script.path} wrote ({table.rows} rows, {len(table.columns)} columns)",
            ),
        ]
        if loaders:
            why = (
                f"{script.path} calls {', '.join(loaders)}, whose data ships inside scikit-learn: "
                "scrubbed, and loading it must fail"
            )
            found.guesses.append(
                Guess(field="scrub", value=", ".join(scrub) or "(none found)", confidence="medium", why=why)
            )
        return found
    raise DraftError("no preparation script wrote a usable table: " + "; ".join(errors))


def find_run_script(facts: RepoFacts) -> tuple[ScriptInfo | None, str | None, str | None, str | None]:
    """The script that reads a train and a test CSV and writes a submission CSV, with those three
    literals (a script named train/main/baseline first)."""
    found = []
    for s in facts.scripts:
        reads = [lit for lit in s.literals if lit not in s.written and lit.lower().endswith(".csv")]
        train = next((lit for lit in reads if "train" in Path(lit).stem.lower()), None)
        test = next((lit for lit in reads if "test" in Path(lit).stem.lower()), None)
        sub = next((w for w in s.written if w.lower().endswith(".csv") and is_submission(w)), None)
        if train and test and sub:
            stem = Path(s.path).stem.lower()
            rank = next((i for i, name in enumerate(RUN_NAMES) if name in stem), len(RUN_NAMES))
            found.append((rank, s.path.count("/"), s.path, (s, train, test, sub)))
    return min(found)[3] if found else (None, None, None, None)


def _duplicates(other: TableInfo, found: Survey) -> bool:
    """Another labelled copy of the table (its columns include most of the table's, the target among them)."""
    if other.path in (found.table.path, found.table_path) or other.note:
        return False
    if other.path in (found.train_literal, found.test_literal) and not found.table_add:
        return False  # written by the build at that path anyway
    shared = set(other.names) & set(found.table.names)
    return len(shared) >= max(2, len(found.table.names) // 2) and found.targets[0][0] in shared


def reads_table(facts: RepoFacts, path: str) -> bool:
    """A script or notebook of the repository reads the file at `path` (by its name)."""
    name = Path(path).name
    return any(
        Path(lit).name == name for s in facts.scripts + facts.notebooks for lit in s.literals if lit not in s.written
    )
