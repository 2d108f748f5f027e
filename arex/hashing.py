"""The arex cache folder and the sha256 digests arex names things by (stdlib only).

Digests name cached checkouts, images, env builds and archives, so the bytes each helper hashes
are part of arex's on-disk contract: changing one invalidates every cache built with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable


def cache_dir() -> Path:
    """Where arex caches checkouts, compiled checkers and the sandbox runtime ($AREX_CACHE)."""
    return Path(os.environ.get("AREX_CACHE", Path.home() / ".cache" / "arex"))


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_sha256(text: str) -> str:
    """Of the text's UTF-8 bytes."""
    return bytes_sha256(text.encode())


def json_sha256(obj: Any, *, sort_keys: bool = False, default: Callable[[Any], Any] | None = None) -> str:
    """Of `json.dumps(obj, ...)` with its default separators: callers keep the options they hash with."""
    return text_sha256(json.dumps(obj, sort_keys=sort_keys, default=default))


def file_sha256(path: Path) -> str:
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def files_sha256(files: Iterable[tuple[str, Path]], prefix: bytes = b"") -> str:
    """Of `prefix`, then for each (name, file) in the order given: the name, a NUL, the file's bytes."""
    digest = hashlib.sha256(prefix)
    for name, path in files:
        digest.update(name.encode() + b"\0")
        with Path(path).open("rb") as handle:
            hashlib.file_digest(handle, lambda: digest)  # streams the file into this same digest
    return digest.hexdigest()


def tree_sha256(root: Path, paths: Iterable[Path] | None = None, prefix: bytes = b"") -> str:
    """`files_sha256` of files under `root` (default: all of them), named by their POSIX path
    relative to `root`, in sorted order."""
    chosen = (p for p in root.rglob("*") if p.is_file()) if paths is None else paths
    return files_sha256(((p.relative_to(root).as_posix(), p) for p in sorted(chosen)), prefix)
