"""`arex export --eval-set`: the trajectories of an env found in an evaluation set are left out
(or kept when flagged), and the dataset card lists the env, the evaluation item and the evidence,
with what build-envs already removed. No Docker: the checked-in v1 store, selected."""

import json
import shutil

import pyarrow.parquet as pq
import pytest
from repo_paths import TESTS
from typer.testing import CliRunner

from arex.cli import app
from arex.sandbox import SandboxConfig
from arex.selection.selector import SelectConfig, select

FIXTURE = TESTS / "fixtures" / "v1"
runner = CliRunner()


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "v1"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("golden"))
    sel = tmp_path / "sel"
    selection = select(root / "store", root / "envs", sel, SelectConfig(regrade=False), SandboxConfig())
    kept = sorted(r.env_id for r in selection.kept)
    return {"root": tmp_path, "envs": root / "envs", "sel": sel, "kept": kept}


def export(world, name: str, *extra: str):
    out = world["root"] / name
    result = runner.invoke(app, ["export", "--selection", str(world["sel"]), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    envs = {e for p in (out / "trajectories").glob("*.parquet") for e in pq.read_table(p)["env_id"].to_pylist()}
    return out, envs, (out / "README.md").read_text()


def test_an_env_in_an_evaluation_set_is_left_out_and_listed(world):
    assert set(world["kept"]) == {"ml-diabetes", "subset-fill"}
    listed = world["root"] / "benchmark-ids.txt"
    listed.write_text("subset-fill\n")
    _, envs, card = export(world, "clean", "--eval-set", str(listed))
    assert envs == {"ml-diabetes"}
    assert "## Decontamination" in card and f"Evaluation sets checked: `{listed}`" in card
    assert f"| subset-fill | removed | {listed} | subset-fill | same id 'subset-fill' |" in card
    assert f"{world['kept'].count('subset-fill')} trajectories left out at export" in card


def test_flag_keeps_the_trajectories_and_says_so(world):
    listed = world["root"] / "ids.txt"
    listed.write_text("ml-diabetes\n")
    _, envs, card = export(world, "flagged", "--eval-set", str(listed), "-c", "decontamination.action=flag")
    assert envs == {"ml-diabetes", "subset-fill"}
    assert "| ml-diabetes | flagged (kept) |" in card and "0 trajectories left out" in card


def test_the_card_lists_what_the_build_removed(world):
    """build-envs' report (its overlaps) reaches the card even when export names no evaluation set."""
    overlap = {"eval_set": "bench/", "item": "frontier-1", "where": "x", "signals": ["4 of 4 tests identical"]}
    report = {"envs": [{"source": "src/copy", "env_id": "portal", "overlaps": [{**overlap, "action": "refused"}]}]}
    (world["envs"] / "build-report.json").write_text(json.dumps(report))
    _, envs, card = export(world, "with-build")
    assert envs == {"ml-diabetes", "subset-fill"}  # nothing of these two is in an evaluation set
    assert "Evaluation sets checked: none named at export." in card
    assert "| portal | removed | bench/ | frontier-1 | 4 of 4 tests identical |" in card


def test_a_missing_evaluation_set_is_one_sentence(world):
    result = runner.invoke(
        app, ["export", "--selection", str(world["sel"]), "--out", str(world["root"] / "x"), "--eval-set", "nope"]
    )
    assert result.exit_code == 2 and "evaluation set nope does not exist" in result.output
    assert "Traceback" not in result.output and not (world["root"] / "x").exists()
