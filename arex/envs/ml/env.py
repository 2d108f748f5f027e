"""MLEnv: an ML env as the rollout and selection see it, graded in the agent's own sandbox."""

from __future__ import annotations

from pathlib import Path

from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.runtime import Env, Grading
from arex.grading.ml import MLGrader
from arex.record.trajectory import RoundEnd
from arex.sandbox import SandboxConfig, make_sandbox
from arex.sandbox.base import Sandbox
from arex.specs import GradeResult, MLSpec


class MLEnv(Env):
    kind = "ml"
    spec_model = MLSpec

    @property
    def submission_path(self) -> str:
        return self.spec.submission.file

    def _baseline(self, scores: dict) -> float | None:
        value = scores.get("baseline")
        return None if value is None else (value if self.spec.metric.direction == "maximize" else -value)

    def _sandbox_update(self, base: SandboxConfig) -> dict:
        return {"image": self.spec.image, "seed": IMAGE_WORKSPACE, "memory": max(base.memory, 2 << 30)}

    def _grader(self) -> MLGrader:
        return MLGrader(self.dir, self.spec)

    def _run_task(self, sandbox: Sandbox) -> tuple[GradeResult | None, str]:
        return self._grader().run(sandbox)

    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult:
        return MLGrader.with_log(self._grader().score(data), log)

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        return MLGrader.with_log(self._grader().invalid(problem), log)

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        box = make_sandbox(self.sandbox_config(base), f"select-{self.id}")
        box.start()
        try:
            box.restore(archive, box.config.workdir)  # unpacked inside the sandbox, never on the host
            return self._grader().grade(box)
        finally:
            box.stop()
