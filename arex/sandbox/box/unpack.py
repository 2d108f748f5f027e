"""Unpack a tar stream from stdin into the current folder, as the sandbox user (restore, copy_in).

GNU tar cannot extract a name longer than PATH_MAX (4096 bytes), which a workspace may well hold
(nested folders), so its snapshot could not be restored. This walks every name one component at
a time from a descriptor of the folder (openat, O_NOFOLLOW): names of any length work, and no
symbolic link, from the archive or already there, is followed on the way.

Names are placed as arex.record.snapshots reads them: '/', '.' and empty components dropped, names
holding '..' skipped; a later member of a name replaces an earlier one. Modes are kept (-p) and
owners are not (everything belongs to the user running this). Folder modes and times are applied
last, deepest first, so a read-only folder is filled before it closes. Devices are skipped (the
user cannot make them). Exit 0, or 2 with the reasons on stderr if some member was not placed.
"""

import os
import stat
import sys
import tarfile

ROOT = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
errors = 0


def warn(name, why):
    global errors
    errors += 1
    sys.stderr.write(f"arex-unpack: {name!r}: {why}\n")


def parts_of(name):
    """The components of a member name (bytes), or None if it would leave the folder."""
    parts = [p for p in name.encode("utf-8", "surrogateescape").split(b"/") if p not in (b"", b".")]
    return None if b".." in parts else parts


def folder(parts, create):
    """A descriptor of the folder `parts` (made as needed), reached without following a link."""
    fd = os.dup(ROOT)
    try:
        for part in parts:
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


last_parent = [None, None]  # (parts, descriptor) of the folder the previous member went into


def parent_of(parts):
    """folder(parts, create=True), kept for the next member: an archive lists a folder's entries
    together, so most members need no walk at all."""
    if last_parent[0] != parts:
        forget()
        last_parent[:] = [parts, folder(parts, create=True)]
    return last_parent[1]


def forget():
    if last_parent[1] is not None:
        os.close(last_parent[1])
    last_parent[:] = [None, None]


def clear(fd, name, parts):
    """Make room for member `parts` (named `name` in `fd`): remove a file, link or empty folder."""
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        if last_parent[0] is not None and last_parent[0][: len(parts)] == parts:
            forget()  # the remembered folder is going
        os.rmdir(name, dir_fd=fd)


def place(tar, info, parts, pending):
    if not parts:  # the folder itself: only its mode and times
        if info.isdir():
            pending[()] = (info.mode, info.mtime)
        return
    parent = parent_of(parts[:-1])
    name = parts[-1]
    if not info.isdir():
        pending.pop(tuple(parts), None)  # a folder of that name earlier in the archive is replaced
    if info.isdir():
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                clear(parent, name, parts)
                os.mkdir(name, 0o700, dir_fd=parent)
        except FileNotFoundError:
            os.mkdir(name, 0o700, dir_fd=parent)
        pending[tuple(parts)] = (info.mode, info.mtime)
    elif info.isreg():
        clear(parent, name, parts)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
        try:
            data = tar.extractfile(info)
            for chunk in iter(lambda: data.read(1 << 20), b""):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, info.mode & 0o7777)
            os.utime(fd, (info.mtime, info.mtime))
        finally:
            os.close(fd)
    elif info.issym():
        clear(parent, name, parts)
        os.symlink(info.linkname.encode("utf-8", "surrogateescape"), name, dir_fd=parent)
        os.utime(name, (info.mtime, info.mtime), dir_fd=parent, follow_symlinks=False)
    elif info.islnk():
        target = parts_of(info.linkname)
        if not target:
            raise OSError(f"hard link to {info.linkname!r}, outside the folder")
        source = folder(target[:-1], create=False)
        try:
            clear(parent, name, parts)
            os.link(target[-1], name, src_dir_fd=source, dst_dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(source)
    elif info.isfifo():
        clear(parent, name, parts)
        os.mkfifo(name, 0o600, dir_fd=parent)
        os.chmod(name, info.mode & 0o7777, dir_fd=parent)
        os.utime(name, (info.mtime, info.mtime), dir_fd=parent)
    else:
        raise OSError("a device or unknown member type, not made")


def settle(pending):
    """Folder modes and times, deepest first (a later member of the same name has replaced an
    earlier one's)."""
    for parts, (mode, mtime) in sorted(pending.items(), key=lambda item: -len(item[0])):
        try:
            fd = folder(list(parts), create=False)
            try:
                os.fchmod(fd, mode & 0o7777)
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)
        except OSError as exc:
            warn(b"/".join(parts).decode("utf-8", "replace") or ".", exc.strerror or exc)


def main():
    pending = {}  # folder parts -> (mode, mtime)
    try:
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|", encoding="utf-8", errors="surrogateescape") as tar:
            while (info := tar.next()) is not None:
                tar.members.clear()  # nothing is looked up by name: memory stays flat
                parts = parts_of(info.name)
                if parts is None:
                    warn(info.name, "name holds '..', skipped")
                    continue
                try:
                    place(tar, info, parts, pending)
                except OSError as exc:
                    warn(info.name, exc.strerror or exc)
    except (tarfile.TarError, EOFError, ValueError, OSError) as exc:
        warn("<archive>", f"not a readable tar stream: {exc}")
    forget()
    settle(pending)
    sys.exit(2 if errors else 0)


main()
