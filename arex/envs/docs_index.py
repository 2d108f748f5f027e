"""The offline documentation layer of sandbox images: the `docs` command and its index.

`docs_image(image)` derives `arex-docs:<hash>` from `image`: `/usr/local/bin/docs` (arex/data/docs/
docs.py) and `/opt/arex/docs/index.sqlite`, built by arex/data/docs/indexer.py inside the image with
no network, from what that image has installed (the standard library, each distribution's
docstrings and bundled docs). Both scripts are standard-library only; the index is read-only.
The tag is a hash of the image's id, the scripts and the excluded files, so an unchanged image is
never indexed twice. ML env images are built on it (ml_images.env_image, with the env's `scrub`
list excluded so scrubbed files never reach the index); judge envs' agent sandboxes use
`agent_image(base)`, the same layer over the base image (`arex-agent-docs:<hash>`).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from importlib import resources
from pathlib import Path

from arex.hashing import json_sha256
from arex.sandbox import SandboxConfig, SandboxError, backend_class
from arex.sandbox.images import ImageBuildFailed, Images

DOCS_VERSION = "docs-1"
SCRIPTS = Path(str(resources.files("arex").joinpath("data"))) / "docs"
INDEX_PATH = "/opt/arex/docs/index.sqlite"
COMMAND_PATH = "/usr/local/bin/docs"
_lock = threading.Lock()  # env builds run in threads; one build per tag
_known: dict[str, str] = {}  # (image, exclude) -> tag, for this process


def scripts_digest() -> str:
    return json_sha256({name: (SCRIPTS / name).read_text(encoding="utf-8") for name in ("indexer.py", "docs.py")})


def _images(backend: str | None = None) -> Images:
    backend = backend or SandboxConfig.model_fields["backend"].default
    found = backend_class(backend).images()
    if found is None:
        raise SandboxError(f"The '{backend}' sandbox backend builds no images, so it cannot add the docs index.")
    return found


def docs_tag(image: str, exclude: tuple[str, ...] | list[str] = (), repo: str = "arex-docs") -> str:
    """The tag of `image` with the docs layer: a hash of its id, the scripts and `exclude`."""
    image_id = _images().id(image)
    if image_id is None:
        raise SandboxError(
            f"image '{image}' not found, so its docs index cannot be built; "
            "build the image first (arex build-envs, or scripts/setup.sh for the base image)."
        )
    return f"{repo}:{json_sha256([DOCS_VERSION, image_id, scripts_digest(), sorted(exclude)])[:16]}"


def docs_image(image: str, exclude: tuple[str, ...] | list[str] = (), repo: str = "arex-docs") -> str:
    """`image` plus the `docs` command and the index of what it has installed (built once per tag).
    `exclude`: files as `package/relative/path` (an ML spec's `scrub`) kept out of the index."""
    key = f"{repo}\0{image}\0{sorted(exclude)}"
    with _lock:
        if key in _known:
            return _known[key]
        tag = docs_tag(image, exclude, repo)
        if _images().id(tag) is None:
            _build(_images(), image, tag, tuple(exclude))
        _known[key] = tag
        return tag


def agent_image(base: SandboxConfig) -> str:
    """The image of a judge env's agent sandbox: the base image with the docs layer (backends that
    build no images keep their image)."""
    if backend_class(base.backend).images() is None:
        return base.image
    return docs_image(base.image, repo="arex-agent-docs")


def _dockerfile(image: str, user: str, exclude: tuple[str, ...]) -> str:
    excluded = "".join(f" --exclude {entry}" for entry in exclude)
    folder = INDEX_PATH.rsplit("/", 1)[0]
    return "\n".join([
        f"FROM {image}",
        "USER root",
        "COPY indexer.py /tmp/arex-docs-indexer.py",
        f"COPY docs.py {COMMAND_PATH}",
        f"RUN chmod 0755 {COMMAND_PATH} && mkdir -p {folder}"
        f" && PYTHONDONTWRITEBYTECODE=1 python3 /tmp/arex-docs-indexer.py {INDEX_PATH}{excluded}"
        f" && rm /tmp/arex-docs-indexer.py && chmod 0444 {INDEX_PATH} && chmod 0555 {folder}",
        f"USER {user or 'root'}",
    ]) + "\n"  # fmt: skip


def _build(images: Images, image: str, tag: str, exclude: tuple[str, ...]) -> float:
    """Build the docs layer with no network; the seconds it took."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arex-docs-") as ctx:
        ctx_path = Path(ctx)
        for name in ("indexer.py", "docs.py"):
            shutil.copyfile(SCRIPTS / name, ctx_path / name)
        (ctx_path / "Dockerfile").write_text(_dockerfile(image, images.user(image), exclude))
        labels = {"arex.managed": "1", "arex.kind": "docs", "arex.docs.from": image}
        try:
            images.build(ctx_path, tag, network=False, labels=labels)
        except ImageBuildFailed as exc:
            raise SandboxError(
                f"the docs index of '{image}' could not be built: {exc.reason}\n{exc.log_tail[-1200:]}"
            ) from None
    return time.monotonic() - started
