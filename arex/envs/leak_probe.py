"""The host side of the ML leak gate: which held-out rows to look for and how to recognise them (the
probe), running `leak_scan` in the env's sandbox as the agent's user, and reading its report."""

from __future__ import annotations

import fcntl
import gzip
import json
import threading
import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ValidationError

from arex.envs import leak_scan
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.leak_scan import norm
from arex.hashing import cache_dir, text_sha256
from arex.sandbox import SandboxError, backend_class, make_sandbox
from arex.sandbox.base import Sandbox, SandboxConfig
from arex.specs import DataSpec

PROBE_CAP = 5000
"""Held-out rows probed at most (a deterministic sample by id): enough to see any leak, cheap to match."""
PROBE_VALUES = 2_000_000
"""Feature values sent at most (the probe sits in the sandbox's /tmp)."""
KEYS_PER_ROW = 3
STARTS = 64
"""Wide rows are keyed by runs starting at this many evenly spaced columns (counting every run of
every row would cost rows × columns per size)."""
WINDOWS = (1, 2, 4, 8, 16, 32)
"""Sizes of runs of consecutive feature values tried as a row's keys, smallest first."""
SCAN_DIR = "/tmp/.arex-leak"
SCAN_TIMEOUT = 1800.0


class ProbeRow(BaseModel):
    label: str
    features: list[str]
    """Normalised feature values in table order (to tell a label column from a copy of a feature)."""
    keys: list[list[str]]
    """Runs of consecutive feature values no other row of the table has: a record holding one is this row."""
    sets: list[list[str]] = []
    """Values (repeated as often as the row holds them, rarest first) no other row of the table holds
    all of, in any columns: a record holding them is this row even with its columns reordered."""
    id: str | None = None
    """The row's id, when it appears nowhere among the table's values (else it identifies nothing)."""
    pos: int | None = None
    """The row's place in the table, when arex made the ids (the id is then that place)."""


class LeakProbe(BaseModel):
    """What the scanner looks for: held-out rows (public and private) that no training row duplicates."""

    rows: list[ProbeRow]
    chance: float
    """The majority-label rate among the probed rows: a column must beat it by far."""
    held_out: int
    table_rows: int
    duplicates: int
    """Held-out rows whose features equal a training row's: the training file holds their labels legitimately."""


class FoundLeak(BaseModel):
    path: str
    recovered: int
    matched: int
    of: int
    column: str
    how: str


class UnreadableFile(BaseModel):
    path: str
    reason: str


class LeakReport(BaseModel):
    files: int
    records: int
    bytes: int
    denied: int
    truncated: int
    kinds: dict[str, int]
    seconds: float
    leaks: list[FoundLeak]
    unreadable: list[UnreadableFile]
    indexed: int = 0
    """Files of the dependency image left unread: unchanged, and its index says this probe's rows are not in them."""
    cpu_seconds: float = 0.0
    models: list[str] = []
    """Pickled models read (their kept rows searched like any table): what else they were fitted on cannot be read."""
    index: str = ""
    """The dependency image whose index planned the scan ('' for a scan of every file)."""


class LeakScanFailed(RuntimeError):
    """The scanner itself did not finish (crash, timeout): the gate fails with its output."""


# -- the probe -----------------------------------------------------------------------------------------
def build_probe(data: DataSpec, columns: list[str], train: list[dict], held_out: list[dict]) -> LeakProbe:
    """Held-out rows not duplicated by a training row, each with its label, its keys, and its id or
    place where those identify it."""
    features = [c for c in columns if c not in (data.target, data.id_column)]

    def values(row: dict) -> list[str]:
        return [norm(row.get(c)) for c in features]

    seen = {tuple(values(r)) for r in train}
    probed = [r for r in held_out if tuple(values(r)) not in seen]
    duplicates = len(held_out) - len(probed)
    cap = min(PROBE_CAP, max(200, PROBE_VALUES // max(1, len(features))))  # wide tables: fewer rows, same probe size
    probed = sorted(probed, key=lambda r: text_sha256(str(r[data.id_column])))[:cap]
    table = [values(r) for r in train + held_out]
    keys = row_keys([values(r) for r in probed], table)
    sets = set_keys([values(r) for r in probed], table)
    taken = {v for row in table for v in row} | {norm(r[data.target]) for r in train + held_out}
    ids = [str(r[data.id_column]) for r in train + held_out]
    positional = all(i.isdigit() for i in ids) and sorted(map(int, ids)) == list(range(len(ids)))
    rows = []
    for r, row_keys_, row_sets in zip(probed, keys, sets):
        ident = norm(r[data.id_column])
        rows.append(
            ProbeRow(
                label=norm(r[data.target]),
                features=values(r),
                keys=row_keys_,
                sets=row_sets,
                id=ident if ident and ident not in taken else None,
                pos=int(r[data.id_column]) if positional else None,
            )
        )
    labels = Counter(row.label for row in rows)
    chance = max(labels.values()) / len(rows) if rows else 0.0
    return LeakProbe(rows=rows, chance=chance, held_out=len(held_out), table_rows=len(table), duplicates=duplicates)


def row_keys(probed: list[list[str]], table: list[list[str]]) -> list[list[list[str]]]:
    """For each probed row, up to KEYS_PER_ROW runs of consecutive values that no other row of `table`
    holds anywhere (shortest runs first, spread across the row); the whole row if none is unique."""
    keys: list[list[list[str]]] = [[] for _ in probed]
    width = max((len(r) for r in probed), default=0)
    for size in [s for s in WINDOWS if s < width] + [width]:
        pending = [i for i, k in enumerate(keys) if len(k) < KEYS_PER_ROW]
        if not pending or size == 0:
            break
        windows = {i: _windows(probed[i], size) for i in pending}
        wanted = {w for ws in windows.values() for _, w in ws}
        counts: Counter = Counter()
        for row in table:
            counts.update({w for _, w in _windows(row, size)} & wanted)
        for i in pending:
            taken_until = -1
            for start, w in windows[i]:
                if counts[w] == 1 and start > taken_until and len(keys[i]) < KEYS_PER_ROW and list(w) not in keys[i]:
                    keys[i].append(list(w))
                    taken_until = start + size - 1
    for i, row in enumerate(probed):
        if not keys[i] and any(row):
            keys[i].append(list(row))  # a row another held-out row duplicates: found by all its values
    return keys


SET_CELLS = 20_000_000
"""Table cells at most for which keys in any column order are worked out (their index is in memory)."""
SET_SIZE = 12
"""Values in one such key at most: more and a record holding them all is no longer a short lookup."""


def set_keys(probed: list[list[str]], table: list[list[str]]) -> list[list[list[str]]]:
    """For each probed row, the fewest of its values (rarest first, each as often as the row holds it)
    that no other row of `table` holds all of, in any columns; none if no such set of SET_SIZE exists,
    or if the row has one value only (its ordered key is already order-free)."""
    if sum(len(r) for r in table) > SET_CELLS:
        return [[] for _ in probed]
    holders: dict[tuple[str, int], list[int]] = {}
    for i, row in enumerate(table):
        for v, c in Counter(row).items():
            if v:
                for m in range(1, c + 1):
                    holders.setdefault((v, m), []).append(i)
    out = []
    for row in probed:
        items = sorted(((v, c) for v, c in Counter(row).items() if v), key=lambda vc: len(holders.get(vc, ())))
        left: set[int] | None = None
        chosen: list[tuple[str, int]] = []
        for v, c in items[:SET_SIZE] if len(row) > 1 else ():
            rows = holders.get((v, c), [])
            left = set(rows) if left is None else left.intersection(rows)
            chosen.append((v, c))
            if len(left) <= 1:
                break
        out.append([[v for v, c in chosen for _ in range(c)]] if left is not None and len(left) <= 1 else [])
    return out


def _windows(row: list[str], size: int) -> list[tuple[int, tuple[str, ...]]]:
    count = len(row) - size + 1
    starts = range(count) if count <= STARTS else sorted({j * count // STARTS for j in range(STARTS)})
    return [(j, tuple(row[j : j + size])) for j in starts if all(row[j : j + size])]


# -- running the scanner -------------------------------------------------------------------------------
SCAN_LOG: list[dict] = []
"""Every scan this process ran: image, dependency image, files read, CPU-seconds (for benchmarks)."""
_index_lock = threading.Lock()


def run_scan(box: Sandbox, probe: LeakProbe, full: bool = False) -> LeakReport:
    """The scanner over the sandbox's whole filesystem, as the agent's user; its probe and report sit in
    a folder it skips. The dependency image's files are read only where its index (built once per
    image, cached) says this probe's rows could be, or they changed; `full` reads every file."""
    dependency = None if full else dependency_image(box.config)
    plan, planning = None, time.process_time()
    index = None
    if dependency is not None:
        try:
            index = image_index(dependency, box.config)
        except LeakScanFailed as exc:  # no index: this scan reads every file, as before, and says so
            SCAN_LOG.append({"index_failed": dependency, "reason": str(exc)})
            dependency = None
    if index is not None:
        plan = {
            "files": {path: entry[:2] for path, entry in index["files"].items()},
            "rescan": leak_scan.plan_rescan(index, json.loads(probe.model_dump_json())),
            "always": [IMAGE_WORKSPACE, "/workspace"],
        }
    planning = time.process_time() - planning
    box.write_file(f"{SCAN_DIR}/leak_scan.py", Path(leak_scan.__file__).read_bytes())
    box.write_file(f"{SCAN_DIR}/probe.json", probe.model_dump_json())
    command = ["python3", f"{SCAN_DIR}/leak_scan.py", "--progress", f"{SCAN_DIR}/progress.json"]
    if plan is not None:
        box.write_file(f"{SCAN_DIR}/plan.json", json.dumps(plan))
        command += ["--plan", f"{SCAN_DIR}/plan.json"]
    result = box.exec(command + [f"{SCAN_DIR}/probe.json", f"{SCAN_DIR}/report.json", "/"], timeout=SCAN_TIMEOUT)
    if not result.ok:
        raise LeakScanFailed(failure_reason(box, result))
    try:
        report = LeakReport.model_validate_json(box.read_file(f"{SCAN_DIR}/report.json"))
    except (FileNotFoundError, ValidationError) as exc:
        raise LeakScanFailed(f"the leak scan wrote no readable report: {str(exc)[:300]}") from None
    report.index = dependency or ""
    SCAN_LOG.append(
        {
            "image": box.config.image,
            "index": report.index,
            "files": report.files,
            "indexed": report.indexed,
            "cpu_seconds": report.cpu_seconds + planning,
            "seconds": report.seconds,
            "config": box.config,
            "probe": probe,
        }
    )
    return report


def failure_reason(box: Sandbox, result) -> str:
    """Why the scan stopped, never empty: its status, its last output, and the file it was reading."""
    where = ""
    try:
        note = json.loads(box.read_file(f"{SCAN_DIR}/progress.json"))
        where = f"; it had read {note['files']} files and was reading {note['path']}"
    except (FileNotFoundError, ValueError, KeyError, OSError):
        where = "; it stopped before its first progress note"
    output = (result.stderr or result.stdout or "").strip()[-600:] or "no output"
    return f"the leak scan did not finish ({result.status}, exit {result.exit_code}){where}: {output}"


def dependency_image(config: SandboxConfig) -> str | None:
    """The id of the dependency image `config.image` was built on (shared by every env of the same
    requirements; the docs layer above it is small), whose index a scan can
    use; None if there is none or the backend cannot tell (the scan then reads every file)."""
    images = backend_class(config.backend).images()
    try:
        return images.built_on(config.image, ("deps",)) if images is not None else None
    except SandboxError:
        return None


def index_path(image_id: str) -> Path:
    return cache_dir() / "leak-index" / f"{image_id.replace(':', '-')}-v{leak_scan.INDEX_VERSION}.json.gz"


def image_index(image_id: str, config: SandboxConfig) -> dict:
    """The dependency image's index: read from arex's cache, else built in a sandbox of that image as
    the agent's user (once per image: locks keep parallel builds, in threads or processes, to one)."""
    path = index_path(image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _index_lock, open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another arex process building this index: wait for it, then read it
        if not path.is_file():
            started = time.process_time()
            index_config = config.model_copy(update={"image": image_id, "seed": None, "mounts": ()})
            with make_sandbox(index_config, "leak-index") as box:
                box.write_file(f"{SCAN_DIR}/leak_scan.py", Path(leak_scan.__file__).read_bytes())
                out = f"{SCAN_DIR}/index.json.gz"
                command = ["python3", f"{SCAN_DIR}/leak_scan.py", "--index", out, "/"]
                result = box.exec(command, timeout=2 * SCAN_TIMEOUT)  # once per image: a busy machine's time
                if not result.ok:
                    raise LeakScanFailed(
                        f"indexing the dependency image {image_id[:19]} failed: " + failure_reason(box, result)
                    )
                blob = box.read_file(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(blob)
            tmp.replace(path)
            SCAN_LOG.append({"index_built": image_id, "host_cpu_seconds": time.process_time() - started})
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)


def describe(report: LeakReport, probe: LeakProbe) -> tuple[list[str], str]:
    """The gate's problems (leaking and unreadable files) and what was scanned, in words."""
    problems = [
        f"{leak.path} recovers {leak.recovered} of {leak.of} held-out labels ({leak.column}; {leak.how})"
        for leak in report.leaks[:10]
    ]
    if len(report.leaks) > 10:
        problems.append(f"and {len(report.leaks) - 10} more leaking tables")
    problems += [
        f"{u.path} cannot be read in the env image: {u.reason}; remove it with the source YAML's `remove:` list, "
        "or add a reader such as pyarrow to the requirements"
        for u in report.unreadable
    ]
    scanned = (
        f"scanned {report.files} files ({report.records} records, {report.bytes / 1e6:.0f} MB) "
        f"in {report.seconds:.0f}s ({report.cpu_seconds:.1f} CPU-seconds) for {len(probe.rows)} held-out rows "
        f"({probe.duplicates} duplicates of training rows not probed)"
    )
    if report.index:
        scanned += f"; {report.indexed} files of the dependency image left unread by its index"
    if report.models:
        scanned += (
            f"; {len(report.models)} pickled model(s) read, no held-out rows kept in them "
            f"({', '.join(report.models[:3])}): what else they were fitted on cannot be read from a model"
        )
    return problems, scanned
