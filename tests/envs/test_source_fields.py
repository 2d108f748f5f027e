"""A source rejected for a field of the wrong shape names that field (issue 31, "Malformed input,
one sentence"): before, these fell through to "a field does not have the shape the <format>
format gives it (TypeError: ...)", which left the user to guess which one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from repo_paths import REPO, TESTS

from arex.envs import judge_sources
from arex.envs.judge_sources import SourceError

CASES = [
    (REPO / "envs" / "judge-subset-fill", "task.yaml", "solutions", None, None),  # absent: no solutions, fine
    (REPO / "envs" / "judge-subset-fill", "task.yaml", "solutions", ["x"], "solutions.0"),
    (REPO / "envs" / "judge-subset-fill", "task.yaml", "solutions", "abc", "solutions"),
    (REPO / "envs" / "judge-subset-fill", "task.yaml", "checker", ["x"], "checker"),
    (TESTS / "corpus" / "kattis-2023", "problem.yaml", "limits", {"memory": [1]}, "limits.memory"),
    (TESTS / "corpus" / "kattis-2023", "problem.yaml", "limits", {"time_limit": "x"}, "limits.time_limit"),
    (TESTS / "corpus" / "kattis-2023", "problem.yaml", "limits", {"output": {}}, "limits.output"),
    (TESTS / "corpus" / "frontier-single-case", "config.yaml", "subtasks", [{"n_cases": "x"}], "subtasks.0.n_cases"),
    (TESTS / "corpus" / "frontier-single-case", "config.yaml", "input_prefix", "x" * 300, "subtasks.0"),
]


@pytest.mark.parametrize(("source", "spec", "key", "value", "field"), CASES, ids=lambda v: str(v)[:24])
def test_a_field_of_the_wrong_shape_is_named(tmp_path, source: Path, spec: str, key: str, value, field):
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    data = yaml.safe_load((folder / spec).read_text())
    if value is None:
        data.pop(key, None)
    else:
        data[key] = value
    (folder / spec).write_text(yaml.safe_dump(data))
    if field is None:
        judge_sources.load(folder)
        return
    with pytest.raises(SourceError) as caught:
        judge_sources.load(folder)
    message = str(caught.value)
    assert f"field '{field}'" in message and "does not have the shape" not in message, message
    assert str(folder / spec) in message
