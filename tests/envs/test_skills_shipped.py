"""The skills catalogue is the top-level skills/ folder of the checkout, and a wheel ships it inside
the package as arex/_skills: a wheel built from the checkout holds every file of it (no bytecode, no
top-level skills/), and arex installed from that wheel into a fresh venv, run outside the checkout,
loads the catalogue from its own copy with the rollout key's content hash unchanged. No Docker: the
wheel's build and install are pip's, offline (the venv sees the system site-packages)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from repo_paths import REPO

from arex.envs.skills import bundled_skills, load_skills
from arex.rollout.batch import BUNDLED_CONTENT
from arex.rollout.config import RolloutConfig

BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "arex", "skills")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
PROBE = textwrap.dedent(
    """
    import json
    import arex
    from arex.envs.skills import bundled_skills, load_skills
    from arex.rollout.config import RolloutConfig

    config, skills = RolloutConfig(), bundled_skills()
    print(json.dumps({"arex": arex.__file__, "skills": str(skills), "names": [s.name for s in load_skills(skills)],
                      "path": str(config.skills_path()), "content": config.content()["skills"]}))
    """
)


def skill_files() -> list[str]:
    """The catalogue's files, relative to skills/ (what a skill's scripts leave on the host excluded)."""
    root = REPO / "skills"
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(p.relative_to(root).as_posix() for p in files)


def run(cmd: list, cwd: Path, env: dict | None = None) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of what the build reads (pip writes build/ and *.egg-info beside it)."""
    base = tmp_path_factory.mktemp("skills-wheel")
    (base / "src").mkdir()
    for name in BUILD_INPUTS:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, base / "src" / name, ignore=JUNK)
        else:
            shutil.copy(src, base / "src" / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    run([*pip, "-w", base / "dist", "./src"], cwd=base)
    [built] = (base / "dist").glob("arex-*.whl")
    return built


def test_the_checkout_reads_its_top_level_catalogue():
    assert bundled_skills() == REPO / "skills" and RolloutConfig().skills_path() == REPO / "skills"
    assert not (REPO / "arex" / "data" / "skills").exists()
    assert len(load_skills(bundled_skills())) >= 8
    assert RolloutConfig().content()["skills"] == BUNDLED_CONTENT["skills"]  # moved, not changed: same rollout keys


@pytest.mark.heavy
def test_the_wheel_ships_every_file_of_the_catalogue_inside_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in skill_files() if f"arex/_skills/{f}" not in names] == []
    stray = [n for n in names if n.split("/")[0] == "skills" or n.endswith(".pyc") or n.startswith("arex/data/skills/")]
    assert stray == []


@pytest.mark.heavy
def test_an_installed_copy_loads_the_catalogue_it_shipped(wheel, tmp_path):
    run([sys.executable, "-m", "venv", "--system-site-packages", tmp_path / "venv"], cwd=tmp_path)
    python = tmp_path / "venv" / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--no-index", wheel], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    info = json.loads(run([python, "-c", PROBE], cwd=tmp_path, env=env))
    package = Path(info["arex"]).parent
    assert package.is_relative_to(tmp_path / "venv"), info  # the wheel's arex, not the checkout's
    assert Path(info["skills"]) == Path(info["path"]) == package / "_skills"
    assert sorted(info["names"]) == sorted(s.name for s in load_skills(REPO / "skills"))
    assert info["content"] == BUNDLED_CONTENT["skills"]  # an installed copy keys rollouts as the checkout does
