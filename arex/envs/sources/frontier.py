"""Frontier-CS algorithmic problems (FrontierCS/Frontier-CS `algorithmic/problems/<id>/`), as shipped.

A problem folder holds `statement.txt`, `config.yaml` and `testdata/`, plus a testlib checker
(`type: default`, `checker:` default chk.cc) or interactor (`type: interactive`, `interactor:`
default interactor.cc), as Frontier-CS's own judge reads them. config.yaml: `time` / `time_limit`
("2s", "500ms"; a bare number is seconds), `memory` / `memory_limit` ("256m"; a bare number is
bytes), `subtasks` each with `n_cases` (files <input_prefix><k><input_suffix>, numbered on across
subtasks) or `cases: [{input, output}]`; `input_prefix`/`output_prefix`/`input_suffix`/
`output_suffix` (defaults "", "", .in, .ans). testlib.h is looked up beside the problem and in its
parents (the repository keeps it in algorithmic/judge/include/). Scores are the checker's ratios.

Frontier-CS's test data is its public cases: with two or more, the first is the sample (shown in
feedback, not scored) and the rest are hidden; a problem with one case has it hidden only, and no
sample, so hidden data never shows in sample feedback. The sample is shown to the agent before its
first submission too: appended to the statement and in workspace/samples/1.in and .ans (not for an
interactive problem, whose .in is the interactor's, nor when it equals a hidden case).

Solutions: `solutions/<name>` inside the problem folder is arex's convention (accepted, or partial /
wrong by name). Frontier-CS itself ships model-written solutions of unknown score in
`<root>/solutions/<id>/` (`<root>/problems/<id>` being the problem) and sometimes
`examples/*.cpp` in the problem folder: a few of these become `candidate` solutions, the evidence
the reference-free gates use that grading rewards a better answer (see `_candidates`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from arex.envs.sources.common import (
    TESTLIB_HEADER,
    Problem,
    SourceError,
    make_spec,
    read_text,
    read_yaml,
    slug,
    testlib_header,
)
from arex.envs.sources.common import number as as_number
from arex.envs.sources.programs import classify
from arex.envs.sources.statement import Sample, with_samples, workspace_samples
from arex.specs import CheckerSpec, SolutionRef, TestCase, resolve_inside

_LIMIT_LINE = re.compile(r"^(time|memory)\s*limit|^problem\s*$|^(input|output)\b", re.I)
CANDIDATES_MAX = 3
"""Candidate solutions taken per problem: the build grades each (the best twice), so few."""
CANDIDATES_DIR = "solutions/candidates"


def seconds(value: Any, path: Path, key: str) -> float:
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s)?", text)
    if not match:
        raise SourceError(f"{path}: field '{key}': cannot read a time from {value!r} (use e.g. '2s' or '500ms')")
    number = float(match.group(1))
    return number / 1000 if match.group(2) == "ms" else number


def megabytes(value: Any, path: Path, key: str) -> int:
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)b?", text)
    if not match:
        raise SourceError(f"{path}: field '{key}': cannot read a memory size from {value!r} (use e.g. '256m')")
    number, unit = float(match.group(1)), match.group(2)
    if not unit:  # Frontier-CS: a bare number is bytes
        return max(1, int(number / (1 << 20)))
    return max(1, int(number * {"k": 1 / 1024, "m": 1, "g": 1024}[unit]))


def load_frontier(folder: Path, candidates: int = CANDIDATES_MAX) -> Problem:
    config_path = folder / "config.yaml"
    config = read_yaml(config_path)
    kind = str(config.get("type", "default"))
    if kind not in ("default", "interactive"):
        raise SourceError(
            f"{config_path}: field 'type': only 'default' and 'interactive' problems are supported, got {kind!r}"
        )
    statement = read_text(folder / "statement.txt")
    for key, alias in (("time", "time_limit"), ("memory", "memory_limit"), ("subtasks", "subtasks")):
        if key not in config and alias not in config:
            raise SourceError(f"{config_path}: field '{key}' is missing")
    time_limit = seconds(config.get("time", config.get("time_limit")), config_path, "time")
    memory = megabytes(config.get("memory", config.get("memory_limit")), config_path, "memory")
    files: dict[str, Path | bytes] = {}
    tests = _tests(folder, config, config_path, files)
    checker = _checker(folder, config, config_path, kind, files)
    solutions, skipped = _solutions(folder, files)
    solutions += _candidates(folder, files, candidates)
    shown = [] if kind == "interactive" else _public_sample(tests, files)
    statement = with_samples(statement, shown) if shown else statement
    files.update(workspace_samples(shown))
    spec = make_spec(
        config_path,
        id=f"frontier-{slug(folder.name)}",
        title=_title(statement, folder),
        time_limit_s=time_limit,
        memory_mb=memory,
        checker=checker,
        scoring="ratio",
        tests=tests,
        solutions=solutions,
        source_format="frontier-cs",
    )
    return Problem(spec=spec, statement=statement, files=files, skipped=skipped, samples_published=False)


def _title(statement: str, folder: Path) -> str:
    lines = [line.strip() for line in statement.splitlines() if line.strip()]
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), None)
    plain = next((line for line in lines if not _LIMIT_LINE.search(line)), None)
    return (heading or plain or f"Frontier-CS {folder.name}")[:120]


def _case_files(config: dict, config_path: Path) -> list[tuple[int, str, str]]:
    """(subtask index, input name, output name) of every case, in order."""
    subtasks = config["subtasks"]
    if not isinstance(subtasks, list) or not subtasks:
        raise SourceError(f"{config_path}: field 'subtasks' must be a list of subtasks (each with n_cases or cases)")
    in_prefix, out_prefix = str(config.get("input_prefix", "")), str(config.get("output_prefix", ""))
    in_suffix, out_suffix = str(config.get("input_suffix", ".in")), str(config.get("output_suffix", ".ans"))
    cases, number = [], 1
    for s, subtask in enumerate(subtasks):
        if isinstance(subtask, dict) and "n_cases" in subtask:
            subtask = {**subtask, "n_cases": as_number(subtask["n_cases"], config_path, f"subtasks.{s}.n_cases", int)}
            for k in range(number, number + subtask["n_cases"]):
                cases.append((s, f"{in_prefix}{k}{in_suffix}", f"{out_prefix}{k}{out_suffix}"))
            number += int(subtask["n_cases"])
        elif isinstance(subtask, dict) and isinstance(subtask.get("cases"), list):
            cases += [(s, str(c["input"]), str(c["output"])) for c in subtask["cases"]]
        else:
            raise SourceError(
                f"{config_path}: field 'subtasks.{s}' needs n_cases or a list of cases ({{input, output}})"
            )
    return cases


def _case_paths(folder: Path, data: Path, config_path: Path, s: int, in_name: str, out_name: str) -> tuple[Path, Path]:
    """The input and answer files of one case of subtask `s`; SourceError naming it if one is missing."""
    inp = resolve_inside(folder, in_name, config_path, f"subtasks.{s}", SourceError, base=data)
    # As Frontier-CS's judge: the answer is the output name with .out read as .ans, else the name itself.
    names = (re.sub(r"\.out$", ".ans", out_name), out_name)
    named = [resolve_inside(folder, name, config_path, f"subtasks.{s}", SourceError, base=data) for name in names]
    ans = next((p for p in named if p.is_file()), named[-1])
    for path, what in ((inp, "input"), (ans, "answer")):
        if not path.is_file():
            raise SourceError(f"{config_path}: field 'subtasks.{s}': {what} file testdata/{path.name} is missing")
    return inp, ans


def _tests(folder: Path, config: dict, config_path: Path, files: dict) -> list[TestCase]:
    data = folder / "testdata"
    cases = _case_files(config, config_path)
    if not cases:
        raise SourceError(f"{config_path}: field 'subtasks': no test cases (n_cases is 0 everywhere)")
    tests = []
    for index, (s, in_name, out_name) in enumerate(cases, start=1):
        try:
            inp, ans = _case_paths(folder, data, config_path, s, in_name, out_name)
        except OSError as exc:  # a name the OS refuses (too long): made of the prefixes and suffixes
            raise SourceError(
                f"{config_path}: field 'subtasks.{s}': the test file name {in_name[:40]!r}... cannot be a file name "
                f"({exc.strerror}); check input_prefix, input_suffix, output_prefix and output_suffix"
            ) from None
        files[f"private/tests/{index}.in"], files[f"private/tests/{index}.ans"] = inp, ans
        sample = index == 1 and len(cases) > 1  # one case: hidden only, never a sample too
        tests.append(
            TestCase(
                name=str(index),
                input=f"tests/{index}.in",
                answer=f"tests/{index}.ans",
                group=f"subtask{s + 1}",
                sample=sample,
            )
        )
    return tests


def _public_sample(tests: list[TestCase], files: dict) -> list[Sample]:
    """The sample case as the agent is shown it, or [] if there is none or it equals a hidden case
    (then it stops being a sample: common._drop_sample_twins)."""
    sample = next((t for t in tests if t.sample), None)
    if sample is None:
        return []
    given = files[f"private/{sample.input}"].read_bytes()
    if any(files[f"private/{t.input}"].read_bytes() == given for t in tests if not t.sample):
        return []
    answer = files[f"private/{sample.answer}"]
    return [
        Sample(
            given.decode(errors="replace"),
            answer.read_text(errors="replace"),
            download_input=files[f"private/{sample.input}"],
            download_answer=answer,
        )
    ]


def _checker(folder: Path, config: dict, config_path: Path, kind: str, files: dict) -> CheckerSpec:
    key, default = ("interactor", "interactor.cc") if kind == "interactive" else ("checker", "chk.cc")
    name = config.get(key) or default
    path = resolve_inside(folder, name, config_path, key, SourceError)
    if not path.is_file():
        raise SourceError(f"{config_path}: field '{key}': {name} does not exist in the problem folder")
    files[f"private/checker/{path.name}"] = path
    header = testlib_header(path, folder)
    if header is not None:
        files[f"private/checker/{TESTLIB_HEADER}"] = header
    if kind == "interactive":
        return CheckerSpec(kind="interactive", protocol="testlib", source=f"checker/{path.name}")
    return CheckerSpec(kind="testlib", source=f"checker/{path.name}")


def _solutions(folder: Path, files: dict) -> tuple[list[SolutionRef], list[tuple[str, str, str]]]:
    """arex's convention beside a Frontier-CS problem: solutions/<name> (accepted; "partial" in the
    name: partially accepted; "wrong": wrong answer). Frontier-CS's own solutions are candidates."""
    solutions, skipped = [], []
    root = folder / "solutions"
    for path in sorted(root.glob("*")) if root.is_dir() else []:
        if not path.is_file():
            continue
        expected = (
            "partially_accepted" if "partial" in path.stem else ("wrong_answer" if "wrong" in path.stem else "accepted")
        )
        language, reason = classify(path.name, path.read_text(encoding="utf-8", errors="replace"))
        if language is None:
            skipped.append((f"solutions/{path.name}", expected, reason))
            continue
        files[f"solutions/{path.name}"] = path
        solutions.append(SolutionRef(path=f"solutions/{path.name}", language=language, expected=expected))
    return solutions, skipped


def _candidates(folder: Path, files: dict, limit: int) -> list[SolutionRef]:
    """Up to `limit` solutions of unknown quality, chosen by name alone (their scores are unknown):
    the problem's examples/ first, then Frontier-CS's <root>/solutions/<id>/ in `_by_family` order.
    In the env: solutions/candidates/<name> (examples: solutions/candidates/examples/<name>)."""
    root = folder.parent.parent if folder.parent.name == "problems" else None
    shipped = _runnable(root / "solutions" / folder.name) if root is not None else []
    chosen = [(path, language, "examples/") for path, language in _runnable(folder / "examples")]
    chosen += [(path, language, "") for path, language in _by_family(shipped)]
    refs = []
    for path, language, prefix in chosen[: max(0, limit)]:
        rel = f"{CANDIDATES_DIR}/{prefix}{path.name}"
        files[rel] = path
        refs.append(SolutionRef(path=rel, language=language, expected="candidate"))
    return refs


def _runnable(directory: Path) -> list[tuple[Path, str]]:
    """(file, language) of each file in `directory` arex can run, by name; others (Frontier-CS's
    `<model>.FAILED` notes of generations that failed) are left out. A link out of the folder is
    never followed: only the package's own files go into the env."""
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.iterdir()):
        if not path.is_file() or not path.resolve().is_relative_to(directory.resolve()):
            continue
        language, _ = classify(path.name, path.read_text(encoding="utf-8", errors="replace"))
        if language is not None:
            found.append((path, language))
    return found


def _by_family(entries: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """Diverse first: one solution per model family (the name's leading letters: claude, gemini,
    gpt, ...; families in name order), then a second of each, and so on. Within a family the first
    attempt comes before numbered repeats (`gpt5_2.cpp`), and a newer version before an older
    (gpt5.2 before gpt5.1 before gpt5), as likelier to score."""
    families: dict[str, list[tuple[Path, str]]] = {}
    for entry in entries:
        families.setdefault(_family(entry[0].stem), []).append(entry)
    ranked = [_newest_first(group) for _, group in sorted(families.items())]
    rounds = max((len(group) for group in ranked), default=0)
    return [group[i] for i in range(rounds) for group in ranked if i < len(group)]


def _family(stem: str) -> str:
    match = re.match(r"[a-z]+", stem.lower())
    return match.group(0) if match else stem.lower()


def _newest_first(group: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    def split(stem: str) -> tuple[int, tuple[int, ...]]:
        repeat = re.search(r"_(\d+)$", stem)
        base = stem[: repeat.start()] if repeat else stem
        return (int(repeat.group(1)) if repeat else 0), tuple(int(n) for n in re.findall(r"\d+", base))

    by_version = sorted(group, key=lambda entry: (split(entry[0].stem)[1], entry[0].name), reverse=True)
    return sorted(by_version, key=lambda entry: split(entry[0].stem)[0])  # stable: versions stay newest first
