"""Workspace snapshots: tar archives made inside a sandbox, kept on the host as files, never extracted.

The agent controls every byte of its workspace (and, if it subverts the sandbox's `tar`, of the
archive), so unpacking one on the host would hand it the host's file system: `extractall` filters
have been bypassed before (CVE-2025-4517). Here an archive is only ever *read*: a member's bytes
come back as `bytes`, links are reported and never followed, nothing is written to disk. Unpacking
happens only inside a sandbox (`Sandbox.restore`).

Archives are content-addressed (`<sha256>.tar` in `<store>/<env>/<key>/snapshots`): a round
refers to its workspace by hash, and identical workspaces are stored once.

A member is found under the name GNU tar would extract it to (`./a//b` and `/a/b` are `a/b`;
names with `..` are skipped, as GNU tar skips them); when a name occurs twice, the later member
wins, as it would on extraction. So what is read here is what `restore` puts in the sandbox.
"""

from __future__ import annotations

import os
import re
import secrets
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from arex.errors import UserInputError
from arex.hashing import file_sha256

__all__ = ["MemberError", "SnapshotError", "SnapshotStore", "iter_files", "read_member"]

_SHA = re.compile(r"[0-9a-f]{64}")
_ARCHIVE = re.compile(r"[0-9a-f]{64}\.tar")
_PARTIAL = re.compile(r"\.partial-[0-9a-f]{16}\.tar")
_END_BLOCK = b"\0" * tarfile.BLOCKSIZE


class SnapshotError(UserInputError, ValueError):
    """The archive itself cannot be trusted to read: missing, not a tar, corrupt or truncated. The
    trajectory store is damaged (re-run the rollout); selection drops the trajectory."""


class MemberError(ValueError):
    """The member exists but is not a readable regular file (a link, a device, too large, ...).
    The agent's doing, caught by its callers (so it is no ArexError)."""


class SnapshotStore:
    """The content-addressed archives of one trajectory: `<folder>/<sha256>.tar`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def save(self, stream_writer: Callable[[BinaryIO], object]) -> str:
        """Let `stream_writer` write a tar stream, store it as `<sha256>.tar`, return the sha256.

        The stream goes to a temporary file first (a real file, so the writer may hand its
        descriptor to a subprocess), and is renamed only once complete and on disk: a record line
        that names a snapshot never points at half an archive, even after a crash."""
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f".partial-{secrets.token_hex(8)}.tar"
        try:
            with partial.open("xb") as handle:
                stream_writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
            sha = file_sha256(partial)
            final = self.path(sha)
            if final.exists():
                partial.unlink()  # same content already stored: content addressing
            else:
                os.replace(partial, final)
            return sha
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def path(self, sha: str) -> Path:
        """Where the archive `sha` lives. The sha is checked: it comes from a record, which is data."""
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise ValueError(f"{sha!r} is not a snapshot id (64 lowercase hex digits of a sha256)")
        return self.folder / f"{sha}.tar"

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def prune(self, keep: set[str]) -> None:
        """Delete the archives not in `keep`, and temporary files left by interrupted saves.

        Only names this class makes are touched, so nothing else in the folder is ever at risk.
        Call it when no `save` is running on this folder (one rollout owns it)."""
        wanted = {self.path(sha).name for sha in keep}  # validates every id
        if not self.folder.is_dir():
            return
        for entry in self.folder.iterdir():
            ours = _ARCHIVE.fullmatch(entry.name) or _PARTIAL.fullmatch(entry.name)
            if ours and entry.name not in wanted and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)


# -- reading ----------------------------------------------------------------------------------------
def _normalise(name: str) -> str | None:
    """A member name as an extraction would place it under the folder; None if it would leave it."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"a symbolic link (to {info.linkname!r})"
    if info.islnk():
        return f"a hard link (to {info.linkname!r})"
    if info.isfifo():
        return "a FIFO"
    if info.ischr() or info.isblk():
        return "a device"
    if info.isdir():
        return "a folder"
    return "a regular file" if info.isreg() else f"a member of unknown type {info.type!r}"


def _open(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, mode="r:")  # uncompressed, random access: no member is loaded whole
    except (OSError, tarfile.TarError) as exc:
        raise SnapshotError(f"workspace snapshot {archive} cannot be read as a tar archive: {exc}") from exc


def _headers(tar: tarfile.TarFile, archive: Path) -> Iterator[tarfile.TarInfo]:
    """Every member header in order, then a check that the archive really ended there."""
    while True:
        try:
            info = tar.next()
        except (tarfile.TarError, ValueError, EOFError) as exc:
            raise SnapshotError(f"workspace snapshot {archive} is corrupt: {exc}") from exc
        # tarfile keeps every header it reads; a hostile archive of millions of empty members
        # would fill memory, and nothing here looks a member up by name through tarfile.
        tar.members.clear()
        if info is None:
            break
        yield info
    _check_end(archive, tar.offset)


def _check_end(archive: Path, offset: int) -> None:
    # tarfile also stops quietly at a cut or garbled header; only tar's zero block is a real end.
    with archive.open("rb") as handle:
        handle.seek(offset)
        if handle.read(tarfile.BLOCKSIZE) != _END_BLOCK:
            raise SnapshotError(
                f"workspace snapshot {archive} is truncated or corrupt at byte {offset} (no end-of-archive block)"
            )


def _read(tar: tarfile.TarFile, info: tarfile.TarInfo, archive: Path) -> bytes:
    """The data of a regular member; tarfile resolves nothing for regular files."""
    try:
        handle = tar.extractfile(info)
        data = handle.read() if handle is not None else b""
    except (tarfile.TarError, OSError, ValueError) as exc:
        raise SnapshotError(f"workspace snapshot {archive} is corrupt in member {info.name!r}: {exc}") from exc
    if len(data) != info.size:
        raise SnapshotError(f"workspace snapshot {archive} is truncated in member {info.name!r}")
    return data


def read_member(archive: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of the regular file `name` (relative to the archived folder) in `archive`.

    FileNotFoundError: no such member. IsADirectoryError: it is a folder. MemberError (a
    ValueError): it is a link, FIFO or device, lies under a non-folder (a symlink `a` then `a/b`),
    or is larger than `max_bytes`. SnapshotError (a ValueError): the archive is missing or corrupt."""
    wanted = _normalise(name)
    if not wanted:
        raise ValueError(f"{name!r} is not a path inside the workspace")
    parts = wanted.split("/")
    ancestors = {"/".join(parts[:i]) for i in range(1, len(parts))}
    found: tarfile.TarInfo | None = None
    above: dict[str, tarfile.TarInfo] = {}
    with _open(archive) as tar:
        for info in _headers(tar, archive):
            member = _normalise(info.name)
            if member == wanted:
                found = info  # a later member of the same name wins, as on extraction
            elif member in ancestors:
                above[member] = info
        return _read(tar, _checked(archive, name, found, above, max_bytes), archive)


def _checked(
    archive: Path, name: str, found: tarfile.TarInfo | None, above: dict[str, tarfile.TarInfo], max_bytes: int
) -> tarfile.TarInfo:
    """`found` if it is a regular file within the cap that no link or file stands above."""
    for ancestor in sorted(above, key=len):
        if not above[ancestor].isdir():
            raise MemberError(
                f"{name!r} in workspace snapshot {archive} lies under {ancestor!r}, which is {_kind(above[ancestor])}, "
                "not a folder"
            )
    if found is None:
        raise FileNotFoundError(f"{name!r} is not in workspace snapshot {archive}")
    if found.isdir():
        raise IsADirectoryError(f"{name!r} in workspace snapshot {archive} is a folder, not a file")
    if not found.isreg():
        raise MemberError(f"{name!r} in workspace snapshot {archive} is {_kind(found)}, not a file")
    if found.size > max_bytes:
        raise MemberError(
            f"{name!r} in workspace snapshot {archive} is {found.size} bytes, larger than the {max_bytes} allowed"
        )
    return found


def iter_files(archive: Path, max_member_bytes: int) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every regular member up to `max_member_bytes`, in archive order.

    Names are normalised; a name that would leave the folder is given as stored (its bytes are
    still data worth scanning). Links, devices and folders are skipped, never followed."""
    with _open(archive) as tar:
        for info in _headers(tar, archive):
            if info.isreg() and info.size <= max_member_bytes:
                yield _normalise(info.name) or info.name, _read(tar, info, archive)
