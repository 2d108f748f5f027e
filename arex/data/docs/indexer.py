#!/usr/bin/env python3
"""Build the offline documentation index of this Python installation (standard library only).

Run once at image build time, with no network:

    python3 indexer.py OUT.sqlite [--exclude PACKAGE/RELPATH ...]

It indexes the docstrings of the standard library and of every installed distribution's top-level
packages (modules, classes, functions, methods, properties: signature and docstring), the language
reference topics (`pydoc_data`), each distribution's description (its README, from METADATA) and
the documentation files it ships (README*, *.md, *.rst, and *.txt files named like docs). Each
group of packages is imported in a worker process with a cap on modules and on time; a module that
fails to import, hangs or crashes its worker is skipped. `--exclude` names files (as the env's
`scrub` list does, `package/relative/path`) that must not reach the index.

The result is one SQLite file: `pages` (one row per page) with an FTS5 index over its words,
summary and body (or, where SQLite lacks FTS5, a plain `terms` table). `docs` reads it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import os
import pkgutil
import re
import signal
import sqlite3
import subprocess
import sys
import time

SCHEMA = 1
BODY_CAP = 30_000  # characters of one docstring or file kept
FILE_CAP = 256 << 10  # bytes of a docs file read
FILES_PER_DIST = 300
MEMBERS_PER_MODULE = 600
MODULES_PER_TOP = {"python": 40}  # submodules walked per top-level package (stdlib); others DEFAULT_MODULES
DEFAULT_MODULES = 300
MODULE_SECONDS = 20  # one import and its extraction
GROUP_SECONDS = 300  # one worker
BUDGET_SECONDS = float(os.environ.get("AREX_DOCS_BUDGET_S", "900"))  # the whole docstring pass
SKIP_TOP = {
    "antigravity", "this", "idlelib", "turtledemo", "turtle", "tkinter", "test", "lib2to3", "ensurepip", "venv",
    "pydoc_data", "__hello__", "__phello__", "xxlimited", "xxsubtype", "pip", "setuptools", "wheel", "pkg_resources",
    "_distutils_hack",
}  # fmt: skip
SKIP_PART = {"tests", "test", "testing_utils", "conftest", "setup", "__main__", "_vendor", "vendor", "externals"}
DOC_SUFFIXES = (".md", ".rst", ".markdown")
DOC_TXT = re.compile(r"^(readme|changes|changelog|history|news|usage|guide|tutorial|faq|docs?)([._-].*)?\.txt$", re.I)
NOT_DOCS = re.compile(
    r"^(license|licence|copying|authors|notice|record|top_level|entry_points|sources|requires|dependency_links|requirements)",
    re.I,
)


# -- worker: one group of top-level packages, imported here --------------------------------------
class _Slow(BaseException):
    """One module took longer than MODULE_SECONDS."""


def _alarm(signum, frame):
    raise _Slow()


def summary_of(doc: str) -> str:
    """The first sentence-ish line of a docstring, short."""
    for para in doc.strip().split("\n\n"):
        line = " ".join(para.split())
        if line and not line.startswith(
            ("..", "|", "[![", "<", "=", "-", "*")
        ):  # not markup: directives, badges, rules
            return line if len(line) <= 160 else line[:157] + "..."
    return ""


def _doc(obj, own: bool) -> str:
    try:
        doc = obj.__doc__ if own else inspect.getdoc(obj)
    except Exception:  # noqa: BLE001 - any object may raise on attribute access
        return ""
    if not isinstance(doc, str):
        return ""
    return inspect.cleandoc(doc)[:BODY_CAP]


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except Exception:  # noqa: BLE001 - builtins without a text signature, odd callables
        return ""


def _kind(obj, in_class: bool) -> str | None:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj):
        return "method" if in_class else "function"
    if isinstance(obj, property):
        return "property" if in_class else None
    try:
        if callable(obj) and isinstance(getattr(obj, "__doc__", None), str) and obj.__doc__ != type(obj).__doc__:
            return "method" if in_class else "function"  # callable objects with their own docs (numpy ufuncs)
    except Exception:  # noqa: BLE001
        return None
    return None


class Worker:
    """Walks packages breadth-first (shallow names win when an object is re-exported) and prints one
    JSON line per page on `out`; `{"start": module}` before each module, so a parent can skip it."""

    def __init__(self, group: str, out, excluded: set[str]):
        self.group, self.out, self.excluded = group, out, excluded
        self.seen: set[int] = set()

    def emit(self, **page) -> None:
        self.out.write(json.dumps(page) + "\n")
        self.out.flush()

    def run(self, tops: list[str], skip: set[str]) -> None:
        for top in tops:
            queue, done = [top], 0
            cap = MODULES_PER_TOP.get(self.group, DEFAULT_MODULES)
            while queue and done < cap:
                name = queue.pop(0)
                if name in skip:
                    continue
                self.emit(start=name)
                done += 1
                queue += self.module(name)

    def module(self, name: str) -> list[str]:
        """Document one module; the names of its public submodules."""
        signal.alarm(MODULE_SECONDS)
        try:
            mod = importlib.import_module(name)
            source = getattr(mod, "__file__", None) or ""
            if os.path.realpath(source) in self.excluded:
                return []
            self.page(name, "module", name.rsplit(".", 1)[0] if "." in name else "", mod, source, own=True)
            self.members(name, mod, source)
            return self.submodules(name, mod)
        except (Exception, _Slow, SystemExit, KeyboardInterrupt):  # noqa: BLE001 - any import may fail; the module is skipped
            return []
        finally:
            signal.alarm(0)

    def submodules(self, name: str, mod) -> list[str]:
        path = getattr(mod, "__path__", None)
        if not path or name.count(".") >= 4:
            return []
        found = sorted(info.name for info in pkgutil.iter_modules(list(path)))
        return [f"{name}.{sub}" for sub in found if not sub.startswith("_") and sub not in SKIP_PART]

    def page(self, name: str, kind: str, parent: str, obj, source: str, own: bool) -> None:
        doc = _doc(obj, own)
        sig = ""
        if kind in ("class", "exception", "function", "method"):
            sig = _signature(obj)
        if kind in ("class", "exception"):
            bases = ", ".join(b.__name__ for b in getattr(obj, "__bases__", ()) if b is not object)
            sig = f"class {name.rsplit('.', 1)[-1]}{sig or ('(' + bases + ')' if bases else '')}" + (
                f"  [bases: {bases}]" if bases and sig else ""
            )
        elif sig:
            sig = f"{name.rsplit('.', 1)[-1]}{sig}"
        self.emit(
            name=name,
            kind=kind,
            parent=parent,
            pkg=self.group,
            signature=sig[:1000],
            summary=summary_of(doc),
            body=doc,
            source=source,
        )

    def members(self, modname: str, mod, source: str) -> None:
        exported = getattr(mod, "__all__", None)
        names = (
            [n for n in exported if isinstance(n, str)] if isinstance(exported, (list, tuple)) else sorted(vars(mod))
        )
        real = getattr(mod, "__name__", modname)
        count = 0
        for attr in names:
            if attr.startswith("_") or count >= MEMBERS_PER_MODULE:
                continue
            obj = getattr(mod, attr, None)
            kind = _kind(obj, in_class=False)
            if kind is None or id(obj) in self.seen:
                continue
            origin = getattr(obj, "__module__", None) or ""
            if not isinstance(origin, str):
                origin = ""
            if exported is None and origin != real and not any(part.startswith("_") for part in origin.split(".")):
                continue  # imported from another public module: documented there
            self.seen.add(id(obj))
            count += 1
            self.page(f"{modname}.{attr}", kind, modname, obj, source, own=kind in ("class", "exception"))
            if kind in ("class", "exception"):
                self.class_members(f"{modname}.{attr}", obj, source)

    def class_members(self, clsname: str, cls, source: str) -> None:
        try:
            items = sorted(vars(cls).items())
        except TypeError:
            return
        for attr, raw in items[:MEMBERS_PER_MODULE]:
            if attr.startswith("_") and attr not in ("__call__", "__getitem__", "__iter__", "__enter__"):
                continue
            obj = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
            kind = _kind(obj, in_class=True)
            if kind in (None, "class", "exception"):
                continue
            self.page(f"{clsname}.{attr}", kind, clsname, obj, source, own=False)


def worker_main(group: str, tops: list[str], skip: set[str], excluded: set[str]) -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)  # whatever imported modules print must not reach the page stream
    signal.signal(signal.SIGALRM, _alarm)
    sys.argv = [sys.argv[0]]
    Worker(group, out, excluded).run(tops, skip)
    out.flush()


# -- parent: targets, workers, files, the database ------------------------------------------------
def stdlib_tops() -> list[str]:
    names = sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in SKIP_TOP)
    return [
        m for n in names for m in ([n, "os.path"] if n == "os" else [n])
    ]  # os.path before posixpath: the name people use


def dist_tops(dist) -> list[str]:
    text = dist.read_text("top_level.txt")
    tops = set(text.split()) if text else set()
    if not tops:
        for f in dist.files or []:
            parts = f.parts
            if len(parts) == 1 and parts[0].endswith(".py"):
                tops.add(parts[0][:-3])
            elif len(parts) == 2 and parts[1] == "__init__.py":
                tops.add(parts[0])
    return sorted(t for t in tops if t.isidentifier() and not t.startswith("_") and t not in SKIP_TOP)


def groups() -> list[tuple[str, list[str]]]:
    """(group, top-level module names): the standard library first, then each distribution."""
    out = [("python", stdlib_tops())]
    seen = set()
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        name = dist.metadata["Name"] or ""
        if not name or name.lower() in seen or name.lower() in SKIP_TOP:
            continue
        seen.add(name.lower())
        tops = dist_tops(dist)
        if tops:
            out.append((name, tops))
    return out


def run_group(group: str, tops: list[str], excluded: set[str], deadline: float, add) -> int:
    """Run workers for one group until it is done; a worker that dies or overruns is restarted after
    the module it was on. Returns the pages added."""
    skip: set[str] = set()
    added = 0
    for _ in range(4):
        seconds = min(GROUP_SECONDS, deadline - time.monotonic())
        if seconds <= 1:
            break
        args = [sys.executable, os.path.abspath(__file__), "--worker", group, *tops]
        args += [a for s in sorted(skip) for a in ("--skip", s)] + [
            a for e in sorted(excluded) for a in ("--exclude-path", e)
        ]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore"}
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            encoding="utf-8",
        )
        current, started = None, time.monotonic()
        for line in proc.stdout:
            try:
                page = json.loads(line)
            except ValueError:
                continue
            if "start" in page:
                current = page["start"]
            else:
                added += add(page)
            if time.monotonic() - started > seconds:
                proc.kill()
                break
        proc.stdout.close()
        if proc.wait() == 0:
            break
        if current is None:
            break
        skip.add(current)
    return added


def files_of(dist, excluded: set[str]) -> list[tuple[str, str, str]]:
    """(page name, text, path) of the docs files a distribution ships."""
    found = []
    for f in dist.files or []:
        rel = str(f).replace("\\", "/")
        base = rel.rsplit("/", 1)[-1]
        parts = rel.split("/")
        if (
            ".." in parts
            or any(p.endswith((".dist-info", ".egg-info")) for p in parts)
            or any(p in SKIP_PART for p in parts[:-1])
        ):
            continue
        if NOT_DOCS.match(base) or not (
            base.lower().endswith(DOC_SUFFIXES) or DOC_TXT.match(base) or base.lower().startswith("readme")
        ):
            continue
        found.append((rel, f))
    pages = []
    for rel, f in sorted(found, key=lambda x: (x[0].count("/"), x[0]))[:FILES_PER_DIST]:
        path = os.path.realpath(str(dist.locate_file(f)))
        if path in excluded or not os.path.isfile(path) or os.path.getsize(path) > FILE_CAP:
            continue
        try:
            with open(path, "rb") as handle:
                text = handle.read(FILE_CAP).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\x00" not in text:
            pages.append((f"file:{dist.metadata['Name']}/{rel}", text[:BODY_CAP], path))
    return pages


def static_pages(excluded: set[str]) -> list[dict]:
    """Pages that need no import of the indexed packages: language topics, READMEs, docs files."""
    pages = []
    try:
        from pydoc_data.topics import topics

        for key, text in sorted(topics.items()):
            pages.append(
                {
                    "name": f"topic:{key}",
                    "kind": "topic",
                    "pkg": "python",
                    "summary": summary_of(text),
                    "body": text[:BODY_CAP],
                }
            )
    except ImportError:
        pass
    for dist in importlib.metadata.distributions():
        meta = dist.metadata
        name = meta["Name"] or ""
        if not name or name.lower() in SKIP_TOP:
            continue
        description = meta.get_payload() or meta["Description"] or ""
        if isinstance(description, str) and description.strip():
            head = f"{name} {meta['Version']}: {meta['Summary'] or ''}".strip()
            pages.append(
                {
                    "name": f"readme:{name}",
                    "kind": "readme",
                    "pkg": name,
                    "summary": head[:160],
                    "body": description[:BODY_CAP],
                }
            )
        for page_name, text, path in files_of(dist, excluded):
            pages.append(
                {
                    "name": page_name,
                    "kind": "file",
                    "pkg": name,
                    "summary": summary_of(text),
                    "body": text,
                    "source": path,
                }
            )
    return pages


def words_of(name: str) -> str:
    """The words a name is searched by: its parts, camelCase split, and its last part whole."""
    parts = re.split(r"[._:/\-\s]+", name)
    camel = [w for p in parts for w in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", p)]
    return " ".join(parts + camel + [name.rsplit(".", 1)[-1].replace("_", "")]).lower()


class Index:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path)
        self.fts = self._fts_available()
        self.db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
            "CREATE TABLE pages(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT, pkg TEXT, parent TEXT, "
            "tail TEXT,"
            " signature TEXT, summary TEXT, body TEXT, words TEXT);"
        )
        self.count = 0

    def _fts_available(self) -> bool:
        try:
            self.db.execute("CREATE VIRTUAL TABLE temp.probe USING fts5(x)")
            self.db.execute("DROP TABLE temp.probe")
            return True
        except sqlite3.OperationalError:
            return False

    def add(self, page: dict) -> int:
        name = page["name"]
        tail = (
            name.rsplit(".", 1)[-1]
            if page["kind"] not in ("file", "readme", "topic")
            else name.split(":", 1)[-1].rsplit("/", 1)[-1]
        )
        row = (
            name,
            page["kind"],
            page.get("pkg", ""),
            page.get("parent", ""),
            tail.lower(),
            page.get("signature", ""),
            page.get("summary", ""),
            page.get("body", ""),
            words_of(name),
        )
        cur = self.db.execute(
            "INSERT OR IGNORE INTO pages(name, kind, pkg, parent, tail, signature, summary, body, words) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            row,
        )
        self.count += cur.rowcount
        return cur.rowcount

    def finish(self, info: dict) -> None:
        db = self.db
        db.execute("CREATE INDEX pages_parent ON pages(parent)")
        db.execute("CREATE INDEX pages_tail ON pages(tail)")
        db.execute("CREATE INDEX pages_lname ON pages(name COLLATE NOCASE)")
        if self.fts:
            db.execute(
                "CREATE VIRTUAL TABLE pages_fts USING fts5(words, summary, body, content='pages', content_rowid='id')"
            )
            db.execute("INSERT INTO pages_fts(pages_fts) VALUES('rebuild')")
            db.execute("INSERT INTO pages_fts(pages_fts) VALUES('optimize')")
        else:  # a plain inverted index of names and summaries
            db.execute("CREATE TABLE terms(term TEXT, id INTEGER)")
            for pid, words, summary in db.execute("SELECT id, words, summary FROM pages").fetchall():
                terms = set(re.findall(r"[a-z0-9]+", f"{words} {summary}".lower()))
                db.executemany("INSERT INTO terms VALUES (?, ?)", [(t, pid) for t in terms])
            db.execute("CREATE INDEX terms_term ON terms(term)")
        info = {**info, "schema": SCHEMA, "fts5": self.fts, "pages": self.count}
        db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in info.items()])
        db.commit()
        db.execute("VACUUM")
        db.close()


def excluded_paths(entries: list[str]) -> set[str]:
    """Real paths of `package/relative/path` entries (the env's scrub list), found without importing."""
    import importlib.util

    out = set()
    for entry in entries:
        package, _, rel = entry.partition("/")
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            out.add(os.path.realpath(os.path.join(list(spec.submodule_search_locations)[0], rel)))
    return out


def build(out: str, exclude: list[str]) -> dict:
    started = time.monotonic()
    excluded = excluded_paths(exclude)
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    index = Index(tmp)
    packages = {}
    deadline = started + BUDGET_SECONDS
    timing = {}
    for group, tops in groups():
        begun = time.monotonic()
        packages[group] = run_group(group, tops, excluded, deadline, index.add)
        timing[group] = round(time.monotonic() - begun, 1)
    for page in static_pages(excluded):
        packages[page["pkg"]] = packages.get(page["pkg"], 0) + index.add(page)
    info = {
        "python": sys.version.split()[0],
        "packages": packages,
        "seconds": round(time.monotonic() - started, 1),
        "group_seconds": timing,
        "excluded": sorted(excluded),
    }
    index.finish(info)
    os.replace(tmp, out)
    return {**info, "pages": index.count}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        group, rest = argv[1], argv[2:]
        tops = [
            a
            for i, a in enumerate(rest)
            if not a.startswith("--") and (i == 0 or rest[i - 1] not in ("--skip", "--exclude-path"))
        ]
        skip = {rest[i + 1] for i, a in enumerate(rest) if a == "--skip"}
        excluded = {rest[i + 1] for i, a in enumerate(rest) if a == "--exclude-path"}
        worker_main(group, tops, skip, excluded)
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    exclude = [argv[i + 1] for i, a in enumerate(argv) if a == "--exclude" and i + 1 < len(argv)]
    info = build(argv[0], exclude)
    print(
        f"docs index: {info['pages']} pages from {len(info['packages'])} packages in {info['seconds']} s -> {argv[0]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
