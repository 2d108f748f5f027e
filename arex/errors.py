"""The one base of every error a user can cause and fix, and the exit code it ends the CLI with.

The CLI catches `ArexError` in one place (`arex.cli`) and prints its message, one paragraph, no
traceback. Anything else that escapes is a bug in arex and shows its traceback.

Exit codes (each subclass sets its own `exit_code`; they live next to the code that raises them):

    1    ArexError: a setup problem (a package not installed, a server that would not start);
         DiskFull: an output could not be written for lack of space
    2    UserInputError: a file, folder, option, config key or spec the user gave is wrong
         (ConfigError, SpecError, SourceError, SkillError, SnapshotError, PushError, RecordError,
         ExportError, OutputError, StoreLocked)
    3    LeakError: private data reached the agent; nothing was selected or exported
    4    SandboxError: the sandbox engine is down or an image is missing
    5    TeacherError: the teacher endpoint refused or cannot be reached
    6    Unfinished: `arex rollout` ran, but rollouts ended infra_failed or teacher_error (arex.rollout.endings);
         the summary is written and the reasons are printed, grouped
    130  Interrupted: Ctrl-C

Errors that are never the user's to fix (a submission the agent wrote that cannot be scored, an
archive member that is a link) stay plain `ValueError`s: the code that raises them also catches them.

`explain_validation` turns a pydantic `ValidationError` into one sentence per problem, with the
dotted key, where it was set, what was expected and, for an unknown key, the closest known one;
config files (`arex.config`) and task specs (`arex.specs`) both use it.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Callable

_GOT_CHARS = 80


class ArexError(Exception):
    """A problem the user can fix (bad input, missing setup, a service down). The message says
    what is wrong, naming the file or key, and what to do."""

    exit_code: int = 1
    """The CLI's exit status for this error."""


class UserInputError(ArexError):
    """A file, folder or option the user gave is missing or malformed."""

    exit_code = 2


class Interrupted(ArexError):
    """The user pressed Ctrl-C (or the process got SIGINT); the message says what was kept."""

    exit_code = 130


# -- explaining pydantic validation errors ------------------------------------------------------
def explain_validation(
    exc: Any, model: type, source_of: Callable[[tuple[str, ...]], str | None] = lambda loc: None
) -> list[str]:
    """One sentence per problem of `exc` (a pydantic ValidationError raised validating `model`).
    `source_of(loc)` names where the value at `loc` was set (a file, an override), or None to leave it out."""
    problems = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        source = source_of(loc)
        problems.append(_explain_one(err, loc, model, f" (set by {source})" if source else ""))
    return problems


def _explain_one(err: dict, loc: tuple[str, ...], model: type, set_by: str) -> str:
    dotted = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        guess = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f" Did you mean '{'.'.join(loc[:-1] + (guess[0],))}'?" if guess else ""
        where = "under '" + ".".join(loc[:-1]) + "'" if loc[:-1] else "at the top level"
        return f"unknown key '{dotted}'{set_by}.{hint} Known keys {where}: {', '.join(known)}."
    if err["type"] == "value_error" and _model_at(model, loc) is not None:
        # A rule across a section's keys (e.g. a model with no price): the message says which.
        return f"section '{dotted}': {err['msg'].removeprefix('Value error, ')}."
    expected = _type_name(_annotation_at(model, loc)) if loc else f"a '{model.__name__}' mapping"
    if err["type"] == "missing":
        return f"missing key '{dotted}'{set_by}: expects {expected}."
    got = repr(err.get("input"))
    got = got if len(got) <= _GOT_CHARS else got[: _GOT_CHARS - 3] + "..."
    # right type, out of range
    if err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"'{dotted}'{set_by} cannot be {got}: {err['msg'].replace('Input should be', 'it must be')}."
    if err["type"] == "value_error":  # a validator's own rule: its message says what is expected
        return f"'{dotted}'{set_by} cannot be {got}: {err['msg'].removeprefix('Value error, ')}."
    return f"'{dotted}'{set_by} expects {expected}, got {got}: {err['msg']}."


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "model_fields")


def _annotation_at(model: type, loc: tuple[str, ...]) -> Any:
    """The type of the value at `loc`: fields of models, items of lists (an index), values of
    mappings (a key). None if `loc` leads nowhere known."""
    current: Any = model
    for part in loc:
        current = _strip_none(current)
        if not _is_model(current) and typing.get_origin(current) in (typing.Union, types.UnionType):
            current = next((a for a in typing.get_args(current) if _is_model(a)), None)
        origin = typing.get_origin(current)
        if _is_model(current):
            field = current.model_fields.get(part)
            current = field.annotation if field is not None else None
        elif origin in (list, tuple, set, frozenset) and part.isdigit():
            current = (typing.get_args(current) or (None,))[0]
        elif origin is dict:
            current = (typing.get_args(current) or (None, None))[-1]
        else:
            return None
        if current is None:
            return None
    return current


def _strip_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _model_at(model: type, loc: tuple[str, ...]) -> type | None:
    """The model whose mapping sits at `loc`, if one does."""
    found = _strip_none(_annotation_at(model, loc))
    return found if _is_model(found) else None


def _type_name(annotation: Any) -> str:
    if annotation is None:
        return "a valid value"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple, set, frozenset):
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if annotation is type(None):
        return "null"
    if _is_model(annotation):
        return f"a '{annotation.__name__}' mapping"
    if isinstance(annotation, type):
        names = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true/false"}
        return names.get(annotation.__name__, annotation.__name__)
    return str(annotation)


class ConfigError(UserInputError, ValueError):
    """A configuration that cannot be used (a -c file missing or not YAML, an unknown key, a value
    of the wrong type); the message names every problem, its key and where it was set."""
