"""JudgeEnv: a judge env as the rollout and selection see it, graded in leases of the batch's pool."""

from __future__ import annotations

from pathlib import Path

from arex.envs.docs_index import agent_image
from arex.envs.runtime import RECORDED_CHARS, Env, Grading
from arex.grading.judge import Judge
from arex.grading.languages import language_for
from arex.grading.ml import SUBMISSION_CAP
from arex.grading.pool import GradingPool, GradingPools
from arex.hashing import json_sha256, text_sha256
from arex.record.snapshots import MemberError, read_member
from arex.record.trajectory import RoundEnd
from arex.sandbox import SandboxConfig
from arex.sandbox.base import Sandbox
from arex.specs import GradeResult, JudgeSpec


class JudgeEnv(Env):
    kind = "judge"
    spec_model = JudgeSpec

    @property
    def submission_path(self) -> str:
        return self.spec.starter

    def _baseline(self, scores: dict) -> float | None:
        return scores.get("starter")

    def _sandbox_update(self, base: SandboxConfig) -> dict:
        return {"image": agent_image(base)}  # the base image with the offline `docs` command and index

    def judge(self, base: SandboxConfig | None = None) -> Judge:
        """The judge, its grading containers made from `base` (mounts dropped: no skills there)."""
        return Judge(self.dir, self.spec, (base or SandboxConfig()).model_copy(update={"mounts": ()}))

    def prepare(self, sandbox: Sandbox) -> None:
        sandbox.copy_in(self.dir / "workspace", sandbox.config.workdir)

    def open_grading(self, base: SandboxConfig | None = None, pools: GradingPools | None = None) -> "JudgeGrading":
        """Gradings drawn from the batch's pool of this env (`pools`), or from a pool of the rollout's own."""
        if pools is None:
            return JudgeGrading(self, GradingPool(self.judge(base), cap=1), owned=True)
        sandbox = (base or SandboxConfig()).model_dump(mode="json")
        key = json_sha256({"env": str(self.dir.resolve()), "spec": self.spec_hash, "sandbox": sandbox})
        return JudgeGrading(self, pools.get(key, lambda cap: GradingPool(self.judge(base), cap=cap)), owned=False)

    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult:
        language = language_for(self.spec.starter).name
        assert isinstance(grading, JudgeGrading)

        def grade() -> GradeResult:
            return grading.pool.grade(
                lambda lease: grading.judge.grade(text, language, box=lease.box, checker_box=lease.checker)
            )

        # A submission that graded the same twice in this batch (for this rollout or another of the
        # env's) is not run again; one whose gradings disagree is run for every request.
        result, cached = grading.pool.grade_once(text_sha256(f"{language}\0{text}"), grade)
        return result.model_copy(update={"details": {**result.details, "cached": True}}) if cached else result

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        return GradeResult(
            public_score=0.0,
            held_out_score=0.0,
            held_out_raw=0.0,
            feedback=f"Submission not graded: {problem}",
            details={"kind": "judge", "invalid": problem},
        )

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        try:
            archived = read_member(archive, self.spec.starter, SUBMISSION_CAP)
            archived = archived.decode("utf-8", "replace")[:RECORDED_CHARS]
        except (FileNotFoundError, IsADirectoryError, MemberError):
            archived = ""  # as the rollout recorded it (grade_round)
        if archived != end.submission:
            raise ValueError(f"the workspace snapshot's {self.spec.starter} differs from the recorded submission")
        # A fresh grading container, never a pooled one.
        return self.judge(base).grade(end.submission, language_for(self.spec.starter).name)


class JudgeGrading(Grading):
    """One rollout's gradings, each in a lease of a GradingPool: the batch's pool of this env
    (shared with its other rollouts), or one of its own, removed by close()."""

    def __init__(self, env: JudgeEnv, pool: GradingPool, owned: bool):
        super().__init__()
        self.env, self.pool, self.owned = env, pool, owned
        self.judge = pool.judge
        pool.join()

    def warm(self) -> None:
        """Have a lease started ahead in the background, so the first grading does not wait for
        a container start (the agent's first round, mostly teacher latency, hides it)."""
        self.pool.warm()

    def lease(self):
        """A clean grading lease (grading box, checker box) for one grading."""
        return self.pool.lease()

    def close(self) -> None:
        self.pool.leave()
        if self.owned:
            self.pool.close()
