"""A BAPCtools `generators/generators.yaml` → the list of test cases it makes (`GenPlan`), read on
the host without running anything; `arex.envs.judge_generate` runs the plan in a sandbox.

What is read (BAPCtools doc/generators.md, the format current ICPC tooling writes):
- the root is a directory: `sample` and `secret` are generated (other roots, e.g. `invalid_input`,
  are validation data and are left out); `generators:` names multi-file generators (name → files
  in generators/, the first one the entry point); `solution:` writes the answers (default: the
  package's first accepted submission), `random_salt:` and `retries:` are inherited downwards;
- a directory is a mapping with `data:` (a mapping of name → test case or directory, or a list of
  one-entry mappings: the entries are then numbered), `test_group.yaml` / `testdata.yaml` (written
  into the group's folder), `include:` (keys of earlier test cases or groups, linked in here);
- a test case is a command string (`gen.py {seed} 10`, or `x.in`: a copy), `null` (a manual case,
  read from data/), or a mapping with `generate:`, `copy:` (a base path under generators/),
  hard-coded contents by extension (`in:`, `ans:`, ...), `count:` (`3`, `[1, 5]`, `2..=4`: that
  many cases, `{count}` filled in, `-<count>` added to the name) and its own `solution:` etc.

Names follow BAPCtools: numbered entries get a zero-padded number (one counter for every numbered
test case of the file, one per directory for groups), `{seed}` / `{seed:N}` is
`int(sha512(salt + [":<count-1>"] + command)) mod 2^31`, `{name}` is `testcase`, and a generator
writes `testcase.in` (and maybe `testcase.ans`) in its working folder or prints the input.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arex.envs.sources.common import SourceError, read_yaml
from arex.specs import resolve_inside

GENERATORS_YAML = "generators/generators.yaml"
NAME = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,254}")
SEED = re.compile(r"\{seed(:[0-9]+)?\}")
ROOTS = ("sample", "secret")
CASE_KEYS = ("copy", "generate", "count", "match", "input")
EXTENSIONS = ("in", "ans", "out", "interaction", "in.statement", "ans.statement", "in.download", "ans.download")
KEPT = ("in", "ans", "interaction", "in.statement", "ans.statement", "in.download", "ans.download")
"""The files of a test case that arex keeps (hints, descriptions and images are not read)."""
MAX_COUNT = 100


@dataclass
class GenCase:
    path: str
    """Where the test goes, relative to data/ and without extension: `secret/group1/03-random`."""
    command: list[str] | None = None
    """A generator invocation: the program's name (a key of `GenPlan.programs`), then its arguments."""
    seed: int = 0
    retries: int = 1
    copy: Path | None = None
    """A manual case: the base path of its files (`<copy>.in`, `<copy>.ans`, ...)."""
    inline: dict[str, str] = field(default_factory=dict)
    """Hard-coded files by extension."""
    solution: str | None = None
    """The program writing the answer (`/submissions/...` or `/generators/...`), None: no answer."""
    same_as: str | None = None
    """An included case: the path of the case it repeats."""
    validator_args: list[str] | None = None
    """The test case's own `input_validator_args` (its `yaml:`), which replace its group's."""
    config: dict = field(default_factory=dict)
    """The test case's own `yaml:`, written beside it as `<name>.yaml` (its test case configuration:
    `output_validator_args` there replace its group's when it is judged)."""

    @property
    def how(self) -> str:
        if self.same_as:
            return "included"
        if self.command:
            return "generated"
        return "copied" if self.copy is not None else "inline"


@dataclass
class Program:
    name: str
    files: list[Path]
    """The program's files on the host: a file, a folder's files, or a `generators:` entry's list."""
    entry: str
    """The file (relative to the staged folder) that decides the language; "" for a folder."""


@dataclass
class GenPlan:
    folder: Path
    cases: list[GenCase] = field(default_factory=list)
    programs: dict[str, Program] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)
    """Directory (relative to data/) → its test_group.yaml."""
    default_solution: str | None = None
    """The `solution:` used where none is named (the first accepted submission)."""


@dataclass
class _Config:
    solution: str | None | bool = True
    """A path; None: no answers; True: the default solution."""
    salt: str = ""
    retries: int = 1


def plan_generators(folder: Path, constants: dict | None = None, default_solution: str | None = None) -> GenPlan | None:
    """The plan of `folder`'s generators/generators.yaml, or None if it has none; `default_solution`
    (`/submissions/...`) answers where the file names no `solution:`. SourceError naming the file
    and the key for anything arex cannot read."""
    path = folder / GENERATORS_YAML
    if not path.is_file():
        return None
    raw = read_yaml(path)
    plan = GenPlan(folder, default_solution=default_solution)
    _programs(plan, raw.get("generators"), path)
    values = {str(k): (v.get("value") if isinstance(v, dict) else v) for k, v in (constants or {}).items()}
    walker = _Walker(plan, path, values)
    walker.total = _numbered_total(raw)
    root_config = walker.config(raw, _Config(), "")
    data = raw.get("data") or {}
    if not isinstance(data, dict):
        raise SourceError(f"{path}: key 'data' at the root must map sample and secret to directories")
    for root in ROOTS:
        if root in data and data[root] is not None:
            if not _is_directory(data[root]):
                raise SourceError(f"{path}: key 'data.{root}' must be a directory (a mapping with data:)")
            walker.directory(data[root], root, root, root_config)
    walker.check_unique()
    return plan


def _programs(plan: GenPlan, entries: Any, path: Path) -> None:
    if entries is None:
        return
    if not isinstance(entries, dict):
        raise SourceError(f"{path}: key 'generators' must map generator names to lists of files")
    gen = plan.folder / "generators"
    for name, files in entries.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise SourceError(f"{path}: key 'generators.{name}' is not a valid program name")
        if not isinstance(files, list) or not files:
            raise SourceError(f"{path}: key 'generators.{name}' must list the program's files (the first: its entry)")
        paths = [resolve_inside(gen, str(f), path, f"generators.{name}", SourceError) for f in files]
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise SourceError(f"{path}: key 'generators.{name}': generators/{missing[0].name} does not exist")
        plan.programs[name] = Program(name, paths, paths[0].name)


def _is_case(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, dict) and any(k in value for k in (*CASE_KEYS, *EXTENSIONS)))
    )


def _is_directory(value: Any) -> bool:
    return isinstance(value, dict) and not _is_case(value)


def _counts(value: Any, where: str) -> list[int]:
    """The `count:` of a test case as its values ([1] without one)."""
    count = value.get("count") if isinstance(value, dict) else None
    if count is None:
        return [1]
    if isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= MAX_COUNT:
        return list(range(1, count + 1))
    if isinstance(count, list) and count and all(isinstance(c, int) for c in count) and len(set(count)) == len(count):
        return list(count)[:MAX_COUNT]
    match = re.fullmatch(r"(-?\d+)\.\.=(-?\d+)", str(count).strip())
    if match and int(match.group(1)) <= int(match.group(2)):
        return list(range(int(match.group(1)), int(match.group(2)) + 1))[:MAX_COUNT]
    raise SourceError(f"{where}: key 'count' must be 1 to {MAX_COUNT}, a list of numbers or a range like 1..=5")


def _numbered_total(node: Any) -> int:
    """How many numbered test cases the whole file has: the width of their numbers."""
    data = node.get("data") if isinstance(node, dict) else None
    numbered = isinstance(data, list)
    total = 0
    for entry in data if numbered else [data] if isinstance(data, dict) else []:
        for value in entry.values() if isinstance(entry, dict) else []:
            if _is_case(value) and numbered:
                total += len(_counts(value, "generators.yaml"))
            elif _is_directory(value):
                total += _numbered_total(value)
    return total


class _Walker:
    """Walks the directories in BAPCtools' order, numbering and seeding as it goes."""

    def __init__(self, plan: GenPlan, path: Path, constants: dict):
        self.plan, self.path, self.constants = plan, path, constants
        self.total, self.next_number = 0, 1
        self.keys: dict[str, list[tuple[str, bool]]] = {}
        """Key → the (path, is a directory) of every entry of that key (includes name them)."""

    def config(self, node: dict, parent: _Config, where: str) -> _Config:
        config = _Config(parent.solution, parent.salt, parent.retries)
        if "solution" in node:
            value = node["solution"]
            if value is not None and not isinstance(value, str):
                raise SourceError(f"{self.path}: key '{where}solution' must be a path like /submissions/accepted/x.py")
            config.solution = value or None
        if "random_salt" in node:
            config.salt = str(node["random_salt"] or "")
        if "retries" in node:
            retries = node["retries"]
            if not isinstance(retries, int) or isinstance(retries, bool) or not 1 <= retries <= 100:
                raise SourceError(f"{self.path}: key '{where}retries' must be a number from 1 to 100")
            config.retries = retries
        return config

    def directory(self, node: dict, rel: str, key: str, parent: _Config) -> None:
        where = f"data.{rel.replace('/', '.')}."
        config = self.config(node, parent, where)
        self.keys.setdefault(key, []).append((rel, True))
        group_yaml = node.get("test_group.yaml", node.get("testdata.yaml"))
        if isinstance(group_yaml, dict):
            self.plan.groups[rel] = group_yaml
        included = self._included(node.get("include"), rel, where)
        data = node.get("data")
        numbered = isinstance(data, list)
        entries = data if numbered else [data] if isinstance(data, dict) else []
        groups = sum(1 for e in entries if isinstance(e, dict) for v in e.values() if _is_directory(v))
        group_number = 1
        for entry in entries:
            if not isinstance(entry, dict) or (numbered and len(entry) != 1):
                raise SourceError(f"{self.path}: key '{where}data': a numbered entry must be a mapping of one name")
            for child in sorted(entry, key=lambda k: "" if k is None else str(k)):
                value, name = entry[child], "" if child is None else str(child)
                if _is_directory(value):
                    label = self._numbered(name, group_number, groups) if numbered else name
                    group_number += 1
                    self._check_name(label, where)
                    self.directory(value, f"{rel}/{label}", name, config)
                elif _is_case(value):
                    self._cases(value, name, rel, numbered, config, where)
                else:
                    raise SourceError(f"{self.path}: key '{where}data.{name}' is neither a test case nor a directory")
        self.plan.cases += [GenCase(f"{rel}/{Path(p).name}", same_as=p) for p in included]

    @staticmethod
    def _numbered(name: str, number: int, total: int) -> str:
        prefix = f"{number:0{len(str(total))}}"
        return f"{prefix}-{name}" if name else prefix

    def _check_name(self, name: str, where: str) -> None:
        if not NAME.fullmatch(name) or name.endswith(".in"):
            raise SourceError(f"{self.path}: key '{where}data' names '{name}', not a valid test case or group name")

    def _included(self, keys: Any, rel: str, where: str) -> list[str]:
        """The paths of the cases an `include:` list links into this directory."""
        if keys is None:
            return []
        if not isinstance(keys, list):
            raise SourceError(f"{self.path}: key '{where}include' must list keys of earlier test cases or groups")
        by_name: dict[str, str] = {}  # a linked case's name here → the case it repeats (its origin)
        for key in keys:
            found = self.keys.get(str(key), [])
            if len(found) != 1:
                what = "is ambiguous" if found else "names no earlier test case or group"
                raise SourceError(f"{self.path}: key '{where}include': '{key}' {what}")
            target, is_dir = found[0]
            paths = [c.path for c in self.plan.cases if c.path.startswith(target + "/")] if is_dir else [target]
            for path in paths:
                origin = self._origin(path)
                name = Path(path).name
                if by_name.setdefault(name, origin) != origin:  # one name, two different cases
                    raise SourceError(
                        f"{self.path}: key '{where}include' links two cases named '{name}' into data/{rel}"
                    )
        return list(by_name.values())

    def _origin(self, path: str) -> str:
        """The case an included case repeats, through includes of includes."""
        cases = {c.path: c for c in self.plan.cases}
        while cases[path].same_as:
            path = cases[path].same_as
        return path

    def _cases(self, value: Any, key: str, rel: str, numbered: bool, config: _Config, where: str) -> None:
        node = {"generate": value} if isinstance(value, str) else dict(value) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip().endswith(".in"):
            node = {"copy": value.strip()[:-3]}
        counts = _counts(node, f"{self.path}: key '{where}data.{key}'")
        consecutive = max(counts) - min(counts) == len(counts) - 1
        pad = max(len(str(c)) for c in counts) if consecutive else 0
        base = key
        for count in counts:
            if numbered:
                base = self._numbered(key, self.next_number, self.total)
                self.next_number += 1
            elif not key:
                raise SourceError(f"{self.path}: key '{where}data': a test case without a name")
            name = f"{base}-{count:0{pad}}" if node is not None and "count" in node else base
            self._check_name(name, where)
            case = self._case(node, f"{rel}/{name}", count, config, f"{where}data.{key}.")
            self.keys.setdefault(key, []).append((case.path, False))
            self.plan.cases.append(case)

    def _case(self, node: dict | None, rel: str, count: int, parent: _Config, where: str) -> GenCase:
        case = GenCase(rel)
        config = self.config(node or {}, parent, where)
        case.retries = config.retries
        case.solution = (
            None
            if config.solution is None
            else (self.plan.default_solution if config.solution is True else str(config.solution))
        )
        if node is None:  # a manual case: its files are in data/ already
            case.copy = self.plan.folder / "data" / rel
            return case
        command = node.get("generate", node.get("input"))
        if command is not None:
            self._command(case, str(command), count, config, node, where)
        if node.get("copy") is not None:
            case.copy = resolve_inside(
                self.plan.folder / "generators", str(node["copy"]), self.path, f"{where}copy", SourceError
            )
        own = node.get("yaml") if isinstance(node.get("yaml"), dict) else {}
        case.config = own
        if own.get("input_validator_args") is not None:
            value = own["input_validator_args"]
            case.validator_args = [str(v) for v in value] if isinstance(value, list) else str(value).split()
        for ext in EXTENSIONS:
            if isinstance(node.get(ext), str):
                text = node[ext]
                case.inline[ext] = text if not text or text.endswith("\n") else text + "\n"
        if case.command is None and case.copy is None and "in" not in case.inline and "interaction" not in case.inline:
            raise SourceError(f"{self.path}: key '{where.rstrip('.')}' makes no input (give generate, copy or in)")
        return case

    def _command(self, case: GenCase, command: str, count: int, config: _Config, node: dict, where: str) -> None:
        for name, value in self.constants.items():
            command = command.replace("{{" + name + "}}", str(value))
        if "count" in node:
            command = command.replace("{count}", str(count))
        seed_text = config.salt + (f":{count - 1}" if count != 1 else "") + command.strip()
        case.seed = int(hashlib.sha512(seed_text.encode()).hexdigest(), 16) % 2**31
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        if not words:
            raise SourceError(f"{self.path}: key '{where}generate' is empty")
        if sum(len(SEED.findall(w)) for w in words[1:]) > 1:
            raise SourceError(f"{self.path}: key '{where}generate': {{seed}} may appear at most once")
        case.command = [self._program(words[0], where), *words[1:]]

    def _program(self, name: str, where: str) -> str:
        """The program a command names: a `generators:` entry, else a file or folder in generators/."""
        if name in self.plan.programs:
            return name
        gen = self.plan.folder / "generators"
        path = resolve_inside(gen, name, self.path, f"{where}generate", SourceError)
        if path.is_file():
            self.plan.programs[name] = Program(name, [path], path.name)
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            self.plan.programs[name] = Program(name, files, "")
        else:
            raise SourceError(f"{self.path}: key '{where}generate': no generator '{name}' in generators/")
        return name

    def check_unique(self) -> None:
        seen: set[str] = set()
        for case in self.plan.cases:
            if case.path in seen:
                raise SourceError(f"{self.path}: test case data/{case.path} is made twice")
            seen.add(case.path)


def fill_arguments(case: GenCase, seed: int) -> list[str]:
    """A generator's arguments as it runs: `{seed}` / `{seed:N}` → the seed, `{name}` → testcase."""
    return [SEED.sub(str(seed), arg).replace("{name}", "testcase") for arg in (case.command or [])[1:]]


def group_args(plan: GenPlan, path: str, key: str, validator: str) -> list[str]:
    """`input_validator_args` (or legacy `input_validator_flags`) for the test at `path`: from the
    nearest directory's test_group.yaml that sets it; a mapping gives each validator its own."""
    parts = path.split("/")[:-1]
    for depth in range(len(parts), 0, -1):
        config = plan.groups.get("/".join(parts[:depth]), {})
        value = config.get(key, config.get(key.replace("_args", "_flags")))
        if value is None:
            continue
        if isinstance(value, dict):
            value = value.get(validator, [])
        return [str(v) for v in value] if isinstance(value, list) else str(value).split()
    return []
