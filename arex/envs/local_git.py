"""Reading a local git repository without letting it run anything on the host.

A repository's own configuration (`.git/config`, and any file it includes) can name commands git
runs while it only reads: `core.fsmonitor` when it lists the tree, a filter's `clean` command when
it compares a file with the index, hooks, `diff.external`, textconv, `core.sshCommand`. A folder
given to `draft-env` or `build-envs` is someone else's data, so arex never lets git read that
configuration: git runs on a private git folder of arex's own (`shadow`) that holds a copy of the
repository's HEAD, refs, index and `info/` (ignore rules, attributes), borrows its objects (an
alternates file: read-only, nothing copied), and has a configuration arex writes. System and
global configuration are ignored too (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL`), except the
user's own ignore file (`core.excludesFile`), so the listing is the one the user sees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from arex.envs.judge_sources import SourceError

GIT_TIMEOUT_S = 300
# Belt and braces: the shadow's configuration sets none of these, but a command-line value wins
# over any file git might still read, and these are the keys that name a program to run.
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.askPass=",
    "core.sshCommand=false",
    "diff.external=",
    "protocol.allow=never",
    "credential.helper=",
)

Git = Callable[..., subprocess.CompletedProcess]


def git_dirs(local: Path) -> tuple[Path, Path]:
    """(the repository's git folder, its common folder): both `local/.git` for a plain repository; a
    linked worktree or submodule has a `.git` file naming its folder, which may name a common one."""
    dot = local / ".git"
    git_dir = dot
    if dot.is_file():
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith("gitdir:"):
            raise SourceError(
                f"{dot}: not a git folder link ('gitdir: <path>'); remove it or make {local} a plain folder"
            )
        git_dir = (local / text.removeprefix("gitdir:").strip()).resolve()
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    if not (common / "objects").is_dir():
        raise SourceError(
            f"{dot}: names no git repository (no objects folder in {common}); remove it or repair the repository"
        )
    return git_dir, common


def _copy_state(git_dir: Path, common: Path, shadow: Path) -> None:
    """The data git needs to list the tree and find HEAD; never a configuration, hook or script."""
    for name in ("HEAD", "index"):
        if (git_dir / name).is_file():
            shutil.copyfile(git_dir / name, shadow / name)
    for shared in git_dir.glob("sharedindex.*"):  # a split index keeps its entries apart
        shutil.copyfile(shared, shadow / shared.name)
    if (common / "packed-refs").is_file():
        shutil.copyfile(common / "packed-refs", shadow / "packed-refs")
    if (common / "refs").is_dir():
        shutil.copytree(common / "refs", shadow / "refs", symlinks=True, dirs_exist_ok=True)
    (shadow / "refs").mkdir(exist_ok=True)
    (shadow / "info").mkdir()
    for name in ("exclude", "attributes"):  # ignore rules and attributes: data, they name no program
        if (common / "info" / name).is_file():
            shutil.copyfile(common / "info" / name, shadow / "info" / name)
    (shadow / "objects" / "info").mkdir(parents=True)
    (shadow / "objects" / "info" / "alternates").write_text(f"{(common / 'objects').resolve()}\n", encoding="utf-8")


def _object_format(common: Path) -> str:
    """The repository's hash (sha1 or sha256), read from its config as a plain file: `--file` takes
    no includes and runs nothing."""
    out = subprocess.run(
        ["git", "config", "--file", str(common / "config"), "--get", "extensions.objectformat"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=GIT_TIMEOUT_S,
    )
    return out.stdout.strip() or "sha1"


def _clean_env() -> dict[str, str]:
    """The environment without any GIT_* variable the caller had (a GIT_DIR would point git elsewhere)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _user_excludes(shadow: Path) -> str | None:
    """The user's own `core.excludesFile` (system and global configuration, as git reads them): files
    the user ignores everywhere (a `.env`, editor files) stay out of the env as they do in git."""
    env = {**_clean_env(), "GIT_DIR": str(shadow)}
    out = subprocess.run(
        ["git", "config", "--includes", "--type=path", "--get", "core.excludesFile"],
        capture_output=True,
        text=True,
        env=env,
        timeout=GIT_TIMEOUT_S,
    )
    return out.stdout.strip() or None


def _write_config(shadow: Path, common: Path) -> None:
    fmt = _object_format(common)
    lines = ["[core]", f"\trepositoryformatversion = {1 if fmt != 'sha1' else 0}", "\tbare = false"]
    if fmt != "sha1":
        lines += ["[extensions]", f"\tobjectformat = {fmt}"]
    (shadow / "config").write_text("\n".join(lines) + "\n", encoding="utf-8")


@contextmanager
def shadow(local: Path) -> Iterator[Git]:
    """A `git(*args)` that runs git on `local`'s working tree through arex's private git folder; the
    folder is removed after the block. Raises SourceError if `local/.git` is no repository."""
    git_dir, common = git_dirs(local)
    with tempfile.TemporaryDirectory(prefix="arex-git-") as tmp:
        folder = Path(tmp) / "git"
        folder.mkdir()
        _copy_state(git_dir, common, folder)
        _write_config(folder, common)
        excludes = _user_excludes(folder)
        env = {
            **_clean_env(),
            "GIT_DIR": str(folder),
            "GIT_WORK_TREE": str(local),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
        }
        overrides = [*SAFE_CONFIG, *([f"core.excludesFile={excludes}"] if excludes else [])]
        flags = [arg for item in overrides for arg in ("-c", item)]

        def git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
            result = subprocess.run(
                ["git", *flags, *args],
                cwd=local,
                env=env,
                capture_output=True,
                encoding="utf-8",
                errors="surrogateescape",
                timeout=GIT_TIMEOUT_S,
            )
            if check and result.returncode != 0:
                reason = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
                raise SourceError(
                    f"{local}: git {args[0]} failed on the repository ({reason}); check that `git status` works there"
                )
            return result

        yield git
