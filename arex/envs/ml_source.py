"""ML sources: what the user gave, as arex builds it, with its spec loaded and its content digest.

A source is a folder with arex.yaml (a git working tree is built as the user sees it: tracked files
with their uncommitted changes plus untracked files git does not ignore), or a YAML naming a git
repository, a commit, a spec, and an overlay (`add`: files to add or replace, `remove`: paths or
globs to leave out) so a user need not fork a repository. A named commit is fetched and cached; a
working tree or an overlaid tree is copied to a folder of its own under the cache, named by its
content, so neither the user's folder nor the cached checkout is ever changed.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import git
import yaml
from pydantic import BaseModel, ConfigDict, Field

from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.local_git import shadow
from arex.grading.ml import resolve_metric
from arex.hashing import cache_dir, text_sha256, tree_sha256
from arex.specs import MLSpec, read_spec_yaml, refuse_links_leaving, resolve_inside, validate_spec

SPEC_FILE = "arex.yaml"
BUILDER_VERSION = "ml-1"
TABLE_CAP = 512 << 20
WORKTREE = "worktree"
"""The commit of a folder that is not a git repository, and the marker of a dirty working tree (`<sha>+worktree`)."""
_SHA = re.compile(r"^[0-9a-f]{40}$")
_SCP_URL = re.compile(r"^[\w.-]+@[\w.-]+:")


def tail(text: str, limit: int) -> str:
    """The end of a log or an error, at most about `limit` characters, starting at a word (a reason
    that opens mid-word reads as garbage): '… ' marks what was left out."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    if text[-limit - 1].isspace():
        return "… " + cut.lstrip()
    space = min((i for i in (cut.find(" "), cut.find("\n")) if i >= 0), default=-1)
    return "… " + (cut[space + 1 :] if 0 <= space < limit // 2 else cut).lstrip()


class SourceFile(BaseModel):
    """The YAML form of an ML source (`arex draft-env` writes it too)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    repo: str
    """A git URL, or a path (relative to this YAML) to a git repository or a plain folder."""
    commit: str | int | None = None
    """A commit, branch or tag; unset: the remote's HEAD, or a local folder's working tree."""
    spec: dict[str, Any] | str | None = None
    """The spec (a mapping, or a file relative to this YAML); unset: arex.yaml of the repository or of `add`."""
    add: dict[str, str] = Field(default_factory=dict)
    """Files to add or replace: repository-relative path → file relative to this YAML."""
    remove: list[str] = Field(default_factory=list)
    """Repository-relative paths or globs (`*`, `?`, `**`) to leave out."""


@dataclass
class MLSource:
    url: str
    """git URL (https://, file://, a path to a git repository) or a plain folder."""
    rev: str | None
    spec: dict | None
    """Spec given beside the repository (None: read arex.yaml from it)."""
    origin: str
    """What the user passed, for reports."""
    add: dict[str, Path] = field(default_factory=dict)
    """Overlay: repository-relative path → the file on the host that goes there."""
    remove: tuple[str, ...] = ()
    """Overlay: repository-relative paths or globs left out."""

    @property
    def local_tree(self) -> Path | None:
        """The user's own folder when it is built as it is on disk (no commit named), else None."""
        local = Path(self.url)
        return local if self.rev is None and not _is_url(self.url) and local.is_dir() else None


def _is_url(text: str) -> bool:
    return "://" in text or bool(_SCP_URL.match(text))


def is_ml_source(path: Path) -> bool:
    if path.is_dir():
        return (path / SPEC_FILE).is_file()
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, OSError, UnicodeDecodeError, RecursionError):
            return False
        return isinstance(data, dict) and "repo" in data
    return False


def parse_source(path: Path) -> MLSource:
    if path.is_dir():
        return MLSource(url=str(path.resolve()), rev=None, spec=None, origin=str(path))
    data = validate_spec(SourceFile, read_spec_yaml(path, SourceError), path, SourceError)
    repo = data.repo
    if not _is_url(repo) and not Path(repo).is_absolute():
        repo = str((path.parent / repo).resolve())
    spec = data.spec
    if isinstance(spec, str):
        spec_path = resolve_inside(path.parent, spec, path, "spec", SourceError)
        if not spec_path.is_file():
            raise SourceError(f"{path}: field 'spec': file {spec} does not exist")
        spec = read_spec_yaml(spec_path, SourceError)
    add = {_inside(path, "add", rel): _added_file(path, rel, file) for rel, file in data.add.items()}
    remove = tuple(_inside(path, "remove", entry) for entry in data.remove)
    return MLSource(repo, str(data.commit) if data.commit is not None else None, spec, str(path), add, remove)


def _inside(yaml_path: Path, key: str, entry: str) -> str:
    """`entry` as a normalised repository-relative POSIX path; one that could reach outside the
    repository (absolute, `..`) or into its .git folder is refused."""
    rel = PurePosixPath(entry.strip().rstrip("/"))
    if (
        not entry.strip()
        or rel.is_absolute()
        or entry.startswith("~")
        or ".." in rel.parts
        or ".git" in rel.parts
        or rel.as_posix() == "."
    ):
        raise SourceError(
            f"{yaml_path}: key '{key}', entry '{entry}': give a path inside the repository, relative to its root, "
            "without '..' or .git"
        )
    return rel.as_posix()


def _added_file(yaml_path: Path, rel: str, file: str) -> Path:
    """The file an `add` entry puts into the tree: one beside the YAML (in its folder), never any host file."""
    host = resolve_inside(yaml_path.parent, file, yaml_path, f"add.{rel}", SourceError)
    if not host.is_file():
        raise SourceError(
            f"{yaml_path}: key 'add', entry '{rel}': file {file} does not exist "
            f"(paths on the right of 'add' are relative to {yaml_path.parent})"
        )
    return host.resolve()


# -- fetching --------------------------------------------------------------------------------
def fetch(source: MLSource) -> tuple[Path, str]:
    """A checkout of the source at its commit (cached), and the commit id ('worktree' for a plain
    folder; a local repository with no commit named: its HEAD. `open_source` builds the working tree instead)."""
    local = Path(source.url)
    if source.rev is None and local.is_dir() and not (local / ".git").exists():
        return local, WORKTREE
    if source.rev is None and local.is_dir():
        source = MLSource(source.url, "HEAD", source.spec, source.origin)
    url = source.url if _is_url(source.url) else f"file://{Path(source.url).resolve()}"
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


_GIT_BOILERPLATE = (
    "please make sure you have the correct access rights",
    "and the repository exists.",
    "fatal: could not read from remote repository.",
)


def _git_reason(exc: git.GitCommandError) -> str:
    """git's own account of the failure, one line: its lines naming the cause (a host that does
    not resolve, a path that is no repository, a refused key), without the advice git appends."""
    text = (exc.stderr or str(exc)).strip().replace("stderr: ", "").strip("'\n ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = [line for line in lines if line.lower() not in _GIT_BOILERPLATE]
    return "; ".join(cause or lines) or str(exc)


# -- the working tree and the overlay -----------------------------------------------------------
def worktree(local: Path) -> tuple[str, dict[str, Path]]:
    """A local repository as the user sees it: tracked files (with their uncommitted changes) and
    untracked files git does not ignore, deleted ones left out; and its commit, `<HEAD>+worktree`
    when the tree differs from HEAD (`worktree` before the first commit). Git runs on arex's own
    copy of the repository's state (`local_git.shadow`): nothing the repository configures runs."""
    with shadow(local) as git:
        listed = git("ls-files", "-co", "--exclude-standard", "-z").stdout.split("\0")
        files = {rel: local / rel for rel in listed if rel and ((local / rel).is_symlink() or (local / rel).is_file())}
        head = git("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).stdout.strip()
        if not head:  # no commit yet
            return WORKTREE, files
        status = git("status", "--porcelain", "--untracked-files=all").stdout
    return (f"{head}+{WORKTREE}" if status.strip() else head), files


def apply_overlay(source: MLSource, tree: dict[str, Path]) -> dict[str, Path]:
    """`tree` (repository-relative path → host file) without the files `source.remove` names and
    with `source.add`'s files added or replacing; an entry that does nothing is an error, not a no-op."""
    kept = dict(tree)
    for entry in source.remove:
        matches = _glob(entry)
        gone = [rel for rel in kept if matches(rel)]
        if not gone:
            raise SourceError(
                f"{source.origin}: key 'remove', entry '{entry}' matches no file of the repository: "
                "correct the path or glob, or drop the entry"
            )
        for rel in gone:
            del kept[rel]
    parents = {p.as_posix() for rel in kept for p in PurePosixPath(rel).parents}
    for rel in source.add:
        clash = (
            rel
            if rel in parents
            else next((p.as_posix() for p in PurePosixPath(rel).parents if p.as_posix() in kept), None)
        )
        if clash is not None:
            raise SourceError(
                f"{source.origin}: key 'add', entry '{rel}' clashes with '{clash}' of the repository "
                f"(a file cannot also be a folder): add it under another path, or remove '{clash}'"
            )
    return {**kept, **source.add}


def _glob(pattern: str) -> Callable[[str], bool]:
    """Whether a repository-relative path is `pattern` or lies under a folder it names; `*` and `?`
    stay within one folder, `**` spans any number."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        else:
            parts.append({"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])))
            i += 1
    regex = re.compile("".join(parts))

    def matches(rel: str) -> bool:
        segments = rel.split("/")
        return any(regex.fullmatch("/".join(segments[:n])) for n in range(1, len(segments) + 1))

    return matches


def materialise(files: dict[str, Path], origin: str) -> Path:
    """The tree as a folder of its own under the cache, named by its content: the env is built from
    exactly these files, and neither the user's folder nor a cached checkout is changed. A re-run
    over the same content reuses it; a new one replaces the source's older trees."""
    root = cache_dir() / "trees"
    owner = text_sha256(str(Path(origin).resolve()))[:12]
    final = root / f"{owner}-{tree_digest(files)[:20]}"
    if final.is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tree-", dir=root))
    try:
        for rel, host in files.items():
            _copy(host, tmp / rel)
        # Named by what was copied: a file edited while this ran cannot give the folder a wrong name.
        final = root / f"{owner}-{tree_digest({rel: tmp / rel for rel in files})[:20]}"
        if not final.is_dir():
            try:
                tmp.rename(final)
            except OSError:
                if not final.is_dir():  # not a concurrent build of the same tree: a real failure
                    raise
        for older in root.glob(f"{owner}-*"):
            if older != final:
                shutil.rmtree(older, ignore_errors=True)
        return final
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _copy(host: Path, dest: Path) -> None:
    """A file with its mode, or a symlink as a symlink (as a git checkout has it)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if host.is_symlink():
        os.symlink(os.readlink(host), dest)
    else:
        shutil.copyfile(host, dest)
        shutil.copymode(host, dest)


def tree_digest(files: dict[str, Path]) -> str:
    """The sha256 of a tree's paths and contents (links by their target)."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        host = files[rel]
        digest.update(rel.encode() + b"\0")
        if host.is_symlink():
            digest.update(b"link\0" + os.readlink(host).encode())
        else:
            with host.open("rb") as handle:
                hashlib.file_digest(handle, lambda: digest)
        digest.update(b"\0")
    return digest.hexdigest()


# -- the spec --------------------------------------------------------------------------------
def load_ml_spec(checkout: Path, source: MLSource) -> MLSpec:
    shown = _spec_location(checkout, source)
    where = Path(source.origin) if source.spec is not None else shown
    raw = source.spec
    if raw is None:
        if not (checkout / SPEC_FILE).is_file():
            raise SourceError(
                f"{source.origin}: no {SPEC_FILE} in the repository and no spec given beside it "
                f"(under 'spec', or as an 'add' entry '{SPEC_FILE}')"
            )
        try:
            raw = read_spec_yaml(checkout / SPEC_FILE, SourceError)
        except SourceError as exc:  # name the file the user edits, not arex's copy of it
            raise SourceError(str(exc).replace(str(checkout / SPEC_FILE), str(shown))) from None
    spec = validate_spec(MLSpec, raw, where if source.spec is None else f"{where} (under 'spec')", SourceError)
    generated = {spec.data.train_file, spec.data.test_file}
    named = [("statement", spec.statement)] + [("protected", p) for p in spec.protected if p not in generated]
    if spec.requirements_file:
        named.append(("requirements_file", spec.requirements_file))
    if spec.mutation:
        named.append(("mutation.file", spec.mutation.file))
    if not spec.data.prepare:
        named.append(("data.table", spec.data.table))
    for key, rel in named:
        if not resolve_inside(checkout, rel, where, key, SourceError).is_file():
            raise SourceError(f"{where}: field '{key}' names '{rel}', which is not in the repository")
    try:
        resolve_metric(spec.metric.name)
    except ValueError as exc:
        raise SourceError(f"{where}: field 'metric.name': {exc}") from None
    if spec.data.encoding != "auto":
        try:
            codecs.lookup(spec.data.encoding)
        except LookupError:
            raise SourceError(
                f"{where}: field 'data.encoding': '{spec.data.encoding}' is not a known text encoding; "
                "use 'auto' or a codec name such as utf-8, cp1252 or latin-1"
            ) from None
    return spec


def _spec_location(folder: Path, source: MLSource) -> Path:
    """Where the user's arex.yaml is: an `add` entry's file, their own folder, or the checkout."""
    if SPEC_FILE in source.add:
        return source.add[SPEC_FILE]
    return (source.local_tree or folder) / SPEC_FILE


@dataclass
class Checkout:
    """A source as arex builds it: the folder holding exactly its files, its commit, its spec."""

    source: MLSource
    folder: Path
    commit: str
    """The commit id; `<sha>+worktree` for a working tree with changes, `worktree` for a plain folder."""
    spec: MLSpec
    files: list[Path]
    worktree: bool = False
    """Built from a folder as it is on disk: its content, not its commit id, names what was built."""


def open_source(path: Path) -> Checkout:
    """What build-envs builds from a source: parsed, fetched (or its working tree read), overlaid,
    with its spec loaded. Raises SourceError (or OSError, git.GitError) naming what is wrong."""
    source = parse_source(path)
    local = source.local_tree
    files: dict[str, Path] | None = None
    if local is None:
        folder, commit = fetch(source)
    elif (local / ".git").exists():
        folder, (commit, files) = local, worktree(local)
        if (local / SPEC_FILE).is_file():  # arex's own file, even where a .gitignore leaves it out
            files.setdefault(SPEC_FILE, local / SPEC_FILE)
    else:
        folder, commit = local, WORKTREE
    if files is not None or source.add or source.remove:
        tree = files if files is not None else {p.relative_to(folder).as_posix(): p for p in repo_files(folder)}
        folder = materialise(apply_overlay(source, tree), source.origin)
    # Every file of the tree is read on the host (statement, table, workspace copy): a link out of
    # it would carry a host file into the env, so the source must be its own files only.
    refuse_links_leaving(folder, SourceError, shown=local or source.url)
    spec = load_ml_spec(folder, source)
    return Checkout(source, folder, commit, spec, repo_files(folder), worktree=local is not None)


def repo_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts and p.name != ".arex-complete")


def content_digest(checkout: Checkout, base_image: str) -> str:
    """What the env is built from: builder, image workspace, commit (a working tree: its content
    only, so committing unchanged files is no change), spec, base image, overlay, files."""
    parts: list[Any] = [
        BUILDER_VERSION,
        IMAGE_WORKSPACE,
        WORKTREE if checkout.worktree else checkout.commit,
        checkout.spec.model_dump(mode="json"),
        base_image,
    ]
    if checkout.source.add or checkout.source.remove:
        parts.append({"add": sorted(checkout.source.add), "remove": list(checkout.source.remove)})
    return tree_sha256(checkout.folder, checkout.files, json.dumps(parts).encode())[:16]
