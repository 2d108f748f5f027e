"""Finds every file the agent could read from which held-out labels can be recovered.

Runs inside an env's own sandbox (its image, no network) as the agent's user, over the whole
filesystem, so it sees exactly what the agent could open: names and extensions mean nothing to an
agent, so each file is sniffed by its content (magic bytes, else text-ness) and read as the format it
is: delimited text in any encoding, JSON and JSON lines, parquet, feather/arrow, xlsx, pickles and
joblib files (unpickled here: the agent could do the same), npy/npz, and gzip/bz2/xz/zlib/zip
layers around any of them. A file the image has no reader for fails the gate instead of being
skipped. The same module is imported on the host (the probe builder, unit tests), so it uses only the
standard library at import time; pandas, numpy, pyarrow and joblib are used only if importable.

The probe (held-out rows: label, features, identifying keys, id, position) comes from the host in a
file this scan skips. A file leaks when, among the records matched to held-out rows (by the row's
distinctive feature values, by its id, or by its position where ids are positions), one column
equals the held-out label far above chance and not merely because a feature column equals it.

    python3 leak_scan.py PROBE.json REPORT.json [ROOT ...]
"""

from __future__ import annotations

import base64
import binascii
import bz2
import csv
import gzip
import io
import json
import lzma
import math
import os
import pickle
import re
import stat
import sys
import time
import zipfile
import zlib
from collections import Counter
from functools import partial
from typing import Any, Iterable, Iterator
from xml.etree import ElementTree

FILE_CAP = 1 << 30
"""Bytes read of one file (or one decompressed layer); more is not read (and the report says so)."""
PSEUDO = ("/proc", "/sys", "/dev")
EXPLAINED = 0.9
"""A column whose label matches coincide with one feature's value this often is a copy of that feature."""
SIGNIFICANCE = 1e-6
"""A column's label matches must be this unlikely by chance (binomial tail at the majority-label rate)."""
MAX_DEPTH = 4
"""Nested layers (compression, archives) followed within one file."""
OBJECT_DEPTH = 8
"""Nested containers followed within one object (a notebook's output text sits 6 deep)."""

csv.field_size_limit(2**31 - 1)


# -- normalisation ---------------------------------------------------------------------------------
_CACHE: dict[str, str] = {}
_TOKEN = re.compile(r"[^\s,;|\"'\[\](){}=:<>]+")
_NUMBER = re.compile(r"[-+.]?\d[\d.eE+-]*")
"""Numbers only: where every value a text is searched for is a number, other words need no look."""
_NUMERIC_START = frozenset("0123456789-+.")


def norm_float(x: float) -> str:
    """Numbers compare at float32 precision: 1 == 1.0 == "1", 0.1 == float32(0.1)."""
    if x != x or x in (math.inf, -math.inf):
        return ""
    if x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return "%.6g" % x


def norm_str(s: str) -> str:
    out = _CACHE.get(s)
    if out is not None:
        return out
    t = s.strip().strip("\"'").strip()
    if t and (t[0] in _NUMERIC_START or t[:3].lower() in ("nan", "inf")):
        try:
            out = norm_float(float(t))
        except ValueError:
            out = " ".join(t.split()).casefold()
    else:
        low = " ".join(t.split()).casefold()
        out = {"true": "1", "false": "0", "none": "", "null": "", "nan": ""}.get(low, low)
    if len(_CACHE) > 2_000_000:
        _CACHE.clear()
    _CACHE[s] = out
    return out


def norm(v: Any) -> str:
    """Any scalar → the form values are compared in (strings case- and whitespace-normalised)."""
    t = type(v)
    if t is str:
        return norm_str(v)
    if v is None:
        return ""
    if t is bool:
        return "1" if v else "0"
    if t is int:
        return str(v) if abs(v) < 2**53 else "%.6g" % v
    if isinstance(v, float):
        return norm_float(float(v))
    if isinstance(v, (bytes, bytearray)):
        return norm_str(bytes(v).decode("latin-1"))
    item = getattr(v, "item", None)  # numpy and pandas scalars
    if item is not None and getattr(v, "ndim", 0) == 0:
        try:
            inner = item()
        except (TypeError, ValueError):
            inner = str(v)
        if type(inner) is not type(v):
            return norm(inner)
    return norm_str(str(v))


# -- the probe -------------------------------------------------------------------------------------
class Probe:
    """Held-out rows as the host sent them, indexed for matching records against."""

    def __init__(self, data: dict):
        rows = data["rows"]
        self.labels = [r["label"] for r in rows]
        self.features = [r["features"] for r in rows]
        self.keys1: dict[str, list[int]] = {}
        self.keys_n: dict[tuple, list[int]] = {}
        for i, r in enumerate(rows):
            for key in r["keys"]:
                target = self.keys1.setdefault(key[0], []) if len(key) == 1 else self.keys_n.setdefault(tuple(key), [])
                target.append(i)
        self.sizes = sorted({len(k) for k in self.keys_n})
        self.known = frozenset(v for k in self.keys_n for v in k) | {
            v for r in rows for k in r.get("sets", ()) for v in k
        }
        # Keys in any column order: values (with their counts) no other row holds all of, by the first
        # (rarest) value; a copy with its columns reordered holds them though its runs are broken.
        self.sets: dict[str, list[tuple[int, int, tuple]]] = {}
        for i, r in enumerate(rows):
            for values in r.get("sets", ()):
                items = tuple(Counter(values).items())
                self.sets.setdefault(items[0][0], []).append((items[0][1], i, items[1:]))
        for bucket in self.sets.values():
            bucket.sort(key=lambda entry: entry[0])
        self.ids = {r["id"]: i for i, r in enumerate(rows) if r.get("id")}
        self.positions = {r["pos"]: i for i, r in enumerate(rows) if r.get("pos") is not None}
        self.chance = float(data.get("chance", 0.0))
        self.label_set = frozenset(self.labels)
        self.total = len(rows)
        self.table_rows = int(data.get("table_rows", 0))
        self.min_hits = min(20, max(2, self.total // 4))
        # Words worth parsing a text file for: each single-value key's longest word, with the rows it
        # may point to; values of multi-value keys count only where they make up most of the text.
        self.anchors: dict[str, set[int]] = {}
        for key, holders in self.keys1.items():
            self.anchors.setdefault(max(_TOKEN.findall(key) or [key], key=len), set()).update(holders)
        self.words = (
            _NUMBER if all(_NUMBER.fullmatch(v) for v in self.anchors.keys() | self.known | self.ids.keys()) else _TOKEN
        )
        self._by_value: dict[int, dict[str, list[int]]] = {}
        self._values: dict[int, Counter] = {}

    def by_value(self, row: int) -> dict[str, list[int]]:
        """A row's feature positions by value (to tell a label copy from a feature copy)."""
        found = self._by_value.get(row)
        if found is None:
            found = {}
            for f, v in enumerate(self.features[row]):
                found.setdefault(v, []).append(f)
            self._by_value[row] = found
        return found

    def text_relevant(self, text: str) -> bool:
        """Whether a text can hold enough matching records to leak (min_hits rows): it has the key
        values (or ids) of that many rows, and these are long enough to mean something or make up a
        good part of its words; or it is mostly made of values of multi-value keys. Counting words
        runs in C; only distinct words are normalised."""
        counts = Counter(self.words.findall(text))
        words = ((value, n, len(value)) for value, n in ((norm_str(w), n) for w, n in counts.items()))
        chars = sum(len(w) * n for w, n in counts.items())
        return self.relevant(words, sum(counts.values()), chars, len(text), self.anchors, self.ids, self.known)

    def relevant(self, words, total: int, chars: int, length: int, anchors, ids, known) -> bool:
        """`text_relevant` from a text's (normalised word, count, length) triples, its word count,
        word characters and length; the probe's values may be looked up by value or by `hashed` value."""
        known_n = anchor_words = id_words = 0
        rows: set[int] = set()
        long_rows: set[int] = set()
        id_n = 0
        for value, n, size in words:
            holders = anchors.get(value)
            if holders:
                rows |= holders
                anchor_words += n
                if size >= 5:  # a six-digit float or a word: hardly there by chance
                    long_rows |= holders
            if value in ids:
                id_n, id_words = id_n + 1, id_words + n
            if value in known:
                known_n += n
        if len(long_rows) >= self.min_hits or (len(rows) >= self.min_hits and anchor_words * 10 >= total):
            return True
        if id_n >= self.min_hits and id_words * 10 >= total:
            return True  # a list of ids with a few values each: an id → label map
        if not self.sizes or known_n < self.sizes[0] or known_n * 2 < total:
            return False
        # the values are not all numbers, or numbers make up the text
        return self.words is _TOKEN or chars * 4 >= length

    def hashed(self) -> tuple[dict, set, set]:
        """The probe's anchors, ids and known values by `word_hash`, to look up in an index."""
        anchors: dict[int, set[int]] = {}
        for value, holders in self.anchors.items():
            anchors.setdefault(word_hash(value), set()).update(holders)
        return anchors, {word_hash(v) for v in self.ids}, {word_hash(v) for v in self.known}

    def many_lines(self, text: str) -> bool:
        """Whether a text could list most of the table's rows in order (ids are then positions); one
        far longer is something else (its lines past the table's would not line up anyway)."""
        return self.many_items(*line_counts(text))

    def many_items(self, lines: int, commas: int, spaces: int) -> bool:
        return bool(self.positions) and self.table_rows // 2 <= max(lines, commas, spaces) <= 4 * self.table_rows + 10

    def match_keys(self, record: list[str]) -> list[int]:
        """Held-out rows this record holds a key of. One is enough: a key is unique in the whole table,
        so no training row holds it, and chance matches elsewhere agree with the label only by chance."""
        found: dict[int, None] = {}
        if not self.keys1.keys().isdisjoint(record):
            for v in record:
                for r in self.keys1.get(v, ()):
                    found[r] = None
        if self.sizes and len(record) >= self.sizes[0] and not self.known.isdisjoint(record):
            for s in self.sizes:
                for j in range(len(record) - s + 1):
                    for r in self.keys_n.get(tuple(record[j : j + s]), ()):
                        found[r] = None
        counts: Counter | None = None
        if self.sets and len(record) > 1 and not self.sets.keys().isdisjoint(record):
            counts = Counter(record)
            for v, c in counts.items():
                for m, r, rest in self.sets.get(v, ()):
                    if m > c:
                        break
                    if all(counts.get(x, 0) >= k for x, k in rest):
                        found[r] = None
        if len(found) > 1:
            # A record with its columns reordered can hold another row's run by chance: where some of
            # the rows it matched have all their values in it, those are the row it is.
            counts = counts or Counter(record)
            whole = [r for r in found if all(counts.get(v, 0) >= n for v, n in self.row_values(r).items())]
            if whole:
                return whole
        return list(found)

    def row_values(self, row: int) -> Counter:
        found = self._values.get(row)
        if found is None:
            found = self._values[row] = Counter(v for v in self.features[row] if v)
        return found


def line_counts(text: str) -> tuple[int, int, int]:
    """Lines, commas, and (in a printed list, `[1 0 2]`) spaces: how many items a text may list."""
    return text.count("\n"), text.count(","), text.count(" ") if text.lstrip()[:1] == "[" else 0


def is_notebook(text: str) -> bool:
    """A JSON document with output cells (a Jupyter notebook): its outputs are read whatever its words."""
    return text.lstrip()[:1] == "{" and '"outputs"' in text


def word_hash(value: str) -> int:
    """A normalised word as 32 bits (an index stores these; a collision only costs a file's rescan)."""
    return zlib.crc32(value.encode("utf-8", "surrogatepass"))


def binomial_tail(hits: int, n: int, p: float) -> float:
    """P(X >= hits) for X ~ Binomial(n, p)."""
    if hits <= 0:
        return 1.0
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    logs = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)
        for k in range(hits, n + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


# -- one table's evidence --------------------------------------------------------------------------
class TableStats:
    """Matches of one table's records to held-out rows, and which columns equal the label, by how
    the rows were matched: ("key",) distinctive values, ("id", c) the id in column c, ("pos", k)
    the record's position (ids are positions) with k header lines."""

    def __init__(self, probe: Probe, name: str):
        self.probe, self.name = probe, name
        self.records = 0
        self.header: list[str] | None = None
        self.matched: dict[tuple, set[int]] = {}
        self.matched_count: Counter = Counter()
        self.hits: dict[tuple, set[int]] = {}
        self.hit_count: Counter = Counter()
        self.align: dict[tuple, Counter] = {}
        # For the null rate of each column: the matched rows' labels, and the label values each
        # column holds in the matched records (by record, as the rates count).
        self.matched_labels: dict[tuple, Counter] = {}
        self.column_values: dict[tuple, Counter] = {}

    def add(self, record: list[str], index: int) -> None:
        probe = self.probe
        if self.header is None:
            self.header = record
        self.records += 1
        for r in probe.match_keys(record):
            self._compare(("key",), r, record)
        if probe.ids and not probe.ids.keys().isdisjoint(record):
            for c, v in enumerate(record):
                r = probe.ids.get(v)
                if r is not None:
                    self._compare(("id", c), r, record)
        if probe.positions:
            for k in (0, 1):
                r = probe.positions.get(index - k)
                if r is not None:
                    self._compare(("pos", k), r, record)

    def _compare(self, mode: tuple, row: int, record: list[str]) -> None:
        self.matched.setdefault(mode, set()).add(row)
        self.matched_count[mode] += 1
        label = self.probe.labels[row]
        self.matched_labels.setdefault(mode, Counter())[label] += 1
        values = self.column_values.setdefault(mode, Counter())
        for d, v in enumerate(record):
            if v in self.probe.label_set:
                values[(d, v)] += 1
        if not label or label not in record:
            return
        features = self.probe.by_value(row).get(label, ())
        for d, v in enumerate(record):
            if v == label:
                key = mode + (d,)
                self.hits.setdefault(key, set()).add(row)
                self.hit_count[key] += 1
                if features:
                    self.align.setdefault(key, Counter()).update(features)

    def leaks(self) -> list[dict]:
        """Columns from which held-out labels are recovered far above chance."""
        p, best = self.probe.chance, {}
        level = SIGNIFICANCE / max(1, len(self.hits))  # every (column, way of matching) tried is one test
        for key, rows in self.hits.items():
            # Rates count matched records, not rows: a row matched by many records (an id value that
            # recurs in a big numeric table) is not recovered because one of them happens to agree.
            n, h = self.matched_count[key[:-1]], self.hit_count[key]
            q = max(p, self._null_rate(key))
            if len(rows) < self.probe.min_hits or h / n < q + (1 - q) / 2 or binomial_tail(h, n, q) > level:
                continue
            explained = max(self.align.get(key, Counter()).values(), default=0) / self.hit_count[key]
            if explained >= EXPLAINED:
                continue  # the column is a copy of a feature that happens to equal the label
            if len(rows) > best.get(key[-1], {}).get("recovered", 0):
                best[key[-1]] = {
                    "path": self.name,
                    "recovered": len(rows),
                    "matched": len(self.matched[key[:-1]]),
                    "of": self.probe.total,
                    "column": self._column(key[-1]),
                    "how": _how(key[:-1]),
                }
        return sorted(best.values(), key=lambda leak: -leak["recovered"])

    def _null_rate(self, key: tuple) -> float:
        """How often column d would equal the matched row's label if the column's values were
        independent of which row matched: sum over labels of P(label) x P(column = label). Keys that
        happen to occur in unrelated data (small numbers in a lookup table) mostly match rows of
        one label, and such a column holds that value often: agreement by chance, not a leak."""
        mode, d = key[:-1], key[-1]
        n = self.matched_count[mode]
        labels, values = self.matched_labels.get(mode, Counter()), self.column_values.get(mode, Counter())
        return sum(k / n * values[(d, label)] / n for label, k in labels.items()) if n else 0.0

    def _column(self, d: int) -> str:
        name = self.header[d] if self.header and d < len(self.header) else ""
        return f"column {d + 1}" + (f" ({name[:40]!r})" if name and name != self.probe.labels[0] else "")


def _how(mode: tuple) -> str:
    if mode[0] == "key":
        return "rows found by their feature values"
    if mode[0] == "id":
        return f"rows found by their id in column {mode[1] + 1}"
    return "rows found by their position" + (" after a header line" if mode[1] else "")


# -- sniffing and reading --------------------------------------------------------------------------
class Unreadable(Exception):
    """A data file this image cannot read: the gate fails rather than skip it."""


_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"PAR1", "parquet"),
    (b"ARROW1", "arrow"),
    (b"FEA1", "feather1"),
    (b"\x93NUMPY", "npy"),
    (b"\x5d\x00\x00", "lzma"),
)


def sniff(head: bytes) -> str:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if len(head) >= 2 and head[0] == 0x78 and head[1] in (0x01, 0x5E, 0x9C, 0xDA):
        return "zlib"
    if not head:
        return "empty"
    return "text" if is_text(head) else "binary"


def is_text(head: bytes) -> bool:
    """Text in some encoding: UTF-16/32 (by mark or NUL pattern), or few control bytes and no NUL."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        return True
    sample = head[:8192]
    if head.startswith(b"\x7fELF"):
        return False
    if len(sample) >= 4 and sample.count(0) * 3 >= len(sample):
        even, odd = sample[0::2].count(0) / len(sample[0::2]), sample[1::2].count(0) / len(sample[1::2])
        return (odd >= 0.9 and even <= 0.05) or (even >= 0.9 and odd <= 0.05)  # UTF-16 without a mark
    if 0 in sample:
        return False
    return len(sample.translate(None, _TEXT_BYTES)) * 20 < len(sample)


_TEXT_BYTES = bytes([7, 8, 9, 10, 12, 13, 27, *range(32, 256)])
"""Bytes text is made of; few others (control bytes) may appear in a text file."""


def decode(data: bytes) -> str:
    """Text as the agent would read it: a byte-order mark, UTF-16 by its NULs, UTF-8, else latin-1."""
    for mark, codec in (
        (b"\xff\xfe\x00\x00", "utf-32"),
        (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xef\xbb\xbf", "utf-8-sig"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    ):
        if data.startswith(mark):
            return data.decode(codec, errors="replace")
    head = data[:4096]
    if len(head) >= 4 and head.count(0) * 3 >= len(head):
        return data.decode("utf-16-le" if head[1::2].count(0) > head[0::2].count(0) else "utf-16-be", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _decompress(kind: str, data: bytes) -> bytes:
    try:
        if kind == "zlib":
            return zlib.decompressobj().decompress(data, FILE_CAP)
        opener = {
            "gzip": gzip.open,
            "bz2": bz2.open,
            "xz": lzma.open,
            "lzma": partial(lzma.open, format=lzma.FORMAT_ALONE),
        }[kind]
        with opener(io.BytesIO(data)) as f:
            return f.read(FILE_CAP)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
        raise _NotData(f"corrupt {kind} data: {exc}") from None


class _NotData(Exception):
    """Bytes that look like a format by their magic but are not (a coincidence, or corrupt): skipped."""


def tables(name: str, data: bytes, probe: Probe, depth: int = 0) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """Every table in one file's bytes as (name, raw records), through compression and archives."""
    kind = sniff(data[:8192])
    if kind in ("gzip", "bz2", "xz", "lzma", "zlib") and depth < MAX_DEPTH:
        yield from tables(name, _decompress(kind, data), probe, depth + 1)
    elif kind == "zip" and depth < MAX_DEPTH:
        yield from _zip_tables(name, data, probe, depth)
    elif kind in ("parquet", "arrow", "feather1"):
        yield from object_tables(name, _read_arrow(kind, data), depth, probe)
    elif kind == "npy":
        yield from object_tables(name, _read_npy(data), depth, probe)
    elif kind == "pickle":
        obj = _unpickle(data)
        if callable(getattr(obj, "predict", None)):
            MODELS.append(name)  # the scan says which models it read (rows they keep are searched like any)
        yield from object_tables(name, obj, depth, probe)
    elif kind == "text":
        yield from text_tables(name, decode(data), probe, depth)


def _zip_tables(name: str, data: bytes, probe: Probe, depth: int) -> Iterator[tuple[str, Iterable[list], list | None]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _NotData(f"corrupt zip: {exc}") from None
    names = {m.filename for m in members}
    if "xl/workbook.xml" in names:
        yield from _xlsx_tables(name, archive, names)
        return
    if members and all(m.filename.endswith(".npy") for m in members):  # npz
        arrays = {m.filename[:-4]: _read_npy(archive.read(m)) for m in members}
        yield from object_tables(name, arrays, depth, probe)
        return
    for member in members:
        if member.file_size > FILE_CAP:
            continue
        try:
            blob = archive.read(member)
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, zlib.error):
            continue  # encrypted or corrupt member: the agent cannot read it either
        try:
            yield from tables(f"{name}:{member.filename}", blob, probe, depth + 1)
        except _NotData:
            continue


def _read_arrow(kind: str, data: bytes):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise Unreadable(f"a {kind} file and no reader for it in the image (pyarrow is not installed)") from None
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(io.BytesIO(data)).to_pydict()
        import pyarrow.feather as feather

        return feather.read_table(io.BytesIO(data)).to_pydict()
    except Exception as exc:  # noqa: BLE001 - any reader failure is reported, never skipped
        raise Unreadable(f"{kind} that pyarrow cannot read ({type(exc).__name__}: {str(exc)[:200]})") from None


def _read_npy(data: bytes):
    try:
        import numpy
    except ImportError:
        return _npy_stdlib(data)
    try:
        return numpy.load(io.BytesIO(data), allow_pickle=True, encoding="latin1")
    except Exception as exc:  # noqa: BLE001 - any reader failure is reported, never skipped
        raise Unreadable(f"an npy array numpy cannot load ({type(exc).__name__}: {str(exc)[:200]})") from None


_NPY_CODES = {
    "f8": "d",
    "f4": "f",
    "i8": "q",
    "i4": "i",
    "i2": "h",
    "i1": "b",
    "u8": "Q",
    "u4": "I",
    "u2": "H",
    "u1": "B",
    "b1": "?",
}


def _npy_stdlib(data: bytes) -> list:
    """An npy array of plain numbers without numpy (the agent could parse it with struct too)."""
    import ast
    import struct

    major = data[6]
    size_len = 2 if major == 1 else 4
    header_len = int.from_bytes(data[8 : 8 + size_len], "little")
    start = 8 + size_len + header_len
    header = ast.literal_eval(data[8 + size_len : start].decode("latin-1"))
    descr, shape = header["descr"], tuple(header["shape"])
    code = _NPY_CODES.get(descr[1:]) if isinstance(descr, str) else None
    if code is None:
        raise Unreadable(f"an npy array of dtype {descr!r} and no numpy in the image to read it")
    count = math.prod(shape)
    flat = list(struct.unpack_from(("<" if descr[0] in "<|" else ">") + code * count, data, start))
    if len(shape) < 2:
        return flat
    width = count // shape[0]
    if header.get("fortran_order"):
        return [[flat[r + c * shape[0]] for c in range(width)] for r in range(shape[0])]
    return [flat[r * width : (r + 1) * width] for r in range(shape[0])]


def _unpickle(data: bytes):
    """The object as the agent would load it: joblib first if the image has it (it reads plain pickles
    too), then pickle. A pickle naming classes the image lacks is unreadable (what it holds is
    unknown); one the libraries here refuse for another reason (an old format) is read with every
    class stubbed, which keeps whatever plain values it holds."""
    loaders = []
    try:
        import joblib

        loaders += [lambda: joblib.load(io.BytesIO(data)), lambda: _joblib_latin1(data)]
    except ImportError:
        pass
    loaders += [lambda: pickle.loads(data), lambda: pickle.loads(data, encoding="latin1")]
    first: BaseException | None = None
    for load in loaders:
        try:
            return load()
        except Exception as exc:  # noqa: BLE001 - any loader failure is reported, never skipped
            first = first or exc
    missing = _missing_classes(data)
    if missing:
        raise Unreadable(
            "a pickle of classes this image cannot import "
            f"({', '.join(sorted(missing)[:3])}; {type(first).__name__}: {str(first)[:150]})"
        )
    try:
        return _StubUnpickler(io.BytesIO(data)).load()
    except Exception:  # noqa: BLE001 - a stream even stubs cannot read is reported
        raise Unreadable(f"a pickle this image cannot load ({type(first).__name__}: {str(first)[:200]})") from None


def _joblib_latin1(data: bytes):
    """A joblib file written by Python 2 (joblib refuses those; its unpickler reads them with latin-1 strings)."""
    import inspect

    from joblib.numpy_pickle import NumpyUnpickler

    params = inspect.signature(NumpyUnpickler.__init__).parameters
    unpickler = NumpyUnpickler(
        "",
        io.BytesIO(data),
        **{k: v for k, v in (("ensure_native_byte_order", True), ("mmap_mode", None)) if k in params},
    )
    pickle._Unpickler.__init__(unpickler, unpickler.file_handle, encoding="latin1")
    return unpickler.load()


class _Stub:
    """Stands in for any class of a pickle read without its libraries: keeps the arguments and state."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = list(args), kwargs

    def __setstate__(self, state):
        self.state = state

    def __setitem__(self, key, value):
        self.__dict__.setdefault("items", {})[key] = value

    def append(self, value):
        self.__dict__.setdefault("items_list", []).append(value)

    def extend(self, values):
        self.__dict__.setdefault("items_list", []).extend(values)


class _StubUnpickler(pickle.Unpickler):
    def __init__(self, file):
        super().__init__(file, encoding="latin1")

    def find_class(self, module, name):
        return type(name, (_Stub,), {})


def _missing_classes(data: bytes) -> set[str]:
    """Classes a pickle names that cannot be imported here (read from its opcodes, nothing run)."""
    import pickletools

    missing: set[str] = set()
    recent: list[Any] = [None, None]  # the last two values pushed: STACK_GLOBAL's module and name
    memo: dict[Any, Any] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                memo[len(memo) if op.name == "MEMOIZE" else arg] = recent[-1]
                continue
            if op.name == "GLOBAL":
                _check_class(*arg.split(" ", 1), missing)
            elif op.name == "STACK_GLOBAL" and all(isinstance(x, str) for x in recent):
                _check_class(recent[0], recent[1], missing)
            value = (
                arg if "UNICODE" in op.name else memo.get(arg) if op.name in ("GET", "BINGET", "LONG_BINGET") else None
            )
            recent = [recent[-1], value]
    except Exception:  # noqa: BLE001 - a stream pickletools cannot walk has no class list to give
        pass
    return missing


def _check_class(module: str, name: str, missing: set[str]) -> None:
    import importlib

    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - any import failure means the class is missing here
        missing.add(f"{module}.{name}")


def _xlsx_tables(
    name: str, archive: zipfile.ZipFile, names: set[str]
) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """Sheets of an xlsx workbook, read with the standard library (no openpyxl needed: nor does the agent)."""

    def local(tag: str) -> str:
        return tag.rsplit("}", 1)[-1]

    shared: list[str] = []
    if "xl/sharedStrings.xml" in names:
        for si in ElementTree.fromstring(archive.read("xl/sharedStrings.xml")):
            shared.append("".join(t.text or "" for t in si.iter() if local(t.tag) == "t"))
    for sheet in sorted(n for n in names if n.startswith("xl/worksheets/") and n.endswith(".xml")):
        rows = []
        for row in (e for e in ElementTree.fromstring(archive.read(sheet)).iter() if local(e.tag) == "row"):
            cells: dict[int, str | None] = {}
            for cell in (c for c in row if local(c.tag) == "c"):
                ref = re.match(r"[A-Z]+", cell.get("r") or "")
                col = (
                    sum((ord(ch) - 64) * 26**i for i, ch in enumerate(reversed(ref.group()))) - 1 if ref else len(cells)
                )
                kind = cell.get("t")
                value = next((v.text for v in cell if local(v.tag) == "v"), None)
                if kind == "s" and value is not None:
                    value = shared[int(value)]
                elif kind == "inlineStr":
                    value = "".join(t.text or "" for t in cell.iter() if local(t.tag) == "t")
                cells[col] = value
            rows.append([cells.get(i) for i in range(max(cells) + 1)] if cells else [])
        yield f"{name}:{sheet}", rows, None


# -- text ------------------------------------------------------------------------------------------
_LOOSE = re.compile(r"[\s,;|]+")


def text_tables(
    name: str, text: str, probe: Probe, depth: int = 0, inner: bool = False
) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """JSON (a notebook's outputs too), JSON lines, a printed list, HTML tables, delimited text (the
    delimiter found by parsing a sample), one value per line, or loose text (tokens and the whole
    line, for data pasted into anything else); and whatever base64 runs in it decode to. Texts that
    cannot hold a matching record are passed over, except a notebook's and the `inner` texts of an
    object (a notebook's outputs: their words are not the whole file's)."""
    if depth < OBJECT_DEPTH:
        yield from _base64_tables(name, text, probe, depth)
    relevant = inner or probe.text_relevant(text)
    if not relevant and not probe.many_lines(text) and not is_notebook(text):
        return
    if text.lstrip()[:1] in ("[", "{"):
        try:
            yield from object_tables(name, json.loads(text), depth, probe)
            return
        except ValueError:
            pass
        try:
            yield from object_tables(
                name, [json.loads(line) for line in text.splitlines() if line.strip()], depth, probe
            )
            return
        except ValueError:
            pass
        listed = _printed_list(text)
        if listed is not None:
            yield name, ([v] for v in listed), None
            return
    if "<td" in text or "<TD" in text:
        yield from _html_tables(name, text)
    layout = text_layout(text)
    if layout not in ("columns", ""):
        yield name, _csv_rows(text, layout), None
    elif layout == "columns":
        yield name, (line.split() for line in text.splitlines() if line.strip()), None
    elif relevant:
        yield name, (_LOOSE.split(line.strip()) + [line] for line in text.splitlines() if line.strip()), None


def text_layout(text: str) -> str:
    """How a text lines up, found by parsing a sample: its delimiter, "columns" (the same number of
    words on most lines), or "" (loose text: read only if its words could hold a probe's rows)."""
    sample = text[:65536].rsplit("\n", 1)[0] if len(text) > 65536 else text
    best: tuple[float, int, str] = (0.0, 0, "")
    for delimiter in (",", "\t", ";", "|"):
        try:
            counts = [len(r) for r in csv.reader(io.StringIO(sample), delimiter=delimiter) if r][:200]
        except csv.Error:
            continue
        width, share = _modal(counts)
        if width >= 2 and share >= 0.8:
            best = max(best, (share, width, delimiter))
    if best[2]:
        return best[2]
    lines = [line for line in sample.splitlines() if line.strip()][:200]
    width, share = _modal([len(line.split()) for line in lines])
    return "columns" if share >= 0.8 and width >= 1 else ""


def shaped(text: str) -> bool:
    """Whether a text yields a table whatever the probe (JSON, a printed list, HTML, delimited text or
    columns): only such a text can list the table's rows in order without holding their values."""
    start = text.lstrip()[:1]
    return start in ("[", "{") or "<td" in text or "<TD" in text or text_layout(text) != ""


_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4}(?:\r?\n)?){24,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
"""Runs of base64 (wrapped or not) long enough to hold a table (72 bytes or more)."""


def _base64_blobs(text: str) -> Iterator[bytes]:
    """What the base64 runs of a text decode to, where that is data (not an image, random bytes)."""
    for found in _BASE64.finditer(text):
        run = found.group()
        if not (re.search(r"\d", run) and re.search(r"[a-z]", run) and re.search(r"[A-Z]", run)):
            continue  # an identifier or a hex digest, not base64
        try:
            blob = base64.b64decode("".join(run.split()))
        except (binascii.Error, ValueError):
            continue
        kind = sniff(blob[:8192])
        if kind not in ("binary", "empty") and (kind != "pickle" or _walks(blob)):
            yield blob  # (a pickle by its first two bytes only is random bytes)


def _base64_tables(name: str, text: str, probe: Probe, depth: int) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """Tables in what base64 runs of a text decode to (a whole file, or a string inside code or JSON)."""
    for blob in _base64_blobs(text):
        try:
            yield from tables(f"{name}:base64", blob, probe, depth + 1)
        except _NotData:
            continue


def _walks(data: bytes) -> bool:
    """Whether pickle opcodes read to the end of `data` (a real pickle, not two bytes that look like one)."""
    import pickletools

    try:
        for _ in pickletools.genops(data):
            pass
        return True
    except Exception:  # noqa: BLE001 - any failure means it is no pickle
        return False


def _printed_list(text: str) -> list[str] | None:
    """The values of a list printed by Python or numpy (`[1, 0, 2]`, `[1 0 2\n 2 1]`); None if it is not one."""
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")) or "[" in inner[1:-1] or "]" in inner[1:-1]:
        return None
    values = [v.strip("'\"") for v in re.split(r"[\s,]+", inner[1:-1].strip()) if v]
    return values if len(values) >= 2 else None


_HTML_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S | re.I)
_HTML_CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S | re.I)
_HTML_TAG = re.compile(r"<[^>]+>")


def _html_tables(name: str, text: str) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """Rows of the HTML tables in a text (a notebook's rendered frame, a saved report)."""
    rows = [[_HTML_TAG.sub("", c).strip() for c in _HTML_CELL.findall(row)] for row in _HTML_ROW.findall(text)]
    if len(rows) >= 2:
        yield f"{name}:html", rows, None


def _modal(counts: list[int]) -> tuple[int, float]:
    if not counts:
        return 0, 0.0
    width, n = Counter(counts).most_common(1)[0]
    return width, n / len(counts)


_DECIMAL_COMMA = re.compile(r"-?\d+,\d+")


def _csv_rows(text: str, delimiter: str) -> Iterator[list]:
    """Records of delimited text; where commas do not delimit, `3,14` is the number 3.14 (decimal comma)."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    comma = delimiter != "," and "," in text
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            continue  # a malformed line (a NUL, an unclosed quote at the end): the rest is still read
        if row:
            yield [c.replace(",", ".") if _DECIMAL_COMMA.fullmatch(c) else c for c in row] if comma else row


# -- objects (unpickled, parsed JSON, arrays, arrow tables) ----------------------------------------
def _scalar(v: Any) -> bool:
    return (
        v is None or isinstance(v, (str, int, float, bytes)) or (hasattr(v, "item") and getattr(v, "ndim", None) == 0)
    )


def _is_frame(v: Any) -> bool:
    return not isinstance(v, type) and hasattr(v, "columns") and hasattr(v, "to_numpy") and hasattr(v, "index")


def _is_array(v: Any) -> bool:
    return (
        not isinstance(v, type)
        and hasattr(v, "dtype")
        and hasattr(v, "tolist")
        and hasattr(v, "shape")
        and not hasattr(v, "index")
    )


def _rows_of(v: Any) -> list[list] | None:
    """A column-like value (frame, series, array, list) as rows of scalars; None if it is not one."""
    if isinstance(v, type):
        return None
    if hasattr(v, "toarray") and hasattr(v, "nnz") and math.prod(v.shape) <= 50_000_000:
        v = v.toarray()
    if _is_frame(v):
        return [list(row) for row in v.to_numpy(dtype=object).tolist()]
    if hasattr(v, "to_numpy") and hasattr(v, "index") and getattr(v, "ndim", 0) == 1:  # a pandas Series
        return [[x] for x in v.to_numpy(dtype=object).tolist()]
    if _is_array(v):
        if getattr(v.dtype, "names", None):
            return [list(r) for r in v.tolist()]
        if v.ndim == 0:
            return None
        flat = v.reshape(v.shape[0], -1) if v.ndim > 2 else v
        rows = flat.tolist()
        return [r if isinstance(r, list) else [r] for r in rows]
    if isinstance(v, dict) and v and all(_scalar(x) for x in v.values()):  # a JSON column {"row": value}
        return [[x] for x in v.values()]
    if isinstance(v, (list, tuple)) and v:
        if _lines(v):
            return None  # text split in lines (a notebook's output): read as text, not as a column
        if all(_scalar(x) for x in v):
            return [[x] for x in v]
        if all(isinstance(x, (list, tuple)) and all(_scalar(y) for y in x) for x in v):
            return [list(x) for x in v]
        if all(isinstance(x, dict) and all(_scalar(y) for y in x.values()) for x in v):
            keys = list(dict.fromkeys(k for x in v for k in x))
            return [[x.get(k) for k in keys] for x in v]
    return None


def _columnar(parts: list[tuple[Any, Any]]) -> tuple[list[list], list[str], set] | None:
    """Values of one length side by side ({"data": X, "target": y}, (X, y), a column dict) as one table."""
    shaped = [(key, rows) for key, v in parts if (rows := _rows_of(v)) is not None and len(rows) >= 2]
    if not shaped:
        return None
    length = Counter(len(rows) for _, rows in shaped).most_common(1)[0][0]
    shaped = [(key, rows) for key, rows in shaped if len(rows) == length]
    header = [f"{key}[{j}]" if len(rows[0]) > 1 else str(key) for key, rows in shaped for j in range(len(rows[0]))]
    return [[x for _, rows in shaped for x in rows[i]] for i in range(length)], header, {key for key, _ in shaped}


def _lines(v: Any) -> bool:
    """A list of strings most of which end a line: text as notebooks and readlines() store it."""
    return (
        isinstance(v, list)
        and (len(v) >= 2 or (len(v) == 1 and _texty(v[0])))
        and all(isinstance(x, str) for x in v)
        and sum(x.endswith("\n") for x in v) * 2 >= len(v)
    )


def _texty(v: Any) -> bool:
    """A string worth reading as a text of its own: several lines, or one long run (base64)."""
    return isinstance(v, str) and len(v) >= 96 and ("\n" in v or " " not in v[:96])


def _container_tables(
    name: str, obj: Any, depth: int, probe: Probe | None
) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """A dict or mixed list: its {key: value} map, its column-like values side by side, its rows
    of dicts, and the tables inside its values."""
    items = list(obj.items()) if isinstance(obj, dict) else list(enumerate(obj))
    if isinstance(obj, dict) and len(obj) >= (probe.min_hits if probe else 2) and all(map(_scalar, obj.values())):
        yield f"{name}:(by key)", [[k, v] for k, v in items], None  # a {"row": label} map
    combined = _columnar(items)
    used: set = set()
    if combined is not None:
        yield name, combined[0], combined[1]
        used = combined[2]
    if (
        isinstance(obj, dict)
        and len(obj) >= 2
        and all(isinstance(v, dict) and all(_scalar(x) for x in v.values()) for v in obj.values())
    ):
        # a JSON {"row": {"column": value}}
        yield f"{name}(by row)", [[k, *v.values()] for k, v in obj.items()], None
    if depth < OBJECT_DEPTH:
        for key, child in items[:1000]:
            if key not in used and (not _scalar(child) or _texty(child)):
                yield from object_tables(f"{name}[{key!r}]", child, depth + 1, probe)


def object_tables(
    name: str, obj: Any, depth: int = 0, probe: Probe | None = None
) -> Iterator[tuple[str, Iterable[list], list | None]]:
    """Every table inside an object: frames (with their index), series, arrays, lists of records,
    a {key: value} map as rows of both, column-like values side by side, and texts inside (a
    notebook's outputs, a string of base64); containers are searched a few levels deep."""
    if probe is not None and (_texty(obj) or _lines(obj)):
        if depth < OBJECT_DEPTH:
            text = obj if isinstance(obj, str) else "".join(obj)
            yield from text_tables(f"{name}:(text)", text, probe, depth + 1, inner=True)
        return
    if _is_frame(obj):
        header = [str(obj.index.name or "index")] + [str(c) for c in obj.columns]
        yield name, ([i, *row] for i, row in zip(obj.index.tolist(), obj.to_numpy(dtype=object).tolist())), header
        return
    if (
        not isinstance(obj, type)
        and hasattr(obj, "to_numpy")
        and hasattr(obj, "index")
        and getattr(obj, "ndim", 0) == 1
    ):
        yield (
            name,
            ([i, v] for i, v in zip(obj.index.tolist(), obj.to_numpy(dtype=object).tolist())),
            ["index", str(getattr(obj, "name", "") or "")],
        )
        return
    if isinstance(obj, dict) or (
        isinstance(obj, (list, tuple))
        and obj
        and not all(_scalar(x) or isinstance(x, (list, tuple, dict)) for x in obj)
    ):
        yield from _container_tables(name, obj, depth, probe)
        return
    rows = _rows_of(obj)
    if rows is not None:
        yield name, rows, None
    if isinstance(obj, list) and depth < OBJECT_DEPTH:  # records with texts or containers inside (notebook cells)
        for i, x in enumerate(obj[:1000]):
            if isinstance(x, dict) and not all(_scalar(v) and not _texty(v) for v in x.values()):
                yield from object_tables(f"{name}[{i}]", x, depth + 1, probe)
    if rows is not None or isinstance(obj, list):
        return
    if _is_array(obj) and obj.ndim == 0 and depth < OBJECT_DEPTH:
        yield from object_tables(name, obj.item(), depth + 1, probe)
    elif hasattr(obj, "__dict__") and depth < OBJECT_DEPTH and not isinstance(obj, type):
        yield from object_tables(name, dict(vars(obj)), depth + 1, probe)


# -- the scan --------------------------------------------------------------------------------------
FILE_CPU = 60.0
"""CPU-seconds reading one file may take: a file that takes longer fails the gate, named (an object
too big to search in time says nothing of what it holds), instead of the whole scan timing out."""
PROGRESS_EVERY = 2.0
"""Seconds between the scan's progress notes: what it was reading, should it be stopped."""
MODELS: list[str] = []
"""Objects with a `predict` unpickled from the current file (models: the report names them)."""


class _TooSlow(BaseException):
    """Raised by the CPU timer in whatever reader runs (a BaseException: readers catch Exception)."""


def _too_slow(signum, frame):
    raise _TooSlow()


def _cpu_budget(seconds: float) -> None:
    """Arm (or with 0, disarm) the per-file CPU timer, where this process can (main thread, POSIX)."""
    import signal
    import threading

    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        if seconds:
            signal.signal(signal.SIGPROF, _too_slow)
        signal.setitimer(signal.ITIMER_PROF, seconds)


class Scan:
    """Walks folders file by file, reading each as what it is, and collects leaks and unreadable files.
    With a `plan` (from the dependency image's index) a file the image already had, unchanged, is read
    only if the plan names it (its words could hold this probe's rows)."""

    def __init__(self, probe: Probe | None, skip: Iterable[str] = (), plan: dict | None = None):
        self.probe = probe
        self.skip = {os.path.abspath(s) for s in skip}
        self.files = self.records = self.bytes = self.denied = self.truncated = self.indexed = 0
        self.kinds: Counter = Counter()
        self.leaks: list[dict] = []
        self.unreadable: list[dict] = []
        self.models: list[str] = []
        self.plan = plan
        self.rescan = frozenset(plan["rescan"]) if plan else frozenset()
        self.always = tuple(a.rstrip("/") + "/" for a in plan.get("always", ())) if plan else ()
        self.progress: str | None = None
        self._noted = 0.0

    def walk(self, roots: Iterable[str]) -> Iterator[tuple[str, os.stat_result]]:
        """Regular files under `roots` (each once, links not followed), outside /proc, /sys, /dev and `skip`."""
        seen: set[tuple[int, int]] = set()
        for root in roots:
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if os.path.join(folder, d) not in PSEUDO and os.path.join(folder, d) not in self.skip
                )
                for f in sorted(files):
                    path = os.path.join(folder, f)
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if path in self.skip or not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    if self.planned_away(path, st):
                        self.indexed += 1
                        continue
                    yield path, st

    def planned_away(self, path: str, st: os.stat_result) -> bool:
        """Whether the plan lets this file go unread: the dependency image's own, unchanged (size and
        modification time), outside the env's folders, and not among the files the lookup named."""
        if not self.plan or path in self.rescan or path.startswith(self.always):
            return False
        known = self.plan["files"].get(path)
        return known is not None and known[0] == st.st_size and known[1] == st.st_mtime_ns

    def note(self, path: str) -> None:
        """Where the scan is, every PROGRESS_EVERY seconds: a scan stopped from outside still says it."""
        now = time.monotonic()
        if self.progress and now - self._noted >= PROGRESS_EVERY:
            self._noted = now
            try:
                with open(self.progress, "w", encoding="utf-8") as f:
                    json.dump({"files": self.files, "path": path}, f)
            except OSError:
                pass

    def read(self, path: str) -> tuple[str, bytes, int] | None:
        """(kind, bytes to read, size); None if the agent cannot open it either."""
        try:
            with open(path, "rb") as f:
                head = f.read(8192)
                kind = sniff(head)
                data = head + f.read(FILE_CAP + 1 - len(head)) if kind not in ("binary", "empty") else head
                return kind, data, os.fstat(f.fileno()).st_size
        except OSError:
            self.denied += 1
            return None

    def file(self, path: str) -> None:
        self.note(path)
        found = self.read(path)
        if found is None:
            return
        kind, data, size = found
        self.files += 1
        self.bytes += size
        self.kinds[kind] += 1
        if kind in ("binary", "empty"):
            return
        self.truncated += len(data) > FILE_CAP
        MODELS.clear()
        _cpu_budget(FILE_CPU)
        try:
            for name, rows, header in tables(path, data[:FILE_CAP], self.probe):
                self.table(name, rows, header)
        except _TooSlow:
            self.unreadable.append({"path": path, "reason": _slow_reason(MODELS)})
        except Unreadable as exc:
            self.unreadable.append({"path": path, "reason": str(exc)})
        except _NotData:
            self.kinds["not-data"] += 1
        except Exception as exc:  # noqa: BLE001 - a file the scanner fails on is reported, never skipped
            self.unreadable.append(
                {"path": path, "reason": f"the scanner could not read it ({type(exc).__name__}: {str(exc)[:200]})"}
            )
        finally:
            _cpu_budget(0)
        self.models += MODELS

    def table(self, name: str, rows: Iterable[list], header: list | None) -> None:
        stats = TableStats(self.probe, name)
        if header is not None:
            stats.header = header
        index = 0
        cache = _CACHE
        for raw in rows:
            try:
                record = [cache[v] for v in raw]  # most values recur: a dict lookup, no call
            except (KeyError, TypeError):
                record = [norm(v) for v in raw]
            stats.add(record, index)
            index += 1
        self.records += stats.records
        self.leaks += stats.leaks()

    def report(self, seconds: float, cpu: float) -> dict:
        return {
            "files": self.files,
            "records": self.records,
            "bytes": self.bytes,
            "denied": self.denied,
            "truncated": self.truncated,
            "indexed": self.indexed,
            "kinds": dict(self.kinds),
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "leaks": self.leaks,
            "unreadable": self.unreadable,
            "models": self.models,
        }


def _slow_reason(models: list[str]) -> str:
    what = "a model" if models else "an object or table"
    return (
        f"reading it took over {FILE_CPU:g} CPU-seconds ({what} too large to search in time, so whether it "
        "holds held-out labels is unknown)"
    )


def scan(
    probe_data: dict,
    roots: Iterable[str],
    skip: Iterable[str] = (),
    plan: dict | None = None,
    progress: str | None = None,
) -> dict:
    """Scan `roots` for leaks of the probe's held-out labels → the report (JSON-ready). With a `plan`
    only the files the dependency image did not have (or changed) and those it names are read."""
    started, cpu = time.monotonic(), time.process_time()
    job = Scan(Probe(probe_data), skip, plan)
    job.progress = progress
    for path, _ in job.walk(roots):
        job.file(path)
    return job.report(time.monotonic() - started, time.process_time() - cpu)


# -- the dependency image's index ------------------------------------------------------------------
INDEX_VERSION = 2
"""Bumped when what an index records changes: an index of another version is built again."""
STRUCTURED = frozenset(("gzip", "bz2", "xz", "lzma", "zlib", "zip", "parquet", "arrow", "feather1", "npy", "pickle"))
"""Kinds read in full whatever the probe (what they hold is not words; few of them in an image)."""


def index_entry(path: str, st: os.stat_result, found: tuple[str, bytes, int] | None) -> list:
    """[size, mtime_ns, what]: what is "skip" (nothing to read: binary, empty, denied), "read" (read
    it for every probe: a structured file, a notebook, a text with base64 that decodes to data) or
    the text's word statistics, from which `plan_rescan` tells whether a probe's rows can be in it."""
    head = [st.st_size, st.st_mtime_ns]
    if found is None or found[0] in ("binary", "empty"):
        return head + ["skip"]
    kind, data, _ = found
    if kind != "text":
        return head + ["read" if kind in STRUCTURED else "skip"]
    text = decode(data[:FILE_CAP])
    if is_notebook(text) or any(True for _ in _base64_blobs(text)):
        return head + ["read"]
    # A list as long as a table is read for a probe with positions only if it lines up as a table.
    items = line_counts(text) if shaped(text) else (0, 0, 0)
    return head + [{"len": len(text), "items": items, "t": _words(_TOKEN, text), "n": _words(_NUMBER, text)}]


def _words(regex: re.Pattern, text: str) -> list:
    """[word count, word characters, hashes, counts, lengths] of a text's normalised words (base64 arrays)."""
    import array

    counts = Counter(regex.findall(text))
    merged: dict[int, list[int]] = {}
    for word, n in counts.items():
        value = norm_str(word)
        entry = merged.setdefault(word_hash(value), [0, min(len(value), 255)])
        entry[0] += n
    hashes = array.array("I", merged.keys())
    numbers = array.array("I", (v[0] for v in merged.values()))
    sizes = bytes(v[1] for v in merged.values())
    chars = sum(len(w) * n for w, n in counts.items())
    return [sum(counts.values()), chars] + [
        base64.b64encode(b).decode() for b in (hashes.tobytes(), numbers.tobytes(), sizes)
    ]


def build_index(roots: Iterable[str], skip: Iterable[str] = ()) -> dict:
    """Every regular file of an image with what a later scan needs to know of it (`index_entry`)."""
    started = time.process_time()
    job = Scan(None, skip)
    files = {path: index_entry(path, st, job.read(path)) for path, st in job.walk(roots)}
    return {"version": INDEX_VERSION, "files": files, "cpu_seconds": round(time.process_time() - started, 2)}


def plan_rescan(index: dict, probe_data: dict) -> list[str]:
    """The image's files a scan for this probe must read: those read for every probe, and texts whose
    words could hold enough of its rows (the same test `text_relevant` makes on the text itself)."""
    import array

    probe = Probe(probe_data)
    hashed = probe.hashed()
    mode = "n" if probe.words is _NUMBER else "t"
    out = []
    for path, (_, _, what) in index["files"].items():
        if what == "skip":
            continue
        if what == "read" or probe.many_items(*what["items"]):
            out.append(path)
            continue
        total, chars, hashes, counts, sizes = what[mode]
        words = zip(
            array.array("I", base64.b64decode(hashes)),
            array.array("I", base64.b64decode(counts)),
            base64.b64decode(sizes),
        )
        if probe.relevant(words, total, chars, what["len"], *hashed):
            out.append(path)
    return out


def main(argv: list[str]) -> int:
    """`leak_scan.py [--plan PLAN.json] [--progress FILE] PROBE.json REPORT.json [ROOT ...]`, or
    `leak_scan.py --index INDEX.json.gz [ROOT ...]` (the dependency image's index)."""
    import warnings

    warnings.simplefilter("ignore")  # libraries warn about old formats while the scan reads them
    sys.path.append(os.getcwd())  # the agent works from its workspace: its modules import there
    here = os.path.dirname(os.path.abspath(__file__))
    if argv[:1] == ["--index"]:
        out, *roots = argv[1:]
        index = build_index(roots or ["/"], skip=[here, os.path.dirname(os.path.abspath(out))])
        with gzip.open(out, "wt", encoding="utf-8") as f:
            json.dump(index, f)
        return 0
    options: dict[str, str] = {}
    while argv[:1] and argv[0].startswith("--"):
        options[argv[0]], argv = argv[1], argv[2:]
    probe_path, report_path, *roots = argv
    with open(probe_path, encoding="utf-8") as f:
        probe = json.load(f)
    plan = None
    if "--plan" in options:
        with open(options["--plan"], encoding="utf-8") as f:
            plan = json.load(f)
    report = scan(
        probe,
        roots or ["/"],
        skip=[here, os.path.dirname(os.path.abspath(probe_path)), os.path.dirname(os.path.abspath(report_path))],
        plan=plan,
        progress=options.get("--progress"),
    )
    with open(report_path, "w", encoding="utf-8") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
