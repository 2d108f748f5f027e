"""Sandboxes: isolated machines where agent commands and grading runs happen."""

from arex.sandbox.base import ExecResult, Mount, Sandbox, SandboxConfig, SandboxError, parse_size
from arex.sandbox.docker import DockerSandbox

BACKENDS: dict[str, type[Sandbox]] = {"docker": DockerSandbox}


def make_sandbox(config: SandboxConfig, name: str = "sandbox") -> Sandbox:
    """A sandbox of the configured backend (not started yet)."""
    try:
        backend = BACKENDS[config.backend]
    except KeyError:
        raise SandboxError(
            f"Unknown sandbox backend '{config.backend}'. Known backends: {', '.join(sorted(BACKENDS))}. "
            "Set sandbox.backend to one of them."
        ) from None
    return backend(config, name=name)


__all__ = ["BACKENDS", "ExecResult", "Mount", "Sandbox", "SandboxConfig", "SandboxError", "make_sandbox", "parse_size"]
