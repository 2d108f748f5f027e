"""`arex export`: kept trajectories → parquet shards TRL's SFT trainer reads, plus a dataset card.

Rows, two granularities (each its own folder and Hub config):
- `rounds/`: one row per round, exactly what the teacher saw in that round: its context, every
  (reply, observation) pair, the reflect prompt and the reflection.
- `trajectories/`: one row per trajectory, the rounds joined into one conversation.

Every row has `messages` ([{role, content}]), `weights` (one per message: assistant turns carry the
loss, everything else 0) and metadata. Streams: one trajectory in memory at a time, shards rolled by
file size. Deterministic: same kept set and config → byte-identical files. Near-duplicate
trajectories (same assistant turns after whitespace normalisation) are written once.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from arex.canary import Canaries, scan_file
from arex.errors import UserInputError
from arex.hashing import file_sha256
from arex.trajectory import Header, Round, Trajectory, load

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
`held_out_score` are that round's (the final round's on trajectory rows). Scores are
higher-is-better: metrics to minimise are negated."""


from arex.export_config import GRANULARITIES, ExportConfig  # noqa: E402 (re-exported)


@dataclass
class ExportStats:
    """What the card reports; filled while rows stream past."""

    trajectories: int = 0
    duplicates: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    by_env: dict[str, dict] = field(default_factory=dict)
    teachers: dict[str, dict] = field(default_factory=dict)
    configs: dict[str, dict] = field(default_factory=dict)
    shards: dict[str, dict] = field(default_factory=dict)
    """relative path → {rows, bytes, sha256}"""

    def add(self, header: Header, rounds: list[Round]) -> None:
        """Aggregates only (sums, counts, per-round min/mean/max): memory does not grow with the count."""
        held = [r.held_out for r in rounds]
        env = self.by_env.setdefault(
            header.env_id,
            {"domain": header.domain or header.env_kind, "kind": header.env_kind, "trajectories": 0, "rounds": 0, "sum_first": 0.0, "sum_best": 0.0, "sum_final": 0.0, "improved": 0, "curve": []},
        )
        env["trajectories"] += 1
        env["rounds"] += len(rounds)
        env["sum_first"] += held[0]
        env["sum_best"] += max(held)
        env["sum_final"] += held[-1]
        env["improved"] += max(held) > held[0]
        running = float("-inf")
        for index, value in enumerate(held):  # best so far by round: count, sum, min, max
            running = max(running, value)
            if index == len(env["curve"]):
                env["curve"].append([0, 0.0, running, running])
            point = env["curve"][index]
            point[0] += 1
            point[1] += running
            point[2], point[3] = min(point[2], running), max(point[3], running)
        teacher = header.teacher
        self.teachers.setdefault(f"{teacher.model} @ {teacher.base_url}", {**teacher.model_dump(), "sampling": header.sampling})
        self.configs.setdefault(header.config_hash, header.config)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def assistant_hash(t: Trajectory) -> str:
    """Content hash of every assistant turn, whitespace-normalised: equal for near-duplicates."""
    digest = hashlib.sha256()
    for r in t.rounds:
        for step in r.steps:
            digest.update(_normalise(step.call.content).encode() + b"\0")
        digest.update(_normalise(r.end.reflection.call.content).encode() + b"\1")
    return digest.hexdigest()


class RowBuilder:
    """Turns one loaded trajectory into rows of both granularities."""

    def __init__(self, config: ExportConfig):
        self.config = config

    def _round_messages(self, round_: Round) -> tuple[list[dict], list[float]]:
        """The round's last request (context, steps, reflect prompt) and the reflection reply.

        The context carries no loss: in full-history mode it holds the earlier rounds, whose turns
        are trained in their own rounds' rows (with their own weights)."""
        c = self.config
        messages = round_.messages(None)
        weights = [0.0] * len(messages)
        position = len(round_.start.context)
        for step in round_.steps:
            weights[position] = c.action_weight if step.usable else c.invalid_weight
            position += 2 if step.observation is not None else 1
        reflection = round_.end.reflection.call
        messages.append({"role": "assistant", "content": reflection.content})
        weights.append(c.reflection_weight if reflection.status == "ok" else c.invalid_weight)
        return messages, weights

    def _meta(self, t: Trajectory) -> dict:
        header, held = t.header, t.held_out
        return {
            "trajectory_id": header.key,
            "env_id": header.env_id,
            "env_kind": header.env_kind,
            "domain": header.domain or header.env_kind,
            "rounds": len(held),
            "first_held_out": held[0],
            "best_held_out": max(held),
            "final_held_out": held[-1],
            "baseline_score": header.baseline_score,
            "improvement": max(held) - held[0],
            "teacher": header.teacher.model,
            "config_hash": header.config_hash,
            "arex_version": header.arex_version,
        }

    def rows(self, t: Trajectory) -> dict[str, list[dict]]:
        meta = self._meta(t)
        out: dict[str, list[dict]] = {"rounds": [], "trajectories": []}
        joined: list[dict] = []
        joined_weights: list[float] = []
        for round_ in t.rounds:
            messages, weights = self._round_messages(round_)
            grade = round_.end.grade
            out["rounds"].append({"messages": messages, "weights": weights, **meta, "round": round_.number, "public_score": grade.public_score, "held_out_score": grade.held_out_score})
            if messages[: len(joined)] == joined:  # full-history: the round repeats what came before
                start = len(joined)
            else:  # bounded: a fresh context; the system prompt is said once
                start = 1 if joined and messages and messages[0]["role"] == "system" and messages[0] == joined[0] else 0
            joined += messages[start:]
            joined_weights += weights[start:]
        final = t.rounds[-1].end.grade
        out["trajectories"].append({"messages": joined, "weights": joined_weights, **meta, "round": None, "public_score": final.public_score, "held_out_score": final.held_out_score})
        return out


class ShardWriter:
    """Parquet files of about `shard_mb`, named `train-NNNNN-of-MMMMM.parquet` when closed."""

    def __init__(self, folder: Path, config: ExportConfig):
        self.folder, self.config = folder, config
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
            self._writer = pq.ParquetWriter(self._sink, SCHEMA, compression=self.config.compression, write_statistics=True)
        self._writer.write_table(pa.Table.from_pylist(self.buffer, schema=SCHEMA))
        self.counts[-1] += len(self.buffer)
        self.buffer = []
        if self._sink.tell() >= self.config.shard_mb * (1 << 20):
            self._close_shard()

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer = self._sink = None

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


def kept_records(selection_dir: Path) -> Iterator[Path]:
    kept = selection_dir / "kept.jsonl"
    if not kept.is_file():
        raise UserInputError(f"{kept} does not exist; run `arex select --out {selection_dir}` first")
    rows = [json.loads(line) for line in kept.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in sorted(rows, key=lambda r: (r["env_id"], r["key"])):  # a fixed order: deterministic shards
        yield Path(row["path"])


def export(records: Iterator[Path], out: Path, config: ExportConfig, envs_dir: Path | None = None) -> ExportStats:
    """Write shards under `out/<granularity>/` and `out/checksums.json`; returns the statistics
    the dataset card is made from. The output folder is replaced only when everything succeeded."""
    canaries = Canaries.of_envs(p for p in sorted(envs_dir.iterdir()) if (p / "task.yaml").is_file()) if envs_dir and envs_dir.is_dir() else Canaries({})
    unknown = set(config.granularities) - set(GRANULARITIES)
    if unknown:
        raise UserInputError(f"unknown granularity {sorted(unknown)}; choose from {', '.join(GRANULARITIES)}")
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    writers = {g: ShardWriter(staging / g, config) for g in config.granularities}
    builder = RowBuilder(config)
    stats = ExportStats(rows={g: 0 for g in config.granularities})
    seen: set[str] = set()
    try:
        for path in records:
            scan_file(path, canaries)  # the rows hold nothing the record does not
            record = load(path)
            if record.header is None or not record.rounds:
                continue
            if config.dedupe:
                digest = assistant_hash(record)
                if digest in seen:
                    stats.duplicates.append(record.header.key)
                    continue
                seen.add(digest)
            rows = builder.rows(record)
            for granularity, writer in writers.items():
                for row in rows[granularity]:
                    writer.add(row)
                stats.rows[granularity] += len(rows[granularity])
            stats.trajectories += 1
            stats.add(record.header, record.rounds)
        for granularity, writer in writers.items():
            for path, count in writer.close():
                rel = path.relative_to(staging).as_posix()
                stats.shards[rel] = {"rows": count, "bytes": path.stat().st_size, "sha256": file_sha256(path)}
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (staging / "checksums.json").write_text(json.dumps({k: v["sha256"] for k, v in sorted(stats.shards.items())}, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return stats


def token_weights(tokenizer, messages: list[dict], weights: list[float]) -> tuple[list[int], list[float]]:
    """Per-token loss weights for one row under a tokenizer's chat template: each token takes the
    weight of the message its text came from (template tokens around a message go with it).

    For trainers whose template lacks generation markers: pass the result as the loss mask."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    ends = []  # where each message's rendering ends in `text`
    for i in range(1, len(messages) + 1):
        prefix = tokenizer.apply_chat_template(messages[:i], tokenize=False)
        if not text.startswith(prefix):
            raise ValueError("this chat template does not render a conversation as the concatenation of its turns")
        ends.append(len(prefix))
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    out, index = [], 0
    for start, _ in encoded["offset_mapping"]:
        while index < len(ends) - 1 and start >= ends[index]:
            index += 1
        out.append(weights[index])
    return list(encoded["input_ids"]), out
