"""What a repository holds, read without running anything: its tables (format, delimiter, encoding,
column statistics), its Python scripts (imports, the file names they read and write, the columns
they use as labels), its requirements and its README. The heuristic drafter decides from these."""

from __future__ import annotations

import ast
import codecs
import csv
import io
import json
import re
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from arex.drafting.code_facts import CodeFacts, code_facts
from arex.envs.ml_data import column_names

TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".parquet", ".json", ".jsonl", ".data")
_TEXT_TABLES = (".csv", ".tsv", ".data")
"""Delimited text; `.data` is the UCI repository's headerless comma-separated form (adult.data)."""
REQUIREMENTS_FILES = tuple(
    f"{stem}{sep}{kind}.txt" if kind else f"{stem}.txt"
    for kind in ("train", "", "base", "dev", "prod")
    for stem, sep in (("requirements", "-"), ("requirements", "_"), ("requirements", "/"))
    if kind or sep == "-"
)
"""The requirements file a training run installs, best first: one for training, the plain one, the
base of a split set, then a development or production set (a deployment's lists, which the drafter
filters of web-app packages)."""
TABLE_READ_CAP = 64 << 20
NOTEBOOK_READ_CAP = 32 << 20
SKIP_DIRS = {
    ".git",
    "__pycache__",
    "node_modules",
    ".venv",
    "venv",
    "env",
    ".tox",
    ".mypy_cache",
    ".ipynb_checkpoints",
    "site-packages",
}
ENCODINGS = ("utf-8", "utf-8-sig", "cp1252", "latin-1")

IMPORT_TO_PYPI = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python-headless",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "Bio": "biopython",
    "dotenv": "python-dotenv",
    "tensorflow": "tensorflow-cpu",
    "attr": "attrs",
    "Crypto": "pycryptodome",
    "lightgbm": "lightgbm",
    "xgboost": "xgboost",
    "catboost": "catboost",
    "torch": "torch",
    "sentencepiece": "sentencepiece",
    "google.protobuf": "protobuf",
    "openpyxl": "openpyxl",
    "pyarrow": "pyarrow",
    "statsmodels": "statsmodels",
}
"""Import names whose PyPI distribution is named differently (or worth naming); others map to themselves."""


class Column(BaseModel):
    name: str
    distinct: int
    numeric: bool
    """Every non-empty value parses as a number."""
    integer: bool
    """Every non-empty value is an integer."""
    unique: bool
    """No value repeats and none is empty."""
    values: list[str] = Field(default_factory=list)
    """Up to 20 distinct values, sorted (for binary/class checks)."""
    filled: float = 1.0
    """Share of rows with a value (spreadsheet exports carry columns that are almost all empty)."""
    examples: list[str] = Field(default_factory=list)
    """The first three distinct values in row order (for the statement)."""
    minimum: float | None = None
    """The smallest value of a numeric column (a log metric needs positive labels)."""


class TableInfo(BaseModel):
    """A tabular file, as read from the repository (or from a prepare script's output)."""

    path: str
    format: str
    delimiter: str = ","
    encoding: str = "utf-8"
    rows: int = 0
    columns: list[Column] = Field(default_factory=list)
    note: str = ""
    """Why it could not be read (then `columns` is empty)."""
    sampled: str = ""
    """Set for a file over the read cap: which part of it the guesses were made from."""
    header_from: str = ""
    """Set for a file without a header row: where its column names come from (a script's list of
    names, or none found); the build needs a header, so the draft adds the table with one."""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def plain_csv(self) -> bool:
        """The build reads it as it is: comma-separated (the build detects its encoding)."""
        return self.format == "csv" and self.delimiter == "," and not self.header_from

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


class ScriptInfo(BaseModel):
    """A Python file's facts, from its syntax tree."""

    path: str
    imports: list[str] = Field(default_factory=list)
    literals: list[str] = Field(default_factory=list)
    """String constants that look like data file paths (csv, tsv, json, parquet, ...)."""
    written: list[str] = Field(default_factory=list)
    """Path literals passed to a writer (open(..., 'w'), .to_csv(...), np.savetxt(...))."""
    submission_columns: list[str] = Field(default_factory=list)
    """Column names of the frame or row written to the submission file, in order."""
    label_refs: list[str] = Field(default_factory=list)
    """Subscript keys assigned to label-like names (y, y_train, target, labels)."""
    code: CodeFacts = Field(default_factory=CodeFacts)
    """What the code says about its label, model and metric (fit targets, drops, estimators)."""
    notes: str = ""
    """A notebook's markdown cells (its prose, read like a README)."""
    uses_proba: bool = False
    factories: list[str] = Field(default_factory=list)
    name_lists: list[list[str]] = Field(default_factory=list)
    """Literal lists of three or more strings (column names for a headerless table, e.g. `names=[...]`)."""
    """Top-level functions without required arguments named like a model factory."""
    main_guard: bool = False


class RepoFacts(BaseModel):
    root: Path
    files: list[str]
    tables: list[TableInfo]
    scripts: list[ScriptInfo]
    notebooks: list[ScriptInfo] = Field(default_factory=list)
    """Jupyter notebooks, their code cells read as one script (never run by the drafter)."""
    requirements_file: str | None = None
    readme: str | None = None
    readme_text: str = ""
    readme_title: str = ""
    readme_section: str = ""


# -- files and tables ----------------------------------------------------------------------------
def list_files(root: Path) -> list[str]:
    """Repository-relative paths of its files, leaving out VCS, caches and virtual environments."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part in SKIP_DIRS for part in rel.parts[:-1]) or p.name == ".arex-complete" or not p.is_file():
            continue
        out.append(rel.as_posix())
    return out


def decode(blob: bytes) -> tuple[str, str]:
    """The text and its encoding: UTF-8 (with 'utf-8-sig' for a byte-order mark), else cp1252, else latin-1."""
    if blob.startswith(codecs.BOM_UTF8):
        return blob[len(codecs.BOM_UTF8) :].decode("utf-8", errors="replace"), "utf-8-sig"
    for encoding in ENCODINGS:
        try:
            return blob.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    return blob.decode("latin-1"), "latin-1"


def sniff_delimiter(text: str, suffix: str) -> str:
    sample = text[:65536]
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return "\t" if suffix == ".tsv" else ","


NA_VALUES = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
             "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}  # fmt: skip
"""What pandas reads as missing by default (a Kaggle table's 'NA' is no text value)."""


def column_stats(header: list[str], rows: list[list[str]]) -> list[Column]:
    columns = []
    for i, name in enumerate(header):
        values = [r[i].strip() if i < len(r) else "" for r in rows]
        present = [v for v in values if v not in NA_VALUES]
        distinct = set(present)
        numeric = bool(present) and all(_is_number(v) for v in distinct)
        integer = numeric and all(float(v).is_integer() for v in distinct)
        unique = len(distinct) == len(values) and len(present) == len(values)
        filled = len(present) / len(values) if values else 0.0
        examples = list(dict.fromkeys(present[:200]))[:3]
        columns.append(
            Column(
                name=name,
                distinct=len(distinct),
                numeric=numeric,
                integer=integer,
                unique=unique,
                values=sorted(distinct)[:20],
                filled=filled,
                examples=[e[:40] for e in examples],
                minimum=min(float(v) for v in distinct) if numeric else None,
            )
        )
    return columns


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return value.lower() not in ("nan", "inf", "-inf", "infinity")


def read_table(rel: str, blob: bytes, name_lists: list[tuple[str, list[str]]] = ()) -> TableInfo:  # type: ignore[assignment]
    """A table's facts from its bytes; `note` says why when it cannot be read. A delimited table
    whose first row is data takes its column names from `name_lists` ((script, names) found in
    the repository's code), else numbered names."""
    suffix = Path(rel).suffix.lower()
    try:
        if suffix in _TEXT_TABLES:
            text, encoding = decode(blob)
            delimiter = sniff_delimiter(text, suffix)
            header, rows = _split_rows(list(csv.reader(io.StringIO(text), delimiter=delimiter)))
            header_from = ""
            if _headerless(header, rows):
                rows, (header_from, header) = [header] + rows, _names_for(rel, len(header), name_lists)
            fmt = "csv" if delimiter == "," else "tsv" if delimiter == "\t" else "csv"
            return TableInfo(
                path=rel,
                format=fmt,
                delimiter=delimiter,
                encoding=encoding,
                rows=len(rows),
                columns=column_stats(header, rows),
                header_from=header_from,
            )
        header, rows = records_table(rel, blob)
        return TableInfo(path=rel, format=suffix.lstrip("."), rows=len(rows), columns=column_stats(header, rows))
    except Exception as exc:  # noqa: BLE001 - any reader failure is a note on this one table
        return TableInfo(path=rel, format=suffix.lstrip("."), note=f"{type(exc).__name__}: {str(exc)[:160]}")


def read_capped(root: Path, rel: str, name_lists: list[tuple[str, list[str]]] = ()) -> TableInfo:  # type: ignore[assignment]
    """A table read whole up to TABLE_READ_CAP; a bigger text table (csv, tsv, jsonl) is sampled
    from its first TABLE_READ_CAP bytes (whole lines) and says so; a bigger binary one is noted."""
    size = (root / rel).stat().st_size
    if size <= TABLE_READ_CAP:
        return read_table(rel, (root / rel).read_bytes(), name_lists)
    whole, cap = _size(size), _size(TABLE_READ_CAP)
    if not rel.lower().endswith(_TEXT_TABLES + (".jsonl",)):
        note = f"{whole}, over the drafter's {cap} read cap, and not a text table it can sample"
        return TableInfo(path=rel, format=Path(rel).suffix.lstrip(".").lower(), note=note)
    with (root / rel).open("rb") as handle:
        blob = handle.read(TABLE_READ_CAP)
    table = read_table(rel, blob[: blob.rfind(b"\n") + 1] or blob, name_lists)
    return table.model_copy(update={"sampled": f"guessed from its first {table.rows} rows ({cap} of {whole})"})


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def _headerless(first: list[str], rows: list[list[str]]) -> bool:
    """The first row is data, not names: most of the columns that are numeric below it hold a
    number in it too (a header names a numeric column with a word)."""
    sample = rows[:500]
    numeric = [
        i
        for i in range(len(first))
        if any(i < len(r) and r[i].strip() for r in sample)
        and all(_is_number(r[i].strip()) for r in sample if i < len(r) and r[i].strip())
    ]
    hits = [i for i in numeric if _is_number(first[i].strip())]
    counted = [first[i].strip() for i in range(len(first)) if _is_number(first[i].strip())]
    # `pd.DataFrame(X).to_csv()` names its columns 0, 1, 2, ...: a header of counted names
    if (
        len(counted) >= 3
        and all(v.isdigit() for v in counted)
        and [int(v) for v in counted] == list(range(int(counted[0]), int(counted[0]) + len(counted)))
    ):
        return False
    return bool(hits) and 2 * len(hits) >= len(numeric)


def _names_for(rel: str, count: int, name_lists: list[tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """(where the names come from, the names) for a headerless table of `count` columns."""
    fitting = [(script, names) for script, names in name_lists if len(names) == count == len(set(names))]
    if fitting:
        script, names = fitting[0]
        return f"the list of {count} names in {script}", [n.strip() for n in names]
    return f"no list of {count} names in the code: numbered", [f"column_{i + 1}" for i in range(count)]


def _split_rows(rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise ValueError("no rows")
    return column_names(rows[0]), rows[1:]


def records_table(rel: str, blob: bytes) -> tuple[list[str], list[list[str]]]:
    """A json/jsonl/parquet/xlsx table as a header and string rows (the same text a CSV would hold)."""
    suffix = Path(rel).suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        data = pq.read_table(io.BytesIO(blob)).to_pylist()
    elif suffix == ".xlsx":
        import pandas as pd  # needs openpyxl; without it the table is noted as unreadable

        data = pd.read_excel(io.BytesIO(blob)).to_dict("records")
    elif suffix == ".jsonl":
        data = [json.loads(line) for line in blob.decode("utf-8").splitlines() if line.strip()]
    else:
        data = json.loads(blob.decode("utf-8"))
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        raise ValueError("not a list of records")
    header = list(dict.fromkeys(k for r in data for k in r))
    return [str(h) for h in header], [["" if r.get(h) is None else _cell(r.get(h)) for h in header] for r in data]


def _cell(value) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def csv_text(rel: str, blob: bytes, names: list[str] | None = None) -> str:
    """The table rewritten as UTF-8, comma-separated CSV (what the build reads); with `names`, the
    file has no header row and these are its columns."""
    suffix = Path(rel).suffix.lower()
    if suffix in _TEXT_TABLES:
        text, _ = decode(blob)
        header, rows = _split_rows(list(csv.reader(io.StringIO(text), delimiter=sniff_delimiter(text, suffix))))
        if names is not None:
            header, rows = names, [header] + rows
    else:
        header, rows = records_table(rel, blob)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


# -- scripts ---------------------------------------------------------------------------------------
_DATA_LITERAL = re.compile(r"^[\w./-]+\.(csv|tsv|json|jsonl|parquet|xlsx|txt|npy|pkl)$", re.I)
_FACTORY = re.compile(r"^(build|make|get|create|new)_?(model|estimator|pipeline|classifier|regressor|clf)$", re.I)


def scan_script(rel: str, text: str) -> ScriptInfo:
    info = ScriptInfo(path=rel)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return info
    for node in ast.walk(tree):
        if isinstance(node, ast.List) and len(node.elts) >= 3:
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(names) == len(node.elts):
                info.name_lists.append(names)
        if isinstance(node, ast.Import):
            info.imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            info.imports.append(node.module)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _DATA_LITERAL.match(node.value)
            and node.value not in info.literals
        ):
            info.literals.append(node.value)
        elif isinstance(node, ast.Call):
            _scan_call(node, info)
        elif isinstance(node, ast.Attribute) and node.attr == "predict_proba":
            info.uses_proba = True
    info.factories = [
        f.name for f in tree.body if isinstance(f, ast.FunctionDef) and _FACTORY.match(f.name) and not _required_args(f)
    ]
    info.main_guard = "__main__" in text
    info.code = code_facts(tree, text)
    info.label_refs = list(info.code.label_refs)
    return info


def notebook_text(blob: bytes) -> tuple[str, str]:
    """A notebook's code cells that parse as Python (shell and magic lines left out), and its
    markdown cells' text; ('', '') when it is not a notebook."""
    try:
        cells = json.loads(blob.decode("utf-8", errors="replace")).get("cells", [])
    except (ValueError, AttributeError):
        return "", ""
    code, prose = [], []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown":
            prose.append(source)
            continue
        if cell.get("cell_type") != "code":
            continue
        lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("!", "%"))]
        try:
            ast.parse("\n".join(lines))
        except (SyntaxError, ValueError):
            continue
        code.append("\n".join(lines))
    return "\n\n".join(code), "\n\n".join(prose)[:20000]


def _required_args(f: ast.FunctionDef) -> int:
    return len(f.args.args) - len(f.args.defaults) + sum(d is None for d in f.args.kw_defaults)


def _scan_call(node: ast.Call, info: ScriptInfo) -> None:
    """Writers: open(path, 'w'), frame.to_csv(path), np.savetxt(path), csv writers' header rows."""
    name = (
        node.func.attr
        if isinstance(node.func, ast.Attribute)
        else node.func.id
        if isinstance(node.func, ast.Name)
        else ""
    )
    first = node.args[0] if node.args else None
    path = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    mode = next((a.value for a in node.args[1:2] if isinstance(a, ast.Constant)), None) or next(
        (k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)), "r"
    )
    writes = name in ("to_csv", "to_parquet", "to_json", "savetxt", "to_excel", "write_csv") or (
        name == "open" and isinstance(mode, str) and mode[:1] in "wax"
    )
    if path and writes and path not in info.written:
        info.written.append(path)
    if name in ("to_csv", "write_csv") and path and is_submission(path) and isinstance(node.func, ast.Attribute):
        info.submission_columns = info.submission_columns or _frame_columns(node.func.value)
    if (
        name == "writerow"
        and first is not None
        and isinstance(first, (ast.List, ast.Tuple))
        and not info.submission_columns
    ):
        names = [e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(names) == len(first.elts) == 2:
            info.submission_columns = names


def is_submission(path: str) -> bool:
    stem = Path(path).stem.lower()
    return any(word in stem for word in ("submission", "submit", "prediction", "preds", "pred", "output", "answer"))


def _frame_columns(node: ast.AST) -> list[str]:
    """Keys of pd.DataFrame({'id': ..., 'prediction': ...}) (or its columns=[...] list)."""
    if isinstance(node, ast.Call):
        for arg in node.args[:1]:
            if isinstance(arg, ast.Dict) and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in arg.keys
            ):
                return [k.value for k in arg.keys]  # type: ignore[union-attr]
        for kw in node.keywords:
            if kw.arg == "columns" and isinstance(kw.value, (ast.List, ast.Tuple)):
                return [e.value for e in kw.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


# -- requirements and README -------------------------------------------------------------------------
def pypi_names(imports: list[str], local: set[str]) -> list[str]:
    """PyPI names of the third-party modules imported (stdlib and the repository's own modules left out)."""
    names = set()
    for module in imports:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in local or top in ("__future__", "arex"):
            continue
        names.add(IMPORT_TO_PYPI.get(module, IMPORT_TO_PYPI.get(top, top.lower().replace("_", "-"))))
    return sorted(names)


_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>|</?(p|div|a|br|center|h\d)\b[^>]*>", re.I)
_BARE_URL = re.compile(r"^\s*(https?://\S+|\[[^\]]*\]\([^)]*\))\s*$")


def readme_prose(lines: list[str]) -> list[str]:
    """Lines of a README section without images, badges, HTML wrappers or bare links, and without a
    label line ('OUTPUT:') whose content was one of those."""
    out: list[str] = []
    for line in lines:
        cleaned = _IMAGE.sub("", line).rstrip()
        if _BARE_URL.match(cleaned) or (line.strip() and not cleaned.strip()):
            if out and out[-1].strip().endswith(":"):
                out.pop()
            continue
        out.append(cleaned)
    return out


def readme_parts(text: str) -> tuple[str, str]:
    """The README's title (its first heading) and its first section (up to the next heading, 2000
    chars), as prose: images, badges and bare links left out."""
    lines = readme_prose(text.strip().splitlines())
    title = next((ln.lstrip("#").strip() for ln in lines if ln.startswith("#")), "")
    if lines and lines[0].startswith("#"):
        lines = lines[1:]  # the title is the statement's own heading
    section: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("#") and i > 0 and any(s.strip() for s in section):
            break
        section.append(line)
    return title, "\n".join(section).strip()[:2000]


def inspect_repo(root: Path) -> RepoFacts:
    """Every fact the heuristics use, from the files alone."""
    files = list_files(root)
    scripts = [
        scan_script(rel, (root / rel).read_text(encoding="utf-8", errors="replace"))
        for rel in files
        if rel.endswith(".py")
    ]
    notebooks = []
    for rel in files:
        if rel.endswith(".ipynb") and (root / rel).stat().st_size <= NOTEBOOK_READ_CAP:
            code, prose = notebook_text((root / rel).read_bytes())
            notebooks.append(scan_script(rel, code).model_copy(update={"notes": prose}))
    # column names for a headerless table: literal lists in the code (`names=[...]`, `df.columns = [...]`)
    name_lists = [(s.path, names) for s in scripts + notebooks for names in s.name_lists]
    tables = [read_capped(root, rel, name_lists) for rel in files if rel.lower().endswith(TABLE_SUFFIXES)]
    # a config file or a tiny sample is no dataset
    tables = [t for t in tables if t.note or len(t.columns) >= 2 and t.rows >= 10]
    req = next((rel for rel in REQUIREMENTS_FILES if rel in files), None)
    readme_rel = next((rel for rel in files if "/" not in rel and rel.lower().startswith("readme")), None)
    facts = RepoFacts(
        root=root,
        files=files,
        tables=tables,
        scripts=scripts,
        notebooks=notebooks,
        requirements_file=req,
        readme=readme_rel,
    )
    if readme_rel:
        facts.readme_text = (root / readme_rel).read_text(encoding="utf-8", errors="replace")[:100_000]
        facts.readme_title, facts.readme_section = readme_parts(facts.readme_text)
    return facts


def local_modules(facts: RepoFacts) -> set[str]:
    """Top-level names the repository itself provides (its modules and packages)."""
    names = set()
    for rel in facts.files:
        parts = rel.split("/")
        if rel.endswith(".py"):
            names.add(Path(parts[-1]).stem)
        if len(parts) > 1:
            names.add(parts[0])
    return names
