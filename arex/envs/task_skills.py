"""An env's own skills: `skills/<name>/SKILL.md` in the built env, written for its task.

They come from the source (`arex-skills/<name>/SKILL.md` in a judge problem folder or an ML
repository, copied by `build-envs`) or from the teacher (`build-envs --draft-skills`,
arex.envs.skills_draft). Either way each is checked before it is kept: the Agent Skills format
(arex.envs.skills.check_task_skill) and no private data (`PrivateData`): not the env's canary,
not a hidden test's content (judge), not a private label row nor the labels' values in sequence
(ML). What happened to each is in `<env>/.skills.json` and in the build report.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from arex.envs.skills import ENV_SKILLS, SOURCE_SKILLS, SkillError, check_task_skill
from arex.record.canary import env_canaries

RECORD = ".skills.json"
"""In a built env: what happened to each of its skills (`SkillNote`s)."""
MIN_NEEDLE = 16
"""A hidden test's content (whole, or one line of it) counts from this many characters, whitespace
collapsed: shorter ones ("3", "YES") are as likely to be in any text."""
LABEL_RUN = 8
"""Private label values that, in their file order, may not appear as consecutive words of a skill."""
_READ_CAP = 8 << 20  # bytes read of one hidden test file
_LINES_PER_FILE = 2000
_PUBLIC_CAP = 400_000  # characters of public text (statement, samples) a needle may be excused by
_WORD = re.compile(r"[A-Za-z0-9_.+-]+")


@dataclass
class SkillNote:
    """What happened to one task skill: kept, or rejected with the reason (one sentence)."""

    name: str
    origin: str  # shipped | drafted
    status: str  # kept | rejected
    reason: str = ""


def _collapse(text: str) -> str:
    return " ".join(text.split())


class PrivateData:
    """What a task skill must not contain, read from a built env folder (or one being built)."""

    def __init__(self, env_dir: Path):
        env_dir = Path(env_dir)
        self.canaries = env_canaries(env_dir)
        raw = yaml.safe_load((env_dir / "task.yaml").read_text(encoding="utf-8")) or {}
        self.needles: dict[str, str] = {}  # collapsed text → where it is from
        self.rows: dict[tuple[str, str], str] = {}  # (id, label) → id
        self.labels: list[tuple[str, str]] = []  # (id, label) in the labels file's order
        # Both shapes of private data arex builds are read, whatever the kind: each reader finds
        # nothing in an env without its shape (no hidden `tests`, no labels file), so a new kind
        # is checked for either without a row of its own here.
        self._tests(env_dir, raw)
        self._labels(env_dir / "private" / "labels.csv")

    def _tests(self, env_dir: Path, raw: dict) -> None:
        tests = [t for t in raw.get("tests") or [] if isinstance(t, dict)]
        public = _collapse(
            (env_dir / "statement.md").read_text(encoding="utf-8", errors="replace")
            if (env_dir / "statement.md").is_file()
            else ""
        )
        for t in tests:
            if t.get("sample"):
                public += " \n " + " \n ".join(
                    _collapse(_read(env_dir / "private" / t[key])) for key in ("input", "answer")
                )
        public = public[:_PUBLIC_CAP]
        for t in tests:
            if t.get("sample"):
                continue
            for key in ("input", "answer"):
                text = _read(env_dir / "private" / str(t.get(key, "")))
                where = f"hidden test {t.get('name')} ({key} file)"
                for piece in [_collapse(text)] + [_collapse(line) for line in text.splitlines()[:_LINES_PER_FILE]]:
                    if len(piece) >= MIN_NEEDLE and piece not in public:
                        self.needles.setdefault(piece, where)

    def _labels(self, path: Path) -> None:
        if not path.is_file():
            return
        for row in list(csv.reader(io.StringIO(path.read_text(encoding="utf-8", errors="replace"))))[1:]:
            if len(row) >= 3 and row[2] == "private":
                self.labels.append((row[0].strip(), row[1].strip()))
        self.rows = {(i, v): i for i, v in self.labels if len(i) >= 4}

    def find(self, text: str) -> str | None:
        """Why `text` may not be kept (one sentence), or None if it holds none of the private data."""
        if any(c in text for c in self.canaries):
            return "it contains the env's canary string, so private data reached it"
        flat = _collapse(text)
        for needle, where in self.needles.items():
            if len(needle) <= len(flat) and needle in flat:
                return f"it contains content of {where}: {needle[:40]!r}"
        words = _WORD.findall(text)
        pairs = set(zip(words, words[1:]))
        for pair, row_id in self.rows.items():
            if pair in pairs:
                return f"it contains the private label row of id {row_id!r}"
        return self._label_run(words)

    def _label_run(self, words: list[str]) -> str | None:
        windows = {tuple(words[i : i + LABEL_RUN]) for i in range(len(words) - LABEL_RUN + 1)}
        values = [v for _, v in self.labels]
        for i in range(len(values) - LABEL_RUN + 1):
            run = tuple(values[i : i + LABEL_RUN])
            if len(set(run)) > 1 and run in windows:
                return (
                    f"it contains {LABEL_RUN} private label values in the labels file's order "
                    f"(from the row of id {self.labels[i][0]!r})"
                )
        return None


def _read(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(_READ_CAP).decode("utf-8", "replace")
    except OSError:
        return ""


def check(folder: Path, private: PrivateData) -> str | None:
    """Why the skill in `folder` may not be kept (one sentence), or None."""
    try:
        check_task_skill(folder)
    except SkillError as exc:
        return str(exc).split(": ", 1)[-1]  # the path is the caller's to name
    return private.find((folder / "SKILL.md").read_text(encoding="utf-8"))


def keep(folder: Path, env_dir: Path, origin: str, private: PrivateData) -> SkillNote:
    """Check the skill in `folder` and, if it passes, copy it to the env's `skills/<name>/`;
    a rejected one is never written there."""
    name = folder.name
    if (Path(env_dir) / ENV_SKILLS / name).exists():
        return SkillNote(name, origin, "rejected", f"the env already has a skill named {name!r}")
    reason = check(folder, private)
    if reason is not None:
        return SkillNote(name, origin, "rejected", reason)
    shutil.copytree(folder, Path(env_dir) / ENV_SKILLS / name)
    return SkillNote(name, origin, "kept")


def ship(source: Path, work: Path) -> list[SkillNote]:
    """Copy a source's `arex-skills/*` into the env being built (`work`), each checked; [] if the
    source has none."""
    root = Path(source) / SOURCE_SKILLS
    if not root.is_dir():
        return []
    private = PrivateData(work)
    notes = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        with tempfile.TemporaryDirectory() as tmp:  # only SKILL.md and its files, symlinks resolved
            copy = Path(tmp) / folder.name
            shutil.copytree(folder, copy, symlinks=False)
            notes.append(keep(copy, work, "shipped", private))
    record(work, notes)
    return notes


def read_record(env_dir: Path) -> list[SkillNote]:
    try:
        data = json.loads((Path(env_dir) / RECORD).read_text())
        return [SkillNote(**n) for n in data.get("skills", [])]
    except (OSError, ValueError, TypeError):
        return []


def record(env_dir: Path, notes: list[SkillNote]) -> None:
    """Add `notes` to the env's record of its skills."""
    every = read_record(env_dir) + notes
    (Path(env_dir) / RECORD).write_text(json.dumps({"skills": [asdict(n) for n in every]}, indent=2))
