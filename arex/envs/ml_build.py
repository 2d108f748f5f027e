"""ML-repository sources: a git repository (URL or path, at a commit) with a task spec → a built env.

Steps: fetch (GitPython, shallow where possible, cached by URL and commit) → load the spec →
dependency image (base + requirements, network during the build only, host CA bundle and pip
settings passed through) → prepare the labelled table (no network) → seeded, checksummed split →
env image (dependencies + the agent's workspace, scrubbed of package copies of the data) → gates.
The held-out labels go to the env's private/ folder and never into any image.
"""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path

import git

from arex.envs.judge_sources import SourceError
from arex.envs.leak_probe import build_probe
from arex.envs.ml_data import csv_bytes, decode_table, decode_text, prepare_table, split_table
from arex.envs.ml_gates import run_ml_gates, stage
from arex.envs.ml_images import deps_image, env_image, relaxed_pins
from arex.envs.ml_source import (
    BUILDER_VERSION,
    Checkout,
    MLSource,
    content_digest,
    fetch,
    is_ml_source,
    load_ml_spec,
    open_source,
    parse_source,
)
from arex.envs.report import EnvReport, finish, skipped_report, write_task
from arex.envs.skills import SOURCE_SKILLS
from arex.envs.staging import staging
from arex.hashing import bytes_sha256, text_sha256
from arex.record.canary import CANARY_FILE, make_canary
from arex.sandbox import SandboxConfig, SandboxError

__all__ = [
    "MLSource",
    "build_ml",
    "crash_reason",
    "env_id",
    "fetch",
    "is_ml_source",
    "load_ml_spec",
    "open_source",
    "parse_source",
    "split_table",
]


def build_ml(path: Path, out: Path, sandbox: SandboxConfig, package_sources: bool = False) -> EnvReport:
    """One ML source's report; never raises: an exception no check anticipated is an `error` row.
    `package_sources`: the user lets requirement lines choose a package index or URL."""
    started = time.monotonic()
    try:
        checkout = open_source(path)
        content = content_digest(checkout, sandbox.image)
    except (SourceError, OSError, git.GitError) as exc:
        return EnvReport(str(path), None, "rejected", f"unreadable source: {exc}", seconds=time.monotonic() - started)
    except Exception as exc:  # noqa: BLE001 - reported as this source's error; the batch goes on
        return EnvReport(str(path), None, "error", crash_reason(exc), seconds=time.monotonic() - started)
    skipped = skipped_report(out / checkout.spec.id, content, path, started)
    if skipped is not None:
        return skipped
    report = EnvReport(str(path), checkout.spec.id, "rejected")
    try:
        _build_and_gate(report, checkout, content, out, sandbox, package_sources)
    except SourceError as exc:
        report.reason = str(exc)
    except SandboxError as exc:
        report.status, report.reason = "error", f"SandboxError: {exc}"
    except Exception as exc:  # noqa: BLE001 - reported as this source's error; the batch goes on
        report.status, report.reason = "error", crash_reason(exc)
    report.seconds = time.monotonic() - started
    return report


def env_id(path: Path) -> str:
    """The id an ML source's env gets, read before the batch builds (the fetch is cached)."""
    return open_source(path).spec.id


def crash_reason(exc: BaseException) -> str:
    """An exception no check anticipated, as one sentence: its type, message and the innermost arex
    line it passed through, so a user can report it without a traceback on their console."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/arex/" in f.filename.replace("\\", "/")]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    message = " ".join(str(exc).split()) or "no message"
    return (
        f"unexpected {type(exc).__name__}: {message}{where}; "
        "this is an arex bug or an input it does not handle yet, please report it."
    )


def _build_and_gate(
    report: EnvReport,
    checkout: Checkout,
    content: str,
    out: Path,
    sandbox: SandboxConfig,
    package_sources: bool = False,
) -> None:
    """Images, data split and env folder; the gates; into place under `out` if they all pass."""
    spec = checkout.spec
    stage(spec.id, "requirements preflight and dependency image")
    deps = deps_image(spec, checkout.folder, sandbox.image, package_sources)
    stage(spec.id, "data table and split" + (f" ({spec.data.prepare})" if spec.data.prepare else ""))
    text, encoding = decode_table(spec.data, prepare_table(spec, checkout.folder, deps, sandbox))
    columns, train, public, private = split_table(spec, text)
    out.mkdir(parents=True, exist_ok=True)
    with staging(out, spec.id) as tmp:  # a killed build's is deleted by the next build into `out`
        work = tmp / spec.id
        checksums = _write_data(work, checkout, columns, train, public, private)
        (work / CANARY_FILE).write_text(make_canary(f"{spec.id}\0{content}") + "\n")
        (work / "statement.md").write_text(
            decode_text((checkout.folder / spec.statement).read_bytes()), encoding="utf-8"
        )
        stage(spec.id, "env image")
        image = env_image(spec, deps, work / "workspace", content)
        relaxed = relaxed_pins(spec, checkout.folder, sandbox.image, package_sources)
        spec = spec.model_copy(
            update={
                "image": image,
                "source_url": checkout.source.url,
                "source_commit": checkout.commit,
                "source_hash": content,
                "checksums": checksums,
                "requirements_relaxed": relaxed,
            }
        )
        write_task(work, spec)
        log = run_ml_gates(work, spec, train, sandbox, build_probe(spec.data, columns, train, public + private))
        log.notes += [f"requirements relaxed: {name} {change}" for name, change in spec.requirements_relaxed.items()]
        if encoding not in ("utf-8", "ascii"):
            log.notes.append(
                f"data.table read as {encoding}{'' if spec.data.encoding == 'auto' else ' (data.encoding)'}, "
                "written as UTF-8"
            )
        # The spec is written only if every gate passed, and then the baseline score is known.
        accepted = spec.model_copy(update={"baseline_score": log.scores.get("baseline")})
        finish(report, log, work, out / spec.id, accepted, content, BUILDER_VERSION, skills_from=checkout.folder)


def _write_data(
    work: Path, checkout: Checkout, columns: list[str], train: list[dict], public: list[dict], private: list[dict]
) -> dict[str, str]:
    """The workspace (the repository without its labelled table, plus the train and test files)
    and private/labels.csv; returns their checksums."""
    data, workspace = checkout.spec.data, work / "workspace"
    for p in checkout.files:
        rel = p.relative_to(checkout.folder).as_posix()
        if rel == Path(data.table).as_posix():
            continue  # the full labelled table never enters the workspace
        if rel.startswith(f"{SOURCE_SKILLS}/"):
            continue  # the env's own skills are mounted apart (/task-skills), not workspace files
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, workspace / rel)
    train_csv = csv_bytes(columns, train)
    test_csv = csv_bytes(
        [c for c in columns if c != data.target], sorted(public + private, key=lambda r: text_sha256(r[data.id_column]))
    )
    labels_csv = csv_bytes(
        [data.id_column, data.target, "split"],
        [{**r, "split": "public"} for r in public] + [{**r, "split": "private"} for r in private],
    )
    for rel, blob in ((data.train_file, train_csv), (data.test_file, test_csv)):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(blob)
    (work / "private").mkdir(parents=True)
    (work / "private" / "labels.csv").write_bytes(labels_csv)
    return {"train": bytes_sha256(train_csv), "test": bytes_sha256(test_csv), "labels": bytes_sha256(labels_csv)}
