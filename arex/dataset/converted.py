"""GGUF files converted once: transformers reads a `.gguf` file's whole metadata to build its
tokenizer (seconds) and dequantizes every weight to build its model (~17 CPU-seconds for the
bundled SmolLM2-135M, against 0.1 from a saved folder), and every export, train-check and training
script would pay that again. The converted copy is kept in arex's cache folder, under
`<kind>/<key>`, the key made of the file's path, size and modification time and the transformers
version, so a changed file or library gets its own copy. A copy that no longer loads is converted
again. The cache is a convenience: a folder arex cannot write only costs the conversion.
A dequantized model is stored in float32: 540 MB for SmolLM2-135M."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")


def cached_folder(kind: str, path: Path) -> Path:
    """Where the converted copy of `path` is kept."""
    import transformers

    from arex.hashing import cache_dir

    stat = path.stat()
    stamp = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{transformers.__version__}"
    return cache_dir() / kind / hashlib.sha256(stamp.encode()).hexdigest()[:16]


def converted(kind: str, path: Path, marker: str, convert: Callable[[], T], load: Callable[[str], T]) -> T:
    """`load(folder)` of the kept copy of `path` if its `marker` file is there and it loads; else
    `convert()`, saved (`save_pretrained`) for the next time."""
    folder = cached_folder(kind, path)
    if (folder / marker).is_file():
        try:
            return load(str(folder))
        except Exception:  # noqa: BLE001 - whatever a damaged copy raises (safetensors has its own errors)
            pass
    made = convert()
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    try:
        made.save_pretrained(str(staging))
        shutil.rmtree(folder, ignore_errors=True)  # a copy that did not load
        os.replace(staging, folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process put its copy there first, or no room
    return made
