"""An MLE-bench competition as an evaluation item: its name, description and labelled rows.

MLE-bench keeps a competition's definition in a folder (`config.yaml` with `id`, `dataset.answers`,
`dataset.sample_submission` and `grader`; `description.md`; `leaderboard.csv`) and its prepared
data apart, in `<data dir>/<id>/prepared/{public,private}`, `dataset.answers` naming the answers
file relative to the data dir (`<id>/prepared/private/test.csv`). The prepared data is looked for
in the competition folder itself (`prepared/` beside config.yaml), then where `dataset.answers`
leads from the folder or its parent. The labelled rows are `prepared/public/train.csv` and the test
rows of `prepared/public/test.csv` with their answers (joined on the column they share; the
answers alone when the test file is missing or shares none, as MLE-bench's answers may hold whole
rows). A competition whose prepared data is not found is compared by its id and description, and
the index notes it.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from arex.envs.decontam.fingerprint import Fingerprint, join_labels
from arex.envs.decontam.tables import read_csv
from arex.envs.decontam.text import id_key


def is_competition(folder: Path) -> bool:
    config = _config(folder)
    return isinstance(config.get("dataset"), dict) and "grader" in config


def _config(folder: Path) -> dict:
    try:
        data = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def of_competition(folder: Path) -> Fingerprint:
    config = _config(folder)
    name = str(config.get("id") or folder.name)
    fp = Fingerprint(name, str(folder), ids={id_key(name)})
    description = folder / "description.md"
    if description.is_file():
        fp.statement = description.read_bytes().decode("utf-8", errors="replace")
    answers = _answers(folder, str(config["dataset"].get("answers") or ""))
    if answers is None:
        fp.notes.append("prepared data not found (prepared/ beside config.yaml, or where dataset.answers leads)")
        return fp
    public = answers.parent.parent / "public"
    if (public / "train.csv").is_file():
        header, rows = read_csv(_text(public / "train.csv"))
        fp.tables.append(("prepared/public/train.csv", header, rows, None))
    fp.tables.append(_test_rows(public / "test.csv", answers))
    return fp


def _answers(folder: Path, answers: str) -> Path | None:
    rel = Path(answers) if answers else None
    candidates = [folder / "prepared" / "private" / (rel.name if rel else "test.csv")]
    if rel is not None and not rel.is_absolute() and ".." not in rel.parts:
        candidates += [folder / rel, folder.parent / rel, folder / Path(*rel.parts[1:])]
    return next((c for c in candidates if c.is_file()), None)


def _test_rows(test: Path, answers: Path) -> tuple[str, list[str], list[list[str]], str | None]:
    answer_head, answer_rows = read_csv(_text(answers))
    if test.is_file():
        head, rows = read_csv(_text(test))
        shared = [c for c in head if c in answer_head]
        labels = [c for c in answer_head if c not in head]
        if shared and labels and len(labels) == 1:
            joined = join_labels((head, rows), (answer_head, answer_rows), shared[0], labels[0])
            if joined is not None:
                return ("prepared/public/test.csv + answers", *joined, labels[0])
    label = answer_head[-1] if answer_head else None
    return (f"prepared/private/{answers.name}", answer_head, answer_rows, label)


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")
