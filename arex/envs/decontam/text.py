"""What two texts, tests or programs are compared by: word n-grams of a statement after
normalisation, and content digests of test data and solutions that ignore layout.

Normalisation: Unicode NFKC, case folded, every run of letters or digits one word (markup,
punctuation and LaTeX's `$`, `\\`, braces fall away, so `$1 \\le n \\le 10^5$` and `1 <= n <= 10^5`
give the same words). An n-gram is `n` consecutive words, kept as a 64-bit digest.

Short things coincide by chance (a one-line test `1` / `1`, a solution `print(input())`, a
statement of two sentences): a test pair shorter than `TEST_MIN_BYTES` after normalisation, a
solution shorter than `SOLUTION_MIN_BYTES`, and a statement with fewer shared n-grams than the
configured minimum are never evidence on their own.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

TEST_MIN_BYTES = 32
"""Input plus answer, whitespace collapsed: shorter tests are common to many problems."""
SOLUTION_MIN_BYTES = 200
"""A solution, whitespace collapsed: shorter programs are common to many problems."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def digest64(data: bytes) -> int:
    """A stable 64-bit digest (Python's hash() changes between processes)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def grams(text: str, n: int) -> set[int]:
    """The statement's word n-grams, as digests; a text of fewer than `n` words has none."""
    tokens = words(text)
    return {digest64(" ".join(tokens[i : i + n]).encode()) for i in range(len(tokens) - n + 1)}


def collapsed(data: bytes) -> bytes:
    """Whitespace-insensitive form of a file's bytes (line endings, trailing spaces, indentation)."""
    return b" ".join(data.split())


def test_digest(given: bytes, answer: bytes) -> str | None:
    """A test's digest (its input and answer, layout ignored), None if it is too short to tell problems apart."""
    a, b = collapsed(given), collapsed(answer)
    if len(a) + len(b) < TEST_MIN_BYTES:
        return None
    return hashlib.sha256(a + b"\0" + b).hexdigest()[:32]


def solution_digest(code: bytes) -> str | None:
    """A solution's digest (layout ignored), None if it is too short to tell problems apart."""
    body = collapsed(code)
    if len(body) < SOLUTION_MIN_BYTES:
        return None
    return hashlib.sha256(body).hexdigest()[:32]


def bytes_of(source: Path | bytes) -> bytes:
    return source if isinstance(source, bytes) else Path(source).read_bytes()


def url_key(url: str) -> str:
    """A source URL as compared: no scheme, user, `.git` suffix or trailing slash; the host lower-cased."""
    text = url.strip()
    text = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text, flags=re.I)
    text = re.sub(r"^[^@/]+@", "", text)  # user@ (and scp-like git@host:path)
    text = text.replace(":", "/", 1) if re.match(r"^[\w.-]+:(?!\d)", text) else text
    text = text.rstrip("/").removesuffix(".git").rstrip("/")
    host, _, path = text.partition("/")
    return f"{host.lower()}/{path}" if path else host.lower()


def id_key(name: str) -> str:
    """An id as compared: lower-case words joined by '-' (`Frontier 0` == `frontier-0`)."""
    return "-".join(words(name))
