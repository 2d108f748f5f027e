"""The labelled table of an ML env: prepared without network, split with a seed into training rows,
public and private evaluation rows."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

from arex.envs.judge_sources import SourceError
from arex.envs.ml_source import TABLE_CAP
from arex.sandbox import SandboxConfig, make_sandbox
from arex.specs import MLSpec


# -- data ------------------------------------------------------------------------------------
def prepare_table(spec: MLSpec, checkout: Path, deps: str, sandbox: SandboxConfig) -> bytes:
    if not spec.data.prepare:
        return (checkout / spec.data.table).read_bytes()
    config = sandbox.model_copy(update={"image": deps, "memory": max(sandbox.memory, 2 << 30), "mounts": ()})
    with make_sandbox(config, f"prepare-{spec.id}") as box:
        box.copy_in(checkout, ".")
        result = box.exec(spec.data.prepare, timeout=spec.time_limit_s)
        if not result.ok:
            raise SourceError(f"data.prepare '{spec.data.prepare}' failed ({result.status}, exit {result.exit_code}): {(result.stderr or result.stdout)[-800:]}")
        try:
            return box.read_file(spec.data.table, max_bytes=TABLE_CAP)
        except FileNotFoundError:
            raise SourceError(f"data.prepare '{spec.data.prepare}' did not write data.table '{spec.data.table}'") from None


def split_table(spec: MLSpec, table: bytes) -> tuple[list[str], list[dict], list[dict], list[dict]]:
    """Seeded split → (columns, train rows, public eval rows, private eval rows)."""
    data = spec.data
    rows = list(csv.DictReader(io.StringIO(table.decode("utf-8"))))
    if not rows:
        raise SourceError(f"data.table '{data.table}' has no rows")
    columns = list(rows[0].keys())
    if data.target not in columns:
        raise SourceError(f"data.table '{data.table}' has no target column '{data.target}' (columns: {', '.join(columns[:10])})")
    if data.id_column not in columns:
        for i, row in enumerate(rows):
            row[data.id_column] = str(i)
        columns = [data.id_column] + columns
    rng = random.Random(data.split.seed)
    strata: dict[str, list[dict]] = {}
    for row in rows:
        strata.setdefault(row[data.target] if data.split.stratify else "", []).append(row)
    train, public, private = [], [], []
    for key in sorted(strata):
        group = strata[key]
        rng.shuffle(group)
        n_test = max(2, round(len(group) * data.split.test_fraction)) if len(group) > 3 else round(len(group) * data.split.test_fraction)
        n_public = round(n_test * data.split.public_fraction)
        public += group[:n_public]
        private += group[n_public:n_test]
        train += group[n_test:]
    for part in (train, public, private):
        part.sort(key=lambda r: _sort_key(r[data.id_column]))
    # Evaluation rows are shuffled together so their order gives nothing away.
    return columns, train, public, private


def _sort_key(value: str):
    return (0, int(value), "") if value.lstrip("-").isdigit() else (1, 0, value)


def csv_bytes(columns: list[str], rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def needles(table: bytes, private: list[dict]) -> list[str]:
    """A few private rows as they are written in the labelled table: the leak gate greps for them."""
    original = next(csv.reader(io.StringIO(table.decode("utf-8"))))
    return [csv_bytes(original, [row]).decode().splitlines()[1] for row in private[:3]]
