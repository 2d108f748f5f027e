"""A new env kind is one folder and one row of the kind table (arex.specs.KINDS), nothing else.

The `guess` kind lives in tests/envs/kinds/guess/ (spec model, env class, source detector and
builder); nothing in arex names it. With its row added, `build-envs` builds its source with its
builder, `load_env` loads it as its class, the rollout loop runs it (scripted teacher over real
HTTP, the non-isolating `process` test backend), and selection and export keep what it produced.
No Docker, no model."""

import asyncio
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from kinds.guess import ROW
from kinds.guess.env import GuessEnv

from arex.dataset.export import ExportConfig, export, kept_records
from arex.envs.build import build_envs
from arex.envs.runtime import load_env
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.sandbox.base import BACKENDS
from arex.selection.selector import SelectConfig, select
from arex.specs import KINDS, Kind, load_task_spec, source_kind
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
TARGET = 7


@pytest.fixture(autouse=True)
def guess_kind(monkeypatch):
    monkeypatch.setitem(KINDS, "guess", Kind(**ROW))  # the one line a new kind adds
    monkeypatch.setitem(BACKENDS, "process", "process_sandbox:ProcessSandbox")


def source(root: Path, env_id: str) -> Path:
    root.mkdir(parents=True)
    (root / "guess.yaml").write_text(f"id: {env_id}\ntitle: Guess the number\ntarget: {TARGET}\n")
    return root


def closer(n: int) -> list[str]:
    """Round n guesses 3 + n: 4, 5, 6, each one closer to the target."""
    return [f"echo {3 + n} > guess.txt", "cat guess.txt"]


def test_a_new_kind_is_built_rolled_out_selected_and_exported_through_its_row(tmp_path):
    sources = [source(tmp_path / "src" / "a", "guess-7"), source(tmp_path / "src" / "b", "guess-7")]
    assert [source_kind(s) for s in sources] == ["guess", "guess"]
    envs = tmp_path / "envs"
    reports = build_envs(sources, envs)
    # its builder built the first; its env_id part caught the second as the same env before building
    assert [(r.env_id, r.status) for r in reports] == [("guess-7", "accepted"), ("guess-7", "rejected")]
    assert "duplicate id 'guess-7'" in reports[1].reason
    env = load_env(envs / "guess-7")
    assert isinstance(env, GuessEnv) and env.kind == "guess" and env.spec.target == TARGET
    assert load_task_spec(envs / "guess-7" / "task.yaml").target == TARGET  # the spec model of its row

    store = tmp_path / "store"
    with ScriptedServer(RoundScript(closer), model="scripted-teacher") as server:
        config = RolloutConfig(rounds=3)
        sandbox = SandboxConfig(backend="process")
        summary = asyncio.run(run_batch([env], TEACHER, config, sandbox, store, 1, 1, server.base_url))
    assert summary["endings"] == {"done": 1}
    [path] = sorted((store / "guess-7").glob("*.jsonl"))
    t = load(path)
    assert t.header.env_kind == "guess" and t.held_out == pytest.approx([0.7, 0.8, 0.9])
    assert "guess 6: higher" in t.rounds[-1].end.grade.feedback

    selection = select(store, envs, tmp_path / "sel", SelectConfig(), SandboxConfig(backend="process"))
    [kept] = selection.kept
    assert kept.scores["regraded_last"] == pytest.approx(0.9)  # regraded by GuessEnv.regrade
    [kept_path] = list(kept_records(tmp_path / "sel"))
    assert load(kept_path).header.env_kind == "guess"

    stats = export(kept_records(tmp_path / "sel"), tmp_path / "dataset", ExportConfig(), envs)
    assert stats.rows["rounds"] == 3
    rows = pq.read_table(next((tmp_path / "dataset" / "rounds").glob("*.parquet"))).to_pylist()
    assert {(r["env_kind"], r["env_id"], r["domain"]) for r in rows} == {("guess", "guess-7", "guessing")}
