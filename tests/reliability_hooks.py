"""Pause points and an event log for the reliability suites, installed in a child process
(tests/reliability_runner.py) that the test SIGKILLs.

The child appends one event a line to the file named by AREX_REL_EVENTS: `ready` (imports done,
work about to start), `begin <phase>` / `end <phase>` around each phase (so a kill after a random
delay can be placed), `paused <phase> <n> tokens=<t> cost=<c>` and, when it exits by itself,
`counts <json>` (how often each pause point was reached: a census for choosing kill points).

AREX_REL_PAUSE=`<phase>:<n>[:<cut>]`: the n-th time the child reaches <phase> it logs `paused`
and blocks, so the test's SIGKILL lands exactly there. Pause points:

- call:     a step's teacher reply has arrived and is counted, nothing of it recorded yet
- reflect:  the reflection reply has arrived, the round_end not yet written
- step:     an agent command has run in the sandbox, its step line not yet written
- snapshot: the workspace archive is written to its temporary file, not yet stored under its hash
- grade:    the snapshot is stored, the grade not yet returned (nor the round_end written)
- prune:    a round_end is written, the archives no round names any more not yet deleted
- regrade:  `arex select` is re-grading a round from its archive
- write:    part of a record line is written (<cut> in (0, 1): where, in bytes; a `u` suffix moves
            the cut inside a multibyte UTF-8 character when the line has one)
- fs:       just before a file-system commit (rename, replace, move, rmtree, unlink, write_text,
            write_bytes, open for writing)
- wtext:    `Path.write_text` has written the first half of its text (a kill in the middle of a write)

`tokens`/`cost` in a `paused` event are the teacher tokens and dollars the child has been paid
for and holds only in memory at that moment (the call just received, or the calls in the line
being cut), which the kill loses: what the record cannot know about.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from loop_kit import TallyEnv
from process_sandbox import ProcessSandbox
from reliability_kit import line_spend

from arex.envs import runtime
from arex.envs.runtime import Grading
from arex.record.snapshots import read_member
from arex.record.trajectory import RecordWriter
from arex.sandbox import make_sandbox
from arex.sandbox.base import BACKENDS
from arex.teacher.client import TeacherClient

REFLECT_MARK = "Reflect, then write"


class Probe:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.configure()

    def configure(self) -> None:
        """Read AREX_REL_EVENTS and AREX_REL_PAUSE (again: a forked child has its own)."""
        self.counts: dict[str, int] = {}
        events = os.environ.get("AREX_REL_EVENTS")
        self.log = open(events, "a", buffering=1, encoding="utf-8") if events else None  # noqa: SIM115 - lives as long as the process
        parts = (os.environ.get("AREX_REL_PAUSE") or "").split(":")
        self.phase = parts[0] or None
        self.nth = int(parts[1]) if len(parts) > 1 else 0
        self.cut = parts[2] if len(parts) > 2 else "0.5"
        self.ready = time.monotonic()

    def event(self, text: str) -> None:
        if text == "ready":
            self.ready = time.monotonic()
        if self.log is not None:
            with self.lock:
                self.log.write(text + "\n")

    def reached(self, phase: str) -> bool:
        with self.lock:
            n = self.counts[phase] = self.counts.get(phase, 0) + 1
        return phase == self.phase and n == self.nth

    def hold(self, phase: str, tokens: int = 0, cost: float = 0.0) -> None:
        self.event(f"paused {phase} {self.nth} tokens={tokens} cost={cost!r}")
        time.sleep(120)
        os._exit(97)  # the test kills us long before this

    def point(self, phase: str, tokens: int = 0, cost: float = 0.0) -> None:
        if self.reached(phase):
            self.hold(phase, tokens, cost)

    @contextmanager
    def span(self, phase: str):
        self.event(f"begin {phase}")
        try:
            yield
        finally:
            self.event(f"end {phase}")


PROBE = Probe()


# -- record writes -------------------------------------------------------------------------------
class _CutFile:
    """Stands in for a record file for one write: writes the first part of it, then pauses."""

    def __init__(self, handle, cut: str, spend: tuple[int, float]):
        self.handle, self.cut, self.spend, self.used = handle, cut, spend, False

    def write(self, data: str) -> int:
        self.used = True
        raw = data.encode("utf-8")
        at = max(1, min(len(raw) - 1, int(len(raw) * float(self.cut.rstrip("u")))))
        if self.cut.endswith("u"):  # inside a multibyte character, if there is one from here on
            later = next((i for i in range(at, len(raw) - 1) if raw[i] >= 0xC0), None)
            earlier = next((i for i in range(at, 0, -1) if raw[i] >= 0xC0), None)
            start = later if later is not None else earlier
            at = start + 1 if start is not None else at
        self.handle.flush()
        buffer = getattr(self.handle, "buffer", None)
        if buffer is not None:
            buffer.write(raw[:at])
            buffer.flush()
        else:
            self.handle.write(
                raw[:at] if "b" in getattr(self.handle, "mode", "") else raw[:at].decode("utf-8", "ignore")
            )
            self.handle.flush()
        PROBE.hold("write", *self.spend)
        return len(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)


def _hook_writer() -> None:
    original = RecordWriter.write

    def write(self, line):
        with PROBE.span("write"):
            if not PROBE.reached("write"):
                return original(self, line)
            handle = getattr(self, "_file", None)
            cut = _CutFile(handle, PROBE.cut, line_spend(line.model_dump())) if handle is not None else None
            if cut is not None:
                self._file = cut
            try:
                original(self, line)
            finally:
                if cut is not None:
                    self._file = handle
            PROBE.hold("write", 0, 0.0)  # the writer did not write through its file: pause after the line

    RecordWriter.write = write


# -- teacher calls --------------------------------------------------------------------------------
def _hook_teacher() -> None:
    original = TeacherClient.chat

    async def chat(self, messages, **overrides):
        last = messages[-1].get("content", "") if messages else ""
        phase = "reflect" if REFLECT_MARK in str(last) else "call"
        with PROBE.span(phase):
            call = await original(self, messages, **overrides)
        PROBE.point(phase, call.prompt_tokens + call.completion_tokens, call.cost_usd)
        return call

    TeacherClient.chat = chat


# -- sandboxes and grading --------------------------------------------------------------------------
def _hooked_exec(original):
    def exec_(self, command, *args, **kwargs):
        step = isinstance(command, str)  # the agent's commands; arex's own are argv lists
        with PROBE.span("step" if step else "exec"):
            result = original(self, command, *args, **kwargs)
        if step:
            PROBE.point("step")
        return result

    return exec_


def _hooked_archive(original):
    def archive(self, sandbox_dir, dest, max_bytes):
        with PROBE.span("snapshot"):
            size = original(self, sandbox_dir, dest, max_bytes)
            if PROBE.reached("snapshot"):
                dest.flush()
                PROBE.hold("snapshot")
        return size

    return archive


def _spanned(original, phase: str):
    def method(self, *args, **kwargs):
        with PROBE.span(phase):
            return original(self, *args, **kwargs)

    return method


class HookedProcessSandbox(ProcessSandbox):
    exec = _hooked_exec(ProcessSandbox.exec)
    archive = _hooked_archive(ProcessSandbox.archive)
    start = _spanned(ProcessSandbox.start, "sandbox-start")
    restore = _spanned(ProcessSandbox.restore, "sandbox-restore")
    stop = _spanned(ProcessSandbox.stop, "sandbox-stop")


class HookedTally(TallyEnv):
    """tests/loop_kit.py's TallyEnv with pause points in grading and re-grading."""

    def grade_round(self, sandbox, grading, store):
        with PROBE.span("grade"):
            return super().grade_round(sandbox, grading, store)

    def _grade(self, data, text, grading, log):
        PROBE.point("grade")
        return super()._grade(data, text, grading, log)

    def regrade(self, archive, end, base):
        with PROBE.span("regrade"):
            if base.backend == "docker":
                return self._regrade_in(base, archive)
            PROBE.point("regrade")
            return super().regrade(archive, end, base)

    def _regrade_in(self, base, archive):
        """Re-grade in a fresh sandbox of `base`, as judge and ML envs do; the pause point is
        reached with the sandbox up (a kill there leaves it to whoever cleans up)."""
        data = read_member(archive, self.submission_path, 1 << 20)
        with make_sandbox(base, name="tally-regrade") as box:
            box.write_file(f"{base.workdir}/answer.txt", data)
            PROBE.point("regrade")
            text = box.exec("cat answer.txt").stdout
        return self._grade(data, text, Grading(), "")


# -- file-system commits ----------------------------------------------------------------------------
def _fs(original, name: str):
    def hooked(*args, **kwargs):
        with PROBE.span("fs"):
            PROBE.event(f"fs-op {PROBE.counts.get('fs', 0) + 1} {name} {args[0] if args else ''}")
            PROBE.point("fs")
            return original(*args, **kwargs)

    return hooked


def _hook_fs() -> None:
    os.replace, os.rename = _fs(os.replace, "os.replace"), _fs(os.rename, "os.rename")
    shutil.move, shutil.rmtree = _fs(shutil.move, "shutil.move"), _fs(shutil.rmtree, "shutil.rmtree")
    for name in ("rename", "replace", "unlink", "write_text", "write_bytes"):
        setattr(Path, name, _fs(getattr(Path, name), f"Path.{name}"))
    opener = Path.open

    def open_(self, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            with PROBE.span("fs"):
                PROBE.event(f"fs-op {PROBE.counts.get('fs', 0) + 1} Path.open({mode}) {self}")
                PROBE.point("fs")
        return opener(self, mode, *args, **kwargs)

    Path.open = open_


def _hook_text_writes() -> None:
    """The `wtext` pause point: the n-th Path.write_text writes half of its text, then pauses."""
    original = Path.write_text

    def write_text(self, data, encoding=None, errors=None, newline=None):
        if not PROBE.reached("wtext"):
            return original(self, data, encoding, errors, newline)
        with open(self, "w", encoding=encoding or "utf-8", errors=errors, newline=newline) as handle:
            handle.write(data[: len(data) // 2])
            handle.flush()
        PROBE.hold("wtext")

    Path.write_text = write_text


def _hook_prune() -> None:
    from arex.rollout.keep import Keeper

    original = Keeper.prune

    def prune(self):
        with PROBE.span("prune"):
            PROBE.point("prune")
            return original(self)

    Keeper.prune = prune


def install(backend: str) -> None:
    """Register the tally kind and the process backend (as the `tally_kind` fixture does)
    and put every pause point in place."""
    runtime.KINDS["tally"] = HookedTally
    BACKENDS["process"] = "reliability_hooks:HookedProcessSandbox"
    if backend == "docker":
        from arex.sandbox.docker import DockerSandbox

        DockerSandbox.exec = _hooked_exec(DockerSandbox.exec)
        DockerSandbox.archive = _hooked_archive(DockerSandbox.archive)
        for name in ("start", "restore", "stop"):
            setattr(DockerSandbox, name, _spanned(getattr(DockerSandbox, name), f"sandbox-{name}"))
    _hook_writer()
    _hook_teacher()
    _hook_prune()
    _hook_fs()
    _hook_text_writes()


def counts_event() -> None:
    counts = {**PROBE.counts, "_seconds": round(time.monotonic() - PROBE.ready, 3)}  # the work, after `ready`
    PROBE.event("counts " + json.dumps(counts, sort_keys=True))
