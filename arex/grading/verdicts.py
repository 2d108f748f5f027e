"""A graded program's own failure, read from its kernel evidence: one rule for every kind of run
(batch tests in judge.py, interactive ones in interactive.py)."""

from __future__ import annotations

from dataclasses import dataclass

from arex.sandbox.base import ExecResult

SIGXCPU = 24


@dataclass(frozen=True)
class Failure:
    verdict: str
    message: str


@dataclass(frozen=True)
class Limits:
    """What a run is judged against: the problem's declared limits and the wall-clock backstop."""

    time_s: float
    memory_mb: int
    output_mb: int
    wall_s: float


def program_failure(
    p: ExecResult, limits: Limits, idle: str = "the program was not using CPU: sleeping or waiting for input"
) -> Failure | None:
    """MLE, OLE, TLE or RE by the program's own CPU time, peak memory, signal and exit status, or
    None. The declared memory limit is judged from the peak memory: the container's limit must leave
    room for the command server beside the program, so it is only a backstop."""
    if p.status == "oom" or (p.memory_kb is not None and p.memory_kb > limits.memory_mb * 1024):
        return Failure("MLE", f"memory limit {limits.memory_mb} MB exceeded")
    if p.status == "output_limit":
        return Failure("OLE", f"output over {limits.output_mb} MB")
    if p.cpu_s is not None and p.cpu_s > limits.time_s:
        return Failure("TLE", f"CPU time {p.cpu_s:.2f}s over the {limits.time_s:g}s limit")
    if p.signal == SIGXCPU:  # the kernel's tick-based limit can fire a little before wait4's tally reaches it
        return Failure("TLE", f"stopped by the kernel at the {limits.time_s:g}s CPU time limit")
    if p.status == "timeout":
        return Failure("TLE", f"wall-clock limit {limits.wall_s:g}s exceeded ({idle})")
    if p.exit_code != 0:
        return Failure("RE", f"killed by signal {p.signal}" if p.signal else f"exit code {p.exit_code}")
    return None
