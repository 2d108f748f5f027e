"""Languages a submission may be written in. Adding one is adding a row."""

from __future__ import annotations

from dataclasses import dataclass


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

LANGUAGES: dict[str, Language] = {
    "cpp17": Language(
        "cpp17", "solution.cpp", ("g++", "-std=c++17", "-O2", "-pipe", "-o", "solution", "solution.cpp"), ("./solution",), (".cpp", ".cc", ".cxx"), heavy_compile=True
    ),
    "python3": Language("python3", "solution.py", ("python3", "-c", _PY_SYNTAX_CHECK, "solution.py"), ("python3", "solution.py"), (".py",)),
}


def language_named(name: str) -> Language:
    try:
        return LANGUAGES[name]
    except KeyError:
        raise ValueError(f"Unknown language '{name}'. Known languages: {', '.join(LANGUAGES)}.") from None


def language_for(path: str) -> Language:
    """The language of a source file, by its extension."""
    for language in LANGUAGES.values():
        if path.endswith(language.extensions):
            return language
    known = ", ".join(ext for lang in LANGUAGES.values() for ext in lang.extensions)
    raise ValueError(f"Cannot tell the language of '{path}': known extensions are {known}.")
