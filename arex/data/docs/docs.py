#!/usr/bin/env python3
"""docs: read the documentation of the Python packages installed here, offline.

Reads the index built with the image (standard library only, read-only, no imports of the
documented packages, so it answers in a fraction of a second).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys

INDEX = os.environ.get("AREX_DOCS_INDEX", "/opt/arex/docs/index.sqlite")
PAGE_CHARS = 2800  # one page fits an observation
LINE_CHARS = 150
MEMBERS_SHOWN = 60
KIND_ORDER = (
    "CASE p.kind WHEN 'module' THEN 0 WHEN 'class' THEN 1 WHEN 'function' THEN 2 WHEN 'exception' THEN 3 "
    "WHEN 'method' THEN 4 ELSE 5 END"
)

STOPWORDS = {"a", "an", "the", "by", "of", "to", "in", "on", "for", "and", "or", "is", "how", "do", "i", "from", "into"}
USAGE = """usage: docs search QUERY...      find pages: name, kind, first docstring line (-n N for more hits)
       docs read NAME [--page N]   read a page: signature, docstring, members; or a docs file
       docs list                   the packages indexed and their page counts

Offline documentation of this sandbox's Python: the standard library, every installed package's
docstrings and its bundled docs (READMEs, .md/.rst files), and the language topics.
Examples:
  docs search bisect_left          docs read bisect.bisect_left
  docs search "sort a list by key" docs read topic:with
  docs read readme:numpy           docs read collections.Counter --page 2"""


def connect() -> sqlite3.Connection | None:
    if not os.path.isfile(INDEX):
        return None
    db = sqlite3.connect(f"file:{INDEX}?mode=ro&immutable=1", uri=True)
    db.row_factory = sqlite3.Row
    return db


def meta(db) -> dict:
    return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}


def line(text: str) -> str:
    text = re.sub(r"\s*\n\s*", " ", text.rstrip())
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 3] + "..."


# -- search ----------------------------------------------------------------------------------------
def search(db, query: str, limit: int) -> list[sqlite3.Row]:
    """Exact names first, then names ending in the query, then full-text hits by relevance."""
    q = query.strip()
    hits, seen = [], set()

    def take(rows):
        for row in rows:
            if row["id"] not in seen and len(hits) < limit:
                seen.add(row["id"])
                hits.append(row)

    cols = "p.id, p.name, p.kind, p.summary"
    take(db.execute(f"SELECT {cols} FROM pages p WHERE p.name = ? COLLATE NOCASE", (q,)))
    tail = q.rsplit(".", 1)[-1].lower()
    take(
        db.execute(
            f"SELECT {cols} FROM pages p WHERE p.tail = ? ORDER BY {KIND_ORDER}, length(p.name), p.name LIMIT ?",
            (tail, limit),
        )
    )
    words = [w for w in re.findall(r"[^\W_]+", q.lower()) if w]
    words = [w for w in words if w not in STOPWORDS] or words
    if not words:
        return hits
    if meta(db).get("fts5"):
        fts = f"SELECT {cols} FROM pages_fts f JOIN pages p ON p.id = f.rowid WHERE pages_fts MATCH ?"
        exact = " ".join(f'"{w}"' for w in words)
        passes = [
            (
                f"{fts} ORDER BY length(p.name) - length(replace(p.name, '.', '')), "
                f"{KIND_ORDER}, length(p.name) LIMIT ?",
                f"words : ({exact})",
            ),  # every word in the name
            (f"{fts} ORDER BY bm25(pages_fts, 10.0, 3.0, 1.0) LIMIT ?", exact),  # every word somewhere
            (
                f"{fts} ORDER BY bm25(pages_fts, 10.0, 3.0, 1.0) LIMIT ?",
                " ".join(f'"{w}"*' for w in words),
            ),  # word prefixes
            (
                f"{fts} ORDER BY bm25(pages_fts, 10.0, 3.0, 1.0) LIMIT ?",
                " OR ".join(f'"{w}"*' for w in words),
            ),  # any word
        ]
        for sql, match in passes:
            if len(hits) >= limit:
                break
            take(db.execute(sql, (match, limit)))
    else:
        marks = ",".join("?" * len(words))
        sql = (
            f"SELECT {cols} FROM terms t JOIN pages p ON p.id = t.id WHERE t.term IN ({marks}) "
            "GROUP BY p.id ORDER BY count(*) DESC, length(p.name) LIMIT ?"
        )
        take(db.execute(sql, (*words, limit)))
    return hits


def cmd_search(db, args: list[str]) -> int:
    limit = 10
    if "-n" in args:
        i = args.index("-n")
        try:
            limit = max(1, min(50, int(args[i + 1])))
        except (IndexError, ValueError):
            print("docs search: -n takes a number, e.g. `docs search -n 20 json`.")
            return 2
        args = args[:i] + args[i + 2 :]
    query = " ".join(args).strip()
    if not query:
        print("docs search: give a query, e.g. `docs search read csv`.")
        return 2
    hits = search(db, query, limit)
    if not hits:
        print(f"No pages match {query!r}; try fewer or other words, or `docs list` to see what is indexed.")
        return 1
    print(f"{len(hits)} hits for {query!r} (read one with `docs read NAME`):")
    for row in hits:
        print(line(f"{row['name']}  [{row['kind']}]  {row['summary'] or ''}"))
    return 0


# -- read ------------------------------------------------------------------------------------------
def find(db, name: str) -> tuple[sqlite3.Row | None, list[str]]:
    """The page called `name` (exactly, ignoring case, or by its last part when that is unique); else
    the candidates."""
    for sql in ("SELECT * FROM pages WHERE name = ?", "SELECT * FROM pages WHERE name = ? COLLATE NOCASE"):
        row = db.execute(sql, (name,)).fetchone()
        if row:
            return row, []
    rows = db.execute(
        f"SELECT * FROM pages p WHERE p.tail = ? ORDER BY {KIND_ORDER}, length(p.name) LIMIT 8",
        (name.rsplit(".", 1)[-1].lower(),),
    ).fetchall()
    suffix = [r for r in rows if r["name"].lower().endswith("." + name.lower()) or r["name"].lower() == name.lower()]
    if len(suffix) == 1:
        return suffix[0], []
    return None, [r["name"] for r in (suffix or rows)]


def render(db, row) -> str:
    parts = [f"{row['name']}  ({row['kind']}, {row['pkg'] or 'python'})"]
    if row["signature"]:
        parts.append(row["signature"])
    parts.append("")
    parts.append(row["body"] or "(no docstring)")
    children = db.execute(
        f"SELECT p.name, p.kind, p.summary FROM pages p WHERE p.parent = ? ORDER BY {KIND_ORDER}, p.name",
        (row["name"],),
    ).fetchall()
    if children:
        parts += ["", f"Members ({len(children)}):"]
        for child in children[:MEMBERS_SHOWN]:
            short = child["name"][len(row["name"]) + 1 :]
            parts.append(line(f"  {short}  [{child['kind']}]  {child['summary'] or ''}"))
        if len(children) > MEMBERS_SHOWN:
            parts.append(
                f"  ... {len(children) - MEMBERS_SHOWN} more: `docs search {row['name']}.` lists them by relevance"
            )
    if row["kind"] in ("module",) and "." not in row["name"]:
        readme = db.execute("SELECT name FROM pages WHERE kind = 'readme' AND pkg = ?", (row["pkg"],)).fetchone()
        if readme:
            parts += ["", f"Package description: `docs read {readme['name']}`"]
    return "\n".join(parts)


def pages_of(text: str) -> list[str]:
    """Text cut at line ends into pieces of at most PAGE_CHARS (a longer line is cut where it must)."""
    pages, current = [], ""
    for text_line in text.splitlines(keepends=True):
        while len(text_line) > PAGE_CHARS:
            if current:
                pages.append(current)
                current = ""
            pages.append(text_line[:PAGE_CHARS])
            text_line = text_line[PAGE_CHARS:]
        if len(current) + len(text_line) > PAGE_CHARS:
            pages.append(current)
            current = ""
        current += text_line
    return pages + [current] if current or not pages else pages


def cmd_read(db, args: list[str]) -> int:
    page = 1
    if "--page" in args:
        i = args.index("--page")
        try:
            page = int(args[i + 1])
        except (IndexError, ValueError):
            print("docs read: --page takes a number, e.g. `docs read json.dumps --page 2`.")
            return 2
        args = args[:i] + args[i + 2 :]
    if len(args) != 1:
        print("docs read: give one page name, e.g. `docs read json.dumps` (find names with `docs search`).")
        return 2
    name = args[0]
    row, candidates = find(db, name)
    if row is None:
        if candidates:
            print(f"No page named {name!r}; pages ending that way: {', '.join(candidates)}.")
        else:
            print(
                f"No page named {name!r} in the docs index; "
                f"find the right name with `docs search {name.rsplit('.', 1)[-1]}`."
            )
        return 1
    pieces = pages_of(render(db, row))
    if not 1 <= page <= len(pieces):
        print(f"docs read: {row['name']} has {len(pieces)} page(s); ask for --page 1 to {len(pieces)}.")
        return 2
    print(pieces[page - 1].rstrip("\n"))
    if len(pieces) > 1:
        more = f"; next: `docs read {row['name']} --page {page + 1}`" if page < len(pieces) else ""
        print(f"[page {page} of {len(pieces)}{more}]")
    return 0


def cmd_list(db, args: list[str]) -> int:
    info = meta(db)
    rows = db.execute(
        "SELECT pkg, count(*) AS n FROM pages GROUP BY pkg ORDER BY pkg = 'python' DESC, lower(pkg)"
    ).fetchall()
    print(f"Docs index: {info.get('pages', '?')} pages, Python {info.get('python', '?')}. Packages (pages):")
    print(
        line(", ".join(f"{r['pkg']} ({r['n']})" for r in rows))
        if len(rows) < 12
        else "\n".join(line(f"  {r['pkg']} ({r['n']})") for r in rows[:80])
    )
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    commands = {"search": cmd_search, "read": cmd_read, "list": cmd_list}
    if argv[0] not in commands:
        print(f"docs: unknown command {argv[0]!r}; use `docs search QUERY`, `docs read NAME` or `docs list`.")
        return 2
    db = connect()
    if db is None:
        print(
            f"docs: no documentation index at {INDEX} in this sandbox; "
            "read the package sources or `python3 -m pydoc NAME` instead."
        )
        return 1
    try:
        return commands[argv[0]](db, argv[1:])
    except sqlite3.Error as exc:
        print(f"docs: the index at {INDEX} could not be read ({exc}).")
        return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # `docs ... | head`
        sys.exit(0)
