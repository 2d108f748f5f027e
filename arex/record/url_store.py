"""A trajectory store at an fsspec URL (object storage: `s3://bucket/prefix`, `gs://...`, ...).

Records grow line by line and object stores cannot append, so arex never works on the URL
directly: it works on a local *mirror* of it (`$AREX_CACHE/stores/<sha256 of the URL>[:16]/`), and
everything that reads or writes a store (the store lock, resume, keys, select) runs on the mirror
unchanged. This module moves bytes between the two:

- before a run, the mirror is brought up to date (`opened`): every record is downloaded (the URL
  wins over an older local copy), and every snapshot archive the mirror lacks;
- during a run, each finished round (a `round_end` line) and the `end` line make the rollout's
  record be uploaded whole, its new snapshot archives first (`publisher`, hooked into the record
  writer by `Rollout`): a half-written round is never uploaded, so a re-run anywhere resumes from
  the last uploaded round; `summary.json` is uploaded when written (`publish_file`);
- readers (`arex select`, `arex report`) get a mirror of their own (`<hash>.read/`), so they never
  overwrite the files of a rollout running on this machine.

A mirror holds the URL it mirrors in `.arex-url`; code that has only a path asks `url_of(path)`.
arex never deletes an object at the URL, except its own lock; it overwrites only the records and
the summary it writes (archives are named by their content).

The lock is an object, `<url>/.arex-lock`, naming its owner (host, pid). It is advisory: fsspec's
generic API has no atomic create, so two runs started in the same instant can both take it; a run
finding another live owner's lock stops with one sentence saying how to clear it.
"""

from __future__ import annotations

import json
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator

from arex.errors import UserInputError
from arex.hashing import cache_dir, text_sha256
from arex.record.storage import LOCK_NAME, Owner, StoreLocked

MARK = ".arex-url"
"""In a mirror: the URL it mirrors."""
LOCK = ".arex-lock"
"""The lock object at the URL."""
_LOCAL_ONLY = {MARK, LOCK, LOCK_NAME}
_URL = re.compile(r"[A-Za-z][\w+.-]*(::[A-Za-z][\w+.-]*)*://")
_ARCHIVE = re.compile(r"[0-9a-f]{64}\.tar")
_pool: list[ThreadPoolExecutor] = []


class UrlStoreError(UserInputError):
    """The store's URL cannot be used: no fsspec backend for it, or it cannot be reached or read."""


def is_url(value: str | Path) -> bool:
    """Whether an --out/--store value is a URL (`proto://...`, not `file://`)."""
    text = str(value)
    return bool(_URL.match(text)) and not text.startswith("file://")


def local_path(value: str | Path) -> Path:
    """A value that is no URL as a path (`file://` dropped)."""
    text = str(value)
    return Path(text[len("file://") :] if text.startswith("file://") else text)


def url_of(folder: Path) -> str | None:
    """The URL `folder` (or a folder above it) mirrors, or None for a plain folder."""
    for parent in [Path(folder), *Path(folder).parents]:
        try:
            return (parent / MARK).read_text(encoding="utf-8").strip() or None
        except OSError:
            continue
    return None


def mirror_root(folder: Path) -> Path | None:
    """The mirror holding `folder`, or None."""
    return next((p for p in [Path(folder), *Path(folder).parents] if (p / MARK).is_file()), None)


def _filesystem(url: str):
    """(fsspec filesystem, root path) of `url`; UrlStoreError naming the package a backend needs."""
    try:
        from fsspec.core import url_to_fs
        from fsspec.registry import known_implementations
    except ImportError:
        raise UserInputError(
            f"the trajectory store {url} is a URL, which needs fsspec: pip install 'arex[cloud]'"
        ) from None
    protocol = url.split("://", 1)[0].split("::")[-1]
    try:
        return url_to_fs(url)
    except ImportError:
        package = known_implementations.get(protocol, {}).get("class", protocol).split(".")[0]
        raise UrlStoreError(
            f"the trajectory store {url} needs the fsspec backend for {protocol}://, "
            f"which is not installed: pip install {package}"
        ) from None
    except ValueError as exc:
        raise UrlStoreError(
            f"the trajectory store {url} cannot be opened ({exc}); "
            "use a URL of a known fsspec protocol (s3://, gs://, az://, ...) or a folder"
        ) from None


class Remote:
    """One store URL and its local mirror."""

    def __init__(self, url: str, read_only: bool = False, mirror: Path | None = None):
        """`read_only`: the readers' mirror; `mirror`: an existing one (found by its mark)."""
        self.url = str(url).rstrip("/")
        self.fs, self.root = _filesystem(self.url)
        self.root = self.root.rstrip("/")
        digest = text_sha256(self.url)[:16]
        self.mirror = mirror or cache_dir() / "stores" / (f"{digest}.read" if read_only else digest)
        self.mirror.mkdir(parents=True, exist_ok=True)
        (self.mirror / MARK).write_text(self.url + "\n", encoding="utf-8")

    def key(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    @contextmanager
    def reaching(self, what: str) -> Iterator[None]:
        """Any failure of the block as one sentence naming the URL."""
        try:
            yield
        except UserInputError:
            raise
        except Exception as exc:  # noqa: BLE001 - backends raise their own kinds (botocore, aiohttp, ...)
            detail = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise UrlStoreError(
                f"the trajectory store {self.url} could not be {what} ({type(exc).__name__}: {detail}); "
                "check the URL, that the bucket exists, and your credentials"
            ) from None

    def check(self) -> None:
        """UrlStoreError naming the URL if it cannot be listed (no bucket, no access, no network)."""
        with self.reaching("reached"):
            self.fs.invalidate_cache()
            try:
                self.fs.ls(self.root, detail=False)
            except FileNotFoundError:  # a new store: its bucket (container, ...) must be there
                self.fs.ls(self.root.split("/")[0], detail=False)

    # -- down ----------------------------------------------------------------------------------
    def listing(self, under: str = "") -> dict[str, int]:
        """Every object under the URL (or `under` it): path relative to the URL → size."""
        with self.reaching("listed"):
            self.fs.invalidate_cache()
            found = self.fs.find(self.key(under), detail=True)
        out = {}
        for name, info in found.items():
            rel = name[len(self.root) :].lstrip("/")
            if rel and not rel.endswith("/") and info.get("type", "file") == "file":
                out[rel] = int(info.get("size") or 0)
        return out

    def pull(self, under: str = "", only: Callable[[str], bool] = lambda rel: True) -> None:
        """Bring the mirror up to date with the URL: records and other files always (the URL wins),
        archives (named by their content) only when missing or of another size."""
        for rel, size in self.listing(under).items():
            target = self._inside(rel)
            if target is None or not only(rel) or rel.split("/")[0] == ".arex-images":
                continue
            if _ARCHIVE.fullmatch(rel.rsplit("/", 1)[-1]) and target.is_file() and target.stat().st_size == size:
                continue
            self.download(rel, target)

    def _inside(self, rel: str) -> Path | None:
        """Where `rel` goes in the mirror; None for a name arex keeps local, or one that would leave the mirror.
        A marker at any depth is refused: `url_of` reads the nearest `.arex-url` above a record, so
        one taken from the store would send that folder's uploads to a URL of the store's choosing."""
        parts = rel.split("/")
        if any(p in _LOCAL_ONLY for p in parts) or any(p in ("", ".", "..") for p in parts):
            return None
        return self.mirror.joinpath(*parts)

    def download(self, rel: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.download")
        with self.reaching(f"read ({rel})"):
            self.fs.get_file(self.key(rel), str(scratch))
        os.replace(scratch, target)

    def fetch(self, rel: str) -> str:
        """The mirror's copy of `rel` (a saved image: named by its content), downloaded if missing."""
        target = self._inside(rel)
        if target is None:
            raise UrlStoreError(f"{rel} is not a file arex stores at {self.url}")
        if not target.is_file():
            self.download(rel, target)
        return str(target)

    def pull_record(self, rel: str) -> Path:
        """One rollout's record and its snapshot archives into the mirror (a Ray task's resume)."""
        self.pull(rel.rsplit("/", 1)[0], only=lambda r: r == rel or r.startswith(rel[: -len(".jsonl")] + "/"))
        return self.mirror / rel

    # -- up --------------------------------------------------------------------------------------
    def upload(self, local: Path, rel: str) -> None:
        with self.reaching(f"written ({rel})"):
            self.fs.put_file(str(local), self.key(rel))

    def upload_bytes(self, data: bytes, rel: str) -> None:
        with self.reaching(f"written ({rel})"):
            self.fs.pipe_file(self.key(rel), data)

    # -- the lock --------------------------------------------------------------------------------
    def lock(self, notify: Callable[[str], None]) -> Owner:
        """Take `<url>/.arex-lock`; StoreLocked if another live run holds it."""
        text = self._read(LOCK)
        me = Owner.me()
        previous = Owner.parse(text) if text is not None else None
        if previous is not None and (previous.host, previous.pid) != (me.host, me.pid):
            if previous.alive() is not False:  # alive, or on another host (cannot be checked)
                raise StoreLocked(
                    f"the trajectory store {self.url} is locked by another arex rollout ({previous.describe()}); "
                    "wait for it to finish, "
                    f"or, if that run is over, delete the object {self.url}/{LOCK} (the lock is advisory) and re-run"
                )
            notify(f"took over the stale lock {self.url}/{LOCK} of a run that is gone ({previous.describe()})")
        self.upload_bytes((json.dumps(asdict(me)) + "\n").encode(), LOCK)
        if Owner.parse(self._read(LOCK) or "") != me:  # another run wrote it in the same instant
            raise StoreLocked(
                f"another arex rollout took the lock {self.url}/{LOCK} at the same moment; re-run when it is done"
            )
        return me

    def unlock(self, me: Owner) -> None:
        """Delete the lock object if it is still ours."""
        try:
            if Owner.parse(self._read(LOCK) or "") == me:
                self.fs.rm_file(self.key(LOCK))
        except UserInputError:
            pass  # the URL went away: the next run finds the lock, names it, and says how to clear it

    def _read(self, rel: str) -> str | None:
        with self.reaching(f"read ({rel})"):
            try:
                return self.fs.cat_file(self.key(rel)).decode("utf-8", "replace")
            except FileNotFoundError:
                return None


@contextmanager
def opened(value: str | Path, write: bool, notify: Callable[[str], None] | None = None) -> Iterator[Path]:
    """An --out/--store value as a local folder for the block: a path as it is; a URL as its mirror,
    brought up to date first, and locked (`<url>/.arex-lock`) for the block if `write`."""
    if not is_url(value):
        yield local_path(value)
        return
    remote = Remote(str(value), read_only=not write)
    remote.check()
    me = remote.lock(notify or (lambda line: None)) if write else None
    try:
        remote.pull()
        yield remote.mirror
    finally:
        if me is not None:
            remote.unlock(me)


# -- uploads while a rollout runs ------------------------------------------------------------------
def _uploads() -> ThreadPoolExecutor:
    if not _pool:
        _pool.append(ThreadPoolExecutor(max_workers=4, thread_name_prefix="arex-upload"))
    return _pool[0]


class Publisher:
    """Uploads one rollout's record at each commit (the record writer's `on_commit`), off the event
    loop: the record's bytes are read at the commit, so what goes up ends with a complete round
    whatever is appended meanwhile; a commit superseded before its upload starts is skipped."""

    def __init__(self, remote: Remote, record: Path):
        self.remote, self.record = remote, record
        self.rel = record.relative_to(remote.mirror).as_posix()
        self.snapshots = record.with_suffix("") / "snapshots"
        self.sent: set[str] | None = None  # archive names at the URL
        self.latest = 0
        self.futures: list[Future] = []
        self.lock = threading.Lock()

    def __call__(self, record: Path) -> None:
        data = record.read_bytes()
        names = (
            sorted(p.name for p in self.snapshots.glob("*.tar") if _ARCHIVE.fullmatch(p.name))
            if self.snapshots.is_dir()
            else []
        )
        self.latest += 1
        self.futures.append(_uploads().submit(self._send, self.latest, data, names))

    def _send(self, number: int, data: bytes, names: list[str]) -> None:
        with self.lock:
            if number != self.latest:
                return
            base = self.rel[: -len(".jsonl")] + "/snapshots/"
            if self.sent is None:
                self.sent = {rel.rsplit("/", 1)[-1] for rel in self.remote.listing(base)}
            for name in names:  # archives before the record that names them
                if name not in self.sent and (self.snapshots / name).is_file():
                    try:
                        self.remote.upload(self.snapshots / name, base + name)
                    except UrlStoreError:
                        if (self.snapshots / name).is_file():
                            raise
                        continue  # pruned meanwhile: no later record names it
                    self.sent.add(name)
            self.remote.upload_bytes(data, self.rel)

    def wait(self) -> None:
        """Block until every commit is uploaded; UrlStoreError naming the URL if one failed."""
        futures, self.futures = self.futures, []
        for future in futures:
            future.result()


def publisher(record: Path) -> Publisher | None:
    """The uploader of a record in a mirror, or None for a record in a plain folder."""
    root = mirror_root(Path(record).parent)
    if root is None:
        return None
    url = url_of(root)
    return Publisher(Remote(url, mirror=root), Path(record)) if url else None


def publish_file(path: Path) -> None:
    """Upload a file the run wrote in a mirror (summary.json) to the same place at the URL; nothing
    for a plain folder."""
    root = mirror_root(Path(path).parent)
    url = url_of(root) if root is not None else None
    if url:
        remote = Remote(url, mirror=root)
        remote.upload(Path(path), Path(path).relative_to(root).as_posix())
