"""Parquet shards of about `export.shard_mb`, streamed, named when closed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from arex.dataset.config import ExportConfig
from arex.dataset.schema import SCHEMA, storage
from arex.record.storage import naming


class ShardWriter:
    """Parquet files of about `shard_mb`, named `train-NNNNN-of-MMMMM.parquet` when closed."""

    def __init__(self, folder: Path, config: ExportConfig, schema: pa.Schema = SCHEMA):
        self.folder, self.config, self.schema = folder, config, schema
        self.storage = storage(schema)
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
