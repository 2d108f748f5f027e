"""A built env as the rollout engine sees it: one interface for both kinds.

start a sandbox for the agent → `prepare` it → let the agent work → `grade(sandbox)` → GradeResult.
The rollout engine never asks which kind it has.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import yaml

from arex.envs.ml_build import IMAGE_WORKSPACE
from arex.grading.judge import Judge
from arex.grading.languages import language_for
from arex.grading.ml import SUBMISSION_CAP, MLGrader
from arex.sandbox import Mount, SandboxConfig
from arex.sandbox.base import ArchiveTooLarge, Sandbox, SandboxError
from arex.snapshots import SnapshotStore, read_member
from arex.specs import GradeResult, JudgeSpec, MLSpec

# The most a workspace snapshot may take; over it, the round is graded as not submitted.
SNAPSHOT_CAP = 512 << 20


class Env:
    def __init__(self, env_dir: Path):
        self.dir = Path(env_dir)
        raw = yaml.safe_load((self.dir / "task.yaml").read_text(encoding="utf-8"))
        self.kind = raw.get("kind", "judge")
        self.spec: JudgeSpec | MLSpec = MLSpec.model_validate(raw) if self.kind == "ml" else JudgeSpec.model_validate(raw)
        self.id = self.spec.id
        self.statement = (self.dir / "statement.md").read_text(encoding="utf-8")
        self.spec_hash = hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()[:16]
        self._sandbox_base: SandboxConfig | None = None
        self._judge: Judge | None = None

    @property
    def title(self) -> str:
        return self.spec.title

    @property
    def submission_path(self) -> str:
        """What gets submitted: the solution file (judge) or the code that writes the predictions (ML)."""
        return self.spec.starter if self.kind == "judge" else self.spec.submission.file

    @property
    def protected(self) -> tuple[str, ...]:
        return tuple(getattr(self.spec, "protected", ()))

    @property
    def baseline_score(self) -> float | None:
        build = self.dir / ".build.json"
        if not build.is_file():
            return None
        scores = json.loads(build.read_text()).get("scores", {})
        if self.kind == "ml":
            value = scores.get("baseline")
            return None if value is None else (value if self.spec.metric.direction == "maximize" else -value)
        return scores.get("starter")

    def sandbox_config(self, base: SandboxConfig, skills_dir: Path | None, skills_target: str) -> SandboxConfig:
        self._sandbox_base = base
        mounts = tuple(base.mounts)
        if skills_dir is not None and skills_dir.is_dir():
            mounts += (Mount(source=str(skills_dir.resolve()), target=skills_target),)
        update: dict = {"mounts": mounts}
        if self.kind == "ml":
            update.update(image=self.spec.image, seed=IMAGE_WORKSPACE, memory=max(base.memory, 2 << 30))
        return base.model_copy(update=update)

    def prepare(self, sandbox: Sandbox) -> None:
        """Put the starting workspace in place (ML sandboxes are seeded from their image at start)."""
        if self.kind == "judge":
            sandbox.copy_in(self.dir / "workspace", sandbox.config.workdir)

    def open_grading(self) -> "GradingSession":
        """Grading containers kept for one rollout's successive submissions (judge envs)."""
        return GradingSession(self)

    def grade_round(self, sandbox: Sandbox, session: "GradingSession", store: SnapshotStore) -> tuple[GradeResult, str | None, str]:
        """Grade what the agent left in `sandbox`: (grade, snapshot sha256 or None, submission text).

        ML envs run the task's command first. Then the workspace is archived once and the
        submission is read out of that archive, so what is graded, recorded and kept is one thing
        (a process left running cannot swap the file in between). A workspace too large to keep,
        or a submission that is not a readable file, is the agent's failure in this round."""
        log = ""
        if self.kind == "ml":
            failed, log = MLGrader(self.dir, self.spec).run(sandbox)
            if failed is not None:
                return failed, self._snapshot(sandbox, store)[0], ""
        sha, problem = self._snapshot(sandbox, store)
        data = b""
        if sha is not None:
            try:
                data = read_member(store.path(sha), self.submission_path, SUBMISSION_CAP)
            except (FileNotFoundError, IsADirectoryError, ValueError) as exc:
                problem = f"{self.submission_path}: {exc}"
        text = data.decode("utf-8", "replace")
        if problem is not None:
            return self._not_graded(problem, log), sha, text[: 1 << 20]
        return self._grade_text(data, text, session, log), sha, text[: 1 << 20]

    def _snapshot(self, sandbox: Sandbox, store: SnapshotStore) -> tuple[str | None, str | None]:
        try:
            return store.save(lambda f: sandbox.archive(sandbox.config.workdir, f, SNAPSHOT_CAP)), None
        except ArchiveTooLarge:
            return None, f"the workspace is over the {SNAPSHOT_CAP >> 20} MB snapshot cap, so this round cannot be kept; delete large files"
        except SandboxError as exc:
            # The archiver failed. If the sandbox still answers, the agent's files did it: they live
            # in memory and count against the sandbox's limit, so a workspace filled to the brim
            # leaves `tar` none and it is OOM-killed. That is this round's failure, not the
            # infrastructure's (which would end the rollout, to be retried and paid for again).
            if not _responds(sandbox):
                raise
            return None, f"the workspace could not be archived ({exc}); its files count against the sandbox's memory limit, so a nearly full workspace leaves no memory to archive it: delete large files"

    def _grade_text(self, data: bytes, text: str, session: "GradingSession", log: str) -> GradeResult:
        if self.kind == "ml":
            return MLGrader.with_log(MLGrader(self.dir, self.spec).score(data), log)
        language = language_for(self.spec.starter).name
        # Judge grading is deterministic (a build gate checks it): an unchanged submission is not re-run.
        key = hashlib.sha256(f"{language}\0{text}".encode()).hexdigest()
        if key in session.graded:
            cached = session.graded[key]
            return cached.model_copy(update={"details": {**cached.details, "cached": True}})
        result = self.judge.grade(text, language, box=session.box(), checker_box=session.checker_box())
        if result.infra_error is None:
            session.graded[key] = result
        return result

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        if self.kind == "ml":
            return MLGrader.with_log(MLGrader(self.dir, self.spec).invalid(problem), log)
        return GradeResult(public_score=0.0, held_out_score=0.0, held_out_raw=0.0, feedback=f"Submission not graded: {problem}", details={"kind": "judge", "invalid": problem})

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            base = self._sandbox_base or SandboxConfig()
            self._judge = Judge(self.dir, self.spec, base.model_copy(update={"mounts": ()}))
        return self._judge


class GradingSession:
    """Grading (and checker) containers for one rollout, started on first use or ahead of it by
    warm(), removed by close()."""

    def __init__(self, env: Env):
        self.env = env
        self._box: Sandbox | None = None
        self._checker: Sandbox | None = None
        self._lock = threading.Lock()  # one creator at a time; close() waits for a warm-up in flight
        self._closed = False
        self.graded: dict[str, GradeResult] = {}

    def warm(self) -> None:
        """Start the containers in the background, so the first grading does not wait for them
        (the agent's first round, mostly teacher latency, hides their start-up)."""
        if self.env.kind == "judge":
            threading.Thread(target=self._warm, daemon=True, name=f"warm-{self.env.id}").start()

    def _warm(self) -> None:
        try:
            self.box()
            self.checker_box()
        except Exception:  # noqa: BLE001 - the first grading starts them again and reports the failure
            pass

    def box(self) -> Sandbox | None:
        if self.env.kind != "judge":
            return None
        with self._lock:
            if self._box is None:
                self._box = self._open(self.env.judge.open_box)
            return self._box

    def checker_box(self) -> Sandbox | None:
        if self.env.kind != "judge" or self.env.spec.checker.kind in ("exact", "token", "float"):
            return None
        with self._lock:
            if self._checker is None:
                self._checker = self._open(self.env.judge.open_checker_box)
            return self._checker

    def _open(self, opener) -> Sandbox:
        if self._closed:
            raise SandboxError("the grading session is closed")
        return opener()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            boxes, self._box, self._checker = (self._box, self._checker), None, None
        for box in boxes:
            if box is not None:
                box.stop()


def _responds(sandbox: Sandbox) -> bool:
    """Does the sandbox still run commands (whatever their outcome)?"""
    try:
        sandbox.exec("true", timeout=30)
        return True
    except SandboxError:
        return False


def list_envs(root: Path) -> list[Env]:
    """Every built env under `root` (folders with task.yaml), in name order."""
    if (root / "task.yaml").is_file():
        return [Env(root)]
    return [Env(p) for p in sorted(root.iterdir()) if (p / "task.yaml").is_file()]
