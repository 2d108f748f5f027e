"""A built env as the rollout engine and selection see it: one protocol, one class per kind.

`load_env(folder)` picks the class by the task's `kind` in the one table of kinds (arex.specs.KINDS,
re-exported here as KINDS); each kind's class lives in its folder (arex/envs/judge/env.py,
arex/envs/ml/env.py). Per rollout: `sandbox_config` (a pure function of the base config) → start
→ `prepare` → the agent works → `grade_round` each round, with the grading of `open_grading`
(judge envs: leases of the batch's GradingPool of the env, arex/grading/pool.py). Selection:
`regrade` a round from its workspace archive in fresh sandboxes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from arex.envs.layout import IMAGE_WORKSPACE
from arex.grading.ml import SUBMISSION_CAP
from arex.grading.pool import GradingPools
from arex.hashing import json_sha256, tree_sha256
from arex.record.snapshots import SnapshotStore, read_member
from arex.record.trajectory import RoundEnd
from arex.sandbox import Mount, SandboxConfig
from arex.sandbox.base import ArchiveTooLarge, Sandbox
from arex.specs import KINDS, GradeResult, SpecError, kind_of, read_spec_yaml, validate_spec

# IMAGE_WORKSPACE: kept importable from here for existing callers (it lives in layout.py).
__all__ = ["IMAGE_WORKSPACE", "KINDS", "RECORDED_CHARS", "SNAPSHOT_CAP", "Env", "Grading", "list_envs", "load_env"]

# The most a workspace snapshot may take; over it, the round is graded as not submitted.
SNAPSHOT_CAP = 512 << 20
RECORDED_CHARS = 1 << 20  # how much of a submission's text a round_end carries


class Grading:
    """What grading keeps for one rollout's successive rounds. This base keeps nothing (ML envs
    grade in the agent's own sandbox); JudgeGrading keeps containers."""

    def __init__(self) -> None:
        self.graded: dict[str, GradeResult] = {}

    def warm(self) -> None:
        """Start what grading needs ahead of the first round (in the background)."""

    def close(self) -> None:
        """Remove whatever was started."""


def _spec_hash(raw: dict, skills: Path) -> str:
    """Of the task spec and the env's own skills (skills/, when it has any): rollouts and selection
    key on it, so an env whose skills changed is a changed env. Without skills, of the spec alone."""
    files = [p for p in skills.rglob("*") if p.is_file()] if skills.is_dir() else []
    if not files:
        return json_sha256(raw, sort_keys=True)[:16]
    return json_sha256({"task": raw, "skills": tree_sha256(skills, files)}, sort_keys=True)[:16]


class Env(ABC):
    kind: ClassVar[str]
    spec_model: ClassVar[type[BaseModel]]

    def __init__(self, env_dir: Path, raw: dict):
        self.dir = Path(env_dir)
        self.spec = validate_spec(self.spec_model, raw, self.dir / "task.yaml")
        self.id = self.spec.id
        try:
            self.statement = (self.dir / "statement.md").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(
                f"{self.dir / 'statement.md'} cannot be read ({exc}); rebuild the env with `arex build-envs`."
            ) from None
        self.spec_hash = _spec_hash(raw, self.dir / "skills")

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def protected(self) -> tuple[str, ...]:
        return tuple(getattr(self.spec, "protected", ()))

    @property
    @abstractmethod
    def submission_path(self) -> str:
        """The workspace file that is graded."""

    @property
    def baseline_score(self) -> float | None:
        """The build's score of the starting workspace, on the held-out scale (higher is better)."""
        build = self.dir / ".build.json"
        if not build.is_file():
            return None
        return self._baseline(json.loads(build.read_text()).get("scores", {}))

    @abstractmethod
    def _baseline(self, scores: dict) -> float | None: ...

    def sandbox_config(
        self,
        base: SandboxConfig,
        skills_dir: Path | None = None,
        skills_target: str = "/skills",
        task_skills_dir: Path | None = None,
        task_skills_target: str = "/task-skills",
    ) -> SandboxConfig:
        """The agent's sandbox: `base`, the general skills and the env's own (task_skills_dir, its
        `skills/`) mounted read-only, and what the kind needs."""
        mounts = tuple(base.mounts)
        for folder, target in ((skills_dir, skills_target), (task_skills_dir, task_skills_target)):
            if folder is not None and folder.is_dir():
                mounts += (Mount(source=str(folder.resolve()), target=target),)
        return base.model_copy(update={"mounts": mounts, **self._sandbox_update(base)})

    def _sandbox_update(self, base: SandboxConfig) -> dict:
        return {}

    def prepare(self, sandbox: Sandbox) -> None:
        """Put the starting workspace in place (env images seed theirs at start)."""

    def open_grading(self, base: SandboxConfig | None = None, pools: GradingPools | None = None) -> Grading:
        """What grading keeps for one rollout; `pools`: the batch's shared grading containers."""
        return Grading()

    def grade_round(
        self, sandbox: Sandbox, grading: Grading, store: SnapshotStore
    ) -> tuple[GradeResult, str | None, str]:
        """Grade what the agent left in `sandbox`: (grade, snapshot sha256 or None, submission text).

        The task's own step runs first (ML: its command). Then the workspace is archived once and
        the submission is read out of that archive, so what is graded, recorded and kept is one
        thing (a process left running cannot swap the file in between). A workspace too large to
        keep, or a submission that is not a readable file, is the agent's failure in this round."""
        failed, log = self._run_task(sandbox)
        sha, problem = self._snapshot(sandbox, store)
        if failed is not None:
            return failed, sha, ""
        data = b""
        if sha is not None:
            try:
                data = read_member(store.path(sha), self.submission_path, SUBMISSION_CAP)
            except (FileNotFoundError, IsADirectoryError, ValueError) as exc:
                problem = f"{self.submission_path}: {exc}"
        text = data.decode("utf-8", "replace")[:RECORDED_CHARS]
        if problem is not None:
            return self._not_graded(problem, log), sha, text
        return self._grade(data, text, grading, log), sha, text

    def _run_task(self, sandbox: Sandbox) -> tuple[GradeResult | None, str]:
        """Anything to run before the workspace is archived: (a failing grade or None, a log)."""
        return None, ""

    def _snapshot(self, sandbox: Sandbox, store: SnapshotStore) -> tuple[str | None, str | None]:
        try:
            return store.save(lambda f: sandbox.archive(sandbox.config.workdir, f, SNAPSHOT_CAP)), None
        except ArchiveTooLarge:
            return (
                None,
                f"the workspace is over the {SNAPSHOT_CAP >> 20} MB snapshot cap, so this round cannot be kept; "
                "delete large files",
            )

    @abstractmethod
    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult: ...

    @abstractmethod
    def _not_graded(self, problem: str, log: str) -> GradeResult: ...

    @abstractmethod
    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        """Grade a recorded round again from its workspace archive, in fresh sandboxes (selection).
        ValueError if the archive does not hold what the round recorded."""


def load_env(env_dir: Path) -> Env:
    """The built env in `env_dir`, as the env class of its kind (arex.specs.KINDS)."""
    env_dir = Path(env_dir)
    raw = read_spec_yaml(env_dir / "task.yaml")
    return kind_of(raw, env_dir / "task.yaml").part("env")(env_dir, raw)


def list_envs(root: Path) -> list[Env]:
    """Every built env under `root` (folders with task.yaml), in name order."""
    if (root / "task.yaml").is_file():
        return [load_env(root)]
    return [load_env(p) for p in sorted(root.iterdir()) if (p / "task.yaml").is_file()]
