"""Grading containers shared by the rollouts of a batch, per env, and agent sandboxes started ahead.

A `GradingPool` hands out a `Lease` (a grading container and, for custom checkers, a checker
container) for ONE grading; the lease comes back after it. Before a container is handed out
(again, or for the first time) it is made clean and checked by arex.sandbox.cleaning: every
process of the user killed, every place it can write emptied and put back to its fresh owner, mode
and attributes, its filesystems back to the pages and inodes of the pool's first fresh container
(tmpfs pages would count against the next program's memory), no other place writable, no IPC
object or process left, and the files grading relies on hashed: the runtime (/.arex) against the
package's sources and the first fresh container of the pool, the compiled checker in a checker
container against the host's binary.
An interactive problem's private area (JUDGE_AREA) is emptied as the judge's uid and checked empty.
A container failing any check is removed and replaced by a fresh one: never reused (fail closed).
The tests' inputs and answers come from the host's private/ folder, pinned by hash when the pool
opens (`Judge.pin_private`), so a file changed on disk during the batch stops its gradings.

`GradingPools` holds one pool per env for a batch (`arex rollout`), removed at its end; a killed
run's containers carry the store label and are removed by the next run on the store.
`SandboxesAhead` starts the agent sandboxes of rollouts still waiting for the batch's concurrency
limit (at most `ahead` at once), each for exactly one rollout.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from arex.grading.judge import COMPILE_MEMORY, Judge
from arex.hashing import bytes_sha256
from arex.sandbox import cleaning
from arex.sandbox.base import JUDGE_AREA, Sandbox, SandboxError
from arex.specs import GradeResult

log = logging.getLogger("arex")

RUNTIME = "/.arex"
CLOSE_WAIT_S = 150.0
INSPECT_MEMORY_MB = 112  # a problem's memory limit under which the cleaning command gets more room first
GRADE_ATTEMPTS = 2  # a grading the container broke is graded again, once, in another container
_AREA_WIPE = 'find "$1" -mindepth 1 -delete 2>/dev/null; ls -A "$1"'


@dataclass
class Lease:
    """The containers of one grading: `box` runs the submission, `checker` (custom checkers only)
    runs the trusted checker beside the private data."""

    box: Sandbox
    checker: Sandbox | None = None
    uses: int = 0
    broken: str = ""
    """Why the lease may not be reused, if a grading found it broken."""

    def stop(self) -> None:
        for box in (self.box, self.checker):
            if box is not None:
                box.stop()


@functools.cache
def _runtime_sources() -> dict[str, str]:
    """The runtime's source files' sha256 as shipped in the package, by their path in a container
    (read once per process: the package does not change under a running batch)."""
    from arex.sandbox import runtime

    return {f"{RUNTIME}/{name.rsplit('/', 1)[-1]}": bytes_sha256(data) for name, data in runtime._sources().items()}


class GradingPool:
    """Grading leases for one env: an idle, clean lease is reused before a new one starts, up to
    `cap` at once; one is started ahead by `warm()`. Thread-safe (gradings run in worker threads)."""

    def __init__(self, judge: Judge, cap: int = 4, name: str = ""):
        self.judge, self.cap, self.name = judge, max(1, cap), name or judge.spec.id
        # an interactor runs in the grading box
        self.custom_checker = judge.spec.checker.kind not in ("exact", "token", "float", "interactive")
        self._pinned = False  # the tests' files are pinned on the first lease (in a worker thread: they may be large)
        self._idle: list[Lease] = []
        self._total = 0  # leases alive: idle, in use, starting or being cleaned
        self._starting = 0
        self._members = 0  # rollouts in progress that grade here (join/leave)
        self._cleaning = 0  # leases given back, being cleaned
        self._waiting = 0  # gradings waiting for a lease
        self._threads: set[threading.Thread] = set()
        self._cond = threading.Condition()
        self._closed = False
        self._runner: dict[str, str] = {}  # /.arex file hashes of the pool's first fresh container
        self._checker_hash: str | None = None
        self._fresh_places: dict[str, dict] = {}  # box kind → its places' state in the first fresh container
        self._graded: dict[str, GradeResult] = {}  # results by submission key, for every rollout drawing on this pool
        self._grading: dict[str, threading.Lock] = {}  # one lock per submission key being graded
        self._drawn: dict[str, GradeResult] = {}  # a key's first result, until a second grading agrees
        self._unstable: set[str] = set()  # keys whose gradings disagreed: graded for every request
        self.started = 0
        self.replaced = 0
        """Containers removed because a check failed after a grading (never handed out again)."""
        self.failures: list[str] = []

    def grade_once(self, key: str, grade: Callable[[], GradeResult]) -> tuple[GradeResult, bool]:
        """(the result for submission `key`, whether it is another grading's): `grade()` runs for
        each request until two gradings of the key agree; from then on the batch's rollouts share
        that result. A nondeterministic submission is graded for every request (its one lucky draw
        must not stand for every rollout), and a result with an infra_error is never kept."""
        with self._cond:
            lock = self._grading.setdefault(key, threading.Lock())
        with lock:
            if key in self._graded:
                return self._graded[key], True
            result = grade()
            if result.infra_error is None and key not in self._unstable:
                earlier = self._drawn.pop(key, None)
                if earlier is None:
                    self._drawn[key] = result
                elif _outcome(earlier) == _outcome(result):
                    self._graded[key] = result
                else:
                    self._unstable.add(key)
            return result, False

    def grade(self, run: Callable[[Lease], GradeResult]) -> GradeResult:
        """`run(lease)` on a clean lease. A container that fails the grading itself (the source cannot
        be written, a command cannot start: SandboxError or OSError) is removed, never reused, and
        the submission is graded again in another: such a failure is never its verdict."""
        for attempt in range(GRADE_ATTEMPTS):
            with self.lease() as lease:  # never the broken one: it is removed
                try:
                    return run(lease)
                except (SandboxError, OSError) as exc:
                    if self._closed or attempt + 1 == GRADE_ATTEMPTS:
                        raise
                    lease.broken = f"the grading failed in it: {type(exc).__name__}: {exc}"
                    log.warning("a grading container of %s failed a grading (%s); grading again", self.name, exc)
        raise AssertionError("unreachable")

    # -- handing out -------------------------------------------------------------------------
    @contextmanager
    def lease(self) -> Iterator[Lease]:
        """A clean lease for one grading; it is cleaned and checked in the background after."""
        lease = self._take()
        try:
            yield lease
        finally:
            lease.uses += 1
            with self._cond:
                self._cleaning += 1
            self._spawn(self._recycle, lease, name=f"clean-{self.name}")

    def _take(self) -> Lease:
        with self._cond:
            if not self._pinned:  # the tests' files as they are now; a later change stops the gradings
                self.judge.pin_private()
                self._pinned = True
            self._waiting += 1
            try:
                while True:
                    if self._closed:
                        raise SandboxError(f"the grading pool of env '{self.name}' is closed")
                    if self._idle:
                        lease = self._idle.pop()
                        self._ahead_locked()
                        return lease
                    # A lease being cleaned or started is ready sooner, and cheaper, than a new container.
                    if self._total < self.cap and self._cleaning + self._starting < self._waiting:
                        self._total += 1
                        break
                    self._cond.wait()
            finally:
                self._waiting -= 1
        return self._fresh_or_release()

    def _fresh_or_release(self) -> Lease:
        try:
            return self._fresh()
        except BaseException:
            with self._cond:
                self._total -= 1
                self._cond.notify_all()
            raise

    def join(self) -> None:
        """A rollout of this env started: it will want a lease each round."""
        with self._cond:
            self._members += 1

    def leave(self) -> None:
        with self._cond:
            self._members -= 1

    def warm(self) -> None:
        """Keep one lease idle or starting in the background (within `cap`), so a grading rarely
        waits for a container start. More start only when gradings wait (`_take`): a container
        started on speculation costs a third of a CPU-second when the batch starts, the busiest
        moment, and a grading is a small part of a round."""
        with self._cond:
            self._ahead_locked()

    def settle(self, timeout: float = cleaning.INSPECT_TIMEOUT_S) -> bool:
        """Wait until no lease is being cleaned or started (False on timeout): a bench counts a
        grading's background cleaning as part of it."""
        with self._cond:
            return self._cond.wait_for(lambda: self._cleaning == 0 and self._starting == 0, timeout)

    def _ahead_locked(self) -> None:
        while not self._closed and self._total < self.cap and len(self._idle) + self._starting < 1:
            self._total += 1
            self._starting += 1
            self._spawn(self._start_ahead, name=f"warm-{self.name}")

    def _spawn(self, target, *args, name: str) -> None:
        """A background thread that close() waits for (so nothing is removed after the batch)."""

        def run() -> None:
            try:
                target(*args)
            finally:
                with self._cond:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, daemon=True, name=name)
        with self._cond:
            self._threads.add(thread)
        thread.start()

    def _start_ahead(self) -> None:
        try:
            lease = self._fresh()
        except Exception as exc:  # noqa: BLE001 - the next grading starts one itself and reports the failure
            log.warning("a grading container of %s did not start ahead: %s", self.name, exc)
            lease = None
        with self._cond:
            self._starting -= 1
            if lease is None:
                self._total -= 1
            elif self._closed:
                self._total -= 1
            else:
                self._idle.append(lease)
            self._cond.notify_all()
        if lease is not None and self._closed:
            lease.stop()

    def _fresh(self) -> Lease:
        """A new lease, checked like a returned one (it is the reference of the runner's hashes)."""
        box = self.judge.open_box()
        lease = Lease(box)
        try:
            if self.custom_checker:
                lease.checker = self.judge.open_checker_box()
            problems = self.clean(lease)
        except BaseException:
            lease.stop()
            raise
        if problems:
            lease.stop()
            raise SandboxError(
                f"a fresh grading container of env '{self.name}' is not clean: {'; '.join(problems)[:500]}"
            )
        with self._cond:
            self.started += 1
        return lease

    # -- giving back -------------------------------------------------------------------------
    def _recycle(self, lease: Lease) -> None:
        try:
            problems = [lease.broken] if lease.broken else [] if self._closed else self.clean(lease)
        except Exception as exc:  # noqa: BLE001 - a box that cannot be checked is not reused
            problems = [f"{type(exc).__name__}: {exc}"]
        with self._cond:
            self._cleaning -= 1
            keep = not problems and not self._closed
            if keep:
                self._idle.append(lease)
            else:
                self._total -= 1
                if problems:
                    self.replaced += 1
                    self.failures.append("; ".join(problems)[:1000])
            self._cond.notify_all()
        if not keep:
            if problems:
                log.warning(
                    "grading container of %s removed, a check failed after grading: %s",
                    self.name,
                    "; ".join(problems)[:300],
                )
            lease.stop()

    def clean(self, lease: Lease) -> list[str]:
        """Make both containers of `lease` clean and check them; what is wrong ([] if clean)."""
        problems = self._clean_box(lease.box, keep={}, grading=True)
        if lease.checker is not None:
            checker = f"{lease.checker.config.workdir}/checker"
            problems += [
                f"checker box: {p}"
                for p in self._clean_box(lease.checker, keep={checker: self._checker_sha()}, grading=False)
            ]
        return problems

    def _checker_sha(self) -> str:
        """The host's compiled checker's sha256, read once per pool (it is cached by content)."""
        if self._checker_hash is None:
            self._checker_hash = bytes_sha256(self.judge.checker_binary().read_bytes())
        return self._checker_hash

    def _clean_box(self, box: Sandbox, keep: dict[str, str], grading: bool) -> list[str]:
        # the tests' limit is left on: too tight for this command
        if grading and self.judge.spec.memory_mb < INSPECT_MEMORY_MB:
            box.set_memory_limit(COMPILE_MEMORY)
        runtime = _runtime_sources()
        report = cleaning.inspect(box, sorted(keep), sorted(set(keep) | set(runtime) | set(self._runner)))
        if isinstance(report, str):
            return [report]
        kind = "grading" if grading else "checker"
        with self._cond:  # the first (fresh) container's places are the baseline of pages in use
            fresh = self._fresh_places.setdefault(kind, report["places"])
        problems = cleaning.problems(report, box.config, fresh)
        problems += self._hash_problems(report["hashes"], {**runtime, **keep})
        if box.config.judge_area:
            area = box.judge_exec(["sh", "-c", _AREA_WIPE, "arex-area-wipe", JUDGE_AREA], timeout=60)
            if not area.ok or area.stdout.strip():
                problems.append(
                    f"the judge's private area is not empty: {area.stdout.strip()[:200]!r} {area.stderr.strip()[:200]}"
                )
        return problems

    def _hash_problems(self, hashes: dict[str, str], expected: dict[str, str]) -> list[str]:
        """Files grading relies on whose sha256 is not `expected`'s, or the reference runtime's."""
        problems = []
        with self._cond:
            if not self._runner:  # the first container's runtime binaries are the reference
                self._runner = {p: h for p, h in hashes.items() if p.startswith(RUNTIME + "/") and p not in expected}
            reference = {**self._runner, **expected}
        for path in sorted(set(reference) | {p for p in hashes if p.startswith(RUNTIME + "/")}):
            if hashes.get(path) != reference.get(path):
                problems.append(
                    f"{path} changed (sha256 {str(hashes.get(path))[:16]}, expected {str(reference.get(path))[:16]})"
                )
        return problems

    def close(self) -> None:
        """Remove every container; leases in use are removed when they come back."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._total -= len(idle)
            self._cond.notify_all()
        if idle:  # removed at once: a removal is mostly waiting for the engine
            with ThreadPoolExecutor(max_workers=len(idle)) as workers:
                list(workers.map(Lease.stop, idle))
        with self._cond:
            threads = list(self._threads)
        for thread in threads:  # a lease being started or cleaned is removed by its thread
            thread.join(timeout=CLOSE_WAIT_S)


def _outcome(result: GradeResult) -> tuple:
    """What two gradings of one submission must agree on to share a result: the scores and each
    test's verdict and ratio (times and memory vary from run to run and decide no verdict here)."""
    tests = tuple((t["name"], t["verdict"], t["ratio"], t["raw"]) for t in result.details.get("tests", []))
    return result.public_score, result.held_out_score, result.held_out_raw, tests


class GradingPools:
    """One GradingPool per env (and grading config) for a batch; `close()` removes them all."""

    def __init__(self, cap: int = 4):
        self.cap = max(1, cap)
        self._pools: dict[str, GradingPool] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, key: str, make: Callable[[int], GradingPool]) -> GradingPool:
        """The pool under `key`, made by `make(cap)` on first use."""
        with self._lock:
            if self._closed:
                raise SandboxError("the batch's grading pools are closed")
            if key not in self._pools:
                self._pools[key] = make(self.cap)
            return self._pools[key]

    def pools(self) -> list[GradingPool]:
        with self._lock:
            return list(self._pools.values())

    def close(self) -> None:
        """Close every pool, at once: the batch's end waits for the slowest removal, not their sum."""
        with self._lock:
            self._closed = True
            pools, self._pools = list(self._pools.values()), {}
        if pools:
            with ThreadPoolExecutor(max_workers=len(pools)) as workers:
                list(workers.map(GradingPool.close, pools))


class SandboxesAhead:
    """Agent sandboxes started ahead for rollouts waiting for the batch's concurrency limit, at
    most `ahead` at once, in the order the rollouts wait. Each is taken by exactly one rollout
    (`take`); one nobody takes is removed by `close()`."""

    def __init__(self, ahead: int = 2):
        self.ahead = ahead
        self._waiting: list[str] = []  # keys in waiting order
        self._plans: dict[str, Callable[[], Sandbox | None]] = {}
        self._started: dict[str, asyncio.Future] = {}
        self._closed = False

    def want(self, key: str, plan: Callable[[], Sandbox | None]) -> None:
        """Rollout `key` is waiting; `plan()` (run in a worker thread) starts its sandbox, or
        returns None if it needs none (its record is finished)."""
        if self.ahead < 1:
            return
        self._waiting.append(key)
        self._plans[key] = plan
        self._fill()

    def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        for key in self._waiting:
            if len(self._started) >= self.ahead or self._closed:
                return
            if key not in self._started:
                self._started[key] = loop.run_in_executor(None, self._plans[key])

    def first(self, wave: list[tuple[str, Callable[[], Sandbox | None]]]) -> None:
        """Start the sandboxes of the rollouts that run first, all at once (beyond `ahead`): the
        batch starts them while it asks the teacher's identity, and they take them right after."""
        loop = asyncio.get_running_loop()
        for key, plan in wave if not self._closed else ():
            self._started[key] = loop.run_in_executor(None, plan)

    def take(self, key: str) -> "asyncio.Future[Sandbox | None] | None":
        """The start of rollout `key`'s sandbox (it may still be running), or None if none was
        started for it. The caller owns it: it removes the sandbox if it does not use it."""
        if key in self._waiting:
            self._waiting.remove(key)
        self._plans.pop(key, None)
        started = self._started.pop(key, None)
        self._fill()
        return started

    def close(self) -> None:
        """Remove the sandboxes started for no rollout (the batch ended or stopped)."""
        self._closed = True
        for future in list(self._started.values()):
            future.add_done_callback(stop_started)
        self._started.clear()
        self._waiting.clear()


def stop_started(future: asyncio.Future) -> None:
    """Done-callback of a sandbox start nobody uses: remove the sandbox it started, if any."""
    if not future.cancelled() and future.exception() is None and future.result() is not None:
        future.result().stop()
