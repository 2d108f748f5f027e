"""How a rollout ends: the `end` line's status for each way it can stop (docs/record.md)."""

from __future__ import annotations

import asyncio
import errno

from arex.sandbox import SandboxError
from arex.teacher.client import TeacherError

INFRA = "infra_failed"
"""The infrastructure failed (sandbox, unreachable teacher, a bug): the rollout is redone on re-run."""
STORE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""The store cannot take more (full, read-only): every rollout would fail alike, so one that meets
this stops open to resume and the error goes up to the batch, which names the path."""


def ending_of(exc: BaseException) -> tuple[str, str]:
    """The end status and reason of a rollout stopped by `exc`."""
    if isinstance(exc, TeacherError):
        status = (
            INFRA
            if exc.kind == "unreachable"
            else ("context_overflow" if exc.kind == "context_length" else "teacher_error")
        )
        return status, str(exc)
    if isinstance(exc, SandboxError):
        return INFRA, f"sandbox: {exc}"
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):  # SystemExit: SIGTERM
        return "interrupted", "stopped by the user; re-run to resume"
    return INFRA, f"unexpected {type(exc).__name__}: {exc}"
