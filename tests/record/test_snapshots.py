"""Workspace snapshots are read, never extracted: hostile archives (the agent made them) write nothing.

Every archive here is built with Python's tarfile the way an attacker would: absolute names, `..`,
a symlink followed by a member written "through" it (CVE-2025-4517), hard links out of the folder,
FIFOs, devices, names longer than PATH_MAX, and cut-off archives.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from pathlib import Path

import pytest

from arex.record.canary import Canaries, LeakError, scan_archive
from arex.record.snapshots import (
    MemberError,
    SnapshotError,
    SnapshotStore,
    iter_files,
    read_member,
)

SOLUTION = b"print(sum(map(int, input().split())))\n"


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", linkname: str = ""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return _member(name, tarfile.REGTYPE, data)


def build(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    """An archive holding exactly `members`, in order (PAX, so any name length fits)."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def workspace(path: Path) -> Path:
    """What `tar -C dir -cf - .` makes of a small workspace: `./`, `./solution.py`, `./data/...`."""
    return build(
        path,
        _member(".", tarfile.DIRTYPE),
        regular("./solution.py", SOLUTION),
        _member("./data", tarfile.DIRTYPE),
        regular("./data/train.csv", b"x,y\n1,2\n"),
        regular("./empty.txt", b""),
    )


def listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} | {
        p.name for p in root.parent.iterdir() if p.name.startswith(root.name)
    }


@pytest.fixture
def untouched(tmp_path, monkeypatch):
    """Fails the test if reading created, removed or changed any file: in tmp_path (also the working
    directory, where relative names would land) or beside it (where absolute names point)."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    monkeypatch.chdir(tmp_path)

    def forbidden(*args, **kwargs):
        raise AssertionError("a snapshot was extracted")

    # Belt and braces: extraction is never even attempted.
    for method in ("extract", "extractall", "_extract_member", "makefile", "makelink"):
        monkeypatch.setattr(tarfile.TarFile, method, forbidden)
    state: dict = {}
    yield {"outside": outside, "state": state, "mark": lambda: state.update(before=listing(tmp_path))}
    assert listing(tmp_path) == state["before"], "reading a snapshot wrote to disk"
    assert not outside.exists(), "reading a snapshot wrote outside its folder"


# -- reading a well-formed workspace ----------------------------------------------------------------
def test_read_member_returns_the_bytes_under_any_spelling_of_the_name(tmp_path, untouched):
    archive = workspace(tmp_path / "ws.tar")
    untouched["mark"]()
    for name in ("solution.py", "./solution.py", ".//solution.py"):
        assert read_member(archive, name, max_bytes=1 << 20) == SOLUTION
    assert read_member(archive, "data/train.csv", 8) == b"x,y\n1,2\n"  # exactly at the cap
    assert read_member(archive, "empty.txt", 0) == b""
    with pytest.raises(FileNotFoundError, match="'nope.py' is not in workspace snapshot .*ws.tar"):
        read_member(archive, "nope.py", 1 << 20)
    with pytest.raises(IsADirectoryError, match="'data' .* is a folder"):
        read_member(archive, "data", 1 << 20)
    with pytest.raises(MemberError, match="8 bytes, larger than the 7 allowed"):
        read_member(archive, "data/train.csv", 7)
    with pytest.raises(ValueError, match="not a path inside the workspace"):
        read_member(archive, "../solution.py", 1 << 20)


def test_iter_files_yields_regular_members_with_normalised_names_and_honours_the_cap(tmp_path, untouched):
    archive = workspace(tmp_path / "ws.tar")
    untouched["mark"]()
    assert list(iter_files(archive, 1 << 20)) == [
        ("solution.py", SOLUTION),
        ("data/train.csv", b"x,y\n1,2\n"),
        ("empty.txt", b""),
    ]
    # the solution is over 10 bytes
    assert [name for name, _ in iter_files(archive, 10)] == [
        "data/train.csv",
        "empty.txt",
    ]


def test_a_later_member_of_the_same_name_wins_as_on_extraction(tmp_path, untouched):
    archive = build(
        tmp_path / "dup.tar",
        regular("./solution.py", b"first"),
        regular("solution.py", b"second"),
        regular("/solution.py", b"third"),
    )
    untouched["mark"]()
    assert read_member(archive, "solution.py", 100) == b"third"


# -- hostile archives ---------------------------------------------------------------------------------
def test_absolute_member_names_are_only_read_never_written(tmp_path, untouched):
    target = untouched["outside"] / "pwned"
    archive = build(tmp_path / "abs.tar", regular(str(target), b"owned"), regular("./solution.py", SOLUTION))
    untouched["mark"]()
    assert read_member(archive, "solution.py", 1 << 20) == SOLUTION
    files = dict(iter_files(archive, 1 << 20))
    assert files[str(target).lstrip("/")] == b"owned" and files["solution.py"] == SOLUTION


def test_traversal_names_never_match_a_workspace_file(tmp_path, untouched):
    escape = "../" * 12 + str(untouched["outside"]).lstrip("/") + "/pwned"
    archive = build(
        tmp_path / "dotdot.tar",
        regular("./solution.py", SOLUTION),
        regular(escape, b"owned"),
        regular("./a/../solution.py", b"owned too"),
    )
    untouched["mark"]()
    assert read_member(archive, "solution.py", 1 << 20) == SOLUTION  # not the later `a/../solution.py`
    names = [name for name, _ in iter_files(archive, 1 << 20)]
    assert names == ["solution.py", escape, "./a/../solution.py"]  # still scanned, under their raw names


def test_symlink_then_member_through_it_is_refused(tmp_path, untouched):
    """CVE-2025-4517's shape: `a` → a folder outside, then `a/evil`; extraction would write outside."""
    archive = build(
        tmp_path / "cve.tar",
        _member("./a", tarfile.SYMTYPE, linkname=str(untouched["outside"])),
        regular("./a/evil", b"owned"),
        regular("./solution.py", SOLUTION),
    )
    untouched["mark"]()
    with pytest.raises(MemberError, match=r"'a/evil' .* lies under 'a', which is a symbolic link"):
        read_member(archive, "a/evil", 1 << 20)
    with pytest.raises(MemberError, match="'a' .* is a symbolic link .*, not a file"):
        read_member(archive, "a", 1 << 20)
    assert read_member(archive, "solution.py", 1 << 20) == SOLUTION
    assert dict(iter_files(archive, 1 << 20)) == {"a/evil": b"owned", "solution.py": SOLUTION}


def test_a_symlink_named_like_the_submission_is_not_followed(tmp_path, untouched):
    archive = build(tmp_path / "link.tar", _member("./solution.py", tarfile.SYMTYPE, linkname="/etc/passwd"))
    untouched["mark"]()
    with pytest.raises(
        MemberError, match=r"'solution.py' .* is a symbolic link \(to '/etc/passwd'\), not a file"
    ) as error:
        read_member(archive, "solution.py", 1 << 20)
    assert "root:" not in str(error.value)
    assert list(iter_files(archive, 1 << 20)) == []


def test_hard_links_are_not_resolved_inside_or_outside_the_archive(tmp_path, untouched):
    archive = build(
        tmp_path / "hard.tar",
        regular("./solution.py", SOLUTION),
        _member("./passwd", tarfile.LNKTYPE, linkname="/etc/passwd"),
        _member("./escape", tarfile.LNKTYPE, linkname=str(untouched["outside"] / "x")),
        _member("./copy.py", tarfile.LNKTYPE, linkname="./solution.py"),
    )
    untouched["mark"]()
    for name in ("passwd", "escape", "copy.py"):
        with pytest.raises(MemberError, match=f"'{re.escape(name)}' .* is a hard link"):
            read_member(archive, name, 1 << 20)
    assert list(iter_files(archive, 1 << 20)) == [("solution.py", SOLUTION)]


def test_fifo_and_device_members_are_refused(tmp_path, untouched):
    device, _ = _member("./null", tarfile.CHRTYPE)
    device.devmajor, device.devminor = 1, 3
    archive = build(
        tmp_path / "special.tar", _member("./pipe", tarfile.FIFOTYPE), (device, b""), regular("./solution.py", SOLUTION)
    )
    untouched["mark"]()
    with pytest.raises(MemberError, match="'pipe' .* is a FIFO, not a file"):
        read_member(archive, "pipe", 1 << 20)
    with pytest.raises(MemberError, match="'null' .* is a device, not a file"):
        read_member(archive, "null", 1 << 20)
    assert list(iter_files(archive, 1 << 20)) == [("solution.py", SOLUTION)]


def test_a_path_longer_than_path_max_is_read(tmp_path, untouched):
    deep = "/".join(f"{level}" + "d" * 450 for level in range(10)) + "/deep.txt"
    assert len(deep) > os.pathconf("/", "PC_PATH_MAX")
    archive = build(tmp_path / "deep.tar", regular("./" + deep, b"at the bottom"))
    untouched["mark"]()
    assert read_member(archive, deep, 100) == b"at the bottom"
    assert list(iter_files(archive, 100)) == [(deep, b"at the bottom")]


# Offsets in the archive below: a.txt's header at 0 and its data (700 bytes) from 512; b.txt's
# header at 1536 and its data from 2048; tar's end-of-archive zero blocks from 2560.
@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(600, id="inside-a-member's-data"),
        pytest.param(1536, id="at-a-header-boundary"),
        pytest.param(1636, id="inside-a-header"),
        pytest.param(2053, id="inside-the-last-member's-data"),
        pytest.param(2560, id="without-end-of-archive-blocks"),
        pytest.param(0, id="empty"),
    ],
)
def test_a_truncated_archive_is_a_value_error_naming_it(tmp_path, untouched, cut):
    whole = build(tmp_path / "whole.tar", regular("./a.txt", b"A" * 700), regular("./b.txt", b"B" * 10)).read_bytes()
    assert whole[1536:1543] == b"./b.txt" and whole[2560:3584] == b"\0" * 1024  # the layout above
    assert read_member(tmp_path / "whole.tar", "a.txt", 1 << 20) == b"A" * 700
    archive = tmp_path / "cut.tar"
    archive.write_bytes(whole[:cut])
    untouched["mark"]()
    with pytest.raises(SnapshotError, match="workspace snapshot .*cut.tar"):
        read_member(archive, "a.txt", 1 << 20)  # even a member before the cut: the archive is not whole
    with pytest.raises(ValueError, match="cut.tar"):
        list(iter_files(archive, 1 << 20))


def test_not_a_tar_and_a_missing_archive_are_snapshot_errors(tmp_path, untouched):
    (tmp_path / "noise.tar").write_bytes(os.urandom(4096))
    untouched["mark"]()
    for archive in (tmp_path / "noise.tar", tmp_path / "absent.tar"):
        with pytest.raises(SnapshotError, match=re.escape(str(archive))):
            read_member(archive, "solution.py", 1 << 20)


# -- the store ------------------------------------------------------------------------------------------
def tar_bytes(*members) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def test_save_is_content_addressed(tmp_path):
    store = SnapshotStore(tmp_path / "env" / "key" / "snapshots")
    one, two = tar_bytes(regular("./solution.py", SOLUTION)), tar_bytes(regular("./solution.py", b"print(2)\n"))
    sha = store.save(lambda f: f.write(one))
    assert sha == hashlib.sha256(one).hexdigest() and store.has(sha)
    assert store.save(lambda f: os.write(f.fileno(), one)) == sha  # a writer that hands its descriptor to a subprocess
    assert [p.name for p in store.folder.iterdir()] == [f"{sha}.tar"]
    other = store.save(lambda f: f.write(two))
    assert other != sha and sorted(p.name for p in store.folder.iterdir()) == sorted([f"{sha}.tar", f"{other}.tar"])
    assert store.path(sha).read_bytes() == one
    assert read_member(store.path(other), "solution.py", 100) == b"print(2)\n"


def test_a_failing_writer_leaves_no_file(tmp_path):
    store = SnapshotStore(tmp_path / "snapshots")

    def half_then_fail(handle):
        handle.write(b"partial tar stream")
        raise RuntimeError("sandbox went away")

    with pytest.raises(RuntimeError, match="sandbox went away"):
        store.save(half_then_fail)
    assert list(store.folder.iterdir()) == []


def test_path_accepts_only_sha256_ids(tmp_path):
    store = SnapshotStore(tmp_path)
    sha = "ab" * 32
    assert store.path(sha) == tmp_path / f"{sha}.tar" and not store.has(sha)
    for bad in ("../" * 3 + "etc/passwd", sha.upper(), sha[:-1], sha + "0", f"{sha[:-1]}/", None):
        with pytest.raises(ValueError, match="not a snapshot id"):
            store.path(bad)


def test_prune_deletes_only_its_own_files_not_kept(tmp_path):
    store = SnapshotStore(tmp_path / "snapshots")
    shas = [store.save(lambda f, n=n: f.write(tar_bytes(regular("./n.txt", str(n).encode())))) for n in range(3)]
    foreign = ["notes.txt", "backup.tar", ("C" * 64) + ".tar", ("a" * 64) + ".tar.bak", ".partial-xyz.tar"]
    for name in foreign:
        (store.folder / name).write_text("not arex's")
    stale = store.folder / ".partial-0123456789abcdef.tar"
    stale.write_bytes(b"left by a killed save")
    store.prune({shas[1]})
    assert sorted(p.name for p in store.folder.iterdir()) == sorted([f"{shas[1]}.tar", *foreign])
    with pytest.raises(ValueError, match="not a snapshot id"):
        store.prune({"../notes"})
    SnapshotStore(tmp_path / "never-made").prune(set())  # nothing saved yet: nothing to do
    assert not (tmp_path / "never-made").exists()


# -- canaries -------------------------------------------------------------------------------------------
CANARY = "arex-canary-" + "0123456789abcdef" * 2


def test_scan_archive_names_the_member_and_line_of_a_canary(tmp_path):
    canaries = Canaries({CANARY: "secret-env"})
    clean = workspace(tmp_path / "clean.tar")
    scan_archive(clean, canaries)  # nothing to find: no error
    leaked = build(
        tmp_path / "leaked.tar",
        regular("./solution.py", SOLUTION),
        regular("./notes/log.txt", f"one\r\ntwo\nthe label is {CANARY}\n".encode()),
    )
    with pytest.raises(
        LeakError, match=r"leaked.tar \(member 'notes/log.txt', line 3\): the private-data canary of env 'secret-env'"
    ):
        scan_archive(leaked, canaries)
    named = build(tmp_path / "named.tar", regular(f"./{CANARY}.txt", b"harmless"))
    with pytest.raises(LeakError, match="member name .*canary of env 'secret-env'"):
        scan_archive(named, canaries)
    big = build(tmp_path / "big.tar", regular("./big.bin", CANARY.encode() + b"\0" * 100))
    scan_archive(big, canaries, max_member_bytes=64)  # over the cap: skipped, by design
    with pytest.raises(LeakError):
        scan_archive(big, canaries)


def test_scan_archive_reports_a_corrupt_archive(tmp_path):
    archive = tmp_path / "cut.tar"
    archive.write_bytes(workspace(tmp_path / "ws.tar").read_bytes()[:700])
    with pytest.raises(ValueError, match="cut.tar"):
        scan_archive(archive, Canaries({CANARY: "secret-env"}))
