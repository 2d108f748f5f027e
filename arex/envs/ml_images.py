"""Images of an ML env: the dependency image (base + requirements, network during the build only,
host CA bundle and pip settings passed through) and the env image (dependencies + the agent's
workspace, scrubbed of package copies of the data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import docker
import docker.errors

from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.ml_source import BUILDER_VERSION
from arex.hashing import json_sha256
from arex.sandbox import SandboxError
from arex.sandbox.docker import docker_client
from arex.specs import MLSpec


# -- images ----------------------------------------------------------------------------------
def host_ca_bundle() -> Path | None:
    """The CA bundle this host's pip trusts (auto-detected), to pass into image builds."""
    if os.environ.get("AREX_BUILD_CA", "").lower() == "none":
        return None
    for value in (os.environ.get("AREX_BUILD_CA"), os.environ.get("PIP_CERT"), os.environ.get("REQUESTS_CA_BUNDLE"), os.environ.get("SSL_CERT_FILE")):
        if value and Path(value).is_file():
            return Path(value)
    try:
        out = subprocess.run(["python3", "-m", "pip", "config", "get", "global.cert"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and Path(out.stdout.strip()).is_file():
            return Path(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def _pip_build_args() -> dict[str, str]:
    """Index and proxy settings the build may need; file:// indexes cannot be seen from a build."""
    args = {}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        value = os.environ.get(key)
        if value:
            kept = " ".join(v for v in value.split() if not v.startswith("file:"))
            if kept:
                args[key] = kept
    return args


def _image_exists(client, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(client, context: Path, tag: str, network: str, labels: dict[str, str], buildargs: dict[str, str] | None = None) -> None:
    try:
        client.images.build(path=str(context), tag=tag, network_mode=network, rm=True, forcerm=True, pull=False, labels=labels, buildargs=buildargs or {})
    except docker.errors.BuildError as exc:
        lines = [str(chunk.get("stream") or chunk.get("error") or "").rstrip() for chunk in exc.build_log]
        tail = "\n".join(line for line in lines if line)[-1500:]
        raise SourceError(f"image build failed: {exc.msg}\n{tail}") from None
    except docker.errors.APIError as exc:
        raise SandboxError(f"image build failed in the engine: {exc.explanation or exc}") from None


def deps_image(spec: MLSpec, checkout: Path, base: str) -> str:
    """Base + apt packages + requirements. Shared by every env with the same dependencies."""
    client = docker_client()
    requirements = "\n".join(spec.requirements) + "\n"
    if spec.requirements_file:
        requirements += (checkout / spec.requirements_file).read_text(encoding="utf-8")
    base_id = client.images.get(base).id
    digest = json_sha256([base_id, requirements, list(spec.apt), BUILDER_VERSION])[:16]
    tag = f"arex-deps:{digest}"
    if _image_exists(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-deps-") as ctx:
        ctx_path = Path(ctx)
        (ctx_path / "requirements.txt").write_text(requirements)
        lines = [f"FROM {base}", "USER root"]
        ca = host_ca_bundle()
        if ca is not None:
            shutil.copyfile(ca, ctx_path / "host-ca.crt")
            lines += ["COPY host-ca.crt /usr/local/share/arex/host-ca.crt", "ARG PIP_CERT=/usr/local/share/arex/host-ca.crt", "ARG SSL_CERT_FILE=/usr/local/share/arex/host-ca.crt"]
        args = _pip_build_args()
        lines += [f"ARG {key}" for key in args]
        if spec.apt:
            lines.append("RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q " + " ".join(spec.apt) + " && rm -rf /var/lib/apt/lists/*")
        lines += [
            "COPY requirements.txt /tmp/arex-requirements.txt",
            "RUN PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-cache-dir -r /tmp/arex-requirements.txt && rm /tmp/arex-requirements.txt",
        ]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(client, ctx_path, tag, "host", {"arex.managed": "1", "arex.kind": "deps"}, args)
    return tag


_SCRUB = """
import importlib.util, os, sys
for entry in sys.argv[1:]:
    package, _, rel = entry.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"scrub: package {package!r} is not installed")
    target = os.path.join(list(spec.submodule_search_locations)[0], rel)
    if not os.path.exists(target):
        sys.exit(f"scrub: {entry} does not exist in the image")
    os.remove(target)
"""


def env_image(spec: MLSpec, deps: str, workspace: Path, content: str) -> str:
    client = docker_client()
    tag = f"arex-env-{spec.id}:{content}"
    if _image_exists(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-env-") as ctx:
        ctx_path = Path(ctx)
        shutil.copytree(workspace, ctx_path / "workspace")
        (ctx_path / "scrub.py").write_text(_SCRUB)
        lines = [f"FROM {deps}", "USER root"]
        if spec.scrub:
            lines += ["COPY scrub.py /tmp/arex-scrub.py", "RUN python3 /tmp/arex-scrub.py " + " ".join(spec.scrub) + " && rm /tmp/arex-scrub.py"]
        lines += [f"COPY --chown=1000:1000 workspace/ {IMAGE_WORKSPACE}/", "USER 1000:1000", "WORKDIR /workspace"]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(client, ctx_path, tag, "none", {"arex.managed": "1", "arex.kind": "env", "arex.env": spec.id})
    return tag
