"""The requirements of a heuristic draft: the repository's own file, less what a training run never
imports, with the drafter's wrapper packages resolved *together with* the repository's pins (so the
draft never asks for a second version of a package the repository pins), and the revisions a
requirements preflight's reason calls for (relax, unpin, leave out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from arex.drafting.base import Guess
from arex.drafting.inspect import IMPORT_TO_PYPI, RepoFacts

Pinner = Callable[..., list[str]]
"""`pinned(names, context=[])`: `names` pinned to what pip resolves for them beside the `context` lines."""

DRAFTED_FILE = "arex_requirements.txt"
WRAPPER_PACKAGES = ["pandas", "scikit-learn"]
"""What the generic wrapper (compose.WRAPPER) imports."""

NOT_FOR_TRAINING = {
    # web apps and dashboards serving a trained model
    "flask", "jinja2", "werkzeug", "itsdangerous", "gunicorn", "uvicorn", "waitress", "whitenoise",
    "django", "fastapi", "starlette", "streamlit", "gradio", "dash", "bokeh-server", "voila", "heroku",
    "heroku3", "python-multipart", "wtforms",
    # notebooks
    "jupyter", "jupyterlab", "notebook", "ipykernel", "ipywidgets", "nbconvert", "jupyter-client", "jupyter-core",
    # other operating systems
    "pywin32", "pywin32-ctypes", "pywinpty", "wincertstore", "comtypes", "wmi", "appnope", "pyobjc",
}  # fmt: skip
"""Packages a training run does not import: leaving them out (unless the run imports them) spares
the build pins that no longer install (old Flask, Windows-only pywin32) for nothing it uses."""
_NOT_FOR_TRAINING_PREFIXES = ("flask-", "django-", "streamlit-", "dash-", "jupyterlab-", "pyobjc-", "pywin")


def not_for_training(name: str) -> bool:
    return name in NOT_FOR_TRAINING or name.startswith(_NOT_FOR_TRAINING_PREFIXES)


@dataclass
class Requirements:
    """What a draft asks for: spec requirements, the requirements file, and an added file's text."""

    requirements: list[str]
    requirements_file: str | None
    added: str | None = None
    guesses: list[Guess] = field(default_factory=list)


def drafted_requirements(
    facts: RepoFacts,
    own: list[str],
    run_imports: list[str],
    pinned: Pinner,
    changes: tuple[list[str], list[str]],
    package_sources: bool = False,
) -> Requirements:
    """The repository's requirements file (its lines a training run never imports, or the build
    would refuse, left out; `changes` = (names to unpin, names to leave out)) and `own`: the
    drafter's packages the repository does not name, pinned beside the repository's lines."""
    from arex.envs.judge_sources import SourceError
    from arex.envs.ml_images import readable_requirement_lines, requirement_name, unpinned

    loosen, dropped = changes
    imported = {_pypi(m) for m in run_imports}
    lines: list[str] = []
    left_out: list[str] = []
    changed = False
    if facts.requirements_file:
        try:
            lines, refused = readable_requirement_lines(facts.root, facts.requirements_file, package_sources)
        except SourceError:  # the build says why, and a revision cannot help: the file as it is
            return _own_only(own, pinned, facts.requirements_file, dropped)
        left_out += [f"{text} ({why})" for text, why in refused]
        kept = []
        for line in lines:
            name = requirement_name(line)
            if name in dropped:
                left_out.append(f"{line} (pip cannot install it)")
            elif name and not_for_training(name) and name not in imported:
                left_out.append(f"{line} (the training run does not import it)")
            else:
                kept.append(unpinned(line) if name in loosen and unpinned(line) != line else line)
        changed = bool(left_out) or kept != lines
        lines = kept
    named = {requirement_name(line) for line in lines}
    extra = sorted(n for n in dict.fromkeys(own) if _canonical(n) not in named and _canonical(n) not in dropped)
    extra_pinned = [n for n in extra if _canonical(n) not in loosen]
    pins = pinned(extra_pinned, lines) if extra_pinned else []
    requirements = sorted(pins + [n for n in extra if _canonical(n) in loosen])
    guesses = _guesses(facts.requirements_file, extra, requirements, left_out, loosen, changed)
    if not changed:
        return Requirements(requirements, facts.requirements_file, guesses=guesses)
    header = (
        f"# {facts.requirements_file} as `arex draft-env` builds it; left out: "
        + ("; ".join(left_out) or "nothing")
        + (f"; unpinned: {', '.join(loosen)}" if loosen else "")
    )
    return Requirements(requirements, DRAFTED_FILE, "\n".join([header, *lines]) + "\n", guesses)


def preparation_requirements(
    facts: RepoFacts, own: list[str], pinned: Pinner, package_sources: bool = False
) -> tuple[list[str], str | None]:
    """(requirements, requirements_file) of the image a preparation script runs in before the first
    draft: the repository's file as a draft would take it (web-app and other-OS lines left out,
    as requirement lines when anything was), else `own` pinned."""
    needs = drafted_requirements(facts, own, [], pinned, ([], []), package_sources)
    if needs.added is None:
        return needs.requirements, needs.requirements_file
    lines = [line for line in needs.added.splitlines() if line and not line.startswith("#")]
    return needs.requirements + lines, None


def _own_only(own: list[str], pinned: Pinner, file: str, dropped: list[str]) -> Requirements:
    names = sorted(n for n in dict.fromkeys(own) if _canonical(n) not in dropped)
    return Requirements(pinned(names) if names else [], file)


def _guesses(
    file: str | None, extra: list[str], requirements: list[str], left_out: list[str], loosen: list[str], changed: bool
) -> list[Guess]:
    out = []
    if file:
        what = f"the draft's copy {DRAFTED_FILE}" if changed else file
        why = (
            f"the repository ships {file}"
            + (f"; left out: {'; '.join(left_out)}" if left_out else "")
            + (f"; unpinned: {', '.join(loosen)}" if loosen else "")
        )
        out.append(Guess(field="requirements_file", value=what, confidence="high", why=why))
    if extra and file:
        how = "pinned to what pip resolves beside the repository's own pins" if requirements != extra else "unpinned"
        out.append(
            Guess(
                field="requirements",
                value=", ".join(requirements),
                confidence="medium",
                why=f"imported by the run but not in {file}: {how}",
            )
        )
    return out


def _pypi(module: str) -> str:
    top = module.split(".")[0]
    return _canonical(IMPORT_TO_PYPI.get(module, IMPORT_TO_PYPI.get(top, top)))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[=<>~!\[; @]", name, maxsplit=1)[0].strip()).lower()


# -- revising after a requirements preflight ------------------------------------------------------
_FAILED = re.compile(
    r"Requirements preflight \(pip dry run on [^,]+, Python [^)]*\): (?P<req>.+?)"
    r"(?: \(required by (?P<parent>[^)]+)\))? in .+? cannot be installed (?!together)"
)
_PINNED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:===|==|~=|<=|>=|!=|<|>)\s*\d")


def preflight_change(reason: str, relax: bool, loosen: list[str], dropped: list[str]) -> tuple[str, str, str] | None:
    """What to change after a requirements rejection: ('relax', '', why), ('loosen', names, why) or
    ('drop', name, why); None if the reason is no preflight's or nothing is left to change.
    `names` is comma-separated."""
    if "Requirements preflight" not in reason:
        return None
    if "cannot be installed together" in reason or "still did not resolve" in reason:
        names = [_canonical(n) for n in _PINNED.findall(reason.split("): ", 1)[-1])]
        names += [_canonical(n) for n in re.findall(r"(?:\(|, )([\w.-]+) [\w.]+ -> ", reason)]
        new = [n for n in dict.fromkeys(names) if n not in loosen and n not in dropped]
        return ("loosen", ",".join(new), f"the pins of {', '.join(new)} conflict: unpinned") if new else None
    match = _FAILED.search(reason)
    if match is None:
        return None
    req, parent = match["req"], match["parent"]
    name = _canonical(req)
    if not relax and "requirements_relax: true" in reason and not parent:
        return "relax", "", f"{req} has no wheel for the image's Python: exact pins move to the nearest with one"
    if parent:
        parent_name = _canonical(parent)
        if _PINNED.search(parent) and parent_name not in loosen and parent_name not in dropped:
            return "loosen", parent_name, f"{parent} needs {req}, which does not install: {parent_name} unpinned"
        if parent_name not in dropped:
            return "drop", parent_name, f"{parent} needs {req}, which does not install: {parent_name} left out"
    if _PINNED.search(req) and name not in loosen and name not in dropped:
        return "loosen", name, f"no pin of {name} that installs near {req}: unpinned"
    if name not in dropped:
        return "drop", name, f"pip cannot install {name} on the image: left out"
    return None
