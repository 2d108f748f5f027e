"""ML sources: what the user gave (a folder with arex.yaml, or a YAML naming a git repository, a
commit and a spec), fetched at its commit and cached, with its spec loaded and its content digest."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git
import yaml

from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.grading.ml import METRICS, resolve_metric
from arex.hashing import cache_dir, text_sha256, tree_sha256
from arex.specs import MLSpec, read_spec_yaml, validate_spec

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
