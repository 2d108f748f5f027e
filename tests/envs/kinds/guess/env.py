"""GuessEnv: the score is 1 - |guess - target| / 10, floored at 0, public and held out alike."""

from pathlib import Path

from arex.envs.runtime import Env, Grading
from arex.record.snapshots import read_member
from arex.record.trajectory import RoundEnd
from arex.sandbox import SandboxConfig
from arex.specs import GradeResult

from .spec import GuessSpec


class GuessEnv(Env):
    kind = "guess"
    spec_model = GuessSpec
    submission_path = "guess.txt"

    def _baseline(self, scores: dict) -> float | None:
        return scores.get("starter")

    def prepare(self, sandbox) -> None:
        sandbox.copy_in(self.dir / "workspace", sandbox.config.workdir)

    def _grade(self, data: bytes, text: str, grading: Grading, log: str) -> GradeResult:
        try:
            guess = int(text.strip())
        except ValueError:
            return self._not_graded(f"guess.txt holds {text[:20]!r}, not a whole number", log)
        score = max(0.0, 1 - abs(guess - self.spec.target) / 10)
        hint = "higher" if guess < self.spec.target else "lower" if guess > self.spec.target else "exact"
        feedback = f"guess {guess}: {hint}"
        return GradeResult(public_score=score, held_out_score=score, held_out_raw=score, feedback=feedback)

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        feedback = f"Submission not graded: {problem}"
        return GradeResult(public_score=0.0, held_out_score=0.0, held_out_raw=0.0, feedback=feedback)

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        data = read_member(archive, self.submission_path, 1 << 20)
        return self._grade(data, data.decode(), Grading(), "")
