"""`arex export`: kept trajectories → parquet shards TRL's SFT trainer reads, plus a dataset card.

Rows (`arex/dataset/rows.py` builds them), each granularity its own folder and Hub config:
- `rounds/`: one row per round, exactly what the teacher saw in that round: its context, every
  (reply, observation) pair, the reflect prompt and the reflection.
- `trajectories/`: one row per trajectory, the rounds joined into one conversation.
- `calls/` (opt-in): one prompt/completion row per usable teacher call.
- `tokens/<granularity>/` (with `export.tokenizer`): those rows pre-tokenized, with labels and
  per-token weights, cut to `export.max_length` (`arex/dataset/masks.py`).

`rounds` and `trajectories` rows have `messages` ([{role, content}]), `weights` (one per message:
assistant turns carry the loss, everything else 0) and metadata. Streams: one trajectory in memory
at a time, shards rolled by file size. Deterministic: same kept set and config → byte-identical
files. Near-duplicate trajectories (same assistant turns after whitespace normalisation) are
written once.

Nothing is lost and nothing is trusted blindly: every record must still have the sha256 `arex
select` judged it by; the whole export (shards, checksums, card, curve, the `.arex-export` marker)
is written into `.<out>.partial` beside `--out` and swapped in with one rename
(`renameat2(RENAME_EXCHANGE)` over an earlier export); only a folder carrying the marker, and
holding nothing else, is ever replaced or deleted.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from arex import __version__
from arex.dataset.card import CURVE, write_card
from arex.dataset.masks import Masker, Segment, TokenRows, TokenStats, load_tokenizer
from arex.dataset.rows import RowBuilder, conversation, token_row, tools_of  # noqa: F401 (RowBuilder re-exported)
from arex.dataset.stats import REFLECTION_PARTS, ExportStats  # noqa: F401 (re-exported)
from arex.errors import UserInputError
from arex.hashing import file_sha256
from arex.record.canary import Canaries, scan_file
from arex.record.storage import naming
from arex.record.trajectory import Trajectory, load

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema(
    [
        ("messages", pa.list_(MESSAGE)),
        ("weights", pa.list_(pa.float32())),
        ("trajectory_id", pa.string()),
        ("env_id", pa.string()),
        ("env_kind", pa.string()),
        ("domain", pa.string()),
        ("round", pa.int32()),
        ("rounds", pa.int32()),
        ("public_score", pa.float64()),
        ("held_out_score", pa.float64()),
        ("first_held_out", pa.float64()),
        ("best_held_out", pa.float64()),
        ("final_held_out", pa.float64()),
        ("baseline_score", pa.float64()),
        ("improvement", pa.float64()),
        ("teacher", pa.string()),
        ("config_hash", pa.string()),
        ("arex_version", pa.string()),
    ],
    metadata={"arex.schema": "1", "arex.weights": "per message; assistant turns carry the loss"},
)
"""The row schema, in one place. `round` is null on trajectory rows; `public_score` and
`held_out_score` are that round's (the final round's on trajectory rows); `public_score` is null
for an env with nothing public to score (a judge problem without sample tests). Scores are
higher-is-better: metrics to minimise are negated."""

_META = [f for f in SCHEMA if f.name not in ("messages", "weights", "round")]
CALL_SCHEMA = pa.schema(
    [
        ("prompt", pa.list_(MESSAGE)),
        ("completion", pa.list_(MESSAGE)),
        ("weight", pa.float32()),
        ("kind", pa.string()),
        ("round", pa.int32()),
        ("step", pa.int32()),
        *_META,
    ],
    metadata={"arex.schema": "1", "arex.weights": "per row: the completion's weight"},
)
"""A `calls` row: `prompt` is the exact request of one teacher call, `completion` its reply (one
assistant message); `kind` is `action` or `reflection`, `step` null for a reflection."""
TOKEN_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("labels", pa.list_(pa.int32())),
        ("weights", pa.list_(pa.float32())),
        ("round", pa.int32()),
        ("first_round", pa.int32()),
        ("last_round", pa.int32()),
        ("step", pa.int32()),
        *_META,
    ],
    metadata={"arex.schema": "1", "arex.weights": "per token; labels are -100 where the weight is 0"},
)
"""A token row (`tokens/<granularity>/`): `labels` is `input_ids` with -100 on tokens of weight 0,
`weights` one per token; `first_round`..`last_round` are the rounds it holds (a trajectory row
longer than `export.max_length` is cut into parts at round boundaries)."""


def _tool_message(arguments: pa.DataType) -> pa.DataType:
    function = pa.struct([("name", pa.string()), ("arguments", arguments)])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", function)])
    return pa.struct(
        [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)), ("tool_call_id", pa.string())]
    )


def _with_tools(schema: pa.Schema, arguments: pa.DataType) -> pa.Schema:
    """`schema` with tool-call messages and a `tools` column (after the conversation columns)."""
    message = pa.list_(_tool_message(arguments))
    fields = [pa.field(f.name, message) if f.type == pa.list_(MESSAGE) else f for f in schema]
    at = max(i for i, f in enumerate(fields) if f.name in ("weights", "completion")) + 1
    fields.insert(at, pa.field("tools", pa.string()))
    metadata = {
        **schema.metadata,
        b"arex.tools": b"messages carry tool_calls / tool_call_id; tools: the tool definitions as JSON text",
    }
    return pa.schema(fields, metadata=metadata)


# Tool-call arguments are arrow.json (pyarrow 19+), which `datasets` loads as objects, the form chat
# templates take; rows are built with them as JSON text and cast (`ShardWriter`).
_ARGUMENTS = pa.json_() if hasattr(pa, "json_") else pa.string()
TOOL_SCHEMA = _with_tools(SCHEMA, _ARGUMENTS)
"""`SCHEMA` for an export holding `tools`-format trajectories: `messages` items also have
`tool_calls` ([{id, type, function: {name, arguments}}]) and `tool_call_id`; `tools` is the tool
definitions as JSON text (null for a `text` trajectory)."""
TOOL_CALL_SCHEMA = _with_tools(CALL_SCHEMA, _ARGUMENTS)
"""`CALL_SCHEMA` with tool-call messages and `tools`, as `TOOL_SCHEMA`."""


def _as_text(type_: pa.DataType) -> pa.DataType:
    """`type_` with every arrow.json part as plain text (what `pa.Table.from_pylist` can build)."""
    if isinstance(type_, pa.BaseExtensionType):
        return type_.storage_type
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(f.name, _as_text(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(_as_text(type_.value_type))
    return type_


def _storage(schema: pa.Schema) -> pa.Schema:
    """The schema rows are built in (tool-call arguments as JSON text); `schema` itself if the same."""
    storage = pa.schema([pa.field(f.name, _as_text(f.type)) for f in schema], metadata=schema.metadata)
    return schema if storage.equals(schema) else storage


from arex.dataset.config import GRANULARITIES, MARKER, MARKER_FORMAT, TOKENS_DIR, ExportConfig  # noqa: E402 (re-exported)


def action_format(path: Path) -> str:
    """A record's action format, from its header line (`text` if it cannot be read: `load` names
    the problem when the record's turn comes)."""
    try:
        with Path(path).open("rb") as f:
            header = json.loads(f.readline())
        return header.get("action_format", "text") if isinstance(header, dict) else "text"
    except (OSError, ValueError, RecursionError):
        return "text"


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def assistant_hash(t: Trajectory) -> str:
    """Content hash of every assistant turn, whitespace-normalised: equal for near-duplicates."""
    digest = hashlib.sha256()
    for r in t.rounds:
        for step in r.steps:
            calls = step.call.turn().get("tool_calls")
            digest.update(
                _normalise(step.call.content).encode()
                + (json.dumps(calls, sort_keys=True).encode() if calls else b"")
                + b"\0"
            )
        digest.update(_normalise(r.end.reflection.call.content).encode() + b"\1")
    return digest.hexdigest()


class ShardWriter:
    """Parquet files of about `shard_mb`, named `train-NNNNN-of-MMMMM.parquet` when closed."""

    def __init__(self, folder: Path, config: ExportConfig, schema: pa.Schema = SCHEMA):
        self.folder, self.config, self.schema = folder, config, schema
        self.storage = _storage(schema)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.buffer: list[dict] = []
        self.paths: list[Path] = []
        self.counts: list[int] = []
        self._writer: pq.ParquetWriter | None = None
        self._sink = None

    def add(self, row: dict) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.config.batch_rows:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        if self._writer is None:
            path = self.folder / f".part-{len(self.paths):05d}.parquet"
            self.paths.append(path)
            self.counts.append(0)
            self._sink = path.open("wb")
            self._writer = pq.ParquetWriter(
                self._sink, self.schema, compression=self.config.compression, write_statistics=True
            )
        with naming(self.paths[-1]):
            table = pa.Table.from_pylist(self.buffer, schema=self.storage)
            self._writer.write_table(table if self.storage is self.schema else table.cast(self.schema))
        self.counts[-1] += len(self.buffer)
        self.buffer = []
        if self._sink.tell() >= self.config.shard_mb * (1 << 20):
            self._close_shard()

    def _close_shard(self) -> None:
        if self._writer is not None:
            writer, sink, self._writer, self._sink = self._writer, self._sink, None, None
            with naming(self.paths[-1]):
                try:
                    writer.close()  # the footer
                finally:
                    sink.close()

    def close(self) -> list[tuple[Path, int]]:
        self._flush()
        self._close_shard()
        final = []
        total = len(self.paths)
        for i, (path, count) in enumerate(zip(self.paths, self.counts)):
            target = self.folder / f"train-{i:05d}-of-{total:05d}.parquet"
            path.rename(target)
            final.append((target, count))
        return final


class ExportError(UserInputError):
    """An export that cannot go ahead: an `--out` arex may not replace, a record that changed after
    `arex select`, a full disk, a read-only folder. The message names the file and what to do; the
    previous export in `--out` is left as it was."""


class KeptRecords:
    """The records `arex select` kept (`kept.jsonl`), in a fixed order (deterministic shards), each
    with the sha256 select judged it by; iterating gives their paths. `export` checks every record
    against its checksum and keeps the selection folder, the store and the envs out of `--out`."""

    def __init__(self, selection_dir: Path):
        self.selection_dir = Path(selection_dir)
        self.kept_file = self.selection_dir / "kept.jsonl"
        if not self.kept_file.is_file():
            raise UserInputError(
                f"{self.selection_dir} holds no kept.jsonl; run `arex select --out {self.selection_dir}` first"
            )
        self.rerun = f"re-run `arex select --out {self.selection_dir}` (cached verdicts make it quick)"
        rows = []
        try:
            lines = self.kept_file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ExportError(f"{self.kept_file} is not UTF-8 text ({exc}); {self.rerun}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows.append((str(row["env_id"]), str(row["key"]), Path(row["path"]), row.get("record_sha")))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ExportError(
                    f"{self.kept_file}, line {number}: not a kept record (a JSON object with key, env_id and path); "
                    f"{self.rerun}"
                ) from None
        rows.sort(key=lambda r: (r[0], r[1]))
        self.paths = [r[2] for r in rows]
        self.record_sha = {r[2]: r[3] for r in rows}
        report = self.selection_dir / "selection.json"
        try:
            self.report: dict | None = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ExportError(f"{report} is not valid JSON ({exc}); {self.rerun}") from None

    def __iter__(self) -> Iterator[Path]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)

    def verify(self, path: Path) -> None:
        """ExportError unless the record's bytes are the ones select judged."""
        expected = self.record_sha.get(path)
        if not expected:
            raise ExportError(
                f"{self.kept_file} lists {path} without the checksum select judged it by (an older arex wrote it); "
                f"{self.rerun}"
            )
        if file_sha256(path) != expected:
            raise ExportError(
                f"{path} changed after `arex select` judged it (its sha256 is not the one in {self.kept_file}); "
                f"{self.rerun} to judge it again"
            )


def kept_records(selection_dir: Path) -> KeptRecords:
    return KeptRecords(selection_dir)


def export(
    records: Iterable[Path],
    out: Path,
    config: ExportConfig,
    envs_dir: Path | None = None,
    selection: dict | None = None,
) -> ExportStats:
    """Write the export into `.<out>.partial` beside `out`: shards under `<granularity>/`,
    `checksums.json`, the card (`README.md`, `score_curve.png`, from `selection`: selection.json,
    which `kept_records` reads for you) and the marker; then swap it in with one rename. Returns the
    statistics the card was made from.

    `out` may be new, an empty folder or an earlier export (its marker lists only files arex wrote);
    anything else is refused before anything is written, as is a folder that is, holds or sits in the
    trajectory store, the selection, the envs or a record's folder, or that is or holds the current
    folder. On any failure `out` is left as it was."""
    unknown = set(config.granularities) - set(GRANULARITIES)
    if unknown:
        raise UserInputError(f"unknown granularity {sorted(unknown)}; choose from {', '.join(GRANULARITIES)}")
    kept = records if isinstance(records, KeptRecords) else None
    paths = [Path(p) for p in records]
    if selection is None and kept is not None:
        selection = kept.report
    try:
        target = _Target.check(Path(out), _protected(paths, envs_dir, selection, kept))
    except OSError as exc:
        raise ExportError(
            f"could not look into {exc.filename or out} ({exc.strerror}); choose an --out arex may read and write"
        ) from None
    canaries = (
        Canaries.of_envs(p for p in sorted(envs_dir.iterdir()) if (p / "task.yaml").is_file())
        if envs_dir and envs_dir.is_dir()
        else Canaries({})
    )
    staging = None
    try:
        staging = target.stage()
        stats = _write(paths, kept, staging, config, canaries)
        write_card(staging, stats, config, selection)
        _seal(staging)
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        error = target.os_error(exc) if isinstance(exc, OSError) else None
        if error is not None:
            raise error from None
        raise
    target.swap(staging)
    return stats


def _write(
    paths: list[Path], kept: KeptRecords | None, staging: Path, config: ExportConfig, canaries: Canaries
) -> ExportStats:
    """The shards and checksums.json, one trajectory in memory at a time."""
    tools = any(action_format(p) == "tools" for p in paths)
    schemas = {"calls": TOOL_CALL_SCHEMA} if tools else {"calls": CALL_SCHEMA}
    writers = {
        g: ShardWriter(staging / g, config, schemas.get(g, TOOL_SCHEMA if tools else SCHEMA))
        for g in config.granularities
    }
    builder = RowBuilder(config)
    stats = ExportStats(rows={g: 0 for g in config.granularities})
    tokens = _TokenWriters(staging, config, stats) if config.tokenizer else None
    seen: set[str] = set()
    for path in paths:
        if not path.is_file():
            raise ExportError(
                f"trajectory record {path} does not exist"
                + (f"; it is listed in {kept.kept_file}: {kept.rerun}" if kept else "")
            )
        scan_file(path, canaries)  # the rows hold nothing the record does not; a leak outranks all else
        if kept is not None:
            kept.verify(path)
        record = load(path)
        if record.header is None or not record.rounds:
            continue
        if config.dedupe:
            digest = assistant_hash(record)
            if digest in seen:
                stats.duplicates.append(record.header.key)
                continue
            seen.add(digest)
        built = builder.rows(record)
        for granularity, writer in writers.items():
            for row in built.rows[granularity]:
                writer.add(row)
            stats.rows[granularity] += len(built.rows[granularity])
        if tokens is not None:
            tokens.add(built)
        stats.skipped_calls += built.skipped_calls
        stats.trajectories += 1
        stats.add(record.header, record.rounds)
    for writer in [*writers.values(), *(tokens.writers.values() if tokens else [])]:
        for path, count in writer.close():
            rel = path.relative_to(staging).as_posix()
            stats.shards[rel] = {"rows": count, "bytes": path.stat().st_size, "sha256": file_sha256(path)}
    with naming(staging / "checksums.json"):
        (staging / "checksums.json").write_text(
            json.dumps({k: v["sha256"] for k, v in sorted(stats.shards.items())}, indent=2) + "\n"
        )
    return stats


class _TokenWriters:
    """The token rows of every granularity (`tokens/<granularity>/`), with their statistics."""

    def __init__(self, staging: Path, config: ExportConfig, stats: ExportStats):
        masker = Masker(load_tokenizer(config.tokenizer))
        self.rows = TokenRows(masker, config.max_length)
        self.writers = {g: ShardWriter(staging / TOKENS_DIR / g, config, TOKEN_SCHEMA) for g in config.granularities}
        self.stats = stats
        for g in config.granularities:
            stats.tokens[g] = TokenStats()
            stats.rows[f"{g}-tokens"] = 0
        stats.tokenizer = {"path": str(config.tokenizer), "template": masker.name, "max_length": config.max_length}

    def add(self, built) -> None:
        for granularity, writer in self.writers.items():
            for row in built.rows[granularity]:
                messages, weights = conversation(granularity, row)
                segments = built.segments if granularity == "trajectories" else [Segment(0, row["round"], True)]
                for encoded, first, last in self.rows.parts(
                    messages, weights, segments, self.stats.tokens[granularity], tools_of(row)
                ):
                    part = (segments[first], segments[last]) if granularity == "trajectories" else None
                    writer.add(token_row(granularity, row, encoded, part, built.scores))
                    self.stats.tokens[granularity].rows += 1
                    self.stats.rows[f"{granularity}-tokens"] += 1


# -- the output folder: checked, staged beside it, swapped in ---------------------------------------
def _protected(
    paths: list[Path], envs_dir: Path | None, selection: dict | None, kept: KeptRecords | None
) -> list[tuple[str, Path]]:
    """Folders `--out` may not be, hold or sit in."""
    folders = [("envs folder", envs_dir)] if envs_dir else []
    for name, key in (("trajectory store", "store"), ("envs folder", "envs")):  # as selection.json names them
        if isinstance((selection or {}).get(key), str):
            folders.append((name, Path(selection[key])))
    if kept is not None:
        folders.append(("selection folder", kept.selection_dir))
    folders += [("folder of the trajectory records", p) for p in sorted({p.parent for p in paths})]  # <store>/<env>
    return folders


def _read_marker(folder: Path) -> dict | None:
    """The folder's marker: None if it has none, {} if it is damaged."""
    path = folder / MARKER
    if not path.is_file() or path.is_symlink():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, OSError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _write_marker(folder: Path, files: list[str] | None) -> None:
    """`files` is None while the folder is being staged (a killed run's leftover is still ours)."""
    marker = {"format": MARKER_FORMAT, "arex_version": __version__, "files": files}
    with naming(folder / MARKER):
        (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _strays(folder: Path, files: list[str]) -> list[str]:
    """What is in an export folder that its marker does not list (arex writes no links)."""
    allowed = set(files) | {MARKER}
    dirs = {parent.as_posix() for f in files for parent in Path(f).parents if parent != Path(".")}
    strays = []
    for root, subdirs, names in os.walk(folder):
        here = Path(root).relative_to(folder)
        strays += [
            (here / d).as_posix()
            for d in subdirs
            if (here / d).as_posix() not in dirs or os.path.islink(os.path.join(root, d))
        ]
        strays += [
            (here / n).as_posix()
            for n in names
            if (here / n).as_posix() not in allowed or os.path.islink(os.path.join(root, n))
        ]
    return sorted(strays)


def _marker_files(folder: Path) -> list[str] | None:
    """The files a valid, finished export's marker lists; None if there is no such marker."""
    marker = _read_marker(folder)
    files = (marker or {}).get("files")
    if (
        marker
        and marker.get("format") == MARKER_FORMAT
        and isinstance(files, list)
        and all(isinstance(f, str) for f in files)
    ):
        return files
    return None


def _legacy_files(folder: Path) -> list[str] | None:
    """The files of an export made before exports carried a marker, recognised by its checksums.json:
    every shard it lists is there with that sha256. None if the folder is not one."""
    try:
        listed = json.loads((folder / "checksums.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(listed, dict) or not listed:
        return None
    for rel, sha in listed.items():
        shard = folder / rel
        if not (isinstance(sha, str) and shard.is_file() and not shard.is_symlink() and file_sha256(shard) == sha):
            return None
    return sorted(listed) + [name for name in ("checksums.json", "README.md", CURVE) if (folder / name).is_file()]


def _discard(folder: Path) -> None:
    """Delete a folder arex made (a leftover staging folder, or the previous export after the swap):
    it must carry the marker and, if it is a finished export, hold nothing its marker does not list."""
    if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()  # a kill right after mkdir: empty, nothing to lose
        return
    if _read_marker(folder) is None and _legacy_files(folder) is None:
        raise ExportError(
            f"{folder} is left over from an earlier export but has no {MARKER} file, so arex will not delete it; "
            "move it away and re-run `arex export`"
        )
    files = _marker_files(folder) if _read_marker(folder) is not None else _legacy_files(folder)
    strays = _strays(folder, files) if files is not None else []
    if strays:
        raise ExportError(
            f"{folder} (an earlier export) holds {strays[0]}, which arex did not write, so arex will not delete it; "
            f"move that file out, delete {folder}, and re-run `arex export`"
        )
    shutil.rmtree(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _seal(staging: Path) -> None:
    """Write the marker with every file of the export, and put all of it on disk before the swap."""
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file() and p.name != MARKER)
    _write_marker(staging, files)
    for path in sorted(staging.rglob("*"), reverse=True):  # files before the folders holding them
        _fsync(path)
    _fsync(staging)


AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (Linux `renameat2(RENAME_EXCHANGE)`): no moment without either."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc >= 2.28
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not in this C library", str(a), None, str(b))
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


@dataclass
class _Target:
    """The `--out` folder, checked: `replaces` if it is an earlier export (swapped atomically)."""

    given: Path
    path: Path
    replaces: bool

    @property
    def staging(self) -> Path:
        return self.path.with_name(f".{self.path.name}.partial")

    @classmethod
    def check(cls, out: Path, protected: list[tuple[str, Path]]) -> _Target:
        path, cwd = out.resolve(), Path.cwd().resolve()  # symlinks followed: the folder they name
        if path == cwd or path in cwd.parents:
            what = "the current folder" if path == cwd else f"a folder holding the current folder ({cwd})"
            raise ExportError(f"--out {out} is {what}; export into a folder of its own, e.g. --out dataset")
        for name, folder in protected:
            folder = folder.resolve()
            relation = (
                "is"
                if path == folder
                else "is inside"
                if folder in path.parents
                else "holds"
                if path in folder.parents
                else None
            )
            if relation:
                raise ExportError(f"--out {out} {relation} the {name} {folder}; export into a folder outside it")
        if path.exists() and not path.is_dir():
            raise ExportError(f"--out {out} is a file, not a folder; choose another --out")
        if not path.is_dir() or not any(path.iterdir()):
            return cls(out, path, False)
        if _read_marker(path) is None and _legacy_files(path) is None:
            raise ExportError(
                f"--out {out} is not empty and is not an earlier arex export (it has no {MARKER} file), "
                "so arex will not replace it; choose a new or empty folder"
            )
        files = _marker_files(path) if _read_marker(path) is not None else _legacy_files(path)
        if files is None:
            raise ExportError(
                f"{path / MARKER} is damaged or from another arex version, so arex will not replace {out}; "
                f"delete {out} yourself if it is an old export, or choose another --out"
            )
        strays = _strays(path, files)
        if strays:
            raise ExportError(
                f"--out {out} is an earlier arex export, but {strays[0]} in it was not written by arex; "
                "move that out (or choose another --out) so nothing of yours is deleted"
            )
        return cls(out, path, True)

    def stage(self) -> Path:
        """A fresh staging folder beside `out`, marked as ours before anything else goes in."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.staging
        if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
            raise ExportError(
                f"{staging} is in the way of the export (not a folder arex made); move it away and re-run `arex export`"
            )
        if staging.exists():
            _discard(staging)  # a killed run's leftover
        staging.mkdir()
        try:
            _write_marker(staging, None)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    def swap(self, staging: Path) -> None:
        """Put the staged export at `out` in one rename; then delete the previous one (now at `staging`)."""
        try:
            if self.replaces:
                exchange(staging, self.path)
            else:
                os.rename(staging, self.path)  # also replaces an empty folder
        except OSError as exc:  # nothing moved: the staged export goes, `out` is as it was
            shutil.rmtree(staging, ignore_errors=True)
            raise (self.os_error(exc) or exc) from None
        _fsync(self.path.parent)
        if self.replaces:
            _discard(staging)

    def os_error(self, exc: OSError) -> ExportError | None:
        """One sentence for a file-system failure a user can fix; None for anything else."""
        where = exc.filename or self.path.parent
        untouched = f"{self.given} was left as it was" if self.replaces else f"nothing was written to {self.given}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return ExportError(
                f"no space left on the device while writing {where}; free some space "
                f"(or choose another --out) and re-run `arex export` ({untouched})"
            )
        if exc.errno == errno.EROFS:
            return ExportError(
                f"{where} is on a read-only file system; choose an --out on a writable one ({untouched})"
            )
        if exc.errno in (errno.EACCES, errno.EPERM):
            return ExportError(f"permission denied on {where}; choose an --out you may write to ({untouched})")
        if exc.errno in (errno.EINVAL, errno.ENOSYS) and self.replaces:
            return ExportError(
                f"the file system of {self.given} cannot swap folders in one step (renameat2 RENAME_EXCHANGE: "
                f"{exc.strerror}); export into a new folder instead ({untouched})"
            )
        if exc.errno in (errno.EXDEV, errno.EBUSY, errno.ENOTEMPTY, errno.EEXIST):
            return ExportError(
                f"could not move the finished export from {self.staging} to {self.given} ({exc.strerror}); "
                f"if --out is a mount point, export into a folder inside it ({untouched})"
            )
        return None


def token_weights(tokenizer, messages: list[dict], weights: list[float]) -> tuple[list[int], list[float]]:
    """Per-token loss weights for one row under a tokenizer's chat template, in linear time: the
    tokens of an assistant turn's text and of the special token closing it take its weight; headers
    and every other message 0 (`arex.dataset.masks.Masker`, which also says where each message begins).

    A template whose turns cannot be located raises `arex.dataset.masks.TemplateError`, naming it. Message
    text is tokenized as text (never a special token); a row holding special-token text the template
    cannot keep apart (a tool call's arguments) raises `arex.dataset.masks.SpecialTokenError`."""
    from arex.dataset.masks import Masker

    encoded = Masker(tokenizer).encode(messages, weights)
    return encoded.input_ids, encoded.weights
