"""Languages a submission may be written in. Adding one is adding a row.

A row's file name and commands may hold placeholders that depend on the submission and the
problem, filled by `Language.for_submission` before grading (the judge runs the result as is):
  {main}      the class the JVM starts (Java: the public top-level class, package-qualified)
  {file}      the class's simple name (Java saves `public class X` as X.java, as javac requires)
  {heap_mb}   the JVM heap: the memory limit less what the JVM itself takes (see JVM_OVERHEAD_MB)
  {stack_mb}  the main thread's stack: the memory limit, as native programs get (RLIMIT_STACK)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Language:
    name: str
    source: str
    """File name the submission is saved as in the grading sandbox."""
    compile: tuple[str, ...] | None
    """Compile command (run in the folder holding `source`), or None."""
    run: tuple[str, ...]
    extensions: tuple[str, ...]
    heavy_compile: bool = False
    """The compiler needs more memory than the program may use (the limit is raised meanwhile)."""

    def for_submission(self, code: str, memory_mb: int) -> Language:
        """This language with its placeholders filled for one submission under a memory limit."""
        if "{" not in self.source and not any("{" in a for a in self.run):
            return self
        package, cls = java_main_class(code)
        values = {
            "{main}": f"{package}.{cls}" if package else cls,
            "{file}": cls,
            "{heap_mb}": str(jvm_heap_mb(memory_mb)),
            "{stack_mb}": str(max(1, memory_mb)),
        }

        def fill(text: str) -> str:  # plain replace: other braces (a Python f-string) stay as they are
            for key, value in values.items():
                text = text.replace(key, value)
            return text

        return replace(
            self,
            source=fill(self.source),
            compile=tuple(map(fill, self.compile)) if self.compile else None,
            run=tuple(map(fill, self.run)),
        )


# Python's "compile" step: a syntax check printing what `python3 -m py_compile` prints, at less than
# half its cost (py_compile's command line imports argparse; traceback is only needed on an error).
_PY_SYNTAX_CHECK = (
    "import sys\n"
    "try:\n"
    "    compile(open(sys.argv[1], 'rb').read(), sys.argv[1], 'exec', dont_inherit=True)\n"
    "except (SyntaxError, ValueError) as e:\n"
    "    if type(e) is SyntaxError:\n"
    "        import traceback; sys.stderr.write(''.join(traceback.format_exception_only(SyntaxError, e)))\n"
    "    else:\n"
    "        sys.stderr.write(f'Sorry: {type(e).__name__}: {e}')\n"
    "    sys.exit(1)\n"
)

# What the JVM takes besides its heap, measured as peak RSS in the grading container (Java 17,
# serial GC, class data sharing): ~30 MB for an empty program, ~40 MB with JIT-compiled code. The
# judge's memory verdict is the process's peak RSS, and the heap grows up to -Xmx before a full
# collection, so -Xmx at the full limit would turn garbage into MLE: the heap gets what is left.
JVM_OVERHEAD_MB = 48
JVM_MIN_HEAP_MB = 16
# The JIT is the JVM's default (C1 then C2), as Kattis and DOMjudge run Java: time limits are set
# against it, and C1 alone runs hot loops 2-5x slower (a contest's accepted Java solution TLEs).
_JVM_FLAGS = (
    "-XX:+UseSerialGC",  # one GC thread, least overhead; the grading container has one CPU anyway
    "-XX:-UsePerfData",  # no hsperfdata file in /tmp, and a faster start
    "-Xshare:auto",
    "-Xss{stack_mb}m",
    "-Xmx{heap_mb}m",
    "-Dfile.encoding=UTF-8",
)


def jvm_heap_mb(memory_mb: int) -> int:
    """The JVM's -Xmx for a memory limit: what its own overhead leaves (at least a small heap, so
    a tiny limit fails as MLE/RE on the program's first allocations rather than at JVM start)."""
    return max(JVM_MIN_HEAP_MB, memory_mb - JVM_OVERHEAD_MB)


# C and C++ get a stack protector, as gcc has by default on Ubuntu (where Kattis and DOMjudge
# judgehosts run; Debian's gcc has none): a small stack buffer overrun is then a crash (RE), as a
# contest's run_time_error submissions expect, instead of passing unnoticed.
_GCC_HARDENING = ("-fstack-protector-strong",)

LANGUAGES: dict[str, Language] = {
    "cpp17": Language(
        "cpp17",
        "solution.cpp",
        ("g++", "-std=c++17", "-O2", *_GCC_HARDENING, "-pipe", "-o", "solution", "solution.cpp"),
        ("./solution",),
        (".cpp", ".cc", ".cxx"),
        heavy_compile=True,
    ),
    "python3": Language(
        "python3",
        "solution.py",
        ("python3", "-c", _PY_SYNTAX_CHECK, "solution.py"),
        ("python3", "solution.py"),
        (".py",),
    ),
    "c11": Language(
        "c11",
        "solution.c",
        ("gcc", "-std=c11", "-O2", *_GCC_HARDENING, "-pipe", "-o", "solution", "solution.c", "-lm"),
        ("./solution",),
        (".c",),
        heavy_compile=True,
    ),
    "java": Language(
        "java",
        "{file}.java",
        ("javac", "-encoding", "UTF-8", "-nowarn", "-d", ".", "{file}.java"),
        ("java", *_JVM_FLAGS, "-cp", ".", "{main}"),
        (".java",),
        heavy_compile=True,
    ),
    # PyPy runs Python 3.9: its own parser checks the syntax (3.10's `match` is an error there).
    # Never chosen by extension (.py is python3); named by a package or with --lang.
    "pypy3": Language(
        "pypy3", "solution.py", ("pypy3", "-c", _PY_SYNTAX_CHECK, "solution.py"), ("pypy3", "solution.py"), ()
    ),
}


def language_named(name: str) -> Language:
    try:
        return LANGUAGES[name]
    except KeyError:
        raise ValueError(f"Unknown language '{name}'. Known languages: {', '.join(LANGUAGES)}.") from None


def language_for(path: str) -> Language:
    """The language of a source file, by its extension."""
    for language in LANGUAGES.values():
        if language.extensions and path.endswith(language.extensions):
            return language
    known = ", ".join(ext for lang in LANGUAGES.values() for ext in lang.extensions)
    raise ValueError(f"Cannot tell the language of '{path}': known extensions are {known}.")


# -- Java: which class to save the file as and to start ------------------------------------------
# Comments, string/char literals and text blocks, removed before looking for declarations (a class
# named in a comment is not declared). Text blocks first: `"""` would otherwise read as strings.
_JAVA_NOISE = re.compile(r'"""[\s\S]*?"""|//[^\n]*|/\*[\s\S]*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
_JAVA_TYPE = re.compile(r"\b(class|interface|enum|record)\s+([A-Za-z_$][\w$]*)")
_JAVA_PACKAGE = re.compile(r"^\s*package\s+([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)*)\s*;", re.M)
_JAVA_MAIN = re.compile(r"\bstatic\b[^;{}()]*\bvoid\s+main\s*\(")
_JAVA_DEFAULT = "Main"


def java_main_class(code: str) -> tuple[str, str]:
    """(package, class) of a Java submission: its public top-level type (javac requires the file be
    named after it), else the top-level type declaring `static void main`, else the first one, else
    Main. Submissions name their class anything (Kattis), and may declare a package."""
    text = _JAVA_NOISE.sub(lambda m: " " * len(m.group()), code)
    package = _JAVA_PACKAGE.search(text)
    top: list[tuple[str, bool, int, int]] = []  # (name, public, body start, body end) of top-level types
    depth, pos = 0, 0
    for match in _JAVA_TYPE.finditer(text):
        depth += text.count("{", pos, match.start()) - text.count("}", pos, match.start())
        pos = match.start()
        if depth != 0:
            continue
        head_start = max(text.rfind(c, 0, match.start()) for c in ";{}") + 1
        public = re.search(r"\bpublic\b", text[head_start : match.start()]) is not None
        top.append((match.group(2), public, match.end(), _body_end(text, match.end())))
    chosen = (
        next((t for t in top if t[1]), None)
        or next((t for t in top if _JAVA_MAIN.search(text, t[2], t[3])), None)
        or (top[0] if top else None)
    )
    return (re.sub(r"\s+", "", package.group(1)) if package else ""), (chosen[0] if chosen else _JAVA_DEFAULT)


def _body_end(text: str, start: int) -> int:
    """Where the braces opened after `start` close (the end of the text if they never do)."""
    depth, i = 0, text.find("{", start)
    if i < 0:
        return len(text)
    for i in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)
