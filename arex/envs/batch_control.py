"""A build-envs batch a user can leave running, and stop.

- A line per unit started and finished (`progress`): a batch whose stderr is a log file, not a
  terminal, still shows it is alive and where it is.
- SIGINT or SIGTERM (KeyboardInterrupt or SystemExit in the main thread, where the CLI turns SIGTERM
  into one): no unit starts any more, the running ones finish, the report is written for what is
  done, and the interruption goes on (the CLI exits 130 or 143). A second one aborts the running
  units: this process's sandboxes are stopped (what a unit runs there fails at once, so it ends with
  an error report), its staging folders deleted, the report written for what is done, and the
  process ends (after ABORT_WAIT_S at most: a unit in a step that is no sandbox's is not waited for).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

from arex.sandbox import stop_live

Unit = TypeVar("Unit")
ABORT_WAIT_S = 30.0
"""How long an abort waits for the running units to end once their sandboxes are stopped."""
Interruption = (KeyboardInterrupt, SystemExit)


def run_units(
    pool: ThreadPoolExecutor,
    units: Iterable[Unit],
    run: Callable[[Unit], str],
    label: Callable[[Unit], str],
    progress: Callable[[str], None],
    finish: Callable[[], None],
    out: Path,
    workers: int,
) -> None:
    """Run `run(unit)` (which returns how the unit ended, as the finished line says it) for every
    unit on `pool` (of `workers` threads), drawing the next unit only when one is free: a stream of units (a
    CodeContests shard's rows) is read as it is built, never all held. If interrupted: stop as the
    module says; `finish()` writes the report for what is done; `out` holds the staging folders."""
    count, lock = [0], threading.Lock()

    def one(unit: Unit) -> None:
        progress(f"started {label(unit)}")
        ended = run(unit)
        with lock:
            count[0] += 1
            done = count[0]
        progress(f"finished {label(unit)}: {ended} ({done} done)")

    pending: set[Future] = set()
    try:
        for unit in units:
            while len(pending) >= workers:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                _wait(finished)
            pending.add(pool.submit(one, unit))
        _wait(pending)
    except Interruption as exc:
        for future in pending:
            future.cancel()
        running = sum(not future.done() for future in pending)
        progress(f"stopping: no more sources start; waiting for the {running} running (interrupt again to abort them)")
        try:
            _wait(pending)
        except Interruption as again:
            _abort(pending, progress, finish, out, _exit_code(again))
        finish()
        raise exc


def _wait(futures) -> None:
    for future in futures:
        if not future.cancelled():
            future.result()


def _exit_code(exc: BaseException) -> int:
    code = exc.code if isinstance(exc, SystemExit) else None
    return code if isinstance(code, int) else 130


def _abort(pending: set[Future], progress: Callable[[str], None], finish: Callable[[], None], out: Path, code: int):
    """Stop the running units: their sandboxes (again and again, for a unit may start another until
    it sees one fail; each then ends with an error report), their staging folders; the report; the end."""
    progress("aborting: stopping this build's sandboxes and deleting its staging folders")
    give_up = time.monotonic() + ABORT_WAIT_S
    try:
        while any(not future.done() for future in pending) and time.monotonic() < give_up:
            stop_live()
            wait(pending, timeout=0.5)
    except Interruption:
        pass  # yet another signal: end now
    stop_live()
    removed = remove_own_staging(out)
    finish()
    removed += remove_own_staging(out)  # a unit's thread may have gone on writing while the report was
    progress(f"aborted: {removed} staging folder(s) deleted; the report covers the sources that finished")
    os._exit(code)  # threads still in a step that is no sandbox's are not waited for


def remove_own_staging(out: Path) -> int:
    """Delete the staging folders this process made in `out` (arex/envs/staging.py names them with
    their owner's pid); how many."""
    removed = 0
    for folder in out.glob(f".*-staging-{os.getpid()}-*"):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed
