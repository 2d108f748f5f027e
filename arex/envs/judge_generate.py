"""Generated test data: a Kattis/BAPCtools package's generators/generators.yaml run in a sandbox.

The plan (arex.envs.sources.generators) is run step by step in one sandbox with no network, each
program under CPU, memory, process and output limits (the runner's, as graded programs get): the
generators are built and run (each in a folder of its own, where it may write testcase.in and
testcase.ans, or print the input), manual and hard-coded cases are written, the answers come from
the package's solution (its `solution:`, else its first accepted submission, as BAPCtools does),
and every input validator of the package must accept every input (exit 42). The package is code
from a stranger: nothing of it runs on the host, and what comes back is read with a size cap.

The result is cached by the package's content (`cache_dir()/generated/<hash>/data/`): a rebuild of
an unchanged package reads it without starting a sandbox. A package that ships every test in data/
already is read as shipped (no generation).
"""

from __future__ import annotations

import os.path
import shlex
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from arex.envs.sources.common import SourceError, content_hash, read_yaml
from arex.envs.sources.generators import KEPT, GenCase, GenPlan, Program, fill_arguments, group_args, plan_generators
from arex.envs.sources.kattis import include_files, kattis_type
from arex.envs.sources.kattis_submissions import kattis_solutions
from arex.envs.sources.programs import classify
from arex.grading.languages import language_named
from arex.hashing import cache_dir
from arex.sandbox import SandboxConfig, make_sandbox
from arex.sandbox.base import RunLimits
from arex.specs import refuse_links_leaving

GENERATOR_VERSION = "gen-2"  # 2: a test case's own yaml: is written beside it
PROGRAM_CPU_S = 60
"""CPU seconds for one generator, solution or validator run (BAPCtools' `generator_time` default)."""
COMPILE_CPU_S = 120
STARVED_CAP_S = 900.0
"""Time a step waited for a CPU on a busy host extends its wall clock up to this (RunLimits)."""
MAX_FILE_BYTES = 256 << 20
VALIDATOR_SUFFIXES = (".py", ".cpp", ".cc", ".cxx", ".c", ".sh")
CXX = ("g++", "-std=gnu++20", "-O2", "-pipe")


class GenerationError(SourceError):
    """The package's generators, solution or validators failed: the package's fault, named in one sentence."""


@dataclass
class Generated:
    data: Path
    """The generated data/ folder (sample/, secret/, test_group.yaml files)."""
    summary: str
    """How the tests were made, as the build report says it."""


def generated_data(folder: Path, files: list[Path], sandbox: SandboxConfig) -> Generated | None:
    """The tests of a Kattis package whose generators/generators.yaml makes tests it does not ship,
    from the cache or made now; None when there is nothing to generate. `files`: the package's files
    (its content key). GenerationError naming the step that failed."""
    refuse_links_leaving(folder, SourceError)  # generation reads files by name, before the loader checks
    meta = read_yaml(folder / "problem.yaml")
    interactive, _ = kattis_type(meta, folder / "problem.yaml")  # multi-pass: rejected before any run
    constants = meta.get("constants") if isinstance(meta.get("constants"), dict) else None
    plan = plan_generators(folder, constants)
    if plan is None or _shipped(plan):
        return None
    key = content_hash(files, f"{GENERATOR_VERSION}\0{sandbox.image}".encode())
    done = cache_dir() / "generated" / key
    if (done / "summary.txt").is_file():
        return Generated(done / "data", (done / "summary.txt").read_text(encoding="utf-8"))
    plan = plan_generators(folder, constants, _default_solution(folder))
    staging = done.with_name(f".{key}-{uuid.uuid4().hex[:8]}")
    try:
        summary = _Run(plan, staging / "data", sandbox, interactive).run()
        (staging / "summary.txt").write_text(summary, encoding="utf-8")
        try:
            staging.rename(done)
        except OSError:  # another build made it meanwhile: the same content
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Generated(done / "data", summary)


def _shipped(plan: GenPlan) -> bool:
    """Every test the file makes is in data/ already (a package committed with its generated data)."""
    data = plan.folder / "data"
    made = [c for c in plan.cases if not c.same_as and c.path.startswith("secret/")]
    return bool(made) and all((data / f"{c.path}.in").is_file() for c in plan.cases if not c.same_as)


def _default_solution(folder: Path) -> str | None:
    """The first accepted submission arex can run, as `/submissions/<path>`."""
    solutions, _ = kattis_solutions(folder, {}, None)
    first = next((s for s in solutions if s.expected == "accepted"), None)
    return None if first is None else "/" + "submissions/" + first.path.removeprefix("solutions/")


class _Run:
    """One generation in one sandbox."""

    def __init__(self, plan: GenPlan, out: Path, sandbox: SandboxConfig, interactive: bool):
        self.plan, self.out, self.interactive = plan, out, interactive
        self.config = sandbox.model_copy(
            update={
                "network": False,
                "memory": 2 << 30,
                "disk": 1 << 30,
                "mounts": (),
                "seed": None,
                "output_limit": 16_000,
                "timeout_s": 600.0,
            }
        )
        self.built: dict[str, tuple[str, list[str]]] = {}  # program key → (its folder, its run command)
        self.where = f"{plan.folder}/generators/generators.yaml"

    def run(self) -> str:
        box = make_sandbox(self.config, f"generate-{self.plan.folder.name}")
        box.start()
        try:
            self.box = box
            validators, skipped = self._validators()
            for index, case in enumerate(self.plan.cases):
                if not case.same_as:
                    self._make(index, case, validators)
            self._collect()
        finally:
            box.stop()
        return self._summary(validators, skipped)

    # -- programs ----------------------------------------------------------------------------
    def _exec(self, script: str, what: str, cpu_s: int = PROGRAM_CPU_S):
        limits = RunLimits(cpu_s=cpu_s, starved_wall_s=STARVED_CAP_S, isolated=True)
        result = self.box.exec(["sh", "-c", script], timeout=float(cpu_s) * 2 + 30, limits=limits)
        if result.status == "timeout":
            raise GenerationError(f"{self.where}: {what}: no result within {cpu_s * 2 + 30} s")
        return result

    def _stage(self, key: str, files: dict[str, bytes]) -> str:
        folder = f"programs/{len(self.built)}"
        for rel, data in files.items():
            self.box.write_file(f"{folder}/{rel}", data, mode=0o755 if rel in ("build", "run") else 0o644)
        return folder

    def _build(self, key: str, program: Program, what: str) -> tuple[str, list[str]]:
        """Stage and compile a generator or validator; (its folder, the command that runs it)."""
        if key in self.built:
            return self.built[key]
        files = _program_files(program)
        folder = self._stage(key, files)
        command, compile_cmd = _commands(program, files, what)
        if compile_cmd:
            result = self._exec(f"cd {folder} && {compile_cmd}", f"building {what}", COMPILE_CPU_S)
            if not result.ok:
                tail = (result.stderr or result.stdout).strip()[-400:]
                raise GenerationError(f"{self.where}: {what} does not build: {tail or f'exit {result.exit_code}'}")
        self.built[key] = (folder, command)
        return self.built[key]

    def _solution(self, path: str) -> tuple[str, list[str]]:
        """The answer-writing program (`/submissions/...`), built as the judge builds submissions."""
        if path in self.built:
            return self.built[path]
        host = self.plan.folder / path.lstrip("/")
        if not host.is_file():
            raise GenerationError(f"{self.where}: solution {path} does not exist (name a file in the package)")
        code = host.read_text(encoding="utf-8", errors="replace")
        language, reason = classify(host.name, code)
        if language is None:
            raise GenerationError(f"{self.where}: solution {path} is in a language arex does not run ({reason})")
        lang = language_named(language).for_submission(code, 2048)
        files = {lang.source: code.encode(), **include_files(self.plan.folder, language)}
        folder = self._stage(path, files)
        if lang.compile:
            result = self._exec(f"cd {folder} && {shlex.join(lang.compile)}", f"compiling {path}", COMPILE_CPU_S)
            if not result.ok:
                tail = (result.stderr or result.stdout).strip()[-400:]
                raise GenerationError(f"{self.where}: solution {path} does not compile: {tail}")
        self.built[path] = (folder, list(lang.run))
        return self.built[path]

    def _validators(self) -> tuple[list[tuple[str, str, list[str]]], list[str]]:
        """(name, folder, run command) of each input validator arex can run; the names of the others."""
        runnable, skipped = [], []
        for d in ("input_validators", "input_validator", "input_format_validators"):
            root = self.plan.folder / d
            for path in sorted(root.iterdir()) if root.is_dir() else []:
                if path.name.startswith(".") or path.name == "README.md":
                    continue
                if path.is_file() and path.suffix not in VALIDATOR_SUFFIXES:
                    skipped.append(f"{d}/{path.name}")
                    continue
                files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
                program = Program(path.stem, files, path.name if path.is_file() else "")
                folder, command = self._build(f"validator:{d}/{path.name}", program, f"validator {d}/{path.name}")
                runnable.append((path.stem, folder, command))
        return runnable, skipped

    # -- test cases --------------------------------------------------------------------------
    def _make(self, index: int, case: GenCase, validators) -> None:
        work = f"cases/{index}"
        self.box.exec(["mkdir", "-p", work])
        for ext, text in case.inline.items():
            self.box.write_file(f"{work}/testcase.{ext}", text)
        if case.copy is not None:
            self._copy(case, work)
        if case.command:
            self._generate(case, work)
        listing = self.box.exec(["ls", "-A", work]).stdout.split()
        if "testcase.in" not in listing:
            if "testcase.interaction" in listing or "testcase.in.download" in listing:
                return  # an interactive sample shown as a transcript: nothing to run it on
            raise GenerationError(f"{self.where}: test data/{case.path} has no input")
        for name, folder, command in validators:
            self._validate(case, work, name, folder, command)
        if "testcase.ans" not in listing:
            self._answer(case, work)

    def _copy(self, case: GenCase, work: str) -> None:
        base = case.copy
        found = False
        for ext in KEPT:
            source = base.with_name(f"{base.name}.{ext}")
            if source.is_file() and ext not in case.inline:
                self.box.write_file(f"{work}/testcase.{ext}", source.read_bytes())
                found = found or ext == "in"
        if not found and "in" not in case.inline:
            raise GenerationError(f"{self.where}: test data/{case.path}: {base}.in does not exist")

    def _generate(self, case: GenCase, work: str) -> None:
        name = case.command[0]
        folder, command = self._build(name, self.plan.programs[name], f"generator {name}")
        result = None
        for attempt in range(case.retries):  # BAPCtools: each retry with the next seed
            args = fill_arguments(case, (case.seed + attempt) % 2**31)
            run = shlex.join([*_absolute(command, folder), *args])
            result = self._exec(
                f"cd {work} && {run} > .stdout; code=$?; [ -f testcase.in ] || mv .stdout testcase.in; exit $code",
                f"generator {name} for test data/{case.path}",
            )
            if result.ok:
                return
        tail = (result.stderr or "").strip()[-300:] if result else ""
        shown = shlex.join(case.command)
        raise GenerationError(
            f"{self.where}: generator command '{shown}' failed for test data/{case.path} "
            f"({_how(result)}){': ' + tail if tail else ''}"
        )

    def _validate(self, case: GenCase, work: str, name: str, folder: str, command: list[str]) -> None:
        args = case.validator_args
        if args is None:
            args = group_args(self.plan, case.path, "input_validator_args", name)
        run = shlex.join([*_absolute(command, folder), *args])
        result = self._exec(f"cd {folder} && {run} < /workspace/{work}/testcase.in", f"validator {name}")
        if result.exit_code != 42:
            said = (result.stdout + result.stderr).strip()[-300:]
            raise GenerationError(
                f"{self.where}: input validator {name} rejects the input of test data/{case.path} "
                f"(exit {result.exit_code}, 42 means valid){': ' + said if said else ''}"
            )

    def _answer(self, case: GenCase, work: str) -> None:
        if self.interactive:  # the interactor reads no answer it is not given (as BAPCtools: empty)
            self.box.write_file(f"{work}/testcase.ans", b"")
            return
        if case.solution is None:
            raise GenerationError(
                f"{self.where}: test data/{case.path} has no answer and no solution writes one "
                "(add `solution: /submissions/accepted/<file>` or an accepted submission)"
            )
        folder, command = self._solution(case.solution)
        run = shlex.join(_absolute(command, folder))
        result = self._exec(
            f"cd {folder} && {run} < /workspace/{work}/testcase.in > /workspace/{work}/testcase.ans",
            f"solution {case.solution}",
        )
        if not result.ok:
            tail = (result.stderr or "").strip()[-300:]
            raise GenerationError(
                f"{self.where}: solution {case.solution} failed on test data/{case.path} ({_how(result)})"
                f"{': ' + tail if tail else ''}"
            )

    # -- results -----------------------------------------------------------------------------
    def _collect(self) -> None:
        """Read every made file back (capped), and write the test cases' own .yaml and the groups' test_group.yaml."""
        index = {case.path: i for i, case in enumerate(self.plan.cases)}
        for case in self.plan.cases:
            source = case
            while source.same_as:
                source = self.plan.cases[index[source.same_as]]
            work = f"cases/{index[source.path]}"
            present = set(self.box.exec(["ls", "-A", work]).stdout.split())
            for ext in KEPT:
                if f"testcase.{ext}" in present:
                    target = self.out / f"{case.path}.{ext}"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        target.write_bytes(self.box.read_file(f"{work}/testcase.{ext}", max_bytes=MAX_FILE_BYTES))
                    except ValueError:
                        raise GenerationError(
                            f"{self.where}: test data/{case.path}.{ext} is over {MAX_FILE_BYTES >> 20} MB"
                        ) from None
            config = source.config or case.config
            if config:
                target = self.out / f"{case.path}.yaml"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        for rel, config in self.plan.groups.items():
            target = self.out / rel / "test_group.yaml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def _summary(self, validators, skipped: list[str]) -> str:
        cases = self.plan.cases
        kinds = Counter(c.how for c in cases)
        programs = Counter(c.command[0] for c in cases if c.command and not c.same_as)
        made = ", ".join(f"{n} {how}" for how, n in kinds.items())
        by = ", ".join(f"{name} ×{n}" for name, n in sorted(programs.items()))
        text = f"{len(cases)} tests from generators/generators.yaml ({made}" + (f"; by {by}" if by else "") + ")"
        answers = sorted({c.solution for c in cases if c.solution and not c.same_as})
        if self.interactive:
            text += "; interactive: empty answers where none is given"
        elif answers:
            text += f"; answers by {', '.join(a.lstrip('/') for a in answers)}"
        if validators:
            text += f"; every input accepted by {', '.join(name for name, _, _ in validators)}"
        if skipped:
            text += f"; not run (format arex cannot run): {', '.join(skipped)}"
        return text


def _how(result) -> str:
    if result is None:
        return "not run"
    if result.status in ("oom", "output_limit"):
        return result.status.replace("_", " ")
    return f"signal {result.signal}" if result.signal else f"exit {result.exit_code}"


def _absolute(command: list[str], folder: str) -> list[str]:
    """A run command whose program is the staged folder's (`./gen` → /workspace/<folder>/gen)."""
    return [f"/workspace/{folder}/{w[2:]}" if w.startswith("./") else w for w in command]


def _program_files(program: Program) -> dict[str, bytes]:
    """The files to stage: a folder program's (by their path in it), a `generators:` entry's or a
    lone file with the headers and Python modules beside it in generators/ (which BAPCtools
    generators include without listing)."""
    files = program.files
    if not program.entry:  # a folder
        root = Path(_common_root(files))
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in files}
    staged = {p.name: p.read_bytes() for p in files}
    if len(files) == 1:
        for sibling in sorted(files[0].parent.iterdir()):
            if sibling.is_file() and sibling.suffix in (".h", ".hpp", ".py") and sibling.name not in staged:
                staged[sibling.name] = sibling.read_bytes()
    return staged


def _common_root(files: list[Path]) -> str:
    return os.path.commonpath([str(p.parent) for p in files]) if files else "."


def _commands(program: Program, files: dict[str, bytes], what: str) -> tuple[list[str], str]:
    """(run command, compile script or "") of a staged program, by its files (BAPCtools' programs:
    build/run scripts, C++ or C sources, Python with an entry point, a shell script)."""
    names = sorted(files)
    if "build" in names or "run" in names:
        return ["./run"], ("sh ./build" if "build" in names else "")
    entry = program.entry
    cpp = [n for n in names if n.endswith((".cpp", ".cc", ".cxx"))]
    if (entry and entry.endswith((".cpp", ".cc", ".cxx"))) or (not entry and cpp):
        sources = [entry] if entry else cpp
        return ["./program"], shlex.join([*CXX, "-I", ".", "-o", "program", *sources])
    c = [n for n in names if n.endswith(".c")]
    if (entry and entry.endswith(".c")) or (not entry and c):
        sources = [entry] if entry else c
        return ["./program"], shlex.join(["gcc", "-std=gnu17", "-O2", "-o", "program", *sources, "-lm"])
    py = [n for n in names if n.endswith(".py")]
    main = entry if entry.endswith(".py") else ""
    main = main or ("__main__.py" if "__main__.py" in names else (py[0] if len(py) == 1 else ""))
    if main:
        return ["python3", f"./{main}"], ""
    if entry.endswith(".sh"):
        return ["bash", f"./{entry}"], ""
    raise GenerationError(
        f"{what}: arex cannot tell how to run it (give a .py, .cpp, .c or .sh file, or build/run scripts)"
    )
