"""Records that cross module lines, defined once. Trajectories embed these as they are.

Task specs (a judge env's task.yaml, an ML repository's arex.yaml) are read with `load_task_spec`
or checked with `validate_spec`: every problem is reported at once, with its key and the file.
`KINDS` is the one table of env kinds (judge, ml): every place that asks what a kind does asks it.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_serializer, model_validator

from arex.errors import UserInputError, explain_validation

CallStatus = Literal["ok", "empty", "truncated"]


class TeacherIdentity(BaseModel):
    """Which model produced a trajectory: what we asked for and what the server says it is."""

    model_config = ConfigDict(frozen=True)

    base_url: str
    model: str
    server_models: list[dict[str, Any]] = Field(default_factory=list)
    """The endpoint's own /models listing (id, owned_by, ...), as reported."""
    system_fingerprint: str | None = None
    client: str = ""
    """Client library and version, e.g. 'openai-python 1.52.0'."""


class Attempt(BaseModel):
    """One HTTP attempt of a call: a failure that was retried, or the final response."""

    error: str | None = None
    status: CallStatus | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0


class TeacherCall(BaseModel):
    """One chat call, everything needed to train on it and to account for it."""

    messages: list[dict[str, Any]]
    """The exact request messages."""
    sampling: dict[str, Any]
    """The exact sampling parameters sent."""
    content: str
    reasoning_content: str | None = None
    finish_reason: str | None = None
    status: CallStatus
    """'ok'; 'empty' (no content) or 'truncated' (finish_reason 'length') after retries ran out."""
    model: str
    system_fingerprint: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    """Totals over every attempt that returned usage: retried responses cost tokens too."""
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retries: int = 0
    attempts: list[Attempt] = Field(default_factory=list)


class Usage(BaseModel):
    """Running totals of a client."""

    calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0


# -- paths a spec names ---------------------------------------------------------------------
# A spec or source is data from someone else: a path it names is read, copied or written by arex
# on the host, so it must stay inside its folder, or it becomes a way to read or write host files.
PATH_FIX = "name a file inside the source folder, relative to it, without '..'"


def path_escape(value: str) -> str | None:
    """How `value` would leave the folder it is relative to (absolute, `~`, a drive, `..`), or None."""
    text = value.replace("\\", "/").strip()
    if not text:
        return "is empty"
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        return "is an absolute path"
    if ".." in PurePosixPath(text).parts:
        return "climbs out of the folder with '..'"
    return None


def _relative_path(value: str) -> str:
    escape = path_escape(value)
    if escape is not None:
        raise ValueError(f"it {escape}; {PATH_FIX}")
    return value


InsidePath = Annotated[str, AfterValidator(_relative_path)]
"""A path relative to a folder that cannot leave it by its spelling (symlinks: `resolve_inside`)."""


def is_inside(path: Path, root: Path) -> bool:
    """Whether `path`, every symbolic link on the way resolved, lies in `root` (resolved too)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def resolve_inside(
    root: Path, value: Any, where: str | Path, key: str, error: type[Exception] | None = None, base: Path | None = None
) -> Path:
    """`base / value` (base: `root`) when it is a path inside `root` once symbolic links are
    resolved; else `error` (SpecError) in one sentence naming the file, the key and the fix."""
    error = error or SpecError
    if not isinstance(value, str):
        raise error(f"{where}: key '{key}' must be a path (text), got {value!r}; {PATH_FIX}.")
    escape = path_escape(value)
    path = (base or root) / value
    if escape is None and not is_inside(path, root):
        escape = f"leads through a symbolic link to {os.path.realpath(path)}, outside {root}"
    if escape is not None:
        raise error(f"{where}: key '{key}' names '{value}', which {escape}; {PATH_FIX}.")
    return path


def links_leaving(root: Path) -> list[tuple[str, str]]:
    """(path relative to `root`, target) of every symbolic link under `root` that resolves outside
    it (`.git` not entered: arex never reads a repository's own folder through the tree)."""
    found = []
    real_root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path) and not Path(os.path.realpath(path)).is_relative_to(real_root):
                found.append((os.path.relpath(path, root), os.path.realpath(path)))
    return sorted(found)


def refuse_links_leaving(root: Path, error: type[Exception] | None = None, shown: str | Path | None = None) -> None:
    """`error` (SpecError) naming the first symbolic link under `root` that leads outside it;
    `shown`: how the message names `root` (the user's folder, when `root` is arex's copy of it)."""
    leaving = links_leaving(root)
    if leaving:
        rel, target = leaving[0]
        more = f" (and {len(leaving) - 1} more)" if len(leaving) > 1 else ""
        raise (error or SpecError)(
            f"{shown or root}/{Path(rel).as_posix()}: a symbolic link to {target}, outside the source folder{more}; "
            "arex reads only the source's own files, so replace the link by a copy of what it points to, or remove it."
        )


# -- online-judge environments -------------------------------------------------------------
Verdict = Literal["AC", "WA", "TLE", "MLE", "RE", "OLE", "CE", "JE"]
"""JE: judge error, the env's own checker failed. Never the submission's fault."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


BUILTIN_CHECKS = ("exact", "token", "float")
"""Checker kinds arex compares itself (on the host), no program of the package's."""


class CheckerSpec(_Frozen):
    """How an output is compared with the answer."""

    kind: Literal["exact", "token", "float", "kattis", "testlib", "interactive"] = "token"
    """exact: lines (trailing spaces ignored); token: whitespace-separated tokens; float: tokens with
    numeric tolerance; kattis: output validator (42/43); testlib: `checker input output answer`;
    interactive: `source` is an interactor talking to the running submission (see `protocol`)."""
    protocol: Literal["kattis", "testlib"] = "kattis"
    """How an interactor is called and its verdict read. kattis: `interactor input answer feedback_dir`
    (42 accepted, 43 wrong, score.txt for scored problems); testlib: `interactor input output answer`
    (exit 0 accepted, points from its message as for testlib checkers)."""
    abs_tol: float = 1e-6
    """Absolute tolerance for the float checker."""
    rel_tol: float = 1e-6
    """Relative tolerance for the float checker."""
    case_sensitive: bool = True
    """Compare tokens case-sensitively."""
    source: InsidePath | None = None
    """Custom checker source, relative to the env's private/ folder (kattis, testlib)."""
    flags: tuple[str, ...] = ()
    """Extra arguments passed to a custom checker (Kattis validator flags)."""


class TestCase(_Frozen):
    name: str
    input: InsidePath
    """Path relative to the env's private/ folder."""
    answer: InsidePath
    group: str = "main"
    sample: bool = False
    """Samples: the agent sees full detail. Hidden tests: only counts by verdict."""
    checker: CheckerSpec | None = None
    """This test's own check when its test data group (or the test itself) gives the output
    validator other arguments than the env's `checker` has (Kattis `output_validator_args` in a
    group's test_group.yaml / testdata.yaml); None: the env's `checker`. It may change only the
    arguments of a custom checker, or the built-in comparison (exact, token, float)."""

    @model_serializer(mode="wrap")
    def _without_default_checker(self, handler):
        # Left out when unset, so a task.yaml (and an env's build key) stays as it was for the
        # tests that have none.
        data = handler(self)
        if self.checker is None and isinstance(data, dict):
            data.pop("checker", None)
        return data


class TestGroup(_Frozen):
    name: str
    points: float = 1.0
    """Scored only if every test of the group passes (subtask scoring)."""


class SolutionRef(_Frozen):
    path: InsidePath
    """Relative to the env folder."""
    language: str
    expected: Literal[
        "accepted", "wrong_answer", "time_limit_exceeded", "run_time_error", "partially_accepted", "candidate"
    ]
    """What grading it must give. `candidate`: a solution of unknown quality (e.g. a model-written
    one shipped beside a Frontier-CS problem), used only as evidence that grading rewards better
    answers when there is no accepted submission; never required to score 1.0, nor to fail."""


class JudgeSpec(_Frozen):
    """A built online-judge environment (task.yaml of a judge env)."""

    id: str
    kind: Literal["judge"] = "judge"
    domain: Literal["algorithmic"] = "algorithmic"
    title: str
    statement: InsidePath = "statement.md"
    time_limit_s: float
    memory_mb: int = 256
    output_limit_mb: int = 16
    checker: CheckerSpec = Field(default_factory=CheckerSpec)
    scoring: Literal["fraction", "groups", "ratio"] = "fraction"
    """fraction: share of hidden tests passed; groups: subtask points; ratio: mean checker ratio."""
    groups: tuple[TestGroup, ...] = ()
    tests: tuple[TestCase, ...]
    languages: tuple[str, ...] = ("cpp17", "python3")
    starter: InsidePath = "solution.cpp"
    """The submission file in the agent's workspace."""
    solutions: tuple[SolutionRef, ...] = ()
    source_format: str = "arex"
    source_hash: str = ""

    @model_validator(mode="after")
    def _tests_keep_the_checker(self) -> JudgeSpec:
        """A test's own checker is the env's checker with other arguments, or another built-in
        comparison: the env's checker program is the only one compiled and run."""
        for test in self.tests:
            own = test.checker
            if own is None:
                continue
            env = self.checker
            builtin = own.kind in BUILTIN_CHECKS and env.kind in BUILTIN_CHECKS
            same = (own.kind, own.protocol, own.source) == (env.kind, env.protocol, env.source)
            if not builtin and not same:
                raise ValueError(
                    f"test '{test.name}': its checker may change only the arguments of the env's checker "
                    f"({' '.join(filter(None, (env.kind, env.source)))}), "
                    "or pick another built-in comparison"
                )
        return self

    def checker_of(self, test: TestCase) -> CheckerSpec:
        """The check a test's output gets: its own, else the env's."""
        return test.checker or self.checker


class TestResult(BaseModel):
    name: str
    group: str
    sample: bool
    verdict: Verdict
    ratio: float
    raw: float
    time_s: float | None = None
    """CPU time (user + system)."""
    wall_s: float | None = None
    memory_kb: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    message: str = ""


class GradeResult(BaseModel):
    """What grading one submission produced. Both env kinds return this."""

    public_score: float | None
    """Score on what the agent may see (samples / public split); higher is better. Judge: in [0, 1];
    ML: the metric, negated when it is minimised. None when there is nothing public to score (a
    judge problem with no sample tests): undefined, not 0."""
    held_out_score: float
    """Score used for selection (hidden tests / private split), on the same scale."""
    held_out_raw: float
    """Held-out value as reported: points, unbounded ratio, or the metric itself."""
    feedback: str
    """Text the agent is shown."""
    details: dict[str, Any] = Field(default_factory=dict)
    infra_error: str | None = None
    """Set when grading could not be done (env broken, engine down): not the submission's fault."""


# -- ML-repository environments -----------------------------------------------------------------
_BOUNDED_MAXIMIZE = {"accuracy": 0.0, "f1": 0.0, "roc_auc": 0.0}


class MetricSpec(_Frozen):
    name: str
    """accuracy, f1 (macro), roc_auc (binary, scores), log_loss (binary, probabilities), rmse, mae, r2,
    rmsle (RMSE of log(1 + value)) or rmse_log (RMSE of log(value), e.g. house-price competitions).
    Only built-in metrics: scoring runs on the host, so no metric code from the repository runs."""
    direction: Literal["maximize", "minimize"]
    """Declared, never inferred."""
    worst_value: float | None = None
    """Metric value an invalid submission gets; defaults to 0 for accuracy/f1/roc_auc and ±1e6 otherwise."""

    @property
    def worst(self) -> float:
        if self.worst_value is not None:
            return self.worst_value
        if self.name in _BOUNDED_MAXIMIZE:
            return _BOUNDED_MAXIMIZE[self.name]
        return -1e6 if self.direction == "maximize" else 1e6


class SubmissionSpec(_Frozen):
    file: InsidePath = "submission.csv"
    """Written by the run command, relative to the workspace."""
    id_column: str = "id"
    prediction_column: str = "prediction"


class SplitSpec(_Frozen):
    seed: int = 0
    test_fraction: float = Field(default=0.3, gt=0, lt=1)
    """Share of rows held out for evaluation (features given to the agent, labels kept private)."""
    public_fraction: float = Field(default=0.5, gt=0, lt=1)
    """Share of the evaluation rows scored as per-round feedback; the rest is the private split."""
    stratify: bool = False
    """Keep class proportions equal across splits (classification)."""


class DataSpec(_Frozen):
    prepare: str | None = None
    """Command run at build time (no network) that writes `table`; unset if the repo ships it."""
    table: InsidePath
    """The labelled dataset (CSV). Never enters the agent's workspace as it is."""
    target: str
    """Label column."""
    id_column: str = "id"
    """Row id column; created (0..n-1) if the table lacks it."""
    train_file: InsidePath = "data/train.csv"
    """Where the agent's labelled training rows are written."""
    test_file: InsidePath = "data/test.csv"
    """Where the evaluation rows' features (no labels) are written."""
    split: SplitSpec = Field(default_factory=SplitSpec)
    encoding: str = "auto"
    """Text encoding of `table` (a Python codec name: utf-8, cp1252, latin-1, utf-16, ...). 'auto'
    detects it: a byte-order mark, else UTF-8 if the bytes are valid UTF-8, else cp1252 (latin-1 when
    cp1252 cannot decode them). The env's train, test and labels files are always written as UTF-8."""


class Mutation(_Frozen):
    file: InsidePath
    find: str
    replace: str


class MLSpec(_Frozen):
    """An ML-repository task (arex.yaml in the repo or beside it); the built env's task.yaml adds
    the image, the source commit, the split checksums and the gate scores."""

    id: str
    kind: Literal["ml"] = "ml"
    domain: Literal["ml"] = "ml"
    title: str
    statement: InsidePath = "README.md"
    """Task description file in the repository."""
    requirements: tuple[str, ...] = ()
    """pip requirements installed into the image at build time."""
    requirements_file: InsidePath | None = None
    """A requirements file in the repository, installed too (merged with `requirements`; `-r` files
    it names are read from the repository; editable or local-path lines are refused)."""
    requirements_relax: bool = False
    """Replace an exact pin that has no wheel for the image's Python by the nearest version that has
    one (the lowest above, else the highest below); what changed is recorded in `requirements_relaxed`."""
    build_from_source: tuple[str, ...] = ()
    """Packages allowed to be compiled from their source distribution when no wheel fits; every
    other package installs from wheels only, so a build never compiles unasked."""
    apt: tuple[str, ...] = ()
    """Debian packages installed into the image at build time."""
    run: str
    """Command that trains and writes the submission, e.g. 'python3 train.py'."""
    submission: SubmissionSpec = Field(default_factory=SubmissionSpec)
    metric: MetricSpec
    data: DataSpec
    time_limit_s: float = 300.0
    """Limit for one run of `run`."""
    protected: tuple[InsidePath, ...] = ()
    """Files the agent must not change (checked by selection)."""
    tolerance: float = 1e-9
    """Two baseline runs must agree within this (metric units)."""
    mutation: Mutation | None = None
    """Edit that must change the score (proof the grade depends on the code); unset: training labels are shuffled."""
    scrub: tuple[str, ...] = ()
    """Installed package files holding the full labelled data, deleted from the image, as 'package/relative/path'."""
    leak_probes: tuple[str, ...] = ()
    """Commands that must fail in the sandbox (e.g. loading the original dataset)."""
    # Filled in by the build:
    image: str = ""
    source_url: str = ""
    source_commit: str = ""
    source_hash: str = ""
    checksums: dict[str, str] = Field(default_factory=dict)
    baseline_score: float | None = None
    requirements_relaxed: dict[str, str] = Field(default_factory=dict)
    """Pins the build changed under `requirements_relax`, e.g. {numpy: '1.16.6 -> 1.23.2'}."""


# -- reading task specs -------------------------------------------------------------------------
SpecT = TypeVar("SpecT", bound=BaseModel)


class SpecError(UserInputError, ValueError):
    """A task spec (task.yaml, arex.yaml) that cannot be used: not YAML, not a mapping, or keys
    missing, unknown or of the wrong type. The message names the file and every problem's key."""

    @classmethod
    def from_validation(cls, path: str | Path, exc: ValidationError, model: type[BaseModel]):
        """The error for a spec at `path` that failed to validate as `model`: all its problems, one
        sentence each (subclasses such as SourceError get their own class back)."""
        return cls(f"Task spec error in {path}: " + " Also: ".join(explain_validation(exc, model)))


def validate_spec(model: type[SpecT], raw: Any, path: str | Path, error: type[SpecError] = SpecError) -> SpecT:
    """`raw` (a spec read from `path`) as `model`; raises `error` listing every problem."""
    if not isinstance(raw, dict):
        raise error(
            f"Task spec error in {path}: it must be a mapping of keys (e.g. 'id: ...'), not a {type(raw).__name__}."
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise error.from_validation(path, exc, model) from None


def read_spec_yaml(path: str | Path, error: type[SpecError] = SpecError) -> dict[str, Any]:
    """The mapping in a spec file; raises `error` naming the file (and line) if it is missing or not YAML."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"Task spec {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"Task spec {path} cannot be read ({exc}).") from None
    except RecursionError:
        raise error(f"Task spec {path} is nested too deeply to be a task spec.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(
            f"Task spec {path} is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}. Fix the syntax."
        ) from None
    if data is None:
        return {}  # an empty file: validation names every required key
    if not isinstance(data, dict):
        raise error(
            f"Task spec error in {path}: it must be a mapping of keys (e.g. 'id: ...'), not a {type(data).__name__}."
        )
    return data


def load_task_spec(path: str | Path, model: type[SpecT] | None = None) -> SpecT:
    """Read and validate a task spec file: a built env's task.yaml (the model is chosen by its
    `kind`) or, with `model=MLSpec`, an ML repository's arex.yaml. Raises SpecError listing every
    problem with its key and the file."""
    raw = read_spec_yaml(path)
    return validate_spec(model or spec_model(raw, path), raw, path)


# -- env kinds ----------------------------------------------------------------------------------
# The table is here, not in arex/envs, because reading a task.yaml (load_task_spec) asks it too and
# the kernel imports no stage; the stages' parts are named, so neither imports the other here.
def resolve(part: Any) -> Any:
    """A kind's part: the object itself, or one named "module:name", imported here on first use.
    Names keep this kernel from importing any stage (the envs, builders and graders import it), and
    keep `arex --help` and reading a spec from loading an env runtime, a builder or Docker."""
    if not isinstance(part, str):
        return part
    module, _, name = part.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Kind:
    """One env kind: every part arex asks of it. A kind is a folder (arex/envs/<kind>/) and a row
    of KINDS; each part an object or a "module:name" (see `resolve`)."""

    env: Any
    """The built env as rollout and selection see it: a subclass of arex.envs.runtime.Env."""
    spec: Any = None
    """The model its task.yaml validates as; None: the env class's `spec_model`."""
    source: Any = None
    """`(path) -> bool`: whether a `build-envs` source is of this kind. None: it claims none; the
    default kind takes every source that no kind claims."""
    build: Any = None
    """`(source, out, sandbox, package_sources) -> EnvReport`: build one source whole, never raising.
    None: the source is a collection of problems (the judge kind's), built one problem at a time."""
    env_id: Any = None
    """`(source) -> str | None`: the id the source's env will get, read before the batch builds, so
    two sources of one id are caught; None: not known before building."""
    facts: Any = None
    """`(raw task.yaml) -> str`: the task's limits, metric and files, for drafting its skills."""

    def part(self, name: str) -> Any:
        """The part `name`, imported if it is named; None if the kind has none."""
        return resolve(getattr(self, name))

    @property
    def spec_model(self) -> type[BaseModel]:
        return resolve(self.spec) if self.spec is not None else resolve(self.env).spec_model


DEFAULT_KIND = "judge"
"""The kind of a task.yaml without `kind`, and of a `build-envs` source no kind claims."""

KINDS: dict[str, Kind] = {
    "judge": Kind(env="arex.envs.judge.env:JudgeEnv", spec=JudgeSpec, facts="arex.envs.judge.facts:facts"),
    # build: named where the batch's callers (and tests) replace it; arex.envs.build imports it from ml_build.
    "ml": Kind(
        env="arex.envs.ml.env:MLEnv",
        spec=MLSpec,
        source="arex.envs.ml_source:is_ml_source",
        build="arex.envs.build:build_ml",
        env_id="arex.envs.ml_build:env_id",
        facts="arex.envs.ml.facts:facts",
    ),
    # an MLE-bench competition (arex eval): an ML env whose feedback is the submission's format only
    "mlebench": Kind(env="arex.eval.mlebench:MLEBenchEnv"),
}
"""Env kinds by the name a task.yaml's `kind` takes. A row may also be a bare Env subclass: a kind
with that class only (its spec model the class's `spec_model`), as tests register one."""


def kind_named(name: Any, path: str | Path, error: type[SpecError] = SpecError) -> Kind:
    """The row of kind `name` (the `kind` of the spec at `path`); `error` if there is none."""
    if not isinstance(name, str) or name not in KINDS:
        raise error(f"Task spec error in {path}: unknown kind {name!r}; known kinds: {', '.join(KINDS)}.")
    row = KINDS[name]
    return row if isinstance(row, Kind) else Kind(env=row)


def kind_of(raw: dict[str, Any], path: str | Path, error: type[SpecError] = SpecError) -> Kind:
    """The row of the kind `raw` (a task spec read from `path`) names, DEFAULT_KIND when unset."""
    return kind_named(raw.get("kind", DEFAULT_KIND), path, error)


def spec_model(raw: dict[str, Any], path: str | Path, error: type[SpecError] = SpecError) -> type[BaseModel]:
    """The spec model for `raw`'s `kind` (DEFAULT_KIND when unset)."""
    return kind_of(raw, path, error).spec_model


def source_kind(path: Path) -> str:
    """The kind of a `build-envs` source: the first kind whose detector claims it, else DEFAULT_KIND."""
    for name, row in KINDS.items():
        detect = row.source if isinstance(row, Kind) else None
        if detect is not None and resolve(detect)(path):
            return name
    return DEFAULT_KIND
