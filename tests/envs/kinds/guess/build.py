"""The guess kind's source side: a source is a folder with guess.yaml (id, title, target)."""

import time
from pathlib import Path

import yaml

from arex.envs.report import EnvReport, write_task
from arex.sandbox import SandboxConfig

from .spec import GuessSpec

SOURCE_FILE = "guess.yaml"
STARTER = "0\n"


def is_source(path: Path) -> bool:
    return path.is_dir() and (path / SOURCE_FILE).is_file()


def env_id(path: Path) -> str:
    return yaml.safe_load((path / SOURCE_FILE).read_text())["id"]


def build(source: Path, out: Path, sandbox: SandboxConfig, package_sources: bool = False) -> EnvReport:
    """The env folder: task.yaml, statement.md and a workspace with the starting guess."""
    started = time.monotonic()
    spec = GuessSpec.model_validate(yaml.safe_load((source / SOURCE_FILE).read_text()))
    env = out / spec.id
    (env / "workspace").mkdir(parents=True)
    write_task(env, spec)
    statement = "Write a whole number from 0 to 20 in guess.txt; the feedback says higher or lower.\n"
    (env / "statement.md").write_text(statement)
    (env / "workspace" / "guess.txt").write_text(STARTER)
    return EnvReport(str(source), spec.id, "accepted", seconds=time.monotonic() - started)


def facts(raw: dict) -> str:
    return "Submission: guess.txt, one whole number."
