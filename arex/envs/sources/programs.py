"""Which arex language a package's submission is in, or why it is skipped ("python2", "language .kt").

Languages come from `arex.grading.languages.LANGUAGES` (by file extension); nothing here names an
arex language. Python 2 code is told apart from Python 3 because the base image has no Python 2:
running it as Python 3 would fail (or, worse, divide differently) and sink the package silently.
"""

from __future__ import annotations

import ast
import re

from arex.grading.languages import LANGUAGES, language_for

PYTHON2 = "python2"

# Python 2 statements, checked on the line Python 3 reports a syntax error at.
_PY2_LINE = re.compile(
    r"^\s*print\b\s*(?:[^\s(=.,)\]]|$|>>)"  # print x / print / print >>f, x
    r"|^\s*exec\s+[\"'\w]"  # exec "code"
    r"|\bexcept\s+[\w.()\s,]+\s*,\s*\w+\s*:"  # except E, e:
    r"|^\s*raise\s+[\w.]+\s*,"  # raise E, "message"
    r"|`[^`\n]+`"  # `x` (repr)
    r"|(?<![\w.])0\d+\b|\b\d+[lL]\b"  # 0777 octal, 10L long
    r"|<>"  # not-equal
    r"|\bur[\"']"  # ur"..." strings
)
_PY2_MESSAGES = (
    "Missing parentheses in call to 'print'",
    "Missing parentheses in call to 'exec'",
    "inconsistent use of tabs",
)
# Builtins and methods that only Python 2 has: calling them under Python 3 is a NameError/AttributeError.
_PY2_NAMES = {"raw_input", "xrange", "unicode", "basestring", "unichr", "long", "execfile"}
_PY2_ATTRIBUTES = {"iteritems", "iterkeys", "itervalues", "has_key", "maxint"}
_SHEBANG_PY2 = re.compile(r"^#!.*\bpython2(?:\.\d+)?\b")


def is_python2(code: str) -> bool:
    """Python 2 code: declared so by its shebang; or failing to compile as Python 3 where a
    Python 2 statement stands (`print x`, `except E, e:`, backquotes, 0777, 10L, ...); or compiling
    but calling Python-2-only builtins (`raw_input`, `xrange`, `.iteritems()`) it does not define
    itself or guard with `except NameError`. Only parsed, never run."""
    if _SHEBANG_PY2.match(code):
        return True
    try:
        tree = compile(code, "submission.py", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        lines = code.splitlines()
        line = lines[exc.lineno - 1] if exc.lineno and 0 < exc.lineno <= len(lines) else ""
        return any(m in (exc.msg or "") for m in _PY2_MESSAGES) or bool(_PY2_LINE.search(line))
    except (ValueError, RecursionError, MemoryError):
        return False  # not Python of any version: let the judge report it
    return _uses_python2_only_names(tree)


def _uses_python2_only_names(tree: ast.AST) -> bool:
    bound, used, guarded = set(), set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Attribute) and node.attr in _PY2_ATTRIBUTES:
            (bound if isinstance(node.ctx, ast.Store) else used).add("." + node.attr)
        elif isinstance(node, ast.ExceptHandler) and "NameError" in ast.dump(node.type or ast.Name("")):
            guarded = True  # try: input = raw_input / except NameError: 2-and-3 compatible code
    if guarded:
        return False
    return bool((used & _PY2_NAMES) - bound) or any(
        name.startswith(".") and name[1:] not in bound and name not in bound for name in used
    )


def classify(name: str, code: str | None) -> tuple[str | None, str]:
    """(arex language name, "") for a submission file `name` with source `code`, or (None, reason)."""
    suffix = "." + name.rsplit(".", 1)[1] if "." in name else name
    if suffix == ".py2":
        return None, PYTHON2
    try:
        language = language_for(name)
    except ValueError:
        return None, f"language {suffix}"
    if name.endswith(".py") and code is not None and is_python2(code):
        return None, PYTHON2
    return language.name, ""


# Kattis language codes (the format's languages table) → a file name suffix LANGUAGES knows them by.
KATTIS_CODES = {"c": ".c", "cpp": ".cpp", "java": ".java", "python3": ".py", "python2": ".py2", "kotlin": ".kt"}


def classify_declared(code_name: str, name: str, code: str | None) -> tuple[str | None, str]:
    """As `classify`, for a submission whose language a submissions.yaml declares (`code_name`):
    an arex language of that name (python3, java, pypy3), else the Kattis code's file suffix."""
    key = str(code_name).lower()
    if key in LANGUAGES:
        if name.endswith(".py") and code is not None and is_python2(code):
            return None, PYTHON2
        return key, ""
    suffix = KATTIS_CODES.get(key)
    if suffix is None:
        return None, f"language {code_name}"
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return classify(stem + suffix, code)
