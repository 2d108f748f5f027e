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

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from arex.dataset.card import write_card
from arex.dataset.config import GRANULARITIES, MARKER, MARKER_FORMAT, TOKENS_DIR, ExportConfig  # noqa: F401 (re-exported)
from arex.dataset.masks import Masker, Segment, TokenRows, TokenStats, load_tokenizer, vocabulary_hash
from arex.dataset.rows import RowBuilder, conversation, token_row, tools_of
from arex.dataset.schema import SCHEMA, TOKEN_SCHEMA, schema_for  # noqa: F401 (SCHEMA re-exported)
from arex.dataset.shards import ShardWriter
from arex.dataset.stats import REFLECTION_PARTS, ExportStats  # noqa: F401 (re-exported)
from arex.dataset.swap import ExportError, Target, exchange, protected, seal  # noqa: F401 (exchange re-exported)
from arex.errors import UserInputError
from arex.hashing import file_sha256
from arex.record.canary import Canaries, scan_file
from arex.record.storage import naming
from arex.record.trajectory import Trajectory, load
from arex.selection.files import read_kept, read_selection


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
        rows = sorted(read_kept(self.kept_file), key=lambda r: (r.env_id, r.key))  # checked: one sentence if bad
        self.paths = [Path(r.path) for r in rows]
        self.record_sha = {Path(r.path): r.record_sha for r in rows}
        report = self.selection_dir / "selection.json"
        self.report: dict | None = read_selection(report) if report.is_file() else None

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


@dataclass
class Decontamination:
    """What export is told of the evaluation sets (the CLI makes it with arex.envs.decontam)."""

    eval_sets: list[str]
    check: Callable[[str], list[dict]] | None = None
    """An env id → the evaluation items it overlaps, each with its `action` (refused: its
    trajectories are left out; flagged: kept) and evidence; None when no set is named."""
    at_build: list[dict] = field(default_factory=list)
    """What build-envs refused or flagged (its build-report.json): {env, overlaps}."""


def export(
    records: Iterable[Path],
    out: Path,
    config: ExportConfig,
    envs_dir: Path | None = None,
    selection: dict | None = None,
    decontamination: Decontamination | None = None,
) -> ExportStats:
    """Write the export into `.<out>.partial` beside `out`: shards under `<granularity>/`,
    `checksums.json`, the card (`README.md`, `score_curve.png`, from `selection`: selection.json,
    which `kept_records` reads for you) and the marker; then swap it in with one rename. Returns the
    statistics the card was made from. `decontamination`: the trajectories of an env found in an
    evaluation set are left out (or kept, when flagged), and the card lists it.

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
        target = Target.check(Path(out), protected(paths, envs_dir, selection, kept.selection_dir if kept else None))
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
        stats = _write(paths, kept, staging, config, canaries, decontamination)
        write_card(staging, stats, config, selection)
        seal(staging)
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
    paths: list[Path],
    kept: KeptRecords | None,
    staging: Path,
    config: ExportConfig,
    canaries: Canaries,
    decontamination: Decontamination | None = None,
) -> ExportStats:
    """The shards and checksums.json, one trajectory in memory at a time."""
    tools = any(action_format(p) == "tools" for p in paths)
    writers = {g: ShardWriter(staging / g, config, schema_for(g, tools)) for g in config.granularities}
    builder = RowBuilder(config)
    stats = ExportStats(rows={g: 0 for g in config.granularities})
    screen = _Screen(decontamination, stats)
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
        if record.header is None or not record.rounds or screen.refused(record.header.env_id):
            continue
        if config.dedupe:
            digest = assistant_hash(record)
            if digest in seen:
                stats.duplicates.append(record.header.key)
                continue
            seen.add(digest)
        built = builder.rows(record)
        if tokens is not None:  # first: a calls row goes where its token row goes (length, loss, refusal)
            left_out = tokens.add(built)
            if left_out and "calls" in built.rows:
                built.rows["calls"] = [r for i, r in enumerate(built.rows["calls"]) if i not in left_out]
                stats.calls_left_out += len(left_out)
        for granularity, writer in writers.items():
            for row in built.rows[granularity]:
                writer.add(row)
            stats.rows[granularity] += len(built.rows[granularity])
        stats.skipped_calls += built.skipped_calls
        stats.trajectories += 1
        stats.add(record.header, record.rounds)
        stats.add_usage(record)
    for writer in [*writers.values(), *(tokens.writers.values() if tokens else [])]:
        for path, count in writer.close():
            rel = path.relative_to(staging).as_posix()
            stats.shards[rel] = {"rows": count, "bytes": path.stat().st_size, "sha256": file_sha256(path)}
    with naming(staging / "checksums.json"):
        (staging / "checksums.json").write_text(
            json.dumps({k: v["sha256"] for k, v in sorted(stats.shards.items())}, indent=2) + "\n"
        )
    return stats


class _Screen:
    """Each env's evaluation overlaps, asked once; the card's account (`stats.decontamination`)."""

    def __init__(self, decontamination: Decontamination | None, stats: ExportStats):
        self.check = decontamination.check if decontamination else None
        if decontamination is not None:
            stats.decontamination = {
                "eval_sets": list(decontamination.eval_sets),
                "at_build": list(decontamination.at_build),
                "found": {},
                "left_out": 0,
            }
        self.account = stats.decontamination

    def refused(self, env_id: str) -> bool:
        """Whether the env's trajectories are left out (counted as such)."""
        if self.check is None:
            return False
        found = self.account["found"]
        if env_id not in found:
            found[env_id] = self.check(env_id)
        refused = any(o.get("action") == "refused" for o in found[env_id])
        self.account["left_out"] += refused
        return refused


class _TokenWriters:
    """The token rows of every granularity (`tokens/<granularity>/`), with their statistics."""

    def __init__(self, staging: Path, config: ExportConfig, stats: ExportStats):
        tokenizer = load_tokenizer(config.tokenizer, chat_template=config.chat_template)
        masker = Masker(tokenizer)
        self.rows = TokenRows(masker, config.max_length)
        self.writers = {g: ShardWriter(staging / TOKENS_DIR / g, config, TOKEN_SCHEMA) for g in config.granularities}
        self.stats = stats
        for g in config.granularities:
            stats.tokens[g] = TokenStats()
            stats.rows[f"{g}-tokens"] = 0
        # By name and vocabulary, never by the exporter's local path: the card goes to the Hub.
        stats.tokenizer = {
            "name": tokenizer.arex_name,
            "vocabulary": vocabulary_hash(tokenizer),
            "template": masker.name,
            "max_length": config.max_length,
        }

    def add(self, built) -> set[int]:
        """Write the token rows of `built`; returns the indices of its calls rows that got none."""
        left_out: set[int] = set()
        for granularity, writer in self.writers.items():
            for index, row in enumerate(built.rows[granularity]):
                messages, weights = conversation(granularity, row)
                segments = built.segments if granularity == "trajectories" else [Segment(0, row["round"], True)]
                parts = self.rows.parts(messages, weights, segments, self.stats.tokens[granularity], tools_of(row))
                if not parts and granularity == "calls":
                    left_out.add(index)
                for encoded, first, last in parts:
                    part = (segments[first], segments[last]) if granularity == "trajectories" else None
                    writer.add(token_row(granularity, row, encoded, part, built.scores))
                    self.stats.tokens[granularity].rows += 1
                    self.stats.rows[f"{granularity}-tokens"] += 1
        return left_out


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
