"""MLE-bench in `arex eval`: a competition folder in MLE-bench's layout plus its prepared data becomes
an ML env; a rollout's final submission is scored by the competition's grader on the private answers
and ranked on the competition's leaderboard (arex.eval.medals), as MLE-bench grades it.

The layout (`arex eval mle-bench <folder> --data <prepared data>`): each competition folder holds
`config.yaml` (`id`, `dataset.answers`, `dataset.sample_submission`, `grader.name`, `grader.grade_fn`),
`description.md` and `leaderboard.csv`; the data folder holds `<id>/prepared/public/` (what the
agent gets) and `<id>/prepared/private/` (the answers), as `mlebench prepare` writes them. `<folder>`
may be one competition or a folder of them (the any-medal rate is over the set).

What the agent sees: the public files (read-only, at /home/data) and the description. After each
round it is told only whether its submission is valid, judged against the public sample submission
(its columns and ids, a value in every cell): MLE-bench's rule is that an agent may check the format
of a submission and nothing else, so no signal derived from the private answers reaches it.

Grading: a grader named by a built-in metric (accuracy, root-mean-squared-error, auc-roc, log-loss,
...) is computed by arex on the host; any other grader is the competition's `grade_fn`, code that
arrived with the folder, so it runs in a fresh sandbox of the env's image (no network, removed after),
never in the arex process. Its result is only ever a number.

The env is the ML kind's (MLEnv, MLSpec), with this module's grader: kind `mlebench` in the kind table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml

from arex.envs import leak_scan
from arex.envs.docs_index import docs_image
from arex.envs.judge_sources import SourceError
from arex.envs.layout import IMAGE_WORKSPACE
from arex.envs.leak_probe import SCAN_DIR, SCAN_TIMEOUT, LeakProbe, LeakReport, LeakScanFailed, build_probe, describe
from arex.envs.ml.env import MLEnv
from arex.envs.ml_build import crash_reason
from arex.envs.ml_images import deps_image, images
from arex.envs.report import EnvReport, GateLog, finish, skipped_report
from arex.envs.staging import staging
from arex.errors import UserInputError
from arex.eval.base import Benchmark, Item, Score, Source
from arex.eval.medals import LeaderboardError, Rank, Thresholds, rank, read_leaderboard, thresholds
from arex.grading.ml import METRICS, NUMERIC, SUBMISSION_CAP, SubmissionError
from arex.hashing import bytes_sha256, json_sha256, tree_sha256
from arex.record.snapshots import read_member
from arex.record.trajectory import RoundEnd
from arex.sandbox import SandboxConfig, SandboxError, make_sandbox
from arex.sandbox.base import Sandbox
from arex.sandbox.images import ImageBuildFailed
from arex.specs import DataSpec, GradeResult, MLSpec, SpecError, _Frozen, is_inside

BUILDER_VERSION = "mlebench-1"
DATA_DIR = "/home/data"
"""Where the env image holds the public files (read-only) and description.md, as MLE-bench's /home/data."""
SUBMISSION = "submission/submission.csv"
"""The graded file, in the agent's workspace (MLE-bench's /home/submission/submission.csv)."""
GRADER_TIMEOUT_S = 600.0
ROUNDING = 5

# MLE-bench grader names (and arex's own) computed by arex: name → (arex metric, direction).
BUILTIN: dict[str, tuple[str, str]] = {
    "accuracy": ("accuracy", "maximize"),
    "root-mean-squared-error": ("rmse", "minimize"),
    "rmse": ("rmse", "minimize"),
    "mean-absolute-error": ("mae", "minimize"),
    "mae": ("mae", "minimize"),
    "auc-roc": ("roc_auc", "maximize"),
    "roc-auc": ("roc_auc", "maximize"),
    "roc_auc": ("roc_auc", "maximize"),
    "log-loss": ("log_loss", "minimize"),
    "log_loss": ("log_loss", "minimize"),
    "macro-f1-score": ("f1", "maximize"),
    "f1": ("f1", "maximize"),
    "r2": ("r2", "maximize"),
}
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


class CompetitionError(UserInputError):
    """A competition folder or its data that cannot be evaluated; one sentence naming the file and key."""


# -- the competition folder ----------------------------------------------------------------------
@dataclass(frozen=True)
class Competition:
    id: str
    name: str
    folder: Path
    description: Path
    answers: Path
    sample: Path
    grader: str
    grade_fn: str | None
    module: Path | None
    """The grader's module file in the folder (None: a built-in metric)."""
    builtin: str | None
    """The arex metric computing `grader` (None: the competition's own `grade_fn`)."""
    columns: tuple[str, ...]
    """The sample submission's columns; the first is the id."""
    leaderboard: Thresholds

    @property
    def public(self) -> Path:
        return self.sample.parent

    @property
    def direction(self) -> str:
        return "minimize" if self.leaderboard.lower_is_better else "maximize"


def _config(folder: Path) -> dict:
    path = folder / "config.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CompetitionError(
            f"{folder} has no config.yaml; an MLE-bench competition folder holds config.yaml, description.md "
            "and leaderboard.csv"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CompetitionError(f"{path} cannot be read as YAML ({str(exc).splitlines()[0]}); fix its syntax") from None
    if not isinstance(raw, dict):
        raise CompetitionError(f"{path} must be a mapping of keys (id, dataset, grader), not a {type(raw).__name__}")
    return raw


def _key(raw: dict, dotted: str, path: Path, example: str, required: bool = True) -> str | None:
    """The string at `dotted` in config.yaml, or one sentence naming the key and an example value."""
    value: object = raw
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CompetitionError(f"{path} has no '{dotted}'; set it, e.g. {dotted}: {example}")
    return value.strip()


def _data_file(comp_id: str, rel: str, root: Path, key: str, config: Path) -> Path:
    """`rel` (a dataset path of config.yaml) under the data folder: MLE-bench's `<data>/<id>/prepared/...`,
    or `<data>/prepared/...` when `root` is the competition's own data folder."""
    spelled = Path(rel)
    if spelled.is_absolute() or ".." in spelled.parts:
        raise CompetitionError(f"{config}: {key} '{rel}' must be a path relative to the data folder, without '..'")
    tries = [root / spelled]
    if spelled.parts and spelled.parts[0] == comp_id:
        tries.append(root.joinpath(*spelled.parts[1:]))
    for path in tries:
        if path.is_file():
            if not is_inside(path, root):
                raise CompetitionError(f"{path} ({key} in {config}) is a link leading out of the data folder {root}")
            return path
    raise CompetitionError(
        f"{tries[0]} ({key} in {config}) does not exist; prepare the competition's data and pass the folder "
        f"holding {comp_id}/prepared/ with --data"
    )


def _header_and_rows(path: Path, what: str) -> tuple[list[str], list[dict[str, str]]]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CompetitionError(f"{what} {path} cannot be read as UTF-8 CSV ({exc})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [c.strip() for c in reader.fieldnames or []]
    if not header:
        raise CompetitionError(f"{what} {path} is empty; it needs a header row and one row per test item")
    reader.fieldnames = header
    return header, list(reader)


def load_competition(folder: Path, data: Path | None = None) -> Competition:
    """The competition in `folder` with its data under `data` (default: the folder itself), checked:
    CompetitionError naming the file and key for anything it cannot evaluate."""
    folder, path = Path(folder), Path(folder) / "config.yaml"
    raw = _config(folder)
    comp_id = _key(raw, "id", path, "spaceship-titanic")
    if not _ID.match(comp_id):
        raise CompetitionError(
            f"{path}: id '{comp_id}' must be lower-case letters, digits, '.', '_' or '-' "
            "(it names the env and its image)"
        )
    answers, sample = _data_files(raw, comp_id, Path(data) if data is not None else folder, path)
    description = folder / "description.md"
    if not description.is_file():
        raise CompetitionError(f"{folder} has no description.md; put the competition's description there")
    grader = _key(raw, "grader.name", path, "accuracy")
    grade_fn = _key(raw, "grader.grade_fn", path, "grade:grade", required=False)
    board = _leaderboard(folder / "leaderboard.csv")
    columns, ids = _sample(sample)
    builtin = BUILTIN.get(grader.lower()) if len(columns) == 2 else None
    module = None if builtin else _module(folder, grade_fn, grader, path)
    if builtin and (builtin[1] == "minimize") != board.lower_is_better:
        first = "lower" if board.lower_is_better else "higher"
        raise CompetitionError(
            f"{folder / 'leaderboard.csv'} ranks {first} scores first, but {grader} is better when "
            f"{'lower' if builtin[1] == 'minimize' else 'higher'}; the leaderboard must list the best team first"
        )
    _check_answers(answers, sample, columns, ids)
    _no_copy(answers, sample.parent)
    return Competition(
        id=comp_id,
        name=str(raw.get("name") or comp_id),
        folder=folder,
        description=description,
        answers=answers,
        sample=sample,
        grader=grader,
        grade_fn=grade_fn,
        module=module,
        builtin=builtin[0] if builtin else None,
        columns=tuple(columns),
        leaderboard=board,
    )


def _data_files(raw: dict, comp_id: str, root: Path, config: Path) -> tuple[Path, Path]:
    """The answers and the sample submission under `root`; the answers outside the public folder."""
    answers = _data_file(
        comp_id, _key(raw, "dataset.answers", config, f"{comp_id}/prepared/private/test.csv"), root,
        "dataset.answers", config,
    )  # fmt: skip
    sample = _data_file(
        comp_id, _key(raw, "dataset.sample_submission", config, f"{comp_id}/prepared/public/sample_submission.csv"),
        root, "dataset.sample_submission", config,
    )  # fmt: skip
    if is_inside(answers, sample.parent):
        raise CompetitionError(
            f"{answers} (dataset.answers in {config}) is inside the public folder {sample.parent} the agent sees; "
            "keep the answers in prepared/private/"
        )
    return answers, sample


def _leaderboard(path: Path) -> Thresholds:
    try:
        return thresholds(read_leaderboard(path))
    except LeaderboardError as exc:
        raise CompetitionError(str(exc)) from None


def _sample(path: Path) -> tuple[list[str], list[str]]:
    """The sample submission's columns and ids; every id once."""
    header, rows = _header_and_rows(path, "dataset.sample_submission")
    if len(header) < 2 or len(set(header)) != len(header):
        raise CompetitionError(
            f"dataset.sample_submission {path} needs an id column and at least one prediction column, "
            f"each named once (found: {', '.join(header)})"
        )
    ids = [(r.get(header[0]) or "").strip() for r in rows]
    if not ids or len(set(ids)) != len(ids) or "" in ids:
        raise CompetitionError(
            f"dataset.sample_submission {path} must list each test id once in its first column '{header[0]}'"
        )
    return header, ids


def _check_answers(answers: Path, sample: Path, columns: list[str], ids: list[str]) -> None:
    """The answers cover the sample submission's ids, once each, with its columns."""
    header, rows = _header_and_rows(answers, "dataset.answers")
    missing = [c for c in columns if c not in header]
    if missing:
        raise CompetitionError(
            f"dataset.answers {answers} lacks the sample submission's column(s) {', '.join(missing)}; "
            f"the answers must have {', '.join(columns)}"
        )
    have = [(r.get(columns[0]) or "").strip() for r in rows]
    if len(set(have)) != len(have) or set(have) != set(ids):
        extra, lacking = len(set(have) - set(ids)), len(set(ids) - set(have))
        raise CompetitionError(
            f"dataset.answers {answers} and {sample.name} list different test ids ({extra} only in the answers, "
            f"{lacking} only in the sample, {len(have) - len(set(have))} repeated); prepare the data again so "
            "both list each test row once"
        )


def _no_copy(answers: Path, public: Path) -> None:
    """No public file is the answers file itself (a copy put there by mistake would hand the agent the labels)."""
    digest = bytes_sha256(answers.read_bytes())
    size = answers.stat().st_size
    for path in sorted(public.rglob("*")):
        if path.is_file() and path.stat().st_size == size and bytes_sha256(path.read_bytes()) == digest:
            raise CompetitionError(
                f"{path} in the public folder is a copy of the answers file {answers.name}; remove it from "
                "prepared/public (the agent sees every file there)"
            )


def _module(folder: Path, grade_fn: str | None, grader: str, config: Path) -> Path:
    """The file of `grade_fn` ("module:function") in the competition folder: MLE-bench's
    `mlebench.competitions.<id>.grade:grade` and a plain `grade:grade` both name `<folder>/grade.py`."""
    known = ", ".join(sorted({k for k in BUILTIN if "-" in k}))
    if grade_fn is None:
        raise CompetitionError(
            f"{config}: grader '{grader}' is not a built-in metric for a two-column sample submission ({known}), "
            "so set grader.grade_fn to its function, e.g. grade:grade for grade.py in the competition folder"
        )
    module, _, function = grade_fn.partition(":")
    if not _MODULE.match(module) or not function.isidentifier():
        raise CompetitionError(f"{config}: grader.grade_fn '{grade_fn}' must be 'module:function', e.g. grade:grade")
    parts = module.split(".")
    if parts[:2] == ["mlebench", "competitions"]:  # MLE-bench's own spelling: the rest is in this folder
        parts = parts[3:]
    path = folder.joinpath(*parts).with_suffix(".py") if parts else folder
    if not parts or not path.is_file() or not is_inside(path, folder):
        raise CompetitionError(
            f"{config}: grader.grade_fn '{grade_fn}' names {path.name if parts else 'no module'}, which is not "
            f"a file in {folder}; put the grader module there"
        )
    return path


def competition_folders(folder: Path) -> list[Path]:
    """The competition folders `folder` holds: itself if it has config.yaml, else its subfolders that do."""
    folder = Path(folder)
    if (folder / "config.yaml").is_file():
        return [folder]
    found = sorted(p for p in folder.iterdir() if (p / "config.yaml").is_file()) if folder.is_dir() else []
    if not found:
        raise UserInputError(
            f"{folder} is not an MLE-bench competition folder: neither it nor its subfolders hold a config.yaml"
        )
    return found


# -- the submission's format: public facts only ----------------------------------------------------
def check_submission(data: bytes, columns: tuple[str, ...], ids: set[str], numeric: tuple[str, ...] = ()) -> dict:
    """id → row of a submission with the sample submission's columns and ids, a value in every cell
    (a finite number in the `numeric` columns); SubmissionError saying what to fix. It reads nothing
    but the sample submission's facts, so its verdict is all the agent may be told."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SubmissionError(f"{SUBMISSION} is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [c.strip() for c in reader.fieldnames or []]
    missing, extra = [c for c in columns if c not in header], [c for c in header if c not in columns]
    if missing or extra or len(set(header)) != len(header):
        raise SubmissionError(
            f"{SUBMISSION} has columns {', '.join(header) or 'none'}; expected those of sample_submission.csv: "
            f"{', '.join(columns)}"
        )
    reader.fieldnames = header
    rows: dict[str, dict] = {}
    for line, row in enumerate(reader, start=2):
        key = (row.get(columns[0]) or "").strip()
        if key in rows:
            raise SubmissionError(f"{SUBMISSION} line {line}: id {key!r} appears twice")
        if key not in ids:
            raise SubmissionError(f"{SUBMISSION} line {line}: id {key!r} is not a test id of sample_submission.csv")
        for column in columns[1:]:
            _check_cell(row.get(column), column, line, column in numeric)
        rows[key] = row
    if len(rows) != len(ids):
        raise SubmissionError(f"{SUBMISSION} has {len(rows)} rows; expected {len(ids)}, one per test id")
    return rows


def _check_cell(value: str | None, column: str, line: int, numeric: bool) -> None:
    value = (value or "").strip()
    if value == "":
        raise SubmissionError(f"{SUBMISSION} line {line}: empty '{column}'")
    if numeric:
        try:
            number = float(value)
        except ValueError:
            raise SubmissionError(f"{SUBMISSION} line {line}: '{column}' {value!r} is not a number") from None
        if not math.isfinite(number):
            raise SubmissionError(f"{SUBMISSION} line {line}: '{column}' {value!r} is not finite")


# -- the competition's grader --------------------------------------------------------------------
# Run in a fresh sandbox for a grade_fn from the folder: loads the module by its file, calls it with
# (submission, answers) as pandas DataFrames read as MLE-bench reads them when pandas is installed,
# else as lists of dicts, and writes {"score": x} or {"invalid": "<exception type>"}.
_DRIVER = r"""
import csv, importlib.util, json, sys
code, module_file, function, out = sys.argv[1:5]
sys.path.insert(0, code)
def read(path):
    try:
        import pandas
    except ImportError:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return list(csv.DictReader(f))
    return pandas.read_csv(path, float_precision="round_trip")
def result(payload):
    with open(out, "w") as f:
        json.dump(payload, f)
spec = importlib.util.spec_from_file_location("competition_grader", module_file)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
try:
    value = getattr(module, function)(read(sys.argv[5]), read(sys.argv[6]))
    result({"score": float(value)})
except Exception as exc:
    result({"invalid": type(exc).__name__})
"""
# Graders written for MLE-bench import its exception for an invalid submission; a stand-in of the same name.
_SHIM = "class InvalidSubmissionError(Exception):\n    pass\n"
_BOX = "/tmp/arex-grader"


def run_grade_fn(
    image: str, code: Path, module: str, function: str, submission: bytes, answers: bytes, base: SandboxConfig
) -> tuple[float | None, str]:
    """The competition's own grade function on (submission, answers), in a fresh sandbox of `image`
    without network: (score, '') or (None, why it gave none). Its output is read as one number only."""
    config = base.model_copy(update={"image": image, "mounts": (), "network": False, "seed": None})
    with make_sandbox(config, "mlebench-grader") as box:
        for path in sorted(p for p in code.rglob("*.py") if p.is_file()):
            box.write_file(f"{_BOX}/code/{path.relative_to(code).as_posix()}", path.read_bytes())
        box.write_file(f"{_BOX}/code/mlebench/__init__.py", "")
        box.write_file(f"{_BOX}/code/mlebench/grade_helpers.py", _SHIM)
        box.write_file(f"{_BOX}/driver.py", _DRIVER)
        box.write_file(f"{_BOX}/submission.csv", submission)
        box.write_file(f"{_BOX}/answers.csv", answers)
        result = box.exec(
            [
                "python3",
                f"{_BOX}/driver.py",
                f"{_BOX}/code",
                f"{_BOX}/code/{module}",
                function,
                f"{_BOX}/result.json",
                f"{_BOX}/submission.csv",
                f"{_BOX}/answers.csv",
            ],
            timeout=GRADER_TIMEOUT_S,
            cwd=_BOX,
        )
        try:
            payload = json.loads(box.read_file(f"{_BOX}/result.json", max_bytes=4096))
        except (FileNotFoundError, ValueError):
            tail = (result.stderr or result.stdout)[-300:].strip()
            return None, f"the grader ended {result.status} (exit {result.exit_code}) without a result: {tail}"
    value = payload.get("score") if isinstance(payload, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value), ""
    reason = payload.get("invalid") if isinstance(payload, dict) else None
    return None, f"the grader found the submission invalid ({str(reason)[:80]})" if reason else "no number"


# -- the env ---------------------------------------------------------------------------------------
class LeaderboardSpec(_Frozen):
    """The competition's medal thresholds, read from its leaderboard.csv at build time."""

    gold: float
    silver: float
    bronze: float
    median: float
    lower_is_better: bool
    teams: int


class GraderSpec(_Frozen):
    name: str
    """The grader's name in config.yaml (e.g. accuracy, root-mean-squared-error)."""
    builtin: str | None = None
    """The arex metric that computes it on the host; None: `grade_fn` runs in a sandbox."""
    grade_fn: str | None = None
    module: str | None = None
    """The grade_fn's file, relative to the env's grading/code/ folder."""
    columns: tuple[str, ...]
    """The sample submission's columns (the first is the id)."""


class MLEBenchSpec(MLSpec):
    """An MLE-bench competition as an ML env: the ML spec (the run command is not used: the agent's
    submission is graded as it left it) plus the grader and the leaderboard's thresholds."""

    kind: Literal["mlebench"] = "mlebench"
    competition: str
    grader: GraderSpec
    leaderboard: LeaderboardSpec


class MLEBenchGrader:
    """Scores submissions of one built competition env: its format against the sample submission
    (all the agent is told), its metric on private/answers.csv (held out), its medal."""

    def __init__(self, env_dir: Path, spec: MLEBenchSpec, base: SandboxConfig | None = None):
        self.dir, self.spec = Path(env_dir), spec
        self.base = base or SandboxConfig()
        """How a grade_fn's sandbox is made (backend, limits): the env sets the agent's."""
        self.sample_ids = set(_sample(self.dir / "grading" / "sample_submission.csv")[1])
        self.sign = -1.0 if spec.leaderboard.lower_is_better else 1.0
        self.limits = Thresholds(**spec.leaderboard.model_dump())

    def value(self, data: bytes, rows: dict) -> tuple[float | None, str]:
        """The grader's score of a well-formed submission, or None and why it has none."""
        grader = self.spec.grader
        if grader.builtin is None:
            answers = (self.dir / "private" / "answers.csv").read_bytes()
            return run_grade_fn(
                self.spec.image,
                self.dir / "grading" / "code",
                grader.module,
                grader.grade_fn.partition(":")[2],
                data,
                answers,
                self.base,
            )
        truth = self.answers
        id_column, target = grader.columns
        try:
            value = METRICS[grader.builtin](
                [r[target] for r in truth], [rows[r[id_column].strip()][target] for r in truth]
            )
        except Exception as exc:  # noqa: BLE001 - the agent's numbers broke the metric: no score
            return None, f"{grader.name} cannot be computed on these predictions ({type(exc).__name__})"
        return (value, "") if math.isfinite(value) else (None, f"{grader.name} is {value}")

    @cached_property
    def answers(self) -> list[dict[str, str]]:
        return _header_and_rows(self.dir / "private" / "answers.csv", "dataset.answers")[1]

    def score(self, data: bytes) -> GradeResult:
        grader = self.spec.grader
        numeric = grader.columns[1:] if grader.builtin in NUMERIC else ()
        try:
            rows = check_submission(data, grader.columns, self.sample_ids, numeric)
        except SubmissionError as exc:
            return self.invalid(str(exc))
        value, why = self.value(data, rows)
        score = None if value is None else round(value, ROUNDING)
        placed = rank(score, self.limits)
        worst = self.spec.metric.worst
        return GradeResult(
            public_score=None,
            held_out_score=self.sign * (worst if score is None else score),
            held_out_raw=worst if score is None else score,
            # Only the format check: the same words whatever the private answers say.
            feedback=(
                f"Submission valid: {len(rows)} rows with the columns of sample_submission.csv. "
                "It is not scored here (MLE-bench tells only whether a submission is valid)."
            ),
            details={**_placed(placed, grader.name), **({"not_scored": why} if why else {})},
        )

    def invalid(self, message: str) -> GradeResult:
        worst = self.spec.metric.worst
        return GradeResult(
            public_score=None,
            held_out_score=self.sign * worst,
            held_out_raw=worst,
            feedback=f"Submission invalid: {message}",
            details={**_placed(rank(None, self.limits), self.spec.grader.name), "invalid": message},
        )


def _placed(placed: Rank, metric: str) -> dict:
    return {
        "kind": "mlebench",
        "metric": metric,
        "score": placed.score,
        "medal": placed.label,
        "any_medal": placed.any_medal,
        "above_median": placed.above_median,
    }


class MLEBenchEnv(MLEnv):
    """The ML env of one competition: nothing runs at grading (the agent's submission file is graded
    as it left it, as MLE-bench does), and the grade is this module's."""

    kind = "mlebench"
    spec_model = MLEBenchSpec

    @property
    def submission_path(self) -> str:
        return SUBMISSION

    def _baseline(self, scores: dict) -> float | None:
        return None

    def sandbox_config(self, base: SandboxConfig, *args, **kwargs) -> SandboxConfig:
        self.grader.base = base  # a grade_fn's sandbox is made like the agent's (backend, limits)
        return super().sandbox_config(base, *args, **kwargs)

    @cached_property
    def grader(self) -> MLEBenchGrader:
        return MLEBenchGrader(self.dir, self.spec)

    def _run_task(self, sandbox: Sandbox) -> tuple[GradeResult | None, str]:
        return None, ""

    def _grade(self, data: bytes, text: str, grading, log: str) -> GradeResult:
        return self.grader.score(data)

    def _not_graded(self, problem: str, log: str) -> GradeResult:
        return self.grader.invalid(problem)

    def regrade(self, archive: Path, end: RoundEnd, base: SandboxConfig) -> GradeResult:
        self.grader.base = base
        try:
            data = read_member(Path(archive), SUBMISSION, SUBMISSION_CAP)
        except (FileNotFoundError, IsADirectoryError, ValueError) as exc:
            return self.grader.invalid(f"{SUBMISSION}: {exc}")
        return self.grader.score(data)


# -- building the env ----------------------------------------------------------------------------------
_INSTRUCTIONS = """\
# {name} (MLE-bench)

This is an offline Kaggle competition, run under MLE-bench's rules.

- The competition's files are in {data} (read-only; also reachable as `data/` in your workspace): the
  training data, the test inputs and `sample_submission.csv`. The description follows below and is
  in {data}/description.md. The test set is the benchmark's own split, so it may differ from what the
  description says; use the files you have.
- Train a model and write your predictions for every test row to `{submission}` in your workspace,
  in the format of `sample_submission.csv` (the same columns, one row per test id). Only that file,
  as you leave it at the end, is graded. Do not label the test data by hand.
- After each round you are told only whether your submission is valid (its columns, its ids and a
  value in every cell); you are not told a score. Hold out part of the training data to measure
  your own progress.
- The submission is graded with the competition's metric ({metric}) on the private answers and
  ranked on the competition's leaderboard for a medal.

---

"""


def _digest(comp: Competition, base_image: str) -> str:
    """Of everything the env is made of: a re-run with the same digest keeps the env (resumes)."""
    files = {
        "config": (comp.folder / "config.yaml").read_bytes(),
        "description": comp.description.read_bytes(),
        "leaderboard": (comp.folder / "leaderboard.csv").read_bytes(),
        "answers": comp.answers.read_bytes(),
    }
    code = [p for p in comp.folder.rglob("*.py") if p.is_file()] + list(comp.folder.glob("requirements.txt"))
    return json_sha256(
        [
            BUILDER_VERSION,
            base_image,
            {k: bytes_sha256(v) for k, v in files.items()},
            tree_sha256(comp.public),
            tree_sha256(comp.folder, sorted(code)),
            comp.sample.name,
        ]
    )[:16]


def _spec(comp: Competition, content: str) -> MLEBenchSpec:
    grader = GraderSpec(
        name=comp.grader,
        builtin=comp.builtin,
        grade_fn=comp.grade_fn,
        columns=comp.columns,
        module=comp.module.relative_to(comp.folder).as_posix() if comp.module else None,
    )
    requirements = "requirements.txt" if (comp.folder / "requirements.txt").is_file() else None
    return MLEBenchSpec(
        id=comp.id,
        title=comp.name,
        statement="description.md",
        requirements_file=requirements,
        run="true",
        submission={"file": SUBMISSION, "id_column": comp.columns[0], "prediction_column": comp.columns[-1]},
        metric={"name": comp.grader, "direction": comp.direction},
        data={
            "table": "private/answers.csv",
            "target": comp.columns[-1],
            "id_column": comp.columns[0],
            "train_file": "data/train.csv",
            "test_file": "data/test.csv",
        },
        competition=comp.id,
        grader=grader,
        leaderboard=LeaderboardSpec(**comp.leaderboard.__dict__),
        source_url=f"mle-bench:{comp.id}",
        source_commit="worktree",
        source_hash=content,
        checksums={"answers": bytes_sha256(comp.answers.read_bytes()), "public": tree_sha256(comp.public)},
    )


def _lay_out(work: Path, comp: Competition) -> None:
    """The env folder: the agent's starting workspace, its statement, the private answers and what
    grading reads. The public files go into the image only (see `_env_image`)."""
    (work / "workspace" / "submission").mkdir(parents=True)
    (work / "workspace" / "data").symlink_to(DATA_DIR)
    metric = comp.grader + ("" if comp.builtin else ", the competition's own grader")
    intro = _INSTRUCTIONS.format(name=comp.name, data=DATA_DIR, submission=SUBMISSION, metric=metric)
    (work / "statement.md").write_text(
        intro + comp.description.read_text(encoding="utf-8", errors="replace"), encoding="utf-8"
    )
    (work / "private").mkdir()
    shutil.copyfile(comp.answers, work / "private" / "answers.csv")
    (work / "grading").mkdir()
    shutil.copyfile(comp.sample, work / "grading" / "sample_submission.csv")
    if comp.module is not None:
        for path in comp.folder.rglob("*.py"):
            target = work / "grading" / "code" / path.relative_to(comp.folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def _env_image(comp: Competition, deps: str, workspace: Path, content: str) -> str:
    """The dependency image with the public files and description at DATA_DIR (read-only, outside
    the workspace, so no round's snapshot copies them) and the starting workspace."""
    tag = f"arex-env-{comp.id}:{content}"
    if images().id(tag) is not None:
        return tag
    with tempfile.TemporaryDirectory(prefix="arex-mlebench-") as ctx:
        ctx_path = Path(ctx)
        shutil.copytree(comp.public, ctx_path / "data", symlinks=False)
        shutil.copyfile(comp.description, ctx_path / "data" / "description.md")
        shutil.copytree(workspace, ctx_path / "workspace", symlinks=True)
        (ctx_path / "Dockerfile").write_text(
            "\n".join(
                [
                    f"FROM {docs_image(deps)}",
                    "USER root",
                    f"COPY --chown=0:0 data/ {DATA_DIR}/",
                    f"RUN chmod -R a+rX,go-w {DATA_DIR}",
                    f"COPY --chown=1000:1000 workspace/ {IMAGE_WORKSPACE}/",
                    "USER 1000:1000",
                    "WORKDIR /workspace",
                ]
            )
            + "\n"
        )
        try:
            images().build(
                ctx_path, tag, network=False, labels={"arex.managed": "1", "arex.kind": "env", "arex.env": comp.id}
            )
        except ImageBuildFailed as exc:
            raise SourceError(f"image build failed: {exc.reason}\n{exc.log_tail}") from None
    return tag


def build_competition(comp: Competition, out: Path, sandbox: SandboxConfig) -> EnvReport:
    """The env of `comp` under `out` (kept if its digest is unchanged); never raises for the
    competition's own faults: a rejected or error report says why."""
    started = time.monotonic()
    content = _digest(comp, sandbox.image)
    skipped = skipped_report(out / comp.id, content, comp.folder, started)
    if skipped is not None:
        return skipped
    report = EnvReport(str(comp.folder), comp.id, "rejected")
    try:
        with staging(out, comp.id) as tmp:
            work = tmp / comp.id
            _lay_out(work, comp)
            spec = _spec(comp, content)
            deps = deps_image(spec, comp.folder, sandbox.image)
            spec = spec.model_copy(update={"image": _env_image(comp, deps, work / "workspace", content)})
            log = GateLog()
            if _sample_gate(log, work, spec, sandbox):
                _leak_gate(log, comp, spec, sandbox)
            finish(report, log, work, out / comp.id, spec, content, BUILDER_VERSION)
    except (SourceError, SpecError) as exc:
        report.reason = str(exc)
    except SandboxError as exc:
        report.status, report.reason = "error", f"SandboxError: {exc}"
    except Exception as exc:  # noqa: BLE001 - this competition's error; the set goes on
        report.status, report.reason = "error", crash_reason(exc)
    report.seconds = time.monotonic() - started
    return report


def _sample_gate(log: GateLog, work: Path, spec: MLEBenchSpec, sandbox: SandboxConfig) -> bool:
    """The public sample submission is valid and the grader scores it (a grader that cannot score
    the benchmark's own example would score no agent)."""
    graded = MLEBenchGrader(work, spec, sandbox).score((work / "grading" / "sample_submission.csv").read_bytes())
    details = graded.details
    problem = details.get("invalid") or details.get("not_scored")
    if problem is None:
        log.scores["sample"] = details["score"]
    detail = problem or f"{spec.grader.name} {details['score']} ({details['medal']})"
    return log.check("sample submission graded", problem is None, f"sample_submission.csv: {detail}")


def _leak_gate(log: GateLog, comp: Competition, spec: MLEBenchSpec, sandbox: SandboxConfig) -> None:
    """No file the agent can read holds the answers: none of the public files is the answers file
    (load_competition refuses that), and where the public files have train and test tables to
    recognise test rows by, the leak scanner finds no test row's label in them or the workspace."""
    probe = _probe(comp)
    if probe is None:
        log.check("private answers unreachable", True, "no public file is the answers file")
        log.notes.append("leak scan skipped: the public files have no train.csv and test.csv keyed like the answers")
        return
    config = sandbox.model_copy(
        update={"image": spec.image, "seed": IMAGE_WORKSPACE, "mounts": (), "memory": max(sandbox.memory, 2 << 30)}
    )
    try:
        with make_sandbox(config, f"leak-{comp.id}") as box:
            found = _scan(box, probe)
    except LeakScanFailed as exc:
        log.check("private answers unreachable", False, str(exc))
        return
    problems, scanned = describe(found, probe)
    log.check(
        "private answers unreachable",
        not problems,
        "; ".join(problems) + f" ({scanned})" if problems else f"{scanned}: no file recovers their labels",
    )


def _scan(box: Sandbox, probe: LeakProbe) -> LeakReport:
    """arex's leak scanner over what this build put in the image: the public files and the starting
    workspace. The rest of the image is the dependency image, built before any competition file
    was read, and scanning it (a gigabyte) would take minutes per competition."""
    box.write_file(f"{SCAN_DIR}/leak_scan.py", Path(leak_scan.__file__).read_bytes())
    box.write_file(f"{SCAN_DIR}/probe.json", probe.model_dump_json())
    report = f"{SCAN_DIR}/report.json"
    result = box.exec(
        ["python3", f"{SCAN_DIR}/leak_scan.py", f"{SCAN_DIR}/probe.json", report, DATA_DIR, box.config.workdir],
        timeout=SCAN_TIMEOUT,
    )
    try:
        return LeakReport.model_validate_json(box.read_file(report))
    except (FileNotFoundError, ValueError) as exc:
        raise LeakScanFailed(
            f"the leak scan did not finish ({result.status}, exit {result.exit_code}): "
            f"{(result.stderr or result.stdout or str(exc))[-600:]}"
        ) from None


def _probe(comp: Competition):
    """The leak scanner's probe: the test rows (public features, private label), or None when the
    public files have no train.csv/test.csv with the id column and the one target column."""
    id_column, target = comp.columns[0], comp.columns[-1]
    train_path, test_path = comp.public / "train.csv", comp.public / "test.csv"
    if len(comp.columns) != 2 or not (train_path.is_file() and test_path.is_file()):
        return None
    columns, train = _header_and_rows(train_path, "public train.csv")
    test_columns, test = _header_and_rows(test_path, "public test.csv")
    if id_column not in columns or target not in columns or id_column not in test_columns:
        return None
    labels = {r[id_column].strip(): r[target] for r in _header_and_rows(comp.answers, "dataset.answers")[1]}
    held_out = [{**r, target: labels[r[id_column].strip()]} for r in test if r[id_column].strip() in labels]
    data = DataSpec(table="private/answers.csv", target=target, id_column=id_column)
    return build_probe(data, columns, train, held_out)


# -- the adapter ---------------------------------------------------------------------------------------
class MLEBench(Benchmark):
    """`arex eval mle-bench <competitions> --data <prepared data>`: any-medal % over the competitions."""

    name = "mle-bench"
    score_name = "any medal %"

    def problems(self, source: Source) -> list[Item]:
        folders = competition_folders(source.folder)
        named = {self._id(f): f for f in folders}
        wanted = list(source.only) or list(named)
        items = []
        for comp_id in wanted:
            if comp_id not in named:
                items.append(Item(comp_id, None, absent=f"no competition '{comp_id}' in {source.folder}"))
                continue
            items.append(self._item(comp_id, named[comp_id], source))
        return items

    @staticmethod
    def _id(folder: Path) -> str:
        try:
            value = _config(folder).get("id")
        except CompetitionError:
            return folder.name
        return value if isinstance(value, str) and value.strip() else folder.name

    def _item(self, comp_id: str, folder: Path, source: Source) -> Item:
        try:
            comp = load_competition(folder, source.data)
        except CompetitionError as exc:
            source.notify(f"{comp_id}: not evaluated: {exc}")
            return Item(comp_id, None, absent=str(exc))
        source.notify(f"{comp_id}: building its env")
        report = build_competition(comp, Path(source.envs), source.sandbox)
        if report.status in ("accepted", "skipped"):
            return Item(comp_id, Path(source.envs) / comp.id)
        source.notify(f"{comp_id}: env {report.status}: {report.reason}")
        return Item(comp_id, None, absent=f"env {report.status}: {report.reason}")

    def score(self, env, rounds: list[RoundEnd]) -> Score:
        placed = final_rank(env, rounds)
        return Score(
            value=100.0 if placed.any_medal else 0.0,
            columns={
                "metric": placed.score,
                "medal": placed.label,
                "above median %": 100.0 if placed.above_median else 0.0,
            },
        )


def final_rank(env, rounds: list[RoundEnd]) -> Rank:
    """MLE-bench grades the submission the agent leaves at the end: the last round's, ranked on the
    env's leaderboard thresholds (no round, or one graded with an infrastructure error: nothing)."""
    limits = Thresholds(**env.spec.leaderboard.model_dump())
    if not rounds or rounds[-1].grade.infra_error:
        return rank(None, limits)
    value = rounds[-1].grade.details.get("score")
    return rank(value if isinstance(value, (int, float)) else None, limits)
