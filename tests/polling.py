"""Waiting on an event in tests: poll with a deadline, never a fixed sleep before an assert."""

from __future__ import annotations

import time


def deadline_poll(check, seconds: float, what: str):
    """Poll `check` until it returns something true, and return that; fail naming `what` after `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
