"""A graded program's own failure, read from its kernel evidence: one rule for every kind of run
(batch tests in judge.py, interactive ones in interactive.py)."""

from __future__ import annotations

from dataclasses import dataclass

from arex.sandbox.base import ExecResult, RunLimits, Sandbox, SandboxError

SIGXCPU = 24
STARVED_ATTEMPTS = 2
"""How often a judge step (compile, test run, checker) is run when the host's load starves it past
its hard cap: once more, then the grading reports the host (HostStarved), never a verdict."""
HOST_BUSY = "the host was too busy"
"""How a message about a step the host's load starved begins (a test's JE message, infra_error)."""


class HostStarved(SandboxError):
    """A judge step waited for a CPU until its hard cap, every time it was run: the host is too busy.
    Nothing is known of the submission (or the env); the caller reports it as an infrastructure
    failure (GradeResult.infra_error, a build's `error`), never as a verdict or a cached rejection."""


@dataclass(frozen=True)
class Failure:
    verdict: str
    message: str
    host: bool = False
    """The host's load, not the program, ran out the clock (ExecResult.starved)."""


def starved_message(step: str, r: ExecResult) -> str:
    """Why a step that stayed starved has no verdict, with the kernel's evidence."""
    cpu = f"{r.cpu_s:.2f} s" if r.cpu_s is not None else "unknown"
    waited = f"{r.starved_s:.1f} s" if r.starved_s is not None else "most of its time"
    return (
        f"{HOST_BUSY}: {step} waited {waited} for a CPU and was stopped after {r.duration_s:.1f} s "
        f"(CPU used: {cpu}), {STARVED_ATTEMPTS} times; re-run when the host is less loaded"
    )


IDLE_TIMEOUT_SHARE = 0.5
"""A judge step stopped at its timeout with less CPU than this share of it was mostly waiting."""


def _host_starved(r: ExecResult, timeout: float) -> bool:
    """Starved to its hard cap, or stopped at its timeout having used under half of it in CPU: a judge
    step (a compiler, a checker) does not wait on its own, and the runner's count of the waits for a
    CPU misses a process blocked behind a starved one of the same step (a compiler's pipe to its
    assembler): seen under load as a 'compilation timeout' after 0.3 s of CPU of 3."""
    low_cpu = r.cpu_s is not None and r.cpu_s < IDLE_TIMEOUT_SHARE * timeout
    return r.starved or (r.status == "timeout" and low_cpu)


def fair_exec(box: Sandbox, step: str, command, timeout: float, limits: RunLimits, **kw) -> ExecResult:
    """Run a judge step (`step` names it in a message), again if the host's load starved it (see
    `_host_starved`); HostStarved if it stayed starved. A step's own slowness is its result as usual."""
    for _ in range(STARVED_ATTEMPTS):
        r = box.exec(command, timeout=timeout, limits=limits, **kw)
        if not _host_starved(r, timeout):
            return r
    raise HostStarved(starved_message(step, r))


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
    if p.starved:  # within its CPU limit, waiting for a CPU the host gave others: no verdict of the program's
        return Failure("JE", starved_message("the program", p), host=True)
    if p.status == "timeout":
        return Failure("TLE", f"wall-clock limit {limits.wall_s:g}s exceeded ({idle})")
    if p.exit_code != 0:
        return Failure("RE", f"killed by signal {p.signal}" if p.signal else f"exit code {p.exit_code}")
    return None
