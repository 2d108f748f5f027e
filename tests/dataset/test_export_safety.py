"""`arex export` never deletes what it did not make, never publishes a record changed after
`arex select`, and leaves the previous dataset whole on every failure (refusal, kill, full disk,
read-only folder). No Docker: a real selection of the checked-in v1 store (`tests/fixtures/v1`)."""

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
from repo_paths import TESTS
from typer.testing import CliRunner

import arex.dataset.export
import arex.dataset.swap
from arex.cli import app
from arex.dataset.config import MARKER
from arex.dataset.export import ExportConfig, ExportError, exchange, export, kept_records
from arex.sandbox import SandboxConfig
from arex.selection.selector import SelectConfig, select

FIXTURE = TESTS / "fixtures" / "v1"
runner = CliRunner()


@pytest.fixture
def world(tmp_path, monkeypatch):
    """The v1 store and envs, selected (no re-grading); the current folder is an empty one."""
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("golden"))
    sel = tmp_path / "sel"
    selection = select(root / "store", root / "envs", sel, SelectConfig(regrade=False), SandboxConfig())
    assert len(selection.kept) == 3
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return {"root": tmp_path, "store": root / "store", "envs": root / "envs", "sel": sel, "kept": selection.kept}


def run_export(world, out, *extra):
    return runner.invoke(app, ["export", "--selection", str(world["sel"]), "--out", str(out), *extra])


def tree(folder: Path) -> dict[str, str]:
    """Every file (hidden ones too) and link under `folder` → its sha256 (or link target)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel + "/"] = ""
    return out


def refused(result, *phrases):
    """Exit 2, one line starting `arex:`, no traceback, every phrase in it."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arex: ") and "Traceback" not in result.output, result.output
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


# -- what --out may be --------------------------------------------------------------------------------
def test_a_folder_that_is_not_an_export_is_refused_and_left_alone(world):
    out = world["root"] / "mine"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("my notes")
    (out / "sub" / "data.csv").write_text("1,2")
    before = tree(out)
    refused(
        run_export(world, out),
        f"--out {out} is not empty and is not an earlier arex export",
        MARKER,
        "choose a new or empty folder",
    )
    assert tree(out) == before and leftovers(out) == []
    (world["root"] / "a-file").write_text("x")
    refused(run_export(world, world["root"] / "a-file"), "is a file, not a folder")
    assert (world["root"] / "a-file").read_text() == "x"


@pytest.mark.parametrize("out", [".", "{cwd}", "..", "{cwd}/.."])
def test_the_current_folder_and_its_parents_are_refused(world, out):
    cwd = Path.cwd()
    (cwd / "keep.txt").write_text("mine")  # today's export deleted the folder it ran in
    before = tree(world["root"])
    refused(run_export(world, out.format(cwd=cwd)), "the current folder", "export into a folder of its own")
    assert tree(world["root"]) == before


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("store", "is the trajectory store"),
        ("store/subset-fill", "trajectory store"),
        ("store/subset-fill/new", "is inside the trajectory store"),
        ("v1", "holds the"),
        ("sel", "is the selection folder"),
        ("sel/dataset", "is inside the selection folder"),
        ("envs", "is the envs folder"),
        ("envs/new", "is inside the envs folder"),
        ("link-to-store", "is the trajectory store"),  # symlinks are followed
        ("link-to-store/new", "is inside the trajectory store"),
    ],
)
def test_the_store_the_selection_and_the_envs_are_refused(world, where, name):
    root = world["root"]
    (root / "v1" / "store").rename(root / "v1" / "store-real")
    # the store as selection.json names it is itself a link
    (root / "v1" / "store").symlink_to(root / "v1" / "store-real")
    (root / "link-to-store").symlink_to(root / "v1" / "store-real")
    paths = {"store": root / "v1" / "store", "envs": root / "v1" / "envs", "sel": root / "sel", "v1": root / "v1"}
    head, _, tail = where.partition("/")
    out = paths.get(head, root / head) / tail if tail else paths.get(head, root / head)
    before = tree(root)
    refused(run_export(world, out), f"--out {out}", name, "export into a folder outside it")
    assert tree(root) == before


def test_plain_record_paths_protect_their_folders_too(world):
    records = sorted(world["store"].glob("subset-fill/*.jsonl"))
    with pytest.raises(ExportError, match="is inside the folder of the trajectory records"):
        export(iter(records), world["store"] / "subset-fill" / "ds", ExportConfig(), world["envs"])
    assert not (world["store"] / "subset-fill" / "ds").exists()


# -- replacing an earlier export ------------------------------------------------------------------------
def test_new_and_empty_folders_get_the_whole_export_with_card_and_marker(world):
    for out in (world["root"] / "new" / "dataset", world["root"] / "empty"):
        if out.name == "empty":
            out.mkdir()
        result = run_export(world, out)
        assert result.exit_code == 0, result.output
        marker = json.loads((out / MARKER).read_text())
        assert marker["format"] == 1 and marker["arex_version"] == arex.__version__
        files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MARKER)
        assert marker["files"] == files
        assert {"README.md", "score_curve.png", "checksums.json"} <= set(files) and leftovers(out) == []


def test_an_earlier_export_is_swapped_out_in_one_exchange(world, monkeypatch):
    out = world["root"] / "dataset"
    assert run_export(world, out).exit_code == 0
    first = tree(out)
    calls = []

    def spy(a, b):
        calls.append((Path(a), Path(b)))
        exchange(a, b)

    monkeypatch.setattr(arex.dataset.swap, "exchange", spy)
    result = run_export(world, out, "-c", "export.reflection_weight=2.0")
    assert result.exit_code == 0, result.output
    assert calls == [(out.with_name(".dataset.partial"), out)]
    second = tree(out)
    assert second != first and second["README.md"] != first["README.md"]  # the card says weight 2 now
    assert "2 on reflections" in (out / "README.md").read_text()
    assert set(second) == set(first) and leftovers(out) == []  # the previous export is gone, nothing else


def test_exchange_swaps_two_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_text("a")
    (tmp_path / "b" / "y").write_text("b")
    exchange(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a" / "y").read_text() == "b" and (tmp_path / "b" / "x").read_text() == "a"
    with pytest.raises(OSError) as err:
        exchange(tmp_path / "a", tmp_path / "missing")
    assert err.value.errno == errno.ENOENT


def test_a_file_of_yours_inside_an_earlier_export_stops_the_replacement(world):
    out = world["root"] / "dataset"
    assert run_export(world, out).exit_code == 0
    (out / "rounds" / "my-notes.md").write_text("mine")
    before = tree(out)
    refused(run_export(world, out), "is an earlier arex export, but rounds/my-notes.md in it was not written by arex")
    assert tree(out) == before
    (out / "rounds" / "my-notes.md").unlink()
    (out / MARKER).write_text("{not json")
    refused(run_export(world, out), f"{out / MARKER} is damaged")


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import arex.dataset.swap
    from arex.cli import main

    def die(self, staging):  # the whole export is staged, card included; killed before the swap
        print(sorted(p.name for p in staging.iterdir()), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    arex.dataset.swap.Target.swap = die
    sys.argv = ["arex", "export", "--selection", sys.argv[1], "--out", sys.argv[2], "-c", "export.reflection_weight=3.0"]
    main()
    """  # noqa: E501
)


def test_a_kill_before_the_swap_leaves_the_previous_dataset_whole_and_the_next_run_cleans_up(world):
    out = world["root"] / "dataset"
    assert run_export(world, out).exit_code == 0
    before = tree(out)
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(world["sel"]), str(out)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "'README.md'" in proc.stdout and "'score_curve.png'" in proc.stdout  # the card was staged with the shards
    assert tree(out) == before  # the previous dataset, card and all, untouched
    partial = out.with_name(".dataset.partial")
    assert (partial / MARKER).is_file() and (partial / "README.md").is_file()
    result = run_export(world, out)  # a leftover carrying the marker is ours: removed
    assert result.exit_code == 0, result.output
    assert leftovers(out) == [] and tree(out) == before


def test_a_leftover_staging_folder_without_the_marker_is_not_deleted(world):
    out = world["root"] / "dataset"
    partial = out.with_name(".dataset.partial")
    partial.mkdir()
    (partial / "precious.txt").write_text("not arex's")
    refused(
        run_export(world, out),
        f"{partial} is left over from an earlier export but has no {MARKER} file",
        "move it away",
    )
    assert (partial / "precious.txt").read_text() == "not arex's" and not out.exists()
    (partial / "precious.txt").unlink()  # an empty leftover (a kill right after mkdir) is harmless
    assert run_export(world, out).exit_code == 0 and leftovers(out) == []


# -- records changed after select ------------------------------------------------------------------------
def test_a_score_edited_after_select_is_refused(world):
    out = world["root"] / "dataset"
    assert run_export(world, out).exit_code == 0
    before = tree(out)
    [record] = [Path(v.path) for v in world["kept"] if v.key == "d902a479abd0d1a0"]
    text = record.read_text()
    assert '"held_out_score":0.98028425' in text
    record.write_text(text.replace('"held_out_score":0.98028425', '"held_out_score":0.99', 1))
    line = refused(run_export(world, out), f"{record} changed after `arex select` judged it", "re-run `arex select")
    assert "kept.jsonl" in line
    assert tree(out) == before and leftovers(out) == []
    with pytest.raises(ExportError, match="changed after `arex select`"):  # the API checks it too
        export(kept_records(world["sel"]), world["root"] / "api", ExportConfig())
    assert not (world["root"] / "api").exists()


def test_a_kept_list_without_checksums_is_refused(world):
    kept = world["sel"] / "kept.jsonl"
    rows = [json.loads(line) for line in kept.read_text().splitlines()]
    kept.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "record_sha"}) + "\n" for row in rows))
    refused(
        run_export(world, world["root"] / "dataset"),
        "without the checksum select judged it by",
        "re-run `arex select",
        "cached verdicts",
    )
    assert not (world["root"] / "dataset").exists()
    kept.write_text("not json\n")
    refused(run_export(world, world["root"] / "dataset"), f"{kept}, line 1: not a kept record")


# -- file-system failures ------------------------------------------------------------------------------------
@contextmanager
def tmpfs(path: Path, size: str):
    """A small real tmpfs at `path` (needs root), unmounted however the test ends."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_full_disk_is_one_sentence_and_the_previous_dataset_survives(world):
    with tmpfs(world["root"] / "disk", "1m") as disk:
        out = disk / "dataset"
        assert run_export(world, out).exit_code == 0
        before = tree(out)
        stat = os.statvfs(disk)
        # room for less than one export
        (disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 24 * 1024))
        result = run_export(world, out, "-c", "export.reflection_weight=2.0")
        refused(
            result, f"no space left on the device while writing {disk}/.dataset.partial/", f"{out} was left as it was"
        )
        assert tree(out) == before and leftovers(out) == []


def test_a_read_only_output_folder_is_one_sentence_and_the_previous_dataset_survives(world):
    with tmpfs(world["root"] / "disk", "4m") as disk:
        out = disk / "dataset"
        assert run_export(world, out).exit_code == 0
        before = tree(out)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        refused(
            run_export(world, out),
            "is on a read-only file system",
            "choose an --out on a writable one",
            f"{out} was left as it was",
        )
        refused(
            run_export(world, disk / "new"), "is on a read-only file system", f"nothing was written to {disk / 'new'}"
        )
        assert tree(out) == before


@pytest.mark.parametrize("step", ["write_card", "seal"])
def test_a_disk_full_late_in_the_export_cleans_up_and_keeps_the_previous_dataset(world, monkeypatch, step):
    out = world["root"] / "dataset"
    assert run_export(world, out).exit_code == 0
    before = tree(out)
    real = getattr(arex.dataset.export, step)

    def full(folder, *args):
        real(folder, *args)  # the files get written, then the disk fills
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "README.md"))

    monkeypatch.setattr(arex.dataset.export, step, full)
    refused(run_export(world, out), "no space left on the device while writing", ".dataset.partial/README.md")
    assert tree(out) == before and leftovers(out) == []


def test_an_export_made_before_markers_is_recognised_by_its_checksums_and_replaced(tmp_path):
    """Exports of the previous arex have no marker: their checksums.json, verified against every
    shard, says they are arex's. One shard edited, and it is not (so it is kept)."""
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("golden"))
    select(root / "store", root / "envs", tmp_path / "sel", SelectConfig(regrade=False), SandboxConfig())
    old = tmp_path / "dataset"
    shutil.copytree(FIXTURE / "golden" / "dataset-bounded-unmerged", old)  # written by the version before markers
    (old / "README.md").write_text("old card\n")
    edited = tmp_path / "edited"
    shutil.copytree(old, edited)
    shard = next((edited / "rounds").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes() + b"\0")
    export(kept_records(tmp_path / "sel"), old, ExportConfig(), root / "envs")
    assert (old / MARKER).is_file() and (old / "README.md").read_text() != "old card\n"
    before = {p: p.read_bytes() for p in edited.rglob("*") if p.is_file()}
    with pytest.raises(ExportError, match="is not an earlier arex export"):
        export(kept_records(tmp_path / "sel"), edited, ExportConfig(), root / "envs")
    assert {p: p.read_bytes() for p in edited.rglob("*") if p.is_file()} == before
