"""Every long verb's `--json`: stdout holds one JSON summary and nothing else, its numbers are
what is on disk, and the exit code is the verb's.

Rollout, select and export run on the fast fixtures (tests/conftest.py, tests/loop_kit.py: the `tally` env
kind on the process sandbox, the scripted teacher over real HTTP); push goes to the local fake
Hub (tests/fake_hub.py); build-envs builds a bundled judge env in Docker (marked)."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_hub import FakeHub, isolate_hf_client
from loop_kit import climbing
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.record.trajectory import load
from arex.summary import Summary
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tally_env):
    return tally_env


runner = CliRunner()
BASE = [
    "-c",
    "sandbox.backend=process",
    "-c",
    "teacher.model=scripted-teacher",
    "-c",
    "teacher.track_cost=false",
    "-c",
    "teacher.backoff_base_s=0.01",
]


def run_json(*args: str, code: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    data = json.loads(result.stdout)  # the whole of stdout is the summary
    Summary.model_validate(data)
    return data


def rollout_json(env, store: Path, base_url: str, *options: str, code: int = 0) -> dict:
    return run_json(
        "rollout",
        "--envs",
        str(env.dir.parent),
        "--out",
        str(store),
        *options,
        *BASE,
        "-c",
        f"teacher.base_url={base_url}",
        code=code,
    )


def test_rollout_select_export_push_summaries_are_what_is_on_disk(env, tmp_path, monkeypatch):
    store = tmp_path / "store"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        climbed = rollout_json(env, store, server.base_url, "--samples", "2", "--rounds", "3")
    with ScriptedServer(RoundScript(lambda n: ["echo 1 > answer.txt"]), model="scripted-teacher") as server:
        flat = rollout_json(env, store, server.base_url, "--rounds", "2", "-c", "rollout.max_tokens=1")
    records = {str(p): load(p) for p in (store / env.id).glob("*.jsonl")}
    assert len(records) == 3
    assert climbed["counts"] == {"rollouts": 2, "finished": 2, "done": 2} and flat["counts"] == {
        "rollouts": 1,
        "finished": 1,
        "budget": 1,
    }
    for summary in (climbed, flat):
        for item in summary["items"]:
            record = records[item["fields"]["path"]]
            assert item["outcome"] == record.end.status and item["numbers"]["rounds"] == len(record.rounds)
            assert item["numbers"]["best"] == max(record.held_out) and item["id"] == f"{env.id}/{record.header.key}"
    assert climbed["counts"]["finished"] + flat["counts"]["finished"] == sum(
        1 for t in records.values() if t.end is not None
    )
    assert climbed["extra"]["tokens"] == sum(
        t.end.tokens for p, t in records.items() if p in {i["fields"]["path"] for i in climbed["items"]}
    )

    select = run_json(
        "select", "--store", str(store), "--envs", str(env.dir.parent), "--out", str(tmp_path / "sel"), *BASE
    )
    kept = [json.loads(line) for line in (tmp_path / "sel" / "kept.jsonl").read_text().splitlines()]
    report = json.loads((tmp_path / "sel" / "selection.json").read_text())
    assert select["counts"] == {"trajectories": 3, "kept": len(kept), "dropped": 3 - len(kept)} and len(kept) == 2
    assert sorted(i["id"].split("/")[1] for i in select["items"] if i["outcome"] == "kept") == sorted(
        k["key"] for k in kept
    )
    assert select["extra"]["drops"] == {reason: row["count"] for reason, row in report["drops"].items()}, report

    export = run_json("export", "--selection", str(tmp_path / "sel"), "--out", str(tmp_path / "dataset"), *BASE)
    shards = sorted((tmp_path / "dataset").glob("*/*.parquet"))
    on_disk = {str(p.relative_to(tmp_path / "dataset")): pq.ParquetFile(p).metadata.num_rows for p in shards}
    assert {i["id"]: i["numbers"]["rows"] for i in export["items"]} == on_disk
    assert {i["id"]: i["numbers"]["bytes"] for i in export["items"]} == {
        k: (tmp_path / "dataset" / k).stat().st_size for k in on_disk
    }
    by_config = {g: sum(n for k, n in on_disk.items() if k.startswith(f"{g}/")) for g in export["extra"]["rows"]}
    assert export["extra"]["rows"] == by_config and export["counts"]["rows"] == sum(on_disk.values())
    assert export["counts"]["trajectories"] + export["counts"]["duplicates"] == len(kept)

    with FakeHub() as hub:
        isolate_hf_client(monkeypatch, hub.endpoint, tmp_path / "hf-home")
        push = run_json(
            "push",
            "--dataset",
            str(tmp_path / "dataset"),
            "--repo-id",
            "arex-test/summaries",
            "--token",
            "hf_fake_token",
            "--endpoint",
            hub.endpoint,
        )
        files = hub.files("arex-test/summaries")
    assert push["counts"]["files"] == len(push["items"]) and {i["id"] for i in push["items"]} <= set(files)
    assert all(i["numbers"]["bytes"] == len(files[i["id"]]) for i in push["items"])
    assert push["counts"]["bytes"] == sum(len(files[i["id"]]) for i in push["items"])


def test_an_unreadable_record_still_gives_the_summary_and_the_exit_code(env, tmp_path):
    store = tmp_path / "store"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        rollout_json(env, store, server.base_url, "--samples", "2", "--rounds", "2")
        damaged = sorted((store / env.id).glob("*.jsonl"))[0]
        damaged.write_text(damaged.read_text() + '{"type": "note"}\n')
        summary = rollout_json(env, store, server.base_url, "--samples", "3", "--rounds", "2", code=2)
    finished = [p for p in (store / env.id).glob("*.jsonl") if p != damaged and load(p).end is not None]
    assert summary["ok"] is False and summary["counts"]["finished"] == len(finished) == 2
    assert summary["counts"]["unreadable_record"] == 1 and summary["extra"]["unreadable_records"][0]["path"] == str(
        damaged
    )


def test_variants_summary_adds_up_each_store(env, tmp_path):
    file = tmp_path / "variants.yaml"
    file.write_text("variants:\n  one: [rollout.rounds=1]\n  two: [rollout.rounds=2]\n")
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        summary = rollout_json(env, tmp_path / "out", server.base_url, "--variants", str(file), "--samples", "2")
    for name in ("one", "two"):
        ended = [p for p in (tmp_path / "out" / name).glob("*/*.jsonl") if load(p).end is not None]
        assert summary["extra"]["variants"][name]["finished"] == len(ended) == 2
        assert summary["paths"][name] == str(tmp_path / "out" / name)
        assert {i["fields"]["path"] for i in summary["items"] if i["fields"]["variant"] == name} == {
            str(p) for p in ended
        }
    assert summary["counts"]["finished"] == 4


def test_human_output_keeps_the_tables(env, tmp_path):
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        result = runner.invoke(
            app,
            [
                "rollout",
                "--envs",
                str(env.dir.parent),
                "--out",
                str(tmp_path / "s"),
                "--rounds",
                "2",
                *BASE,
                "-c",
                f"teacher.base_url={server.base_url}",
            ],
        )
    assert result.exit_code == 0, result.output
    assert (
        "│ tally │ 1 " in result.stdout
        and "endings: done 1" in result.stdout
        and "rollout: rollouts 1, finished 1, done 1" in result.stdout
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_build_envs_summary_without_docker_lists_each_rejection(tmp_path):
    (tmp_path / "empty").mkdir()
    summary = run_json(
        "build-envs", str(tmp_path / "empty"), str(tmp_path / "missing"), "--out", str(tmp_path / "built"), code=1
    )
    report = json.loads((tmp_path / "built" / "build-report.json").read_text())
    assert summary["ok"] is False and summary["counts"] == {
        "sources": 2,
        "rejected": report["summary"]["rejected"],
    } == {"sources": 2, "rejected": 2}
    assert [(i["fields"]["source"], i["detail"]) for i in summary["items"]] == [
        (r["source"], r["reason"]) for r in report["envs"]
    ]


@pytest.mark.docker
def test_build_envs_summary_matches_the_build_report(tmp_path):
    root = REPO / "envs"
    (tmp_path / "empty").mkdir()
    summary = run_json(
        "build-envs", str(root / "judge-pair-sums"), str(tmp_path / "empty"), "--out", str(tmp_path / "built"), code=1
    )
    report = json.loads((tmp_path / "built" / "build-report.json").read_text())
    assert (
        {k: v for k, v in report["summary"].items() if v}
        == {k: v for k, v in summary["counts"].items() if k != "sources"}
        == {"accepted": 1, "rejected": 1}
    )
    [accepted] = [i for i in summary["items"] if i["outcome"] == "accepted"]
    built = json.loads((tmp_path / "built" / accepted["id"] / ".build.json").read_text())
    assert {k: v for k, v in accepted["numbers"].items() if k != "seconds"} == built["scores"]
    again = run_json("build-envs", str(root / "judge-pair-sums"), "--out", str(tmp_path / "built"))
    assert again["ok"] is True and again["counts"] == {"sources": 1, "skipped": 1}
