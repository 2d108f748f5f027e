"""How a rollout ends: the `end` line's status for each way it can stop (docs/record.md), and which
endings a re-run redoes."""

from __future__ import annotations

import asyncio
import errno
import re

from arex.errors import ArexError
from arex.record.trajectory import End
from arex.sandbox import SandboxError
from arex.teacher.client import FIXABLE, TeacherError

INFRA = "infra_failed"
"""The infrastructure failed (sandbox, unreachable teacher, a bug): the rollout is redone on re-run."""
TEACHER = "teacher_error"
STORE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""The store cannot take more (full, read-only): every rollout would fail alike, so one that meets
this stops open to resume and the error goes up to the batch, which names the path."""


def ending_of(exc: BaseException) -> tuple[str, str]:
    """The end status and reason of a rollout stopped by `exc`."""
    if isinstance(exc, TeacherError):
        status = (
            INFRA if exc.kind == "unreachable" else ("context_overflow" if exc.kind == "context_length" else TEACHER)
        )
        return status, str(exc)
    if isinstance(exc, SandboxError):
        return INFRA, f"sandbox: {exc}"
    if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):  # SystemExit: SIGTERM
        return "interrupted", "stopped by the user; re-run to resume"
    return INFRA, f"unexpected {type(exc).__name__}: {exc}"


def redone(end: End | None) -> bool:
    """Whether a re-run plays a rollout that ended with `end` again (from its last complete round):
    an infrastructure failure, or a teacher error the user fixes in the configuration (a refused
    API key, a model the endpoint does not serve). Any other ending is final."""
    if end is None:
        return True
    return end.status == INFRA or (end.status == TEACHER and end.reason.startswith(FIXABLE))


FAILED = (INFRA, TEACHER)
"""Endings a batch did not finish: `arex rollout` exits with `Unfinished` when a rollout ends so.
(`budget` and `context_overflow` end a rollout by the limits its config set: finished.)"""


class Unfinished(ArexError):
    """Rollouts of the batch ended infra_failed or teacher_error (a node lost, an unreachable or
    refusing teacher, a sandbox that died); the message groups their reasons, with counts."""

    exit_code = 6


def failures(results: list[dict]) -> list[dict]:
    """The rollouts of `results` (status, reason) that ended in FAILED, grouped by status and reason
    (numbers aside: ports, counts and seconds differ between rollouts failing alike), most first:
    {status, count, redone (whether a re-run plays them again), reason (the first one's)}."""
    groups: dict[tuple[str, str], dict] = {}
    for r in results:
        if r.get("status") not in FAILED:
            continue
        reason = str(r.get("reason") or "")
        group = groups.setdefault(
            (r["status"], re.sub(r"\d+", "#", reason)[:200]),
            {"status": r["status"], "count": 0, "redone": redone(End(status=r["status"], reason=reason, rounds=0)),
             "reason": reason[:300]},
        )  # fmt: skip
        group["count"] += 1
    return sorted(groups.values(), key=lambda g: -g["count"])


def unfinished(groups: list[dict], rollouts: int) -> Unfinished | None:
    """The error `arex rollout` ends with, after its summary, when `groups` (`failures`) is not empty."""
    if not groups:
        return None
    lines = [
        f"  {g['variant'] + ': ' if g.get('variant') else ''}{g['status']} x{g['count']}"
        f"{'' if g['redone'] else ' (final)'}: {g['reason']}"
        for g in groups
    ]
    failed = sum(g["count"] for g in groups)
    return Unfinished(
        f"{failed} of {rollouts} rollout(s) did not finish; finished rounds and every paid call are kept. "
        "Fix the cause, then re-run the same command: it redoes those not marked final.\n" + "\n".join(lines)
    )
