"""ML-repository sources: a git repository (URL or path, at a commit) with a task spec → a built env.

Steps: fetch (GitPython, shallow where possible, cached by URL and commit) → load the spec →
dependency image (base + requirements, network during the build only, host CA bundle and pip
settings passed through) → prepare the labelled table (no network) → seeded, checksummed split →
env image (dependencies + the agent's workspace, scrubbed of package copies of the data) → gates.
The held-out labels go to the env's private/ folder and never into any image.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

import docker
import docker.errors
import git
import yaml

from arex.canary import CANARY_FILE, make_canary
from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.report import EnvReport, GateLog, finish, skipped_report, write_task
from arex.grading.ml import METRICS, MLGrader, resolve_metric
from arex.hashing import bytes_sha256, cache_dir, json_sha256, text_sha256, tree_sha256
from arex.sandbox import SandboxConfig, SandboxError, make_sandbox
from arex.sandbox.base import Sandbox
from arex.sandbox.docker import docker_client
from arex.specs import GradeResult, MLSpec, read_spec_yaml, validate_spec

SPEC_FILE = "arex.yaml"
BUILDER_VERSION = "ml-1"
TABLE_CAP = 512 << 20
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class MLSource:
    url: str
    """git URL (https://, file://, a path to a git repository) or a plain folder."""
    rev: str | None
    spec: dict | None
    """Spec given beside the repository (None: read arex.yaml from it)."""
    origin: str
    """What the user passed, for reports."""


def is_ml_source(path: Path) -> bool:
    if path.is_dir():
        return (path / SPEC_FILE).is_file()
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            return False
        return isinstance(data, dict) and "repo" in data
    return False


def parse_source(path: Path) -> MLSource:
    if path.is_dir():
        return MLSource(url=str(path.resolve()), rev=None, spec=None, origin=str(path))
    data = read_spec_yaml(path, SourceError)
    repo = data.get("repo")
    if not isinstance(repo, str):
        raise SourceError(f"{path}: field 'repo' must be a git URL or a path")
    if repo.startswith((".", "/")) or "://" not in repo:
        repo = str((path.parent / repo).resolve()) if not Path(repo).is_absolute() else repo
    spec = data.get("spec")
    if isinstance(spec, str):
        spec_path = path.parent / spec
        if not spec_path.is_file():
            raise SourceError(f"{path}: field 'spec': file {spec} does not exist")
        spec = read_spec_yaml(spec_path, SourceError)
    return MLSource(url=repo, rev=str(data["commit"]) if data.get("commit") is not None else None, spec=spec, origin=str(path))


# -- fetching --------------------------------------------------------------------------------
def fetch(source: MLSource) -> tuple[Path, str]:
    """A checkout of the source at its commit (cached), and the commit id ('worktree' for a plain folder)."""
    local = Path(source.url)
    if source.rev is None and local.is_dir() and not (local / ".git").exists():
        return local, "worktree"
    if source.rev is None and local.is_dir():
        source = MLSource(source.url, "HEAD", source.spec, source.origin)
    url = source.url if "://" in source.url else f"file://{Path(source.url).resolve()}"
    rev = source.rev or "HEAD"
    sha = rev if _SHA.match(rev) else _resolve(url, rev)
    key = text_sha256(f"{url}\0{sha or rev}")[:20]
    checkout = cache_dir() / "repos" / key
    if (checkout / ".arex-complete").is_file():
        return checkout, (checkout / ".arex-complete").read_text().strip()
    (cache_dir() / "repos").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=cache_dir() / "repos"))
    try:
        repo = git.Repo.init(tmp)
        repo.create_remote("origin", url)
        try:
            repo.git.fetch("--depth", "1", "origin", sha or rev)
        except git.GitCommandError:
            try:  # servers that refuse fetching a commit by id: take everything, then look it up
                repo.git.fetch("origin", "+refs/heads/*:refs/remotes/origin/*", "--tags")
            except git.GitCommandError as exc:
                raise SourceError(f"cannot fetch {url}: {_git_reason(exc)}") from None
            try:
                repo.git.rev_parse("--verify", f"{sha or rev}^{{commit}}")
            except git.GitCommandError:
                raise SourceError(f"commit '{rev}' does not exist in {url}") from None
            repo.git.checkout("--detach", sha or rev)
        else:
            repo.git.checkout("--detach", "FETCH_HEAD")
        commit = repo.head.commit.hexsha
        shutil.rmtree(tmp / ".git")
        (tmp / ".arex-complete").write_text(commit)
        if checkout.exists():
            shutil.rmtree(tmp)
        else:
            checkout.parent.mkdir(parents=True, exist_ok=True)
            tmp.rename(checkout)
        return checkout, commit
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _resolve(url: str, rev: str) -> str | None:
    try:
        out = git.Git().ls_remote(url, rev)
    except git.GitCommandError as exc:
        raise SourceError(f"cannot reach {url}: {_git_reason(exc)}") from None
    line = out.splitlines()[0] if out.strip() else ""
    return line.split()[0] if line else None


def _git_reason(exc: git.GitCommandError) -> str:
    text = (exc.stderr or str(exc)).strip().replace("stderr: ", "").strip("'\n ")
    return text.splitlines()[-1] if text else str(exc)


def load_ml_spec(checkout: Path, source: MLSource) -> MLSpec:
    where = Path(source.origin) if source.spec is not None else checkout / SPEC_FILE
    raw = source.spec
    if raw is None:
        if not (checkout / SPEC_FILE).is_file():
            raise SourceError(f"{source.origin}: no {SPEC_FILE} in the repository and no spec given beside it")
        raw = read_spec_yaml(checkout / SPEC_FILE, SourceError)
    spec = validate_spec(MLSpec, raw, where if source.spec is None else f"{where} (under 'spec')", SourceError)
    generated = {spec.data.train_file, spec.data.test_file}
    named = [("statement", spec.statement)] + [("protected", p) for p in spec.protected if p not in generated]
    if spec.requirements_file:
        named.append(("requirements_file", spec.requirements_file))
    if spec.mutation:
        named.append(("mutation.file", spec.mutation.file))
    if not spec.data.prepare:
        named.append(("data.table", spec.data.table))
    for field, rel in named:
        if not (checkout / rel).is_file():
            raise SourceError(f"{where}: field '{field}' names '{rel}', which is not in the repository")
    if spec.metric.name not in METRICS:
        try:
            resolve_metric(spec.metric.name, checkout)
        except ValueError as exc:
            raise SourceError(f"{where}: field 'metric.name': {exc}") from None
    return spec


# -- images ----------------------------------------------------------------------------------
def host_ca_bundle() -> Path | None:
    """The CA bundle this host's pip trusts (auto-detected), to pass into image builds."""
    if os.environ.get("AREX_BUILD_CA", "").lower() == "none":
        return None
    for value in (os.environ.get("AREX_BUILD_CA"), os.environ.get("PIP_CERT"), os.environ.get("REQUESTS_CA_BUNDLE"), os.environ.get("SSL_CERT_FILE")):
        if value and Path(value).is_file():
            return Path(value)
    try:
        out = subprocess.run(["python3", "-m", "pip", "config", "get", "global.cert"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and Path(out.stdout.strip()).is_file():
            return Path(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def _pip_build_args() -> dict[str, str]:
    """Index and proxy settings the build may need; file:// indexes cannot be seen from a build."""
    args = {}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        value = os.environ.get(key)
        if value:
            kept = " ".join(v for v in value.split() if not v.startswith("file:"))
            if kept:
                args[key] = kept
    return args


def _image_exists(client, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(client, context: Path, tag: str, network: str, labels: dict[str, str], buildargs: dict[str, str] | None = None) -> None:
    try:
        client.images.build(path=str(context), tag=tag, network_mode=network, rm=True, forcerm=True, pull=False, labels=labels, buildargs=buildargs or {})
    except docker.errors.BuildError as exc:
        lines = [str(chunk.get("stream") or chunk.get("error") or "").rstrip() for chunk in exc.build_log]
        tail = "\n".join(line for line in lines if line)[-1500:]
        raise SourceError(f"image build failed: {exc.msg}\n{tail}") from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"image build failed in the engine: {exc.explanation or exc}") from None


def deps_image(spec: MLSpec, checkout: Path, base: str) -> str:
    """Base + apt packages + requirements. Shared by every env with the same dependencies."""
    client = docker_client()
    requirements = "\n".join(spec.requirements) + "\n"
    if spec.requirements_file:
        requirements += (checkout / spec.requirements_file).read_text(encoding="utf-8")
    base_id = client.images.get(base).id
    digest = json_sha256([base_id, requirements, list(spec.apt), BUILDER_VERSION])[:16]
    tag = f"arex-deps:{digest}"
    if _image_exists(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-deps-") as ctx:
        ctx_path = Path(ctx)
        (ctx_path / "requirements.txt").write_text(requirements)
        lines = [f"FROM {base}", "USER root"]
        ca = host_ca_bundle()
        if ca is not None:
            shutil.copyfile(ca, ctx_path / "host-ca.crt")
            lines += ["COPY host-ca.crt /usr/local/share/arex/host-ca.crt", "ARG PIP_CERT=/usr/local/share/arex/host-ca.crt", "ARG SSL_CERT_FILE=/usr/local/share/arex/host-ca.crt"]
        args = _pip_build_args()
        lines += [f"ARG {key}" for key in args]
        if spec.apt:
            lines.append("RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q " + " ".join(spec.apt) + " && rm -rf /var/lib/apt/lists/*")
        lines += [
            "COPY requirements.txt /tmp/arex-requirements.txt",
            "RUN PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-cache-dir -r /tmp/arex-requirements.txt && rm /tmp/arex-requirements.txt",
        ]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(client, ctx_path, tag, "host", {"arex.managed": "1", "arex.kind": "deps"}, args)
    return tag


_SCRUB = """
import importlib.util, os, sys
for entry in sys.argv[1:]:
    package, _, rel = entry.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"scrub: package {package!r} is not installed")
    target = os.path.join(list(spec.submodule_search_locations)[0], rel)
    if not os.path.exists(target):
        sys.exit(f"scrub: {entry} does not exist in the image")
    os.remove(target)
"""


def env_image(spec: MLSpec, deps: str, workspace: Path, content: str) -> str:
    client = docker_client()
    tag = f"arex-env-{spec.id}:{content}"
    if _image_exists(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-env-") as ctx:
        ctx_path = Path(ctx)
        shutil.copytree(workspace, ctx_path / "workspace")
        (ctx_path / "scrub.py").write_text(_SCRUB)
        lines = [f"FROM {deps}", "USER root"]
        if spec.scrub:
            lines += ["COPY scrub.py /tmp/arex-scrub.py", "RUN python3 /tmp/arex-scrub.py " + " ".join(spec.scrub) + " && rm /tmp/arex-scrub.py"]
        lines += [f"COPY --chown=1000:1000 workspace/ {IMAGE_WORKSPACE}/", "USER 1000:1000", "WORKDIR /workspace"]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(client, ctx_path, tag, "none", {"arex.managed": "1", "arex.kind": "env", "arex.env": spec.id})
    return tag


# -- data ------------------------------------------------------------------------------------
def prepare_table(spec: MLSpec, checkout: Path, deps: str, sandbox: SandboxConfig) -> bytes:
    if not spec.data.prepare:
        return (checkout / spec.data.table).read_bytes()
    config = sandbox.model_copy(update={"image": deps, "memory": max(sandbox.memory, 2 << 30), "mounts": ()})
    with make_sandbox(config, f"prepare-{spec.id}") as box:
        box.copy_in(checkout, ".")
        result = box.exec(spec.data.prepare, timeout=spec.time_limit_s)
        if not result.ok:
            raise SourceError(f"data.prepare '{spec.data.prepare}' failed ({result.status}, exit {result.exit_code}): {(result.stderr or result.stdout)[-800:]}")
        try:
            return box.read_file(spec.data.table, max_bytes=TABLE_CAP)
        except FileNotFoundError:
            raise SourceError(f"data.prepare '{spec.data.prepare}' did not write data.table '{spec.data.table}'") from None


def split_table(spec: MLSpec, table: bytes) -> tuple[list[str], list[dict], list[dict], list[dict]]:
    """Seeded split → (columns, train rows, public eval rows, private eval rows)."""
    data = spec.data
    rows = list(csv.DictReader(io.StringIO(table.decode("utf-8"))))
    if not rows:
        raise SourceError(f"data.table '{data.table}' has no rows")
    columns = list(rows[0].keys())
    if data.target not in columns:
        raise SourceError(f"data.table '{data.table}' has no target column '{data.target}' (columns: {', '.join(columns[:10])})")
    if data.id_column not in columns:
        for i, row in enumerate(rows):
            row[data.id_column] = str(i)
        columns = [data.id_column] + columns
    rng = random.Random(data.split.seed)
    strata: dict[str, list[dict]] = {}
    for row in rows:
        strata.setdefault(row[data.target] if data.split.stratify else "", []).append(row)
    train, public, private = [], [], []
    for key in sorted(strata):
        group = strata[key]
        rng.shuffle(group)
        n_test = max(2, round(len(group) * data.split.test_fraction)) if len(group) > 3 else round(len(group) * data.split.test_fraction)
        n_public = round(n_test * data.split.public_fraction)
        public += group[:n_public]
        private += group[n_public:n_test]
        train += group[n_test:]
    for part in (train, public, private):
        part.sort(key=lambda r: _sort_key(r[data.id_column]))
    # Evaluation rows are shuffled together so their order gives nothing away.
    return columns, train, public, private


def _sort_key(value: str):
    return (0, int(value), "") if value.lstrip("-").isdigit() else (1, 0, value)


def _csv(columns: list[str], rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


# -- gates -----------------------------------------------------------------------------------
def constant_prediction(spec: MLSpec, train: list[dict]) -> str:
    values = [r[spec.data.target] for r in train]
    if spec.metric.name in ("accuracy", "f1"):
        return max(sorted(set(values)), key=values.count)
    numbers = [float(v) for v in values]
    return repr(sum(numbers) / len(numbers))


def run_ml_gates(env_dir: Path, spec: MLSpec, train: list[dict], sandbox: SandboxConfig, needles: list[str]) -> GateLog:
    """The gates in order, stopping at the first that fails; `needles` are full labelled lines of
    private rows that must appear nowhere."""
    log = GateLog()
    grader = MLGrader(env_dir, spec)
    config = sandbox.model_copy(update={"image": spec.image, "seed": IMAGE_WORKSPACE, "mounts": (), "memory": max(sandbox.memory, 2 << 30)})
    run = partial(_graded_run, config, grader)
    baseline = _baseline_gates(log, spec, run)
    if baseline is not None and _noop_gate(log, grader, train, baseline) and _mutation_gate(log, spec, train, run, baseline):
        _leak_gate(log, spec, config, needles)
    return log


def _graded_run(config: SandboxConfig, grader: MLGrader, prepare: Callable[[Sandbox], None] | None = None) -> tuple[GradeResult, float]:
    """The env's own run and grading in a fresh sandbox, after `prepare(box)`; with its seconds."""
    with make_sandbox(config, f"gate-{grader.spec.id}") as box:
        if prepare:
            prepare(box)
        started = time.monotonic()
        result = grader.grade(box)
        return result, time.monotonic() - started


def _baseline_gates(log: GateLog, spec: MLSpec, run: Callable[..., tuple[GradeResult, float]]) -> GradeResult | None:
    """The repository's own solution runs within the limit and scores the same twice."""
    baseline, seconds = run()
    invalid = baseline.details.get("invalid")
    detail = f"{spec.run} in {seconds:.1f}s (limit {spec.time_limit_s:g}s)" if invalid is None else f"{invalid}; {baseline.details.get('log_tail', '')[-300:]}"
    if not log.check("baseline runs", invalid is None, detail):
        return None
    log.scores["baseline"] = baseline.held_out_raw
    log.scores["baseline_public"] = baseline.details["public"]
    again, _ = run()
    gap = abs(again.held_out_raw - baseline.held_out_raw)
    if not log.check("baseline deterministic", gap <= spec.tolerance, f"two runs: {baseline.held_out_raw:.6f} and {again.held_out_raw:.6f} (tolerance {spec.tolerance:g})"):
        return None
    return baseline


def _noop_gate(log: GateLog, grader: MLGrader, train: list[dict], baseline: GradeResult) -> bool:
    """Predicting a constant (the majority class, or the mean) scores clearly below the baseline."""
    spec = grader.spec
    ids = [r[spec.data.id_column] for r in grader.labels]
    constant = constant_prediction(spec, train)
    noop_csv = _csv([spec.submission.id_column, spec.submission.prediction_column], [{spec.submission.id_column: i, spec.submission.prediction_column: constant} for i in ids])
    noop = grader.score(noop_csv)
    log.scores["noop"] = noop.held_out_raw
    margin = max(1e-3, 0.02 * abs(baseline.held_out_score))
    return log.check("no-op clearly worse", noop.held_out_score < baseline.held_out_score - margin, f"constant {constant[:12]} scores {noop.held_out_raw:.6f} vs baseline {baseline.held_out_raw:.6f}")


def _mutator(spec: MLSpec, train: list[dict]) -> tuple[Callable[[Sandbox], None], str]:
    """How to break the baseline (the spec's mutation, else shuffled training labels), and how to say it."""
    if spec.mutation:
        mutation = spec.mutation

        def mutate(box: Sandbox) -> None:
            text = box.read_file(mutation.file).decode()
            if mutation.find not in text:
                raise SourceError(f"mutation.find not found in {mutation.file}")
            box.write_file(mutation.file, text.replace(mutation.find, mutation.replace))

        return mutate, f"{mutation.file}: {mutation.find!r} → {mutation.replace!r}"

    def shuffle_labels(box: Sandbox) -> None:
        rows = [dict(r) for r in train]
        labels = [r[spec.data.target] for r in rows]
        random.Random(1).shuffle(labels)
        for row, label in zip(rows, labels):
            row[spec.data.target] = label
        box.write_file(spec.data.train_file, _csv(list(train[0].keys()), rows))

    return shuffle_labels, "training labels shuffled"


def _mutation_gate(log: GateLog, spec: MLSpec, train: list[dict], run: Callable[..., tuple[GradeResult, float]], baseline: GradeResult) -> bool:
    mutate, what = _mutator(spec, train)
    mutated, _ = run(mutate)
    log.scores["mutated"] = mutated.held_out_raw
    return log.check("mutation changes the score", abs(mutated.held_out_raw - baseline.held_out_raw) > spec.tolerance, f"{what}: {mutated.held_out_raw:.6f} vs baseline {baseline.held_out_raw:.6f}")


def _leak_gate(log: GateLog, spec: MLSpec, config: SandboxConfig, needles: list[str]) -> None:
    with make_sandbox(config, f"leak-{spec.id}") as box:
        table_name = Path(spec.data.table).name
        found = box.exec(f"find / -xdev \\( -name labels.csv -o -name {table_name} \\) 2>/dev/null | head -5", timeout=120).stdout.strip()
        probe_failures = [p for p in spec.leak_probes if box.exec(p, timeout=120).ok]
        # Whole labelled private rows in any text file the agent can reach.
        hits = box.exec(["grep", "-rlxF", *sum([["-e", n] for n in needles], []), "/workspace", "/tmp", "/home", "/opt", "/usr/local/share"], timeout=120).stdout.strip()
    problems = [
        f"files named like the labels: {found}" if found else "",
        f"probes that should fail succeeded: {probe_failures}" if probe_failures else "",
        f"labelled private rows found in {hits[:200]}" if hits else "",
    ]
    problems = [p for p in problems if p]
    log.check("private labels unreachable", not problems, "; ".join(problems) or f"no label files, no labelled private rows, {len(spec.leak_probes)} probe(s) fail as they should")


# -- the build -------------------------------------------------------------------------------
@dataclass
class Checkout:
    """A source fetched at its commit, with its spec and the files its content hash covers."""

    source: MLSource
    folder: Path
    commit: str
    spec: MLSpec
    files: list[Path]


def repo_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts and p.name != ".arex-complete")


def content_digest(checkout: Checkout, base_image: str) -> str:
    """What the env is built from: builder, image workspace, commit, spec, base image, files."""
    prefix = json.dumps([BUILDER_VERSION, IMAGE_WORKSPACE, checkout.commit, checkout.spec.model_dump(mode="json"), base_image]).encode()
    return tree_sha256(checkout.folder, checkout.files, prefix)[:16]


def build_ml(path: Path, out: Path, sandbox: SandboxConfig) -> EnvReport:
    started = time.monotonic()
    try:
        source = parse_source(path)
        folder, commit = fetch(source)
        spec = load_ml_spec(folder, source)
    except (SourceError, OSError, git.GitError) as exc:
        return EnvReport(str(path), None, "rejected", f"unreadable source: {exc}", seconds=time.monotonic() - started)
    checkout = Checkout(source, folder, commit, spec, repo_files(folder))
    content = content_digest(checkout, sandbox.image)
    skipped = skipped_report(out / checkout.spec.id, content, path, started)
    if skipped is not None:
        return skipped
    report = EnvReport(str(path), checkout.spec.id, "rejected")
    try:
        _build_and_gate(report, checkout, content, out, sandbox)
    except SourceError as exc:
        report.reason = str(exc)
    except SandboxError as exc:
        report.status, report.reason = "error", f"SandboxError: {exc}"
    report.seconds = time.monotonic() - started
    return report


def _build_and_gate(report: EnvReport, checkout: Checkout, content: str, out: Path, sandbox: SandboxConfig) -> None:
    """Images, data split and env folder; the gates; into place under `out` if they all pass."""
    spec = checkout.spec
    deps = deps_image(spec, checkout.folder, sandbox.image)
    table = prepare_table(spec, checkout.folder, deps, sandbox)
    columns, train, public, private = split_table(spec, table)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{spec.id}-", dir=out) as tmp:
        work = Path(tmp) / spec.id
        checksums = _write_data(work, checkout, columns, train, public, private)
        (work / CANARY_FILE).write_text(make_canary(f"{spec.id}\0{content}") + "\n")
        (work / "statement.md").write_text((checkout.folder / spec.statement).read_text(encoding="utf-8"))
        image = env_image(spec, deps, work / "workspace", content)
        spec = spec.model_copy(update={"image": image, "source_url": checkout.source.url, "source_commit": checkout.commit, "source_hash": content, "checksums": checksums})
        write_task(work, spec)
        log = run_ml_gates(work, spec, train, sandbox, _needles(table, private))
        # The spec is written only if every gate passed, and then the baseline score is known.
        accepted = spec.model_copy(update={"baseline_score": log.scores.get("baseline")})
        finish(report, log, work, out / spec.id, accepted, content, BUILDER_VERSION)


def _write_data(work: Path, checkout: Checkout, columns: list[str], train: list[dict], public: list[dict], private: list[dict]) -> dict[str, str]:
    """The workspace (the repository without its labelled table, plus the train and test files)
    and private/labels.csv; returns their checksums."""
    data, workspace = checkout.spec.data, work / "workspace"
    for p in checkout.files:
        rel = p.relative_to(checkout.folder).as_posix()
        if rel == Path(data.table).as_posix():
            continue  # the full labelled table never enters the workspace
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, workspace / rel)
    train_csv = _csv(columns, train)
    test_csv = _csv([c for c in columns if c != data.target], sorted(public + private, key=lambda r: text_sha256(r[data.id_column])))
    labels_csv = _csv([data.id_column, data.target, "split"], [{**r, "split": "public"} for r in public] + [{**r, "split": "private"} for r in private])
    for rel, blob in ((data.train_file, train_csv), (data.test_file, test_csv)):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(blob)
    (work / "private").mkdir(parents=True)
    (work / "private" / "labels.csv").write_bytes(labels_csv)
    return {"train": bytes_sha256(train_csv), "test": bytes_sha256(test_csv), "labels": bytes_sha256(labels_csv)}


def _needles(table: bytes, private: list[dict]) -> list[str]:
    """A few private rows as they are written in the labelled table: the leak gate greps for them."""
    original = next(csv.reader(io.StringIO(table.decode("utf-8"))))
    return [_csv(original, [row]).decode().splitlines()[1] for row in private[:3]]
