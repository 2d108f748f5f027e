"""Images of an ML env: the dependency image (base + requirements, network during the build only,
host CA bundle and pip settings passed through) and the env image (dependencies + the agent's
workspace, scrubbed of package copies of the data).

Requirements are normalised first (comments, order and name spelling do not change the image) and
resolved by a pip dry run on the base image before anything is built (`preflight`): a pin with no
wheel for the image's Python is reported in seconds, naming the package, the pin, the Python and
the nearest versions that install, instead of failing minutes into a compile. Packages install from
wheels only, except those the spec lists in `build_from_source`; `requirements_relax` moves a pin
that cannot install to the nearest one that can, and the build records it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, Field

from arex.envs.docs_index import docs_image
from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.ml_source import BUILDER_VERSION, tail
from arex.hashing import cache_dir, json_sha256
from arex.sandbox import SandboxConfig, SandboxError, backend_class
from arex.sandbox.images import ImageBuildFailed, Images
from arex.specs import MLSpec


# -- images ----------------------------------------------------------------------------------
def host_ca_bundle() -> Path | None:
    """The CA bundle this host's pip trusts (auto-detected), to pass into image builds."""
    if os.environ.get("AREX_BUILD_CA", "").lower() == "none":
        return None
    for value in (
        os.environ.get("AREX_BUILD_CA"),
        os.environ.get("PIP_CERT"),
        os.environ.get("REQUESTS_CA_BUNDLE"),
        os.environ.get("SSL_CERT_FILE"),
    ):
        if value and Path(value).is_file():
            return Path(value)
    try:
        out = subprocess.run(
            ["python3", "-m", "pip", "config", "get", "global.cert"], capture_output=True, text=True, timeout=30
        )
        if out.returncode == 0 and Path(out.stdout.strip()).is_file():
            return Path(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def _pip_build_args() -> dict[str, str]:
    """Index and proxy settings the build may need; file:// indexes cannot be seen from a build."""
    args = {}
    for key in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    ):
        value = os.environ.get(key)
        if value:
            kept = " ".join(v for v in value.split() if not v.startswith("file:"))
            if kept:
                args[key] = kept
    return args


def images(backend: str | None = None) -> Images:
    """The image builder of `backend` (the configured default if None): ML env images are built
    images, so a backend that builds none cannot hold an ML env."""
    backend = backend or SandboxConfig.model_fields["backend"].default
    found = backend_class(backend).images()
    if found is None:
        raise SandboxError(f"The '{backend}' sandbox backend builds no images, so it cannot build ML envs; use docker.")
    return found


def _image_id(name: str) -> str:
    found = images().id(name)
    if found is None:
        raise SandboxError(f"image '{name}' not found; build it first (scripts/setup.sh for the base image).")
    return found


def _build(
    context: Path, tag: str, network: bool, labels: dict[str, str], buildargs: dict[str, str] | None = None
) -> None:
    try:
        images().build(context, tag, network=network, labels=labels, buildargs=buildargs)
    except ImageBuildFailed as exc:
        raise SourceError(f"image build failed: {exc.reason}\n{exc.log_tail}") from None


# -- requirements: one canonical, sorted list ------------------------------------------------
_COMMENT = re.compile(r"(^|\s+)#.*$")
_VCS = ("git+", "hg+", "svn+", "bzr+")
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".zip", ".tar.bz2")


def requirement_lines(spec: MLSpec, checkout: Path, package_sources: bool = False) -> list[str]:
    """The spec's `requirements` and its `requirements_file` (with the `-r` files it names, read from
    the repository) as one canonical, deduplicated, sorted list: the order, comments or spelling of
    names must not change the dependency image, nor its digest. A line choosing where packages come
    from is refused unless `package_sources` (the user's `build.package_sources`)."""
    items = [_COMMENT.sub("", text).strip() for text in spec.requirements]
    raw = [(text, f"the spec's 'requirements' item {i + 1}") for i, text in enumerate(items) if text]
    if spec.requirements_file:
        raw += _read_requirements_file(checkout, checkout / spec.requirements_file, set())
    return _canonical_list(raw, package_sources)


def normalise_requirements(
    requirements: list[str] | tuple[str, ...], where: str = "requirement", package_sources: bool = False
) -> list[str]:
    """Plain requirement strings (no file) in the same canonical, sorted form."""
    items = [_COMMENT.sub("", r).strip() for r in requirements]
    return _canonical_list([(r, f"{where} {r!r}") for r in items if r], package_sources)


def _canonical_list(raw: list[tuple[str, str]], package_sources: bool = False) -> list[str]:
    lines = set()
    for text, where in raw:
        lines.add(_canonical_line(text, where))
        if not package_sources:
            _refuse_package_source(text, where)
    return sorted(lines, key=lambda line: (not line.startswith("-"), line))


PACKAGE_SOURCES_KEY = "build.package_sources"
"""The config key that lets a source's requirement lines choose where packages come from."""
_INDEX_OPTIONS = {
    "-i": "sets the package index", "--index-url": "sets the package index",
    "--extra-index-url": "adds a package index",
    "--trusted-host": "trusts a host without checking its certificate",
    "-f": "adds a place pip takes packages from", "--find-links": "adds a place pip takes packages from",
}  # fmt: skip


def package_source(text: str) -> str | None:
    """How a requirement line chooses where packages come from (an index, a link, a URL), or None."""
    option, value = _split_option(text)
    if option in _INDEX_OPTIONS:
        return _INDEX_OPTIONS[option]
    if option in ("-r", "--requirement") and "://" in value:
        return "reads more requirements from a URL"
    if option in ("-e", "--editable"):
        return "installs from a version-control URL" if value.startswith(_VCS) or "://" in value else None
    if option is not None:
        return None
    requirement = text.partition(" --")[0]
    if requirement.startswith(_VCS) or "://" in requirement:  # `pkg @ https://...`, a bare URL, `git+https://...`
        return "installs from a URL"
    return None


def _refuse_package_source(text: str, where: str) -> None:
    """Where packages come from is the user's choice: a repository that picks an index, a link or a
    URL picks the code that runs at build time and in the env, so such a line needs the opt-in."""
    how = package_source(text)
    if how is not None:
        raise SourceError(
            f"{where}: '{text}' {how}, which a source may not choose on its own; remove the line, "
            f"or allow it with the config key '{PACKAGE_SOURCES_KEY}: true' (-c {PACKAGE_SOURCES_KEY}=true)."
        )


def readable_requirement_lines(
    checkout: Path, rel: str, package_sources: bool = False
) -> tuple[list[str], list[tuple[str, str]]]:
    """A repository's requirements file as a drafter takes it: the canonical lines the build would
    install, and the lines it would refuse, each with the build's reason (an editable install of
    the repository, a local path, a package index the user did not allow), to leave out instead of
    failing the build. Raises SourceError when the file itself cannot be read."""
    kept: list[str] = []
    refused: list[tuple[str, str]] = []
    for text, where in _read_requirements_file(checkout, checkout / rel, set()):
        try:
            line = _canonical_line(text, where)
            if not package_sources:
                _refuse_package_source(text, where)
        except SourceError as exc:
            refused.append((text, str(exc).split("; ")[0].removeprefix(f"{where}: ")))
            continue
        kept.append(line)
    return sorted(set(kept), key=lambda line: (not line.startswith("-"), line)), refused


def requirement_name(line: str) -> str | None:
    """The canonical package name of a requirement line (None for an option or a bare URL)."""
    return _requirement_name(line)


def unpinned(line: str) -> str:
    """The requirement without its version specifier (extras, URL and marker kept)."""
    try:
        req = Requirement(line.partition(" --")[0])
    except InvalidRequirement:
        return line
    req.specifier = SpecifierSet()
    return _format_requirement(req)


def _read_requirements_file(checkout: Path, path: Path, seen: set[Path]) -> list[tuple[str, str]]:
    """The logical lines of a requirements file with where each is; `-r` files in the repository are
    read in place (pip would need the repository for them), once each."""
    if path in seen:
        return []
    seen.add(path)
    rel = path.relative_to(checkout).as_posix()
    out: list[tuple[str, str]] = []
    for number, text in _logical_lines(_read_text(path, rel)):
        where = f"{rel} line {number}"
        option, value = _split_option(text)
        if option in ("-r", "--requirement") and "://" not in value:
            target = (path.parent / value).resolve()
            if not target.is_relative_to(checkout.resolve()) or not target.is_file():
                raise SourceError(
                    f"{where}: '{text}' names a requirements file that is not in the repository; "
                    "add it to the repository or copy its lines in."
                )
            out += _read_requirements_file(checkout, checkout / target.relative_to(checkout.resolve()), seen)
        else:
            out.append((text, where))
    return out


def _read_text(path: Path, rel: str) -> str:
    """A requirements file as pip reads it: UTF-8, or UTF-16 with a byte-order mark (as Windows'
    `pip freeze > requirements.txt` writes it)."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-16") if raw.startswith((b"\xff\xfe", b"\xfe\xff")) else raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{rel} is neither UTF-8 nor UTF-16 text; save it as UTF-8.") from None


def _logical_lines(text: str):
    """(first line number, text) of each line as pip reads it: continuations joined, comments gone."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        joined, pending = _COMMENT.sub("", pending + line).strip(), ""
        if joined:
            yield start, joined
    if _COMMENT.sub("", pending).strip():
        yield start, _COMMENT.sub("", pending).strip()


def _split_option(text: str) -> tuple[str | None, str]:
    """('--option', value) of an option line ('-r x', '-rx', '--requirement=x'), else (None, text)."""
    if not text.startswith("-"):
        return None, text
    if text.startswith("--"):
        head, _, rest = text.partition(" ")
        name, eq, value = head.partition("=")
        return name, (value if eq else rest).strip()
    return text[:2], text[2:].strip()


def _canonical_line(text: str, where: str) -> str:
    """One requirement or option line in canonical form; lines pip would need the repository for
    (editable installs, local paths, constraints files) are refused, naming the line."""
    option, value = _split_option(text)
    if option in ("-c", "--constraint"):
        raise SourceError(
            f"{where}: '{text}' is a constraints file, which arex does not install from; "
            "copy its pins into the requirements."
        )
    if option in ("-e", "--editable"):
        if value.startswith(_VCS):
            return f"-e {value}"
        raise SourceError(
            f"{where}: '{text}' installs a folder of the repository in editable mode, "
            "which pip cannot do before the repository is in the image; "
            "remove the line (the repository is the agent's working folder)."
        )
    if option in ("-f", "--find-links") and ("://" not in value or value.startswith("file:")):
        raise SourceError(
            f"{where}: '{text}' points pip at a local folder, which the image build cannot see; "
            "remove the line or use an index URL."
        )
    if option is not None:
        return f"{option} {value}" if value else option
    requirement, sep, options = text.partition(" --")  # per-requirement options such as --hash=...
    if _is_local(requirement):
        raise SourceError(
            f"{where}: '{text}' is a local path, which pip cannot install before the repository is in the image; "
            "remove the line or name the package."
        )
    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        if "://" in requirement:
            return text  # a bare URL: pip reads it itself
        raise SourceError(f"{where}: '{text}' is not a requirement pip can read ({exc}); fix the line.") from None
    if req.url and req.url.startswith("file:"):
        raise SourceError(
            f"{where}: '{text}' is a local path, which pip cannot install before the repository is in the image; "
            "remove the line or name the package."
        )
    return _format_requirement(req) + (f" --{options.strip()}" if sep else "")


def _is_local(requirement: str) -> bool:
    name = requirement.split(" @ ")[0].strip()
    if "://" in requirement.split(" @ ")[-1] or name.startswith(_VCS):
        return False
    return name.startswith((".", "/", "~", "file:")) or "/" in name or "\\" in name or name.endswith(_ARCHIVES)


def _format_requirement(req: Requirement) -> str:
    text = str(canonicalize_name(req.name))
    if req.extras:
        text += "[" + ",".join(sorted(canonicalize_name(e) for e in req.extras)) + "]"
    text += str(req.specifier)
    if req.url:
        text += f" @ {req.url}"
    if req.marker:
        text += f"{' ' if req.url else ''}; {req.marker}"
    return text


def _requirement_name(line: str) -> str | None:
    try:
        return canonicalize_name(Requirement(line.partition(" --")[0]).name)
    except InvalidRequirement:
        return None


# -- preflight: pip's dry run on the base image ----------------------------------------------
PREFLIGHT_VERSION = "preflight-1"
PREFLIGHT_TIMEOUT_S = 300
_PREFLIGHT_DIR = "/tmp/arex-preflight"
_PREFLIGHT_SCRIPT = (
    "python3 -c 'import platform; print(\"arex-python\", platform.python_version())' >&2; "
    f"python3 -m pip install --dry-run --ignore-installed --report {_PREFLIGHT_DIR}/report.json "
    '--only-binary=:all: "$@" >&2; '
    f"code=$?; cat {_PREFLIGHT_DIR}/report.json 2>/dev/null; exit $code"
)
_NO_VERSION = re.compile(
    r"Could not find a version that satisfies the requirement (?P<req>.+?) \(from versions: (?P<versions>[^)]*)\)"
)
_NETWORK = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "SSLError",
    "ProxyError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
)


class Unresolvable(BaseModel):
    """A requirement pip found no installable distribution for."""

    requirement: str
    """As pip names it, e.g. 'numpy==1.16.6'."""
    name: str
    """Canonical package name."""
    parent: str = ""
    """The requirement that pulled it in, when the spec did not ask for it directly."""
    versions: list[str] = Field(default_factory=list)
    """The versions that do install on the image (pip's 'from versions:' list)."""


class Preflight(BaseModel):
    """pip's dry run of the requirements on the base image: what it would install, or why it cannot.
    Cached by the requirements, the source-build list, the pip settings and the base image id."""

    python: str
    """The base image's Python version, e.g. '3.11.2'."""
    installs: dict[str, str] = Field(default_factory=dict)
    """Canonical name → version pip would install."""
    failure: Unresolvable | None = None
    error: str = ""
    """pip's own error when it is not a missing version (conflicting pins, a failed source build)."""
    from_cache: bool = False

    @property
    def ok(self) -> bool:
        return self.failure is None and not self.error


def preflight(lines: list[str], base: str, no_binary: list[str] | tuple[str, ...] = ()) -> Preflight:
    """Resolve `lines` (canonical requirement lines) on `base`'s Python, wheels only except
    `no_binary`, in a short-lived container with network; seconds, and cached on disk."""
    args = _pip_build_args()
    key = json_sha256([PREFLIGHT_VERSION, _image_id(base), lines, sorted(no_binary), sorted(args.items())])[:24]
    cached = cache_dir() / "preflight" / f"{key}.json"
    if cached.is_file():
        try:
            return Preflight.model_validate_json(cached.read_text()).model_copy(update={"from_cache": True})
        except ValueError:
            pass
    code, out, err = _run_preflight(base, lines, no_binary, args)
    result = _read_preflight(code, out, err, lines)
    cached.parent.mkdir(parents=True, exist_ok=True)
    # builds run in threads
    with tempfile.NamedTemporaryFile("w", dir=cached.parent, suffix=".tmp", delete=False) as tmp:
        tmp.write(result.model_dump_json(indent=2))
    Path(tmp.name).replace(cached)
    return result


def _run_preflight(base: str, lines: list[str], no_binary, args: dict[str, str]) -> tuple[int, str, str]:
    """pip's exit code, stdout (the JSON report) and stderr; its container is always removed."""
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore", "PIP_NO_INPUT": "1", **args}
    files = {f"{_PREFLIGHT_DIR}/requirements.txt": ("\n".join(lines) + "\n").encode()}
    ca = host_ca_bundle()
    if ca is not None:
        files[f"{_PREFLIGHT_DIR}/host-ca.crt"] = ca.read_bytes()
        env.update(PIP_CERT=f"{_PREFLIGHT_DIR}/host-ca.crt", SSL_CERT_FILE=f"{_PREFLIGHT_DIR}/host-ca.crt")
    flags = [f"--no-binary={','.join(sorted(no_binary))}"] if no_binary else []
    command = ["sh", "-c", _PREFLIGHT_SCRIPT, "preflight", *flags, "-r", f"{_PREFLIGHT_DIR}/requirements.txt"]
    try:
        return images().run(base, command, files=files, env=env, timeout=PREFLIGHT_TIMEOUT_S, name="preflight")
    except TimeoutError:
        raise SandboxError(
            f"the requirements preflight (pip dry run on {base}) did not finish within {PREFLIGHT_TIMEOUT_S} s; "
            "check that the package index is reachable."
        ) from None


def _read_preflight(code: int, out: str, err: str, lines: list[str]) -> Preflight:
    python = next((line.split()[1] for line in err.splitlines() if line.startswith("arex-python ")), "unknown")
    if code == 0:
        try:
            report = json.loads(out[out.index("{") :])
        except ValueError:
            return Preflight(
                python=python,
                error=(
                    f"pip resolved the requirements but wrote no report ({_pip_error(err, lines) or 'no error shown'})"
                ),
            )
        installs = {
            canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report.get("install", [])
        }
        return Preflight(python=python, installs=dict(sorted(installs.items())))
    match = _NO_VERSION.search(err)
    if match and match["versions"].strip() == "none" and any(marker in err for marker in _NETWORK):
        raise SandboxError(
            f"the requirements preflight could not reach the package index from the base image: {_pip_error(err)}"
        )
    if match:
        requirement, parent = match["req"], ""
        inner = re.match(r"^(.+?) \(from (.+)\)$", requirement)
        if inner:
            requirement, parent = inner[1], inner[2]
        name = _requirement_name(requirement) or canonicalize_name(re.split(r"[^A-Za-z0-9._-]", requirement)[0])
        versions = [v.strip() for v in match["versions"].split(",") if v.strip() and v.strip() != "none"]
        return Preflight(
            python=python, failure=Unresolvable(requirement=requirement, name=name, parent=parent, versions=versions)
        )
    if any(marker in err for marker in _NETWORK):
        raise SandboxError(
            f"the requirements preflight could not reach the package index from the base image: {_pip_error(err)}"
        )
    return Preflight(python=python, error=_pip_error(err, lines) or f"pip exited with code {code}")


def _pip_error(err: str, lines: list[str] | None = None) -> str:
    """pip's error lines and a conflict's causes as one line, clipped; '-r requirements.txt (line
    N)' becomes the requirement itself."""
    keep, causes = [], False
    for line in err.splitlines():
        line = line.strip()
        if line.startswith("The conflict is caused by"):
            causes = True
        elif not line or line.startswith("To fix this"):
            causes = False
        if (line.startswith("ERROR") and "ResolutionImpossible" not in line) or (causes and line):
            keep.append(line.removeprefix("ERROR: ").rstrip(":"))
    text = "; ".join(keep)
    for number, line in enumerate(lines or [], 1):
        text = text.replace(f"-r {_PREFLIGHT_DIR}/requirements.txt (line {number})", line)
    return tail(text, 800)


# -- settling the requirements: source builds and relaxed pins --------------------------------
RELAX_ROUNDS = 12


@dataclass
class Settled:
    """The requirements the deps image installs: canonical lines (relaxed pins in place), the
    packages allowed to build from source that needed it, what was relaxed, and the preflight."""

    lines: list[str]
    no_binary: list[str] = field(default_factory=list)
    relaxed: dict[str, str] = field(default_factory=dict)
    preflight: Preflight | None = None


def settle(
    lines: list[str],
    base: str,
    build_from_source: tuple[str, ...] | list[str] = (),
    relax: bool = False,
    where: str = "the requirements",
) -> Settled:
    """Preflight `lines` until they resolve: a failing package listed in `build_from_source` may
    then build from its sdist; with `relax`, a failing exact pin moves to the nearest version that
    installs. Raises SourceError with one sentence saying which package, why, and what to do."""
    settled = Settled(list(lines))
    if not any(not line.startswith("-") or line.startswith("-e ") for line in lines):
        return settled  # nothing to install
    allowed = {canonicalize_name(n) for n in build_from_source}
    for _ in range(RELAX_ROUNDS):
        result = settled.preflight = preflight(settled.lines, base, settled.no_binary)
        if result.ok:
            return settled
        failure = result.failure
        if failure is not None and failure.name in allowed and failure.name not in settled.no_binary:
            settled.no_binary = sorted(settled.no_binary + [failure.name])
            continue
        step = _relax_step(settled.lines, failure) if relax and failure is not None else None
        if step is None:
            raise SourceError(unresolvable_sentence(result, base, where, relax, settled.no_binary))
        settled.lines, old, new = step
        first = settled.relaxed.get(failure.name, f"{old} -> ").split(" -> ")[0]
        settled.relaxed[failure.name] = f"{first} -> {new}"
    changes = ", ".join(f"{k} {v}" for k, v in settled.relaxed.items())
    raise SourceError(
        f"Requirements preflight on {base}: {where} still did not resolve after {RELAX_ROUNDS} relaxed pins "
        f"({changes}); pin the remaining packages by hand."
    )


def _exact_pin(line: str) -> tuple[Requirement, Version] | None:
    try:
        req = Requirement(line.partition(" --")[0])
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        return None
    try:
        return req, Version(specs[0].version)
    except InvalidVersion:
        return None


def nearest_versions(pin: Version, versions: list[str]) -> tuple[Version | None, Version | None]:
    """The lowest of `versions` above `pin` and the highest below it (final releases, unless the
    pin is itself a pre-release)."""
    parsed = []
    for text in versions:
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if not v.is_prerelease or pin.is_prerelease:
            parsed.append(v)
    above = [v for v in parsed if v > pin]
    below = [v for v in parsed if v < pin]
    return (min(above) if above else None), (max(below) if below else None)


def _relax_step(lines: list[str], failure: Unresolvable) -> tuple[list[str], str, str] | None:
    """The lines with the failing exact pin moved to its nearest installable version, the old and new
    version; None if the failure is not an exact pin the spec asked for."""
    if failure.parent:
        return None
    for index, line in enumerate(lines):
        pinned = _exact_pin(line) if _requirement_name(line) == failure.name else None
        if pinned is None:
            continue
        req, pin = pinned
        above, below = nearest_versions(pin, failure.versions)
        choice = above or below
        if choice is None:
            return None
        req.specifier = SpecifierSet(f"=={choice}")
        changed = lines[:index] + [_format_requirement(req)] + lines[index + 1 :]
        return sorted(changed, key=lambda line: (not line.startswith("-"), line)), str(pin), str(choice)
    return None


def unresolvable_sentence(result: Preflight, base: str, where: str, relax: bool, no_binary: list[str]) -> str:
    """Why the requirements cannot install on the image, and what to do, in one sentence."""
    head = f"Requirements preflight (pip dry run on {base}, Python {result.python})"
    failure = result.failure
    if failure is None:
        return f"{head}: {where} cannot be installed together ({result.error}); change the conflicting pins."
    asked = f"{failure.requirement}" + (f" (required by {failure.parent})" if failure.parent else "")
    how = (
        "from its source distribution either"
        if failure.name in no_binary
        else f"from a wheel for Python {result.python}"
    )
    pinned = _exact_pin(failure.requirement)
    above, below = nearest_versions(pinned[1], failure.versions) if pinned else (None, None)
    if pinned:
        near = f"the nearest versions that install are {above or 'none'} above and {below or 'none'} below the pin"
    else:
        finals = [v for v in failure.versions if not re.search(r"[a-z]", v)] or failure.versions
        near = f"versions that install: {', '.join(finals[-6:]) or 'none'}" + (
            " ('requirements_relax' moves exact '==' pins only)" if relax else ""
        )
    todo = []
    if pinned and (above or below) and not failure.parent:
        todo.append(f"set 'requirements_relax: true' to use {above or below} instead" if not relax else "")
    if failure.name not in no_binary:
        todo.append(
            f"list {failure.name} in 'build_from_source' to compile it from its source distribution "
            "(pure-Python packages without a wheel need this too)"
        )
    if failure.parent:
        todo.append(f"or pin {failure.name} or {failure.parent.split('==')[0]} to a version that installs")
    todo = [t for t in todo if t]
    advice = "; " + ", or ".join(todo) if todo else "; change the requirement"
    return f"{head}: {asked} in {where} cannot be installed {how}; {near}{advice}."


# -- the dependency image -----------------------------------------------------------------------
_SETTLED: dict[str, Settled] = {}


def settle_spec(spec: MLSpec, checkout: Path, base: str, package_sources: bool = False) -> Settled:
    """The spec's requirements, settled on `base` (memoised per process: the build asks twice)."""
    lines = requirement_lines(spec, checkout, package_sources)
    key = json_sha256([lines, list(spec.build_from_source), spec.requirements_relax, base])
    if key not in _SETTLED:
        where = "the spec's requirements" + (f" and {spec.requirements_file}" if spec.requirements_file else "")
        _SETTLED[key] = settle(lines, base, spec.build_from_source, spec.requirements_relax, where)
    return _SETTLED[key]


def relaxed_pins(spec: MLSpec, checkout: Path, base: str, package_sources: bool = False) -> dict[str, str]:
    """What `requirements_relax` changed for this spec, e.g. {'numpy': '1.16.6 -> 1.23.2'}."""
    return dict(settle_spec(spec, checkout, base, package_sources).relaxed)


def deps_tag(spec: MLSpec, checkout: Path, base: str, package_sources: bool = False) -> tuple[str, Settled]:
    """The dependency image's tag: of the base image id, the final (settled) requirement lines, the
    source-build list and the apt packages; with the settled requirements."""
    settled = settle_spec(spec, checkout, base, package_sources)
    base_id = _image_id(base)
    digest = json_sha256([base_id, settled.lines, settled.no_binary, list(spec.apt), BUILDER_VERSION])[:16]
    return f"arex-deps:{digest}", settled


def deps_image(spec: MLSpec, checkout: Path, base: str, package_sources: bool = False) -> str:
    """Base + apt packages + requirements, after the preflight. Shared by every env with the same
    dependencies; `package_sources`: the user allows requirement lines that choose an index or URL."""
    tag, settled = deps_tag(spec, checkout, base, package_sources)
    if images().id(tag) is not None:
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-deps-") as ctx:
        ctx_path = Path(ctx)
        (ctx_path / "requirements.txt").write_text("\n".join(settled.lines) + "\n")
        lines = [f"FROM {base}", "USER root"]
        ca = host_ca_bundle()
        if ca is not None:
            shutil.copyfile(ca, ctx_path / "host-ca.crt")
            lines += [
                "COPY host-ca.crt /usr/local/share/arex/host-ca.crt",
                "ARG PIP_CERT=/usr/local/share/arex/host-ca.crt",
                "ARG SSL_CERT_FILE=/usr/local/share/arex/host-ca.crt",
            ]
        args = _pip_build_args()
        lines += [f"ARG {key}" for key in args]
        if spec.apt:
            lines.append(
                "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                + " ".join(spec.apt)
                + " && rm -rf /var/lib/apt/lists/*"
            )
        if settled.lines:
            no_binary = f" --no-binary={','.join(settled.no_binary)}" if settled.no_binary else ""
            lines += [
                "COPY requirements.txt /tmp/arex-requirements.txt",
                "RUN PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q "
                "--no-cache-dir --only-binary=:all:"
                f"{no_binary} -r /tmp/arex-requirements.txt && rm /tmp/arex-requirements.txt",
            ]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(ctx_path, tag, True, {"arex.managed": "1", "arex.kind": "deps"}, args)
    return tag


def resolve_pins(
    requirements: list[str], base_image: str, build_from_source: tuple[str, ...] | list[str] = ()
) -> dict[str, str]:
    """The version pip resolves for each of `requirements` (names, maybe with ranges) on
    `base_image`'s Python, wheels only: {requirement as given: version}, for writing reproducible
    pins. Raises SourceError (one sentence) if they cannot be installed there."""
    given = [r.strip() for r in requirements if r.strip()]
    settled = settle(normalise_requirements(given), base_image, build_from_source, where="the requirements to pin")
    installs = settled.preflight.installs if settled.preflight else {}
    pins = {}
    for text in given:
        name = _requirement_name(text)
        if name is None or name not in installs:
            raise SourceError(
                f"resolve_pins: {text!r} is not a package name pip resolved on {base_image}; "
                "give a plain name such as 'numpy'."
            )
        pins[text] = installs[name]
    return pins


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
    tag = f"arex-env-{spec.id}:{content}"
    if images().id(tag) is not None:
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-env-") as ctx:
        ctx_path = Path(ctx)
        shutil.copytree(workspace, ctx_path / "workspace")
        (ctx_path / "scrub.py").write_text(_SCRUB)
        lines = [f"FROM {docs_image(deps, spec.scrub)}", "USER root"]  # the docs index layer (scrubbed files left out)
        if spec.scrub:
            lines += [
                "COPY scrub.py /tmp/arex-scrub.py",
                "RUN python3 /tmp/arex-scrub.py " + " ".join(spec.scrub) + " && rm /tmp/arex-scrub.py",
            ]
        lines += [f"COPY --chown=1000:1000 workspace/ {IMAGE_WORKSPACE}/", "USER 1000:1000", "WORKDIR /workspace"]
        (ctx_path / "Dockerfile").write_text("\n".join(lines) + "\n")
        _build(ctx_path, tag, False, {"arex.managed": "1", "arex.kind": "env", "arex.env": spec.id})
    return tag
