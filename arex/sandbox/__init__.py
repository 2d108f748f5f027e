"""Sandboxes: isolated machines where agent commands and grading runs happen.

Backends are named in `BACKENDS` as "module:Class" and imported only when a sandbox of that kind
is made, so importing this package (or reading a config) does not load the Docker SDK.
"""

from __future__ import annotations

import importlib
import sys

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


def stop_live() -> None:
    """Stop every sandbox this process started and has not stopped, of every backend it has used (a
    backend module imported: its `stop_live`). For a process about to end without waiting for the
    threads that use them (an aborted batch): what they run fails as the sandbox's end."""
    for target in BACKENDS.values():
        module, _, name = target.partition(":")
        cls = getattr(sys.modules.get(module), name, None)
        stop = getattr(sys.modules.get(cls.__module__), "stop_live", None) if cls is not None else None
        if stop is not None:
            stop()


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
    "stop_live",
]
