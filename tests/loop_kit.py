"""The fast tier's small env kind and its helpers, shared by many test modules (no Docker, no model).

`TallyEnv` is a whole env kind in one class (the score is the number the agent leaves in
answer.txt), run on the `process` test backend (tests/process_sandbox.py) with the scripted
OpenAI-compatible server over real HTTP. The fixtures that register the kind and lay out an env
(`tally_kind`, `tally_env`) are in tests/conftest.py; this module holds what tests import by name,
and what a child process (tests/reliability_runner.py, a `RUNNER` script) imports without pytest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from arex.envs.runtime import Env, Grading
from arex.record.snapshots import read_member
from arex.record.trajectory import RoundEnd, load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.specs import GradeResult
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import ScriptedServer

TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
PROCESS_BACKEND = "process_sandbox:ProcessSandbox"
"""The `process` test backend, as `arex.sandbox.base.BACKENDS` names it (tests/ on the path)."""


class TallySpec(BaseModel):
    kind: Literal["tally"] = "tally"
    id: str
    title: str
    domain: str = "test"
    protected: tuple[str, ...] = ("rules.txt",)


class TallyEnv(Env):
    """Score: the number in answer.txt, over 10 (held out and public alike)."""

    kind = "tally"
    spec_model = TallySpec
    submission_path = "answer.txt"

    def _baseline(self, scores: dict) -> float | None:
        return 0.1

    def prepare(self, sandbox) -> None:
        sandbox.copy_in(self.dir / "workspace", sandbox.config.workdir)

    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult:
        try:
            score = float(text.strip()) / 10
        except ValueError:
            return self._not_graded(f"answer.txt holds {text[:20]!r}, not a number", log)
        return GradeResult(
            public_score=score, held_out_score=score, held_out_raw=score, feedback=f"answer {text.strip()}"
        )

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        return GradeResult(
            public_score=0.0, held_out_score=0.0, held_out_raw=0.0, feedback=f"Submission not graded: {problem}"
        )

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        data = read_member(archive, self.submission_path, 1 << 20)
        return self._grade(data, data.decode(), Grading(), "")


def process_sandbox() -> SandboxConfig:
    return SandboxConfig(backend="process")  # known once the `tally_kind` fixture has registered it


def write_tally_env(envs: Path, name: str = "tally") -> Path:
    """A built `tally` env folder `envs`/`name` (load it with the kind registered)."""
    root = envs / name
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text(f"kind: tally\nid: {name}\ntitle: Count up\n")
    (root / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
    (root / "workspace" / "answer.txt").write_text("1\n")
    (root / "workspace" / "rules.txt").write_text("do not edit\n")
    return root


def rollout(env, script, store: Path, config: RolloutConfig, samples: int = 1):
    with ScriptedServer(script, model="scripted-teacher") as server:
        summary = asyncio.run(run_batch([env], TEACHER, config, process_sandbox(), store, samples, 2, server.base_url))
        requests = list(server.requests)
    records = [load(p) for p in sorted((store / env.id).glob("*.jsonl"))]
    return summary, records, requests


def climbing(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt", f"echo round-{n} >> notes.txt"]


def cli_rollout(env, store: Path, url: str, *extra: str):
    """`arex rollout` of the envs beside `env` on the process backend, with the scripted teacher at `url`."""
    from typer.testing import CliRunner

    from arex.cli import app

    options = [
        "-c",
        "sandbox.backend=process",
        "-c",
        f"teacher.base_url={url}",
        "-c",
        "teacher.model=scripted-teacher",
        "-c",
        "teacher.track_cost=false",
    ]
    return CliRunner().invoke(app, ["rollout", "--envs", str(env.dir.parent), "--out", str(store), *options, *extra])


def select_cli(store: Path, envs: Path, out: Path):
    """`arex select` on the process backend."""
    from typer.testing import CliRunner

    from arex.cli import app

    return CliRunner().invoke(
        app, ["select", "--store", str(store), "--envs", str(envs), "--out", str(out), "-c", "sandbox.backend=process"]
    )


def register_tally_kind() -> None:
    """The tally kind and the process backend registered for good, as the `tally_kind` fixture does
    for one test: for a process of its own (a child started by a test, a Ray worker's setup hook)."""
    from arex.envs import runtime
    from arex.sandbox.base import BACKENDS

    runtime.KINDS["tally"] = TallyEnv
    BACKENDS["process"] = PROCESS_BACKEND
