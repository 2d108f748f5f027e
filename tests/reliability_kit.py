"""Test-side helpers of the reliability suites: tally envs, the killable child process
(tests/reliability_runner.py), a server that keeps its counts per rollout, and the audit of a
trajectory store (duplicates, workspace/record disagreements, corrupt files, spend)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from arex.record.snapshots import SnapshotStore, read_member
from arex.record.trajectory import load
from arex.teacher.config import Price
from arex.teacher.scripted import ScriptedServer

RUNNER = Path(__file__).with_name("reliability_runner.py")
PRICE = Price(input=1e6, output=2e6, cached_input=0.5e6)
"""$1 a prompt token, $0.5 a cached one, $2 a completion token: every cost is a multiple of $0.5,
exact in floating point, so totals can be compared with ==."""
_ROUND_LINE = re.compile(r"round-(\d+)")


def make_tally_env(root: Path, env_id: str, title: str | None = None) -> Path:
    """A tally env folder (the kind of tests/loop_kit.py): the score is answer.txt / 10."""
    folder = root / env_id
    (folder / "workspace").mkdir(parents=True)
    (folder / "task.yaml").write_text(f"kind: tally\nid: {env_id}\ntitle: {title or 'Tally ' + env_id}\n")
    (folder / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
    (folder / "workspace" / "answer.txt").write_text("1\n")
    (folder / "workspace" / "rules.txt").write_text("do not edit\n")
    return folder


def notes_commands(n: int) -> list[str]:
    """Round n appends its number to notes.txt, sets the answer, and shows the notes."""
    return [f'echo "round-{n} ✓" >> notes.txt', f"echo {n + 1} > answer.txt", "cat notes.txt"]


# -- the child process ---------------------------------------------------------------------------
@dataclass
class Outcome:
    killed: bool
    where: str
    """The pause point it was killed at, `random:<phase>` (a kill after a random delay, with the
    phase then under way), or `finished`."""
    pid: int
    returncode: int | None
    tokens: int = 0
    """Teacher tokens held only in memory at the kill (reported by the child)."""
    cost: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    """How often each pause point was reached (a finished child's census)."""


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]  # complete lines only


def _open_phase(lines: list[str]) -> str:
    """The most recently begun phase that had not ended."""
    order: list[str] = []
    for line in lines:
        kind, _, phase = line.partition(" ")
        if kind == "begin":
            order.append(phase)
        elif kind == "end" and phase in order:
            del order[len(order) - 1 - order[::-1].index(phase)]
    return order[-1] if order else "idle"


class _Process:
    """A child started directly (python tests/reliability_runner.py ...)."""

    def __init__(self, args: list[str], log: Path, env: dict):
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(RUNNER), *args], env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
            )
        self.pid = self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class Zygote:
    """`reliability_runner.py serve`: forks each child from one process that has imported
    everything (tests/reliability_runner.py). A context manager; one child at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(RUNNER), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.messages: queue.Queue = queue.Queue()
        self.exits: dict[int, int] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def _next(self, timeout: float | None) -> dict | None:
        message = self.messages.get(timeout=timeout)
        if message is None:
            raise AssertionError(f"the reliability runner server exited ({self.proc.poll()})")
        if "exit" in message:
            self.exits[message["exit"]] = message["code"]
        return message

    def start(self, args: list[str], log: Path, env: dict) -> "_Forked":
        self.proc.stdin.write(json.dumps({"args": args, "env": env, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        return _Forked(self, self._next(120)["pid"])

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "Zygote":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Forked:
    def __init__(self, zygote: Zygote, pid: int):
        self.zygote, self.pid = zygote, pid

    def poll(self) -> int | None:
        while self.pid not in self.zygote.exits and not self.zygote.messages.empty():
            self.zygote._next(None)
        return self.zygote.exits.get(self.pid)

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self.zygote._next(min(left, 0.05))
            except queue.Empty:
                pass
        return self.poll()


def run_child(
    args: list[str],
    events: Path,
    pause: str | None = None,
    delay: float | None = None,
    env: dict | None = None,
    timeout: float = 240.0,
    zygote: Zygote | None = None,
    until=None,
) -> Outcome:
    """Run the runner (forked by `zygote`, or as a new process); with `pause` (`phase:n[:cut]`)
    SIGKILL it once it pauses there (and, with `until`, once `until()` is true too: what the rest
    of the child did while one part of it was held), with `delay` SIGKILL it that many seconds
    after it is ready; otherwise let it finish. A child that fails by itself fails the test with
    its output."""
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_text("")
    log = events.with_suffix(".out")
    environ = {"AREX_REL_EVENTS": str(events), "AREX_REL_PAUSE": pause or "", **(env or {})}
    child = zygote.start(args, log, environ) if zygote else _Process(args, log, environ)
    deadline = time.monotonic() + timeout
    try:
        wanted = "paused" if pause else ("ready" if delay is not None else None)
        while wanted and child.poll() is None and not any(line.startswith(wanted) for line in _lines(events)):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the child did not reach {wanted!r} in {timeout:g}s: {log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.005)  # polling the child's event log
        while until is not None and child.poll() is None and not until():
            if time.monotonic() > deadline:
                raise AssertionError(f"the child paused, but {until.__doc__ or 'the condition'} never held")
            time.sleep(0.01)  # polling the child's output
        if delay is not None and child.poll() is None:
            child.wait(delay)
        if (pause or delay is not None) and child.poll() is None:
            lines = _lines(events)
            os.kill(child.pid, signal.SIGKILL)
            code = child.wait(30)
            paused = next((line.split() for line in lines if line.startswith("paused")), None)
            if paused:
                spend = dict(part.split("=") for part in paused[3:])
                return Outcome(True, paused[1], child.pid, code, int(spend["tokens"]), float(spend["cost"]))
            return Outcome(True, f"random:{_open_phase(lines)}", child.pid, code)
        code = child.wait(max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(30)
    if code != 0:
        raise AssertionError(f"the child exited {code}: {log.read_text(errors='replace')[-3000:]}")
    counts = next((json.loads(line[7:]) for line in _lines(events) if line.startswith("counts ")), {})
    return Outcome(False, "finished", child.pid, code, counts=counts)


def rollout_args(spec: dict) -> list[str]:
    return ["rollout", json.dumps(spec)]


# -- a server that counts per rollout --------------------------------------------------------------
class CountingServer(ScriptedServer):
    """The scripted server, with its own token counts kept per rollout too (the env named in the
    request's system prompt, `# Task: Tally <env>`) and its cost at PRICE."""

    _TASK = re.compile(r"# Task: Tally (\S+)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.per_env: dict[str, Counter] = {}

    @classmethod
    def env_of(cls, request: dict) -> str:
        for message in request.get("messages", [])[:1]:
            match = cls._TASK.search(str(message.get("content", "")))
            if match:
                return match.group(1)
        return "?"

    def _completion(self, request: dict, reply) -> dict:
        body = super()._completion(request, reply)
        usage = body["usage"]
        with self._lock:
            counts = self.per_env.setdefault(self.env_of(request), Counter())
            counts["billed"] += 1
            counts["prompt_tokens"] += usage["prompt_tokens"]
            counts["completion_tokens"] += usage["completion_tokens"]
            counts["cached_tokens"] += usage["prompt_tokens_details"]["cached_tokens"]
        return body

    def spend(self, env: str) -> tuple[int, float]:
        """(tokens, dollars) the server billed for `env`'s requests."""
        c = self.per_env.get(env, Counter())
        cost = (
            (c["prompt_tokens"] - c["cached_tokens"]) * PRICE.input / 1e6
            + c["cached_tokens"] * PRICE.cached_input / 1e6
            + c["completion_tokens"] * PRICE.output / 1e6
        )
        return c["prompt_tokens"] + c["completion_tokens"], cost


def total_billed(server: ScriptedServer) -> int:
    return server.stats["prompt_tokens"] + server.stats["completion_tokens"]


# -- reading a record as lines ---------------------------------------------------------------------
def raw_lines(path: Path) -> tuple[list[dict], int]:
    """The record's lines that parse, and how many do not (a cut last line counts)."""
    good, bad = [], 0
    for chunk in path.read_bytes().split(b"\n"):
        if not chunk:
            continue
        try:
            value = json.loads(chunk.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            bad += 1
            continue
        good.append(value)
    return good, bad


def line_spend(data: dict) -> tuple[int, float]:
    """(tokens, dollars) of the teacher calls one record line carries: a step's call, a round_end's
    reflection call, a `spent` line's totals."""
    call = data.get("call") or (data.get("reflection") or {}).get("call")
    if isinstance(call, dict):
        return call.get("prompt_tokens", 0) + call.get("completion_tokens", 0), call.get("cost_usd", 0.0)
    if data.get("type") == "spent":
        return data.get("prompt_tokens", 0) + data.get("completion_tokens", 0), data.get("cost_usd", 0.0)
    return 0, 0.0


def record_spend(path: Path) -> tuple[int, float]:
    """(tokens, dollars) summed over every call the record holds (steps, reflections, spent lines)."""
    lines, _ = raw_lines(path)
    tokens, cost = 0, 0.0
    for line in lines:
        t, c = line_spend(line)
        tokens, cost = tokens + t, cost + c
    return tokens, cost


def end_line(path: Path) -> dict | None:
    lines, _ = raw_lines(path)
    return next((line for line in reversed(lines) if line.get("type") == "end"), None)


# -- auditing a store -------------------------------------------------------------------------------
@dataclass
class Audit:
    records: int = 0
    rounds: int = 0
    finished: int = 0
    duplicate_rounds: int = 0
    missing_rounds: int = 0
    disagreements: int = 0
    corrupt_files: int = 0
    stray_files: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        self.problems.append(problem)


def _rounds_listed(text: str) -> list[int]:
    return [int(n) for n in _ROUND_LINE.findall(text)]


def audit_store(store: Path, rounds: int) -> Audit:
    """Every record under `store` against what notes_commands rollouts of `rounds` rounds must leave."""
    audit = Audit()
    for path in sorted(store.glob("*/*.jsonl")):
        audit.records += 1
        _audit_record(path, rounds, audit)
    for leftover in sorted(store.rglob("*")):
        if leftover.is_file() and (leftover.suffix == ".tmp" or leftover.name.startswith(".partial-")):
            audit.stray_files += 1
            audit.add(f"{leftover}: a temporary file left behind")
    return audit


def _audit_record(path: Path, rounds: int, audit: Audit) -> None:
    lines, bad = raw_lines(path)
    try:
        record = load(path)
    except Exception as exc:  # noqa: BLE001 - any failure to load is a corrupt file
        audit.corrupt_files += 1
        audit.add(f"{path}: does not load: {type(exc).__name__}: {exc}")
        return
    if bad:
        audit.corrupt_files += 1
        audit.add(f"{path}: {bad} line(s) that are not JSON")
    kinds = Counter(line.get("type") for line in lines)
    ends = Counter(line["round"] for line in lines if line.get("type") == "round_end")
    starts = Counter(line["round"] for line in lines if line.get("type") == "round_start")
    audit.duplicate_rounds += sum(n - 1 for n in ends.values() if n > 1) + sum(
        max(0, n - ends[r]) for r, n in starts.items()
    )
    audit.missing_rounds += len(set(range(1, rounds + 1)) - set(ends))
    audit.rounds += len(record.rounds)
    if kinds["header"] != 1 or kinds["end"] != 1:
        audit.add(f"{path}: {kinds['header']} header and {kinds['end']} end lines")
    if record.end is not None and record.end.status == "done" and record.end.rounds == rounds and kinds["end"] == 1:
        audit.finished += 1
    else:
        audit.add(f"{path}: ended {record.end}")
    for r in record.rounds:
        if [s.step for s in r.steps] != list(range(len(r.steps))):
            audit.duplicate_rounds += 1
            audit.add(f"{path} round {r.number}: steps numbered {[s.step for s in r.steps]}")
    _audit_workspaces(path, record, audit)


def _audit_workspaces(path: Path, record, audit: Audit) -> None:
    """Each round saw the notes of rounds 1..n once each; each kept snapshot holds them and the
    recorded submission; the last round's snapshot is kept; nothing else is in the store."""
    store = SnapshotStore(path.with_suffix("") / "snapshots")
    for r in record.rounds:
        expected = list(range(1, r.number + 1))
        shown = next((s.observation for s in r.steps if s.action.command == "cat notes.txt"), None)
        if shown is None or _rounds_listed(shown) != expected:
            audit.disagreements += 1
            audit.add(
                f"{path} round {r.number}: the workspace showed rounds"
                f" {None if shown is None else _rounds_listed(shown)}"
            )
        sha = r.end.snapshot
        if sha is None or not store.has(sha):
            if r is record.rounds[-1]:
                audit.disagreements += 1
                audit.add(f"{path} round {r.number}: the last round's snapshot is not kept")
            continue
        try:
            notes = read_member(store.path(sha), "notes.txt", 1 << 20).decode()
            answer = read_member(store.path(sha), "answer.txt", 1 << 20).decode()
        except Exception as exc:  # noqa: BLE001 - an unreadable snapshot is a corrupt file
            audit.corrupt_files += 1
            audit.add(f"{path} round {r.number}: snapshot unreadable: {exc}")
            continue
        if _rounds_listed(notes) != expected or answer != r.end.submission:
            audit.disagreements += 1
            audit.add(
                f"{path} round {r.number}: its snapshot holds rounds {_rounds_listed(notes)}"
                f" and answer {answer!r} (recorded {r.end.submission!r})"
            )
    if record.rounds:
        kept = {record.rounds[0].end.snapshot, record.rounds[-1].end.snapshot}
        kept |= {
            r.end.snapshot
            for r in record.rounds
            if record.end and record.end.best and r.number == record.end.best.round
        }
        archives = {p.name for p in store.folder.glob("*")} if store.folder.is_dir() else set()
        stray = archives - {f"{sha}.tar" for sha in kept if sha}
        if stray:
            audit.stray_files += len(stray)
            audit.add(f"{path}: snapshots no kept round names: {sorted(stray)}")


def show(capsys, title: str, figures: dict) -> None:
    """Print a suite's figures (shown even when pytest captures output)."""
    width = max(len(k) for k in figures)
    with capsys.disabled():
        print(f"\n== {title}")
        for key, value in figures.items():
            print(f"   {key:<{width}}  {value}")
