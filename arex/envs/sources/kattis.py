"""Kattis / ICPC problem packages: legacy (problem_statement/, `validation:`, `limits.time_multiplier`)
and 2023-07 / 2025-09 (statement/, `type:` list, `limits.time_limit`, submissions.yaml).

Rejected with the reason: multi-pass and submit-answer problems (the judge would grade a multi-pass
problem as single pass and accept wrong answers). Tests made by generators/generators.yaml come
in as `generated` (arex.envs.judge_generate ran it); a testdata_tools `data/generator.sh` is not
run (rejected: generate first). Interactive problems load with their output validator as the
interactor (`CheckerSpec(kind="interactive", protocol="kattis")`).

2025-09 `include/`: `include/<language>/` (else `include/default/`) is placed beside every
submission in that language when it is graded (env: private/include/<arex language>/, a copy in
workspace/include/ for the agent to read); `{{constants}}` are filled in there and in the example
submissions, as the format says. A BAPCtools `.timelimit` file (or DOMjudge's
`domjudge-problem.ini` `timelimit`) gives the time limit when problem.yaml does not.

Output validator arguments are per test, as the format inherits them: a test's own `<name>.yaml`,
else the nearest folder up to data/ whose test_group.yaml / testdata.yaml sets them (data/secret/'s
do not reach data/sample/). The env's checker has data/secret/'s; a test with others gets its own.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from arex.envs.sources.common import (
    PROVISIONAL_TIME_LIMIT_S,
    Problem,
    SourceError,
    copy_program_folder,
    make_spec,
    number,
    pairs,
    read_text,
    read_yaml,
    slug,
    tests_from_pairs,
)
from arex.envs.sources.kattis_submissions import kattis_solutions
from arex.envs.sources.latex import latex_to_markdown
from arex.envs.sources.statement import Sample, with_samples, workspace_samples
from arex.specs import BUILTIN_CHECKS, CheckerSpec, TestCase, TestGroup

_STATEMENT_DIRS = ("statement", "problem_statement")
_STATEMENT_NAMES = ("problem.en.md", "problem.en.tex", "problem.md", "problem.tex")
_VALIDATOR_SUFFIXES = (".cpp", ".cc", ".cxx", ".py")


def load_kattis(folder: Path, generated: Path | None = None, generation: str = "") -> Problem:
    """`generated`: the data/ folder made by the package's generators (`generation` says how)."""
    meta_path = folder / "problem.yaml"
    meta = read_yaml(meta_path)
    interactive, scoring = kattis_type(meta, meta_path)
    limits = _mapping(meta.get("limits"), meta_path, "limits")
    data = generated or folder / "data"
    if generated is None:
        _check_test_data(folder, data)
    title = _title(meta.get("name"), folder)
    samples = _samples(data / "sample", interactive)
    statement = with_samples(_statement(folder, title, meta.get("constants")), samples)
    found = [(n, i, a) for n, i, a in pairs(data) if n.split("/")[0] in ("sample", "secret")]
    tests, files = tests_from_pairs(folder, found, group_of=_group, sample_of=lambda n: n.startswith("sample/"))
    if not interactive:  # an interactive sample's .in is the interactor's, not the program's
        files.update(workspace_samples(samples))
    hidden_groups = sorted({t.group for t in tests if not t.sample})
    groups = [_group_spec(data / "secret" / g, g) for g in hidden_groups]
    validation = str(meta.get("validation", "default")).split()
    base = str(meta.get("validator_flags") or "").split()  # legacy problem.yaml: every test's
    checker = _checker(folder, meta_path, base + _folder_args(data, "secret"), validation, interactive, files)
    tests = _own_checkers(tests, [name for name, _, _ in found], data, base, checker)
    solutions, skipped = kattis_solutions(folder, files, _full_score(data / "secret") if scoring else None)
    _fill_constants(files, [s.path for s in solutions], _constants(meta))
    included = _includes(folder, files)
    if included:
        statement += included
    time_limit, multiplier, resolution = _time(limits, meta, meta_path, folder)
    spec = make_spec(
        meta_path,
        id=slug(str(meta.get("id") or folder.name)),
        title=title,
        time_limit_s=time_limit,
        memory_mb=number(limits.get("memory", 1024), meta_path, "limits.memory", int),
        output_limit_mb=number(limits.get("output", 8), meta_path, "limits.output", int),
        checker=checker,
        scoring="groups" if scoring and len(hidden_groups) > 1 else ("ratio" if scoring else "fraction"),
        groups=groups,
        tests=tests,
        solutions=solutions,
        source_format="kattis",
    )
    return Problem(
        spec=spec,
        statement=statement,
        files=files,
        time_multiplier=multiplier,
        time_resolution=resolution,
        skipped=skipped,
        generation=generation,
    )


def _mapping(value: Any, path: Path, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SourceError(f"{path}: field '{key}' must be a mapping of fields, got {value!r}")
    return value


def kattis_type(meta: dict, meta_path: Path) -> tuple[bool, bool]:
    """(interactive, scoring) from `type` (2023-07+) or `validation` (legacy); rejects what arex cannot judge."""
    raw = meta.get("type", "pass-fail")
    types = {str(t) for t in raw} if isinstance(raw, list) else set(str(raw).split())
    validation = str(meta.get("validation", "default")).split()
    if "multi-pass" in types:
        raise SourceError(
            f"{meta_path}: field 'type': multi-pass problems are not supported "
            "(arex would run one pass only, so its gates could accept wrong answers)"
        )
    if "submit-answer" in types:
        raise SourceError(
            f"{meta_path}: field 'type': submit-answer problems are not supported "
            "(a submission is a set of answers, not a program)"
        )
    interactive = "interactive" in types or (validation[:1] == ["custom"] and "interactive" in validation)
    scoring = "scoring" in types or "score" in validation
    return interactive, scoring


def _check_test_data(folder: Path, data: Path) -> None:
    has_inputs = (data / "secret").is_dir() and any(p.is_file() for p in (data / "secret").rglob("*.in"))
    if has_inputs:
        return
    generators = [
        p
        for p in (
            folder / "generators" / "generators.yaml",
            data / "generators.yaml",
            data / "generator.sh",  # Kattis testdata_tools: a bash script sourcing gen.sh from outside the package
            folder / "generators",
        )
        if p.exists()
    ]
    if generators:
        where = generators[0].relative_to(folder).as_posix()
        raise SourceError(
            f"{folder}: tests are generated: run the package's generator first "
            f"({where}; for a BAPCtools package, `bt generate`), then build from the folder with data/secret/*.in"
        )
    if not (data / "secret").is_dir():
        raise SourceError(f"{folder}: data/secret/ is missing")


def _title(name: Any, folder: Path) -> str:
    if isinstance(name, dict):
        name = name.get("en") or next(iter(name.values()), None)
    return str(name or folder.name).strip()[:120] or folder.name


def _statement(folder: Path, title: str, constants: Any) -> str:
    """The English statement if there is one (Markdown or LaTeX, 2023+ statement/ or legacy
    problem_statement/), else any language's; LaTeX converted; headed by the title."""
    candidates = [folder / d / n for d in _STATEMENT_DIRS for n in _STATEMENT_NAMES]
    candidates += sorted(
        p for d in _STATEMENT_DIRS for p in (folder / d).glob("problem.*") if p.suffix in (".md", ".tex")
    )
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        pdf = next((p for d in _STATEMENT_DIRS for p in (folder / d).glob("problem*.pdf")), None)
        if pdf is not None:
            raise SourceError(
                f"{pdf}: only a PDF statement; add statement/problem.en.md or .tex (arex shows the agent text)"
            )
        raise SourceError(f"{folder}: no statement found (statement/problem.en.md or problem_statement/problem.en.tex)")
    text = read_text(path)
    values = constants if isinstance(constants, dict) else {}
    if path.suffix == ".tex":
        text = latex_to_markdown(text, values)
    else:
        for key, value in values.items():
            text = text.replace("{{" + str(key) + "}}", str(value))
    if not text.lstrip().startswith("# "):  # Markdown statements leave the name to the judge
        text = f"# {title}\n\n{text.lstrip()}"
    return text


def _samples(folder: Path, interactive: bool) -> list[Sample]:
    """The public samples as the statement shows them: input/output (with the package's .statement,
    .download and .out overrides) or, for interactive problems, .interaction transcripts."""
    if not folder.is_dir():
        return []
    if interactive:
        return [Sample(interaction=read_text(p)) for p in sorted(folder.rglob("*.interaction"))]
    samples = []
    for inp in sorted(folder.rglob("*.in")):
        stem = inp.with_suffix("")
        ans = stem.with_suffix(".ans")
        if not ans.is_file():
            continue  # tests_from_pairs names it
        shown_in = next(p for p in (Path(f"{stem}.in.statement"), inp) if p.is_file())
        shown_out = next(p for p in (stem.with_suffix(".out"), Path(f"{stem}.ans.statement"), ans) if p.is_file())
        down_in = next(p for p in (Path(f"{stem}.in.download"), inp) if p.is_file())
        down_ans = next(p for p in (Path(f"{stem}.ans.download"), stem.with_suffix(".out"), ans) if p.is_file())
        interaction = stem.with_suffix(".interaction")
        samples.append(
            Sample(interaction=read_text(interaction))
            if interaction.is_file()
            else Sample(read_text(shown_in), read_text(shown_out), download_input=down_in, download_answer=down_ans)
        )
    return samples


def _group(name: str) -> str:
    """Each direct subfolder of data/secret is a group; loose files form the group "secret"."""
    parts = name.split("/")
    return parts[1] if parts[0] == "secret" and len(parts) > 2 else parts[0]


def _group_config(folder: Path) -> dict:
    for candidate in (folder / "test_group.yaml", folder / "testdata.yaml"):
        if candidate.is_file():
            return read_yaml(candidate)
    return {}


def _group_spec(folder: Path, name: str) -> TestGroup:
    cfg = _group_config(folder)
    scoring = cfg.get("scoring") if isinstance(cfg.get("scoring"), dict) else {}
    points = cfg.get("max_score", cfg.get("accept_score", scoring.get("score", 1.0)))
    return TestGroup(
        name=name, points=float(points) if isinstance(points, (int, float)) and not isinstance(points, bool) else 1.0
    )


def _full_score(secret: Path) -> float:
    """A scoring problem's full score: data/secret's `max_score` (2023-07+ default 100)."""
    value = _group_config(secret).get("max_score", 100)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 100.0


def _own_checkers(tests: list[TestCase], names: list[str], data: Path, base: list[str], checker: CheckerSpec):
    """Each test whose own `<name>.yaml` or folder gives the output validator other arguments than
    data/secret/ does, with its own checker: the env's validator with those arguments (or the
    built-in comparison they pick). `names`: the tests' paths under data/, in the same order."""
    hidden = base + _folder_args(data, "secret")
    out = []
    for test, name in zip(tests, names, strict=True):
        flags = base + _test_args(data, name)
        if flags != hidden:
            own = (
                _default_validator(flags)
                if checker.kind in BUILTIN_CHECKS
                else checker.model_copy(update={"flags": tuple(flags)})
            )
            test = test.model_copy(update={"checker": own})
        out.append(test)
    return out


def _test_args(data: Path, name: str) -> list[str]:
    """The output validator arguments of the test at data/<name>: its own `<name>.yaml` (2025-09
    test case configuration) if it sets them, else its folder's (`_folder_args`)."""
    own = data / f"{name}.yaml"
    if own.is_file():
        value = _args_value(read_yaml(own))
        if value is not None:
            return value
    return _folder_args(data, PurePosixPath(name).parent.as_posix())


def _folder_args(data: Path, rel: str) -> list[str]:
    """The output validator arguments for tests in data/<rel>: from the nearest folder, from there
    up to data/, whose test_group.yaml (2023-07+) or testdata.yaml (legacy) sets
    `output_validator_args` (or legacy `output_validator_flags`), as the format inherits them."""
    path = PurePosixPath(rel)
    for folder in (path, *path.parents):
        value = _args_value(_group_config(data / folder))
        if value is not None:
            return value
    return []


def _args_value(config: dict) -> list[str] | None:
    value = config.get("output_validator_args", config.get("output_validator_flags"))
    if value is None:
        return None
    return [str(v) for v in value] if isinstance(value, list) else str(value).split()


def _checker(
    folder: Path, meta_path: Path, flags: list[str], validation: list[str], interactive: bool, files: dict
) -> CheckerSpec:
    """The output validator (its folder copied to private/checker/), the interactor if interactive,
    or the default validator's flags."""
    vdirs = [d for d in (folder / "output_validators", folder / "output_validator") if d.is_dir()]
    if "custom" not in validation and not vdirs and not interactive:
        return _default_validator(flags)
    sources = sorted(
        (p for d in vdirs for p in d.rglob("*") if p.suffix in _VALIDATOR_SUFFIXES and p.is_file()),
        key=lambda p: (p.suffix == ".py", p.as_posix()),
    )
    if not sources:
        what = "interactive problem" if interactive else "custom validation"
        raise SourceError(
            f"{meta_path}: field '{'type' if interactive else 'validation'}': "
            f"{what} but no validator source (.cpp/.cc/.py) in output_validator/ or output_validators/"
        )
    src = sources[0]
    copy_program_folder(src, files)
    return CheckerSpec(
        kind="interactive" if interactive else "kattis",
        protocol="kattis",
        source=f"checker/{src.name}",
        flags=tuple(flags),
    )


def _default_validator(flags: list[str]) -> CheckerSpec:
    values: dict[str, Any] = {"kind": "token", "case_sensitive": "case_sensitive" in flags}
    for i, flag in enumerate(flags):
        if flag in ("float_tolerance", "float_absolute_tolerance", "float_relative_tolerance") and i + 1 < len(flags):
            tol = float(flags[i + 1])
            values["kind"] = "float"
            if flag != "float_relative_tolerance":
                values["abs_tol"] = tol
            if flag != "float_absolute_tolerance":
                values["rel_tol"] = tol
    if values["kind"] == "float":
        values.setdefault("abs_tol", 0.0)
        values.setdefault("rel_tol", 0.0)
    return CheckerSpec(**values)


def _time(limits: dict, meta: dict, meta_path: Path, folder: Path) -> tuple[float, float | None, float]:
    """(time limit or a provisional one, the multiplier to derive it with or None, the resolution).
    A 2023-07+ `limits.time_limit` is used as given, else a BAPCtools `.timelimit` file or DOMjudge
    `domjudge-problem.ini` `timelimit`; otherwise the limit is derived from the slowest accepted
    submission: legacy `limits.time_multiplier` (default 5), 2023-07+
    `limits.time_multipliers.ac_to_time_limit` (default 2)."""
    resolution = number(limits.get("time_resolution", 1.0), meta_path, "limits.time_resolution")
    if resolution <= 0:
        raise SourceError(f"{meta_path}: field 'limits.time_resolution' must be above 0, got {resolution:g}")
    if limits.get("time_limit") is not None:
        return number(limits["time_limit"], meta_path, "limits.time_limit"), None, resolution
    given = _time_limit_file(folder)
    if given is not None:
        return given, None, resolution
    version = str(meta.get("problem_format_version", "legacy"))
    if version.startswith("legacy"):
        multiplier = number(limits.get("time_multiplier", 5), meta_path, "limits.time_multiplier")
        return PROVISIONAL_TIME_LIMIT_S, multiplier, resolution
    multipliers = _mapping(limits.get("time_multipliers"), meta_path, "limits.time_multipliers")
    ratio = number(multipliers.get("ac_to_time_limit", 2.0), meta_path, "limits.time_multipliers.ac_to_time_limit")
    return PROVISIONAL_TIME_LIMIT_S, ratio, resolution


def _time_limit_file(folder: Path) -> float | None:
    """The limit a BAPCtools `.timelimit` file (seconds) or `domjudge-problem.ini` (`timelimit = 2`)
    sets; None if neither does. SourceError naming the file if it holds no positive number."""
    candidates = [(folder / ".timelimit", None), (folder / "domjudge-problem.ini", "timelimit")]
    for path, key in candidates:
        if not path.is_file():
            continue
        text = read_text(path)
        if key is not None:
            lines = [line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";")]
            values = [v.strip().strip("'\"") for k, v in lines if k.strip() == key]
            if not values:
                continue
            text = values[-1]
        try:
            value = float(text.strip())
        except ValueError:
            value = 0.0
        if not value > 0 or value != value or value == float("inf"):
            raise SourceError(f"{path}: must hold the time limit in seconds (a number above 0), got {text.strip()!r}")
        return value
    return None


# Kattis language codes of include/<code>/ by arex language (pypy3 is Kattis' python3 too).
INCLUDE_CODES = {"cpp17": "cpp", "python3": "python3", "pypy3": "python3", "c11": "c", "java": "java"}


def _constants(meta: dict) -> dict[str, str]:
    raw = meta.get("constants") if isinstance(meta.get("constants"), dict) else {}
    return {str(k): str(v.get("value") if isinstance(v, dict) else v) for k, v in raw.items()}


def _fill(data: bytes, constants: dict[str, str]) -> bytes:
    """`{{name}}` and `{{name.value}}` of each defined constant replaced (others stay as written)."""
    if not constants or b"{{" not in data:
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    for name, value in constants.items():
        text = text.replace("{{" + name + "}}", value).replace("{{" + name + ".value}}", value)
    return text.encode("utf-8", errors="surrogateescape")


def _fill_constants(files: dict, paths: list[str], constants: dict[str, str]) -> None:
    for path in paths:
        source = files[path]
        data = source if isinstance(source, bytes) else source.read_bytes()
        filled = _fill(data, constants)
        if filled != data:
            files[path] = filled


def include_files(folder: Path, language: str) -> dict[str, bytes]:
    """The 2025-09 `include/` files placed beside a submission in arex language `language`: those
    of include/<its Kattis code>/, else include/default/ (constants filled in); {} if none."""
    root = folder / "include"
    code = INCLUDE_CODES.get(language, language)
    chosen = next((d for d in (root / code, root / "default") if d.is_dir() and any(d.rglob("*"))), None)
    if chosen is None:
        return {}
    constants = _constants(read_yaml(folder / "problem.yaml"))
    return {
        p.relative_to(chosen).as_posix(): _fill(p.read_bytes(), constants)
        for p in sorted(chosen.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _includes(folder: Path, files: dict) -> str:
    """The include/ files into the env (private/include/<language>/ for the judge, workspace/include/
    for the agent); the statement's note on them, "" when the package has none."""
    root = folder / "include"
    if not root.is_dir():
        return ""
    for language in INCLUDE_CODES:
        for rel, data in include_files(folder, language).items():
            files[f"private/include/{language}/{rel}"] = data
    shown = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    if not shown:
        return ""
    constants = _constants(read_yaml(folder / "problem.yaml"))
    for rel in shown:
        files[f"workspace/include/{rel}"] = _fill((root / rel).read_bytes(), constants)
    listed = ", ".join(f"`include/{rel}`" for rel in shown)
    return (
        "\n## Included files\n\nWhen your submission is graded, the files of `include/<language>/` "
        "(`cpp`, `python3`, `c`, `java`), else of `include/default/`, are placed beside it (replacing files "
        f"of the same name); your workspace has a copy: {listed}.\n"
    )
