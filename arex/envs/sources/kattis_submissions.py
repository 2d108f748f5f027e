"""A Kattis package's example submissions → arex SolutionRefs (and the ones skipped, with why).

What each submission must do comes from its folder's default (accepted, wrong_answer, ...) and from
`submissions/submissions.yaml` (2025-09 format): keys are globs over paths under `submissions/`
(`*` stays within a name, `{a,b}` expands; a submission matches if it or a parent folder does),
each mapping to `permitted` / `required` verdict lists (of AC, WA, TLE, RTE), `score`, `language`.
A key equal to a folder name replaces that folder's default (keys it leaves out are inherited);
any other matching key adds a requirement. Keys naming test groups (`secret/group1: {...}`) scope
a requirement to those tests: arex keeps their `required` (a verdict on some test of a group is a
verdict on some test) and cannot check their `permitted`.

arex's categories: accepted (only AC permitted), wrong_answer / time_limit_exceeded /
run_time_error (that one verdict required), partially_accepted (legacy folder, or a `score` range
strictly inside (0, full score)). Anything else (rejected, brute_force: "some failure") is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from arex.envs.sources.common import SourceError, read_yaml
from arex.envs.sources.programs import classify, classify_declared
from arex.specs import SolutionRef

ALL = frozenset({"AC", "WA", "TLE", "RTE"})
DEFAULTS: dict[str, dict[str, frozenset[str]]] = {
    "accepted": {"permitted": frozenset({"AC"})},
    "rejected": {"required": frozenset({"RTE", "TLE", "WA"})},
    "wrong_answer": {"permitted": frozenset({"AC", "WA"}), "required": frozenset({"WA"})},
    "time_limit_exceeded": {"permitted": frozenset({"AC", "TLE"}), "required": frozenset({"TLE"})},
    "run_time_error": {"permitted": frozenset({"AC", "RTE"}), "required": frozenset({"RTE"})},
    "brute_force": {"permitted": frozenset({"AC", "RTE", "TLE"}), "required": frozenset({"RTE", "TLE"})},
}
LEGACY_PARTIAL = "partially_accepted"
_ONE_REQUIRED = {"WA": "wrong_answer", "TLE": "time_limit_exceeded", "RTE": "run_time_error"}
_ENTRY_KEYS = {
    "language",
    "entrypoint",
    "authors",
    "model_solution",
    "permitted",
    "required",
    "score",
    "message",
    "use_for_time_limit",
}


@dataclass
class Expectation:
    category: str | None
    """An arex category, or None when the requirements map to none (then `reason` says why)."""
    reason: str = ""
    language: str | None = None
    """The submissions.yaml `language` (a Kattis language code), if given."""


def _verdicts(value, where: str) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v in ALL for v in items):
        raise SourceError(f"{where}: must be a list of verdicts from AC, WA, TLE, RTE, got {value!r}")
    return frozenset(items)


def _glob_regex(pattern: str) -> list[re.Pattern]:
    """The pattern's brace expansions as regexes: `*` matches within one path part only."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m:
        return [
            r
            for option in m.group(1).split(",")
            for r in _glob_regex(pattern[: m.start()] + option + pattern[m.end() :])
        ]
    return [
        re.compile(
            "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in pattern.strip("/")) + r"\Z"
        )
    ]


def _matches(pattern: str, path: str) -> bool:
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]  # the submission or a parent folder
    return any(r.match(c) for r in _glob_regex(pattern) for c in candidates)


def expectation(path: str, entries: dict, where: str, full_score: float | None) -> Expectation:
    """What the submission at `path` (relative to submissions/) is expected to do."""
    folder = path.split("/")[0]
    rules = [dict(DEFAULTS.get(folder, {}))]
    language, score = None, None
    for key, entry in entries.items():
        if not _matches(str(key), path):
            continue
        if not isinstance(entry, dict):
            raise SourceError(f"{where}: key '{key}' must map to fields (permitted, required, score, language, ...)")
        rule = {k: _verdicts(entry[k], f"{where}: key '{key}.{k}'") for k in ("permitted", "required") if k in entry}
        for group, scoped in entry.items():
            if group not in _ENTRY_KEYS and isinstance(scoped, dict) and "required" in scoped:
                rules.append({"required": _verdicts(scoped["required"], f"{where}: key '{key}.{group}.required'")})
        if str(key).strip("/") == folder:
            rules[0].update(rule)  # the folder's own key replaces its default
        else:
            rules.append(rule)
        language = entry.get("language", language)
        score = entry.get("score", score)
    return _category(folder, rules, score, full_score, language)


def _category(folder: str, rules: list[dict], score, full_score: float | None, language) -> Expectation:
    permitted = frozenset.intersection(ALL, *(r.get("permitted", ALL) for r in rules))
    required = [r["required"] for r in rules if "required" in r]
    if folder == LEGACY_PARTIAL and not required:
        return Expectation("partially_accepted", language=language)
    failing = [r for r in required if "AC" not in r]  # requiring AC somewhere says nothing arex checks
    if permitted == {"AC"} and not failing:
        low, high = _score_range(score)
        if full_score and low is not None and high is not None and 0 < low and high < full_score:
            return Expectation("partially_accepted", language=language)
        return Expectation("accepted", language=language)
    singles = {next(iter(r)) for r in failing if len(r) == 1}
    if len(singles) == 1 and all(len(r) == 1 for r in failing):
        verdict = next(iter(singles))
        if verdict in _ONE_REQUIRED and verdict in permitted:
            return Expectation(_ONE_REQUIRED[verdict], language=language)
    if not failing and len(permitted - {"AC"}) == 1 and "AC" not in permitted:  # e.g. permitted: [WA]
        return Expectation(_ONE_REQUIRED.get(next(iter(permitted)), None), language=language)
    shown = f"permitted {sorted(permitted)}" + (f", required {[sorted(r) for r in required]}" if required else "")
    return Expectation(None, f"expectation has no arex category ({shown})", language)


def _score_range(score) -> tuple[float | None, float | None]:
    """A `score` (a number, or [low, high]) as its bounds; (None, None) if absent or malformed."""
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return float(score), float(score)
    if (
        isinstance(score, list)
        and len(score) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in score)
    ):
        return float(score[0]), float(score[1])
    return None, None


def program_file(program: Path) -> Path | None:
    """The one source file of a submission (a file, or a folder holding one file), else None."""
    if program.is_file():
        return program
    inside = [
        p for p in program.rglob("*") if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts
    ]
    return inside[0] if len(inside) == 1 else None


def kattis_solutions(
    folder: Path, files: dict, full_score: float | None
) -> tuple[list[SolutionRef], list[tuple[str, str, str]]]:
    """The submissions in a language arex runs (added to `files`), and the skipped ones."""
    root = folder / "submissions"
    yaml_path = root / "submissions.yaml"
    entries = read_yaml(yaml_path) if yaml_path.is_file() else {}
    solutions, skipped = [], []
    programs = (
        sorted(
            p
            for d in root.iterdir()
            if d.is_dir() and not d.name.startswith(".")
            for p in d.iterdir()
            if not p.name.startswith(".")
        )
        if root.is_dir()
        else []
    )
    for program in programs:
        rel = program.relative_to(root).as_posix()
        expected = expectation(rel, entries, str(yaml_path), full_score)
        if expected.category is None:
            skipped.append((f"submissions/{rel}", rel.split("/")[0], expected.reason))
            continue
        source = program_file(program)
        if source is None:
            skipped.append((f"submissions/{rel}", expected.category, "multi-file submission"))
            continue
        code = source.read_text(encoding="utf-8", errors="replace")
        if expected.language is not None:
            language, reason = classify_declared(expected.language, source.name, code)
        else:
            language, reason = classify(source.name, code)
        if language is None:
            skipped.append((f"submissions/{rel}", expected.category, reason))
            continue
        dest = f"solutions/{source.relative_to(root).as_posix()}"
        files[dest] = source
        solutions.append(SolutionRef(path=dest, language=language, expected=expected.category))
    return solutions, skipped
