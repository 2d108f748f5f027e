"""Sandboxes: isolated machines where agent commands and grading runs happen.

Backends are named in `BACKENDS` as "module:Class" and imported only when a sandbox of that kind
is made, so importing this package (or reading a config) does not load the Docker SDK.
"""

from __future__ import annotations

import importlib

from arex.sandbox.base import BACKENDS, ExecResult, Mount, Sandbox, SandboxConfig, SandboxError, parse_size


def backend_class(name: str) -> type[Sandbox]:
    """The Sandbox class of the backend called `name` (imported now); SandboxError if there is none."""
    try:
        module, _, cls = BACKENDS[name].partition(":")
    except KeyError:
        raise SandboxError(
            f"Unknown sandbox backend '{name}'. Known backends: {', '.join(sorted(BACKENDS))}. "
            "Set sandbox.backend to one of them."
        ) from None
    return getattr(importlib.import_module(module), cls)


def make_sandbox(config: SandboxConfig, name: str = "sandbox") -> Sandbox:
    """A sandbox of the configured backend (not started yet)."""
    return backend_class(config.backend)(config, name=name)


__all__ = [
    "BACKENDS",
    "ExecResult",
    "Mount",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "backend_class",
    "make_sandbox",
    "parse_size",
]
