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
from arex.sandbox import SandboxConfig, SandboxError

DOCS_VERSION = "docs-1"
SCRIPTS = Path(str(resources.files("arex").joinpath("data"))) / "docs"
INDEX_PATH = "/opt/arex/docs/index.sqlite"
COMMAND_PATH = "/usr/local/bin/docs"
_lock = threading.Lock()  # env builds run in threads; one build per tag
_known: dict[str, str] = {}  # (image, exclude) -> tag, for this process


def scripts_digest() -> str:
    return json_sha256({name: (SCRIPTS / name).read_text(encoding="utf-8") for name in ("indexer.py", "docs.py")})


def docs_tag(image: str, exclude: tuple[str, ...] | list[str] = (), repo: str = "arex-docs") -> str:
    """The tag of `image` with the docs layer: a hash of its id, the scripts and `exclude`."""
    import docker.errors

    from arex.sandbox.docker import docker_client

    try:
        image_id = docker_client().images.get(image).id
    except docker.errors.ImageNotFound:
        raise SandboxError(f"image '{image}' not found, so its docs index cannot be built; build the image first (arex build-envs, or scripts/setup.sh for the base image).") from None
    return f"{repo}:{json_sha256([DOCS_VERSION, image_id, scripts_digest(), sorted(exclude)])[:16]}"


def docs_image(image: str, exclude: tuple[str, ...] | list[str] = (), repo: str = "arex-docs") -> str:
    """`image` plus the `docs` command and the index of what it has installed (built once per tag).
    `exclude`: files as `package/relative/path` (an ML spec's `scrub`) kept out of the index."""
    import docker.errors

    from arex.sandbox.docker import docker_client

    key = f"{repo}\0{image}\0{sorted(exclude)}"
    with _lock:
        if key in _known:
            return _known[key]
        tag = docs_tag(image, exclude, repo)
        client = docker_client()
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            _build(client, image, tag, tuple(exclude))
        _known[key] = tag
        return tag


def agent_image(base: SandboxConfig) -> str:
    """The image of a judge env's agent sandbox: the base image with the docs layer (Docker
    backend only; other backends keep their image)."""
    if base.backend != "docker":
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
        f"RUN chmod 0755 {COMMAND_PATH} && mkdir -p {folder} && PYTHONDONTWRITEBYTECODE=1 python3 /tmp/arex-docs-indexer.py {INDEX_PATH}{excluded}"
        f" && rm /tmp/arex-docs-indexer.py && chmod 0444 {INDEX_PATH} && chmod 0555 {folder}",
        f"USER {user or 'root'}",
    ]) + "\n"  # fmt: skip


def _build(client, image: str, tag: str, exclude: tuple[str, ...]) -> float:
    """Build the docs layer with no network; the seconds it took."""
    import docker.errors

    from arex.sandbox.docker import build_log_tail

    user = client.images.get(image).attrs.get("Config", {}).get("User") or ""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arex-docs-") as ctx:
        ctx_path = Path(ctx)
        for name in ("indexer.py", "docs.py"):
            shutil.copyfile(SCRIPTS / name, ctx_path / name)
        (ctx_path / "Dockerfile").write_text(_dockerfile(image, user, exclude))
        labels = {"arex.managed": "1", "arex.kind": "docs", "arex.docs.from": image}
        try:
            client.images.build(path=str(ctx_path), tag=tag, network_mode="none", rm=True, forcerm=True, pull=False, labels=labels)
        except docker.errors.BuildError as exc:
            raise SandboxError(f"the docs index of '{image}' could not be built: {exc.msg}\n{build_log_tail(exc, 1200)}") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"the docs index of '{image}' could not be built in the engine: {exc.explanation or exc}") from None
    return time.monotonic() - started
