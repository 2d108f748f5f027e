"""The export's output folder: checked, staged beside it, sealed and swapped in with one rename.

Only a folder carrying the `.arex-export` marker, and holding nothing else, is ever replaced or
deleted: nothing arex does deletes what it did not make.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from arex import __version__
from arex.dataset.card import CURVE
from arex.dataset.config import MARKER, MARKER_FORMAT
from arex.errors import UserInputError
from arex.hashing import file_sha256
from arex.record.storage import naming


class ExportError(UserInputError):
    """An export that cannot go ahead: an `--out` arex may not replace, a record that changed after
    `arex select`, a full disk, a read-only folder. The message names the file and what to do; the
    previous export in `--out` is left as it was."""


def protected(
    paths: list[Path], envs_dir: Path | None, selection: dict | None, kept_dir: Path | None
) -> list[tuple[str, Path]]:
    """Folders `--out` may not be, hold or sit in."""
    folders = [("envs folder", envs_dir)] if envs_dir else []
    for name, key in (("trajectory store", "store"), ("envs folder", "envs")):  # as selection.json names them
        if isinstance((selection or {}).get(key), str):
            folders.append((name, Path(selection[key])))
    if kept_dir is not None:
        folders.append(("selection folder", kept_dir))
    folders += [("folder of the trajectory records", p) for p in sorted({p.parent for p in paths})]  # <store>/<env>
    return folders


def _read_marker(folder: Path) -> dict | None:
    """The folder's marker: None if it has none, {} if it is damaged."""
    path = folder / MARKER
    if not path.is_file() or path.is_symlink():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, OSError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _write_marker(folder: Path, files: list[str] | None) -> None:
    """`files` is None while the folder is being staged (a killed run's leftover is still ours)."""
    marker = {"format": MARKER_FORMAT, "arex_version": __version__, "files": files}
    with naming(folder / MARKER):
        (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _strays(folder: Path, files: list[str]) -> list[str]:
    """What is in an export folder that its marker does not list (arex writes no links)."""
    allowed = set(files) | {MARKER}
    dirs = {parent.as_posix() for f in files for parent in Path(f).parents if parent != Path(".")}
    strays = []
    for root, subdirs, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        strays += [
            (here / d).as_posix()
            for d in subdirs
            if (here / d).as_posix() not in dirs or os.path.islink(os.path.join(root, d))
        ]
        strays += [
            (here / n).as_posix()
            for n in names
            if (here / n).as_posix() not in allowed or os.path.islink(os.path.join(root, n))
        ]
    return sorted(strays)


def _marker_files(folder: Path) -> list[str] | None:
    """The files a valid, finished export's marker lists; None if there is no such marker."""
    marker = _read_marker(folder)
    files = (marker or {}).get("files")
    if (
        marker
        and marker.get("format") == MARKER_FORMAT
        and isinstance(files, list)
        and all(isinstance(f, str) for f in files)
    ):
        return files
    return None


def _legacy_files(folder: Path) -> list[str] | None:
    """The files of an export made before exports carried a marker, recognised by its checksums.json:
    every shard it lists is there with that sha256. None if the folder is not one."""
    try:
        listed = json.loads((folder / "checksums.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(listed, dict) or not listed:
        return None
    for rel, sha in listed.items():
        shard = folder / rel
        if not (isinstance(sha, str) and shard.is_file() and not shard.is_symlink() and file_sha256(shard) == sha):
            return None
    return sorted(listed) + [name for name in ("checksums.json", "README.md", CURVE) if (folder / name).is_file()]


def _discard(folder: Path) -> None:
    """Delete a folder arex made (a leftover staging folder, or the previous export after the swap):
    it must carry the marker and, if it is a finished export, hold nothing its marker does not list."""
    if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()  # a kill right after mkdir: empty, nothing to lose
        return
    if _read_marker(folder) is None and _legacy_files(folder) is None:
        raise ExportError(
            f"{folder} is left over from an earlier export but has no {MARKER} file, so arex will not delete it; "
            "move it away and re-run `arex export`"
        )
    files = _marker_files(folder) if _read_marker(folder) is not None else _legacy_files(folder)
    strays = _strays(folder, files) if files is not None else []
    if strays:
        raise ExportError(
            f"{folder} (an earlier export) holds {strays[0]}, which arex did not write, so arex will not delete it; "
            f"move that file out, delete {folder}, and re-run `arex export`"
        )
    shutil.rmtree(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def seal(staging: Path) -> None:
    """Write the marker with every file of the export, and put all of it on disk before the swap."""
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file() and p.name != MARKER)
    _write_marker(staging, files)
    for path in sorted(staging.rglob("*"), reverse=True):  # files before the folders holding them
        _fsync(path)
    _fsync(staging)


AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`): no moment without either."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc >= 2.28
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not in this C library", str(a), None, str(b))
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


@dataclass
class Target:
    """The `--out` folder, checked: `replaces` if it is an earlier export (swapped atomically)."""

    given: Path
    path: Path
    replaces: bool

    @property
    def staging(self) -> Path:
        return self.path.with_name(f".{self.path.name}.partial")

    @classmethod
    def check(cls, out: Path, protected: list[tuple[str, Path]]) -> Target:
        path, cwd = out.resolve(), Path.cwd().resolve()  # symlinks followed: the folder they name
        if path == cwd or path in cwd.parents:
            what = "the current folder" if path == cwd else f"a folder holding the current folder ({cwd})"
            raise ExportError(f"--out {out} is {what}; export into a folder of its own, e.g. --out dataset")
        for name, folder in protected:
            folder = folder.resolve()
            relation = (
                "is"
                if path == folder
                else "is inside"
                if folder in path.parents
                else "holds"
                if path in folder.parents
                else None
            )
            if relation:
                raise ExportError(f"--out {out} {relation} the {name} {folder}; export into a folder outside it")
        if path.exists() and not path.is_dir():
            raise ExportError(f"--out {out} is a file, not a folder; choose another --out")
        if not path.is_dir() or not any(path.iterdir()):
            return cls(out, path, False)
        if _read_marker(path) is None and _legacy_files(path) is None:
            raise ExportError(
                f"--out {out} is not empty and is not an earlier arex export (it has no {MARKER} file), "
                "so arex will not replace it; choose a new or empty folder"
            )
        files = _marker_files(path) if _read_marker(path) is not None else _legacy_files(path)
        if files is None:
            raise ExportError(
                f"{path / MARKER} is damaged or from another arex version, so arex will not replace {out}; "
                f"delete {out} yourself if it is an old export, or choose another --out"
            )
        strays = _strays(path, files)
        if strays:
            raise ExportError(
                f"--out {out} is an earlier arex export, but {strays[0]} in it was not written by arex; "
                "move that out (or choose another --out) so nothing of yours is deleted"
            )
        return cls(out, path, True)

    def stage(self) -> Path:
        """A fresh staging folder beside `out`, marked as ours before anything else goes in."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.staging
        if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
            raise ExportError(
                f"{staging} is in the way of the export (not a folder arex made); move it away and re-run `arex export`"
            )
        if staging.exists():
            _discard(staging)  # a killed run's leftover
        staging.mkdir()
        try:
            _write_marker(staging, None)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    def swap(self, staging: Path) -> None:
        """Put the staged export at `out` in one rename; then delete the previous one (now at `staging`)."""
        try:
            if self.replaces:
                exchange(staging, self.path)
            else:
                os.rename(staging, self.path)  # also replaces an empty folder
        except OSError as exc:  # nothing moved: the staged export goes, `out` is as it was
            shutil.rmtree(staging, ignore_errors=True)
            raise (self.os_error(exc) or exc) from None
        _fsync(self.path.parent)
        if self.replaces:
            _discard(staging)

    def os_error(self, exc: OSError) -> ExportError | None:
        """One sentence for a file-system failure a user can fix; None for anything else."""
        where = exc.filename or self.path.parent
        untouched = f"{self.given} was left as it was" if self.replaces else f"nothing was written to {self.given}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return ExportError(
                f"no space left on the device while writing {where}; free some space "
                f"(or choose another --out) and re-run `arex export` ({untouched})"
            )
        if exc.errno == errno.EROFS:
            return ExportError(
                f"{where} is on a read-only file system; choose an --out on a writable one ({untouched})"
            )
        if exc.errno in (errno.EACCES, errno.EPERM):
            return ExportError(f"permission denied on {where}; choose an --out you may write to ({untouched})")
        if exc.errno in (errno.EINVAL, errno.ENOSYS) and self.replaces:
            return ExportError(
                f"the file system of {self.given} cannot swap folders in one step (renameat2 RENAME_EXCHANGE: "
                f"{exc.strerror}); export into a new folder instead ({untouched})"
            )
        if exc.errno in (errno.EXDEV, errno.EBUSY, errno.ENOTEMPTY, errno.EEXIST):
            return ExportError(
                f"could not move the finished export from {self.staging} to {self.given} ({exc.strerror}); "
                f"if --out is a mount point, export into a folder inside it ({untouched})"
            )
        return None
