"""The labelled table of an ML env: prepared without network, split with a seed into training rows,
public and private evaluation rows."""

from __future__ import annotations

import codecs
import csv
import io
import random
from pathlib import Path

from arex.envs.judge_sources import SourceError
from arex.envs.ml_source import TABLE_CAP, tail
from arex.sandbox import SandboxConfig, make_sandbox
from arex.specs import DataSpec, MLSpec


# -- data ------------------------------------------------------------------------------------
def prepare_table(spec: MLSpec, checkout: Path, deps: str, sandbox: SandboxConfig) -> bytes:
    if not spec.data.prepare:
        return (checkout / spec.data.table).read_bytes()
    config = sandbox.model_copy(update={"image": deps, "memory": max(sandbox.memory, 2 << 30), "mounts": ()})
    with make_sandbox(config, f"prepare-{spec.id}") as box:
        box.copy_in(checkout, ".")
        result = box.exec(spec.data.prepare, timeout=spec.time_limit_s)
        if not result.ok:
            raise SourceError(
                f"data.prepare '{spec.data.prepare}' failed ({result.status}, exit {result.exit_code}): "
                f"{tail(result.stderr or result.stdout, 800)}"
            )
        try:
            return box.read_file(spec.data.table, max_bytes=TABLE_CAP)
        except FileNotFoundError:
            raise SourceError(
                f"data.prepare '{spec.data.prepare}' did not write data.table '{spec.data.table}'"
            ) from None


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def detect_encoding(table: bytes) -> str:
    """The table's encoding, guessed as a user would: a byte-order mark says it; else UTF-16 without a
    mark if every other byte is NUL; else UTF-8 if the bytes are valid UTF-8; else the Windows
    single-byte code page most exported spreadsheets use (cp1252), or latin-1 where cp1252 has holes."""
    for bom, codec in _BOMS:  # UTF-32 LE first: its mark starts with UTF-16 LE's
        if table.startswith(bom):
            return codec
    head = table[:4096]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        odd, even = head[1::2].count(0), head[0::2].count(0)
        return "utf-16-le" if odd > even else "utf-16-be"
    for codec in ("utf-8", "cp1252"):
        try:
            table.decode(codec)
            return codec
        except UnicodeDecodeError:
            continue
    return "latin-1"


def decode_table(data: DataSpec, table: bytes) -> tuple[str, str]:
    """The table as text and the encoding read with (data.encoding, or detected when 'auto'); a
    leading byte-order mark is dropped so the first column keeps its name."""
    encoding = detect_encoding(table) if data.encoding == "auto" else data.encoding
    try:
        text = table.decode(encoding)
    except LookupError:
        raise SourceError(
            f"data.encoding '{encoding}' is not a known text encoding: "
            "set it to 'auto' or a codec name such as utf-8, cp1252 or latin-1"
        ) from None
    except UnicodeDecodeError as exc:
        line = table.count(b"\n", 0, exc.start) + 1
        raise SourceError(
            f"data.table '{data.table}' cannot be decoded as {encoding} "
            f"(byte 0x{table[exc.start]:02x} on line {line}): "
            "set data.encoding in the spec to the table's real encoding (e.g. cp1252 or latin-1), "
            "or to 'auto' to let arex detect it"
        ) from None
    return text.removeprefix("\ufeff"), encoding


def decode_text(raw: bytes) -> str:
    """A text file of the repository (its statement) in whatever encoding it was saved with."""
    return raw.decode(detect_encoding(raw), errors="replace").removeprefix("\ufeff")


def split_table(spec: MLSpec, table: bytes | str) -> tuple[list[str], list[dict], list[dict], list[dict]]:
    """Seeded split → (columns, train rows, public eval rows, private eval rows). `table` is the
    decoded text, or the bytes as the repository has them (decoded by `decode_table`)."""
    data = spec.data
    text = table if isinstance(table, str) else decode_table(data, table)[0]
    rows = _rows(data, text)
    if not rows:
        raise SourceError(f"data.table '{data.table}' has no rows")
    columns = list(rows[0].keys())
    if data.target not in columns:
        raise SourceError(
            f"data.table '{data.table}' has no target column '{data.target}' (columns: {', '.join(columns[:10])})"
        )
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
        n_test = (
            max(2, round(len(group) * data.split.test_fraction))
            if len(group) > 3
            else round(len(group) * data.split.test_fraction)
        )
        n_public = round(n_test * data.split.public_fraction)
        public += group[:n_public]
        private += group[n_public:n_test]
        train += group[n_test:]
    for part in (train, public, private):
        part.sort(key=lambda r: _sort_key(r[data.id_column]))
    # Evaluation rows are shuffled together so their order gives nothing away.
    return columns, train, public, private


def column_names(header: list[str]) -> list[str]:
    """The names arex gives a table's columns: the header's, with an empty one named by its position
    (`column_3`) and a repeated one numbered (`v_2`). Real tables have both (spreadsheet exports
    with trailing commas); read as they are, later columns would overwrite earlier ones, and
    pandas names unnamed columns by position, which differs between the train and test files."""
    names: list[str] = []
    for i, raw in enumerate(header):
        name = raw.strip() or f"column_{i + 1}"
        base, k = name, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def _rows(data: DataSpec, text: str) -> list[dict]:
    """The table's rows; a row with more or fewer fields than the header (an unquoted comma, a cut
    line) is an error naming its line, not a crash later in the split."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return []
    names = column_names(header)
    rows = []
    for cells in reader:
        if not cells:
            continue  # a blank line, as csv.DictReader skips it
        if len(cells) != len(names):
            what = "more" if len(cells) > len(names) else "fewer"
            raise SourceError(
                f"data.table '{data.table}' line {reader.line_num} has {what} fields than its header ({len(names)}): "
                "fix that row (quote a field that holds a comma)"
            )
        rows.append(dict(zip(names, cells)))
    return rows


def _sort_key(value: str):
    return (0, int(value), "") if value.lstrip("-").isdigit() else (1, 0, value)


def csv_bytes(columns: list[str], rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()
