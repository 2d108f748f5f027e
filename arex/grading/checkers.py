"""Output checkers. Built-in ones (exact, token, float) run on the host in plain Python; custom
ones (Kattis output validators, testlib checkers) are compiled once and run by the judge in a
checker sandbox. Either way the verdict comes from trusted code reading the submission's output,
never from anything the submission claims about itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from arex.specs import CheckerSpec

_RATIO = re.compile(r"Ratio:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_RATIO_UNBOUNDED = re.compile(r"RatioUnbounded:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_POINTS = re.compile(r"^points\s+(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", re.M)


@dataclass(frozen=True)
class Check:
    """One test's checking outcome."""

    accepted: bool
    ratio: float
    """Score of this test in [0, 1] (1 for accepted pass/fail tests)."""
    raw: float
    """Unbounded score where the checker reports one (e.g. RatioUnbounded), else `ratio`."""
    message: str = ""
    judge_error: bool = False
    """The checker itself failed (bad exit code, FAIL): the env is broken, not the submission."""


def check_builtin(spec: CheckerSpec, output: str, answer: str) -> Check:
    if spec.kind == "exact":
        got = [line.rstrip() for line in output.rstrip().splitlines()]
        want = [line.rstrip() for line in answer.rstrip().splitlines()]
        if got == want:
            return Check(True, 1.0, 1.0)
        return Check(False, 0.0, 0.0, _first_difference(got, want, "line"))
    got_tokens, want_tokens = output.split(), answer.split()
    if not spec.case_sensitive:
        got_tokens, want_tokens = [t.lower() for t in got_tokens], [t.lower() for t in want_tokens]
    if len(got_tokens) != len(want_tokens):
        return Check(False, 0.0, 0.0, f"expected {len(want_tokens)} tokens, got {len(got_tokens)}")
    for i, (got, want) in enumerate(zip(got_tokens, want_tokens)):
        if got == want:
            continue
        if spec.kind == "float" and _close(got, want, spec.abs_tol, spec.rel_tol):
            continue
        return Check(False, 0.0, 0.0, f"token {i + 1}: expected {want[:40]!r}, got {got[:40]!r}")
    return Check(True, 1.0, 1.0)


def _close(got: str, want: str, abs_tol: float, rel_tol: float) -> bool:
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= abs_tol or abs(a - b) <= rel_tol * abs(b)


def _first_difference(got: list[str], want: list[str], unit: str) -> str:
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else "<missing>"
        w = want[i] if i < len(want) else "<missing>"
        if g != w:
            return f"{unit} {i + 1}: expected {w[:60]!r}, got {g[:60]!r}"
    return "outputs differ"


def interpret_kattis(exit_code: int, score_txt: str | None, message: str) -> Check:
    """Kattis output validator: exit 42 accept, 43 reject, score.txt for scoring problems."""
    if exit_code == 42:
        if score_txt is not None and score_txt.strip():
            try:
                value = float(score_txt.split()[0])
            except ValueError:
                return Check(
                    False, 0.0, 0.0, f"validator wrote a non-numeric score.txt: {score_txt[:40]!r}", judge_error=True
                )
            return Check(True, min(max(value, 0.0), 1.0), value, message)
        return Check(True, 1.0, 1.0, message)
    if exit_code == 43:
        return Check(False, 0.0, 0.0, message)
    return Check(
        False, 0.0, 0.0, f"validator exited {exit_code} (only 42/43 are valid): {message[:200]}", judge_error=True
    )


def interpret_testlib(exit_code: int, stdout: str, stderr: str) -> Check:
    """testlib checker: exit 0 ok, 1 WA, 2 PE, 3 FAIL, 7 points; 'Ratio: x' (Frontier-CS) wins when present."""
    message = (stderr or stdout).strip()
    text = f"{stdout}\n{stderr}"
    ratio_match = _RATIO.search(text)
    if exit_code == 3:
        return Check(False, 0.0, 0.0, f"checker FAIL: {message[:200]}", judge_error=True)
    if ratio_match and exit_code in (0, 7):
        ratio = float(ratio_match.group(1))
        unbounded = _RATIO_UNBOUNDED.search(text)
        raw = float(unbounded.group(1)) if unbounded else ratio
        bounded = min(max(ratio, 0.0), 1.0)
        return Check(bounded >= 1.0, bounded, raw, message[:300])
    if exit_code == 7:
        points = _POINTS.search(stderr) or _POINTS.search(stdout)
        if not points:
            return Check(
                False, 0.0, 0.0, f"checker exited 7 (points) without 'points <x>': {message[:200]}", judge_error=True
            )
        value = float(points.group(1))
        bounded = min(max(value, 0.0), 1.0)
        return Check(bounded >= 1.0, bounded, value, message[:300])
    if exit_code == 0:
        return Check(True, 1.0, 1.0, message[:300])
    if exit_code in (1, 2, 4, 8):
        return Check(False, 0.0, 0.0, message[:300])
    return Check(False, 0.0, 0.0, f"checker exited {exit_code}: {message[:200]}", judge_error=True)
