"""Selection (each drop reason, re-grading, leaks) and export (shards TRL and a chat template accept)."""

import asyncio
import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from repo_paths import REPO
from solutions import EXACT_PY, USE_ALL

from arex.dataset.card import write_card
from arex.dataset.export import SCHEMA, ExportConfig, export, kept_records, token_weights
from arex.envs.runtime import load_env
from arex.record.canary import LeakError, env_canaries
from arex.record.snapshots import SnapshotStore
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.selection.selector import SelectConfig, select
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import RoundScript, ScriptedServer

ROOT = REPO
TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)
pytestmark = pytest.mark.docker


def judge_commands(n):
    """Round 1: the greedy starter; round 2: the exact solution; round 3: a comment; round 4 unchanged."""
    return {
        1: ["head -3 solution.py"],
        2: [f"cat > solution.py <<'EOF'\n{EXACT_PY}EOF"],
        3: ["echo '# exact subset-sum DP' >> solution.py"],
    }.get(n, ["wc -l solution.py"])


@pytest.fixture(scope="module")
def world(tmp_path_factory, bundled_envs):
    """Built envs (the bundled ones, built once for the test run) and a store with one real judge and
    one real ML trajectory (scripted teacher)."""
    root = tmp_path_factory.mktemp("world")
    judge, ml = load_env(bundled_envs / "subset-fill"), load_env(bundled_envs / "ml-diabetes")
    store = root / "store"
    requests = {}
    for env, commands, rounds in (
        (judge, judge_commands, 4),
        (ml, lambda n: [USE_ALL] if n == 2 else ["head -2 train.py"], 2),
    ):
        with ScriptedServer(RoundScript(commands), model="scripted-teacher") as server:
            summary = asyncio.run(
                run_batch([env], TEACHER, RolloutConfig(rounds=rounds), SandboxConfig(), store, 1, 1, server.base_url)
            )
            requests[env.id] = list(server.requests)
        assert summary["endings"] == {"done": 1}
    [jpath] = sorted((store / judge.id).glob("*.jsonl"))
    [mpath] = sorted((store / ml.id).glob("*.jsonl"))
    return {
        "root": root,
        "envs": bundled_envs,
        "judge": judge,
        "ml": ml,
        "store": store,
        "jpath": jpath,
        "mpath": mpath,
        "requests": requests,
    }


def variant(world, source: Path, store: Path, name: str, edit=None, edit_snapshot=None) -> Path:
    """A copy of a real trajectory under a new key, with its record (and snapshots) edited."""
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    for line in lines:
        if line["type"] == "header":
            line["key"] = name
    if edit:
        lines = edit(lines) or lines
    target = store / source.parent.name / f"{name}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(line) + "\n" for line in lines))
    if source.with_suffix("").is_dir():
        shutil.copytree(source.with_suffix(""), target.with_suffix(""))
    if edit_snapshot:
        edit_snapshot(target)
    return target


def replace_in_final_snapshot(record: Path, member: str, data: bytes) -> None:
    """What a changed workspace looks like: the final round's archive with `member`'s bytes
    replaced, stored under its own sha256, and the round's `snapshot` pointed at it."""
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    end = rounds_of(lines)[-1]
    store = SnapshotStore(record.with_suffix("") / "snapshots")

    replaced = []

    def rewrite(out) -> None:
        with tarfile.open(store.path(end["snapshot"]), "r:") as old, tarfile.open(fileobj=out, mode="w:") as new:
            for info in old:  # an archive our own sandbox made, read (not extracted) by the test
                if info.isreg() and info.name.removeprefix("./") == member:
                    info.size = len(data)
                    new.addfile(info, io.BytesIO(data))
                    replaced.append(info.name)
                else:
                    new.addfile(info, old.extractfile(info) if info.isreg() else None)

    end["snapshot"] = store.save(rewrite)
    assert replaced, f"{member} is not in the final snapshot"
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))


def rounds_of(lines):
    return [line for line in lines if line["type"] == "round_end"]


def set_end(status):
    def edit(lines):
        for line in lines:
            if line["type"] == "end":
                line["status"], line["reason"] = status, f"made {status} for the test"

    return edit


def test_real_trajectories_are_kept_and_their_scores_reproduce(world, tmp_path):
    store = tmp_path / "store"
    for path in (world["jpath"], world["mpath"]):
        variant(world, path, store, path.stem)
    selection = select(store, world["envs"], tmp_path / "sel", SelectConfig(), SandboxConfig())
    assert len(selection.kept) == 2, [(v.key, v.details) for v in selection.dropped]
    for verdict in selection.kept:
        assert verdict.scores["regraded_last"] == pytest.approx(verdict.scores["final"], abs=1e-9)
        assert verdict.scores["improvement"] > 0
    judge = next(v for v in selection.kept if v.env_id == "subset-fill")
    assert judge.scores["first"] < 1.0 == judge.scores["final"]


# Edits that turn a real trajectory into one that must be dropped for one reason.
def end_of_round(number, **fields):
    def edit(lines):
        for line in rounds_of(lines):
            if line["round"] == number:
                for key, value in fields.items():
                    target = line
                    *path, last = key.split(".")
                    for part in path:
                        target = target[part]
                    target[last] = value

    return edit


def all_scores(value):
    def edit(lines):
        for line in rounds_of(lines):
            line["grade"]["held_out_score"] = value

    return edit


def same_actions(lines):
    for line in lines:
        if line["type"] == "step":
            line["action"] = {"kind": "command", "command": "ls", "error": ""}


def same_submissions(lines):
    for line in rounds_of(lines):
        line["submission"] = rounds_of(lines)[-1]["submission"]


def cut_end(lines):
    return [line for line in lines if line["type"] != "end"]


def changed_training_data(record):
    replace_in_final_snapshot(record, "data/train.csv", b"id,bmi,progression\n1,0.1,100\n")


def test_each_drop_reason_fires_on_a_trajectory_built_to_trigger_it(world, tmp_path):
    store, j, m = tmp_path / "store", world["jpath"], world["mpath"]

    expected = {
        "unfinished": variant(world, j, store, "unfinished", cut_end),
        "infra_failure": variant(world, j, store, "infra", set_end("infra_failed")),
        "teacher_error": variant(world, j, store, "teacher-error", set_end("teacher_error")),
        "budget_overrun": variant(world, j, store, "budget", set_end("budget")),
        "below_baseline": variant(world, j, store, "below-baseline", all_scores(0.1)),
        "no_improvement": variant(world, j, store, "flat", all_scores(1.0)),
        "protocol": variant(world, j, store, "protocol", end_of_round(2, ending="step_limit")),
        "missing_reflection": variant(
            world, j, store, "no-reflection", end_of_round(3, **{"reflection.complete": False})
        ),
        "repeated_actions": variant(world, j, store, "repeats", same_actions),
        "unchanged_resubmits": variant(world, j, store, "resubmits", same_submissions),
        "protected_file_changed": variant(world, m, store, "protected", edit_snapshot=changed_training_data),
        "not_reproducible": variant(world, j, store, "tampered", end_of_round(4, **{"grade.held_out_score": 0.99})),
        "env_missing": variant(
            world,
            j,
            store,
            "no-env",
            lambda lines: [dict(line, env_id="no-such-env") if line["type"] == "header" else line for line in lines],
        ),
    }
    variant(world, j, store, "good")
    selection = select(store, world["envs"], tmp_path / "sel", SelectConfig(max_unchanged_resubmits=2), SandboxConfig())
    assert [v.key for v in selection.kept] == ["good"]
    table = selection.drop_table()
    for reason, path in expected.items():
        assert reason in table, (reason, table)
        assert path.stem in table[reason]["ids"], (reason, table[reason])
    by_key = {v.key: v for v in selection.dropped}
    assert by_key["tampered"].reasons == ["not_reproducible"]
    assert "recorded held-out 0.99, re-graded 1" in by_key["tampered"].details["not_reproducible"]
    assert by_key["protected"].reasons == ["protected_file_changed"]
    # The report on disk says the same, as JSON and as a table.
    report = json.loads((tmp_path / "sel" / "selection.json").read_text())
    assert (
        report["kept"] == 1
        and report["dropped"] == len(expected)
        and report["drops"]["not_reproducible"]["ids"] == ["tampered"]
    )
    assert "| not_reproducible | 1 | tampered |" in (tmp_path / "sel" / "drops.md").read_text()
    # A re-run judges nothing again: every verdict comes from the cache (no container is started).
    cached_lines = (tmp_path / "sel" / "verdicts.jsonl").read_text().count("\n")
    again = select(store, world["envs"], tmp_path / "sel", SelectConfig(max_unchanged_resubmits=2), SandboxConfig())
    assert [v.key for v in again.kept] == ["good"] and (tmp_path / "sel" / "verdicts.jsonl").read_text().count(
        "\n"
    ) == cached_lines


def test_a_canary_in_a_trajectory_stops_selection_and_export(world, tmp_path):
    [canary] = env_canaries(world["judge"].dir)
    assert canary.startswith("arex-canary-")

    def leak(lines):
        for line in lines:
            if line["type"] == "step" and line["observation"]:
                line["observation"] += f"\n{canary}\n"
                return

    store = tmp_path / "store"
    leaked = variant(world, world["jpath"], store, "leaky", leak)
    with pytest.raises(LeakError, match="canary of env 'subset-fill'"):
        select(store, world["envs"], tmp_path / "sel", SelectConfig(), SandboxConfig())
    assert not (tmp_path / "sel" / "kept.jsonl").exists()
    (tmp_path / "fake-sel").mkdir()
    (tmp_path / "fake-sel" / "kept.jsonl").write_text(
        json.dumps({"key": "leaky", "env_id": "subset-fill", "path": str(leaked)}) + "\n"
    )
    with pytest.raises(LeakError, match="canary"):
        export(kept_records(tmp_path / "fake-sel"), tmp_path / "ds", ExportConfig(), world["envs"])
    assert not (tmp_path / "ds").exists()


def test_llm_judge_criterion_uses_the_teacher(world, tmp_path):
    store = tmp_path / "store"
    variant(world, world["jpath"], store, "judged-1")
    variant(world, world["jpath"], store, "judged-2")
    config = SelectConfig(regrade=False, llm_judge={"enabled": True, "min_score": 5})
    for reply, kept in (("Mostly logical.\nSCORE: 3", False), ("SCORE: 8", True)):  # the verdict is the last line
        with ScriptedServer(lambda request, index, reply=reply: reply, model="scripted-teacher") as server:
            teacher = TEACHER.model_copy(update={"base_url": server.base_url})
            selection = select(store, world["envs"], tmp_path / f"sel-{kept}", config, SandboxConfig(), teacher)
            assert len(server.requests) == 2 and "Rate from 1 to 10" in server.requests[0]["messages"][0]["content"]
            # The judge sees what each round showed the agent (its feedback as recorded), not the grade.
            shown = {
                " ".join(r.end.feedback.split())[:60]
                for path in sorted(store.rglob("*.jsonl"))
                for r in load(path).rounds
            }
            assert any(text in request["messages"][0]["content"] for request in server.requests for text in shown)
        assert len(selection.kept) == (2 if kept else 0)
        if not kept:
            assert [v.reasons for v in selection.dropped] == [["llm_judge"], ["llm_judge"]]
            assert "rated 3 < 5" in selection.dropped[0].details["llm_judge"]


# -- export ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exported(world, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    store = root / "store"
    for path in (world["jpath"], world["mpath"]):
        variant(world, path, store, path.stem)
    variant(world, world["jpath"], store, "zz-duplicate")  # same assistant turns: written once
    selection = select(store, world["envs"], root / "sel", SelectConfig(), SandboxConfig())
    assert len(selection.kept) == 3
    config = ExportConfig(shard_mb=0.001, batch_rows=2)  # tiny shards: several files per config
    stats = export(kept_records(root / "sel"), root / "ds", config, world["envs"])
    write_card(root / "ds", stats, config, selection.report())
    return {"root": root, "ds": root / "ds", "stats": stats, "config": config, "selection": selection}


def test_shards_load_with_datasets_and_hold_what_the_teacher_saw(world, exported):
    from datasets import load_dataset

    ds, stats = exported["ds"], exported["stats"]
    assert stats.duplicates == ["zz-duplicate"] and stats.trajectories == 2
    assert stats.rows == {"rounds": 6, "trajectories": 2}
    assert len(list((ds / "rounds").glob("*.parquet"))) >= 2  # the shard size was honoured
    rounds = load_dataset("parquet", data_files=str(ds / "rounds" / "*.parquet"), split="train")
    trajectories = load_dataset("parquet", data_files=str(ds / "trajectories" / "*.parquet"), split="train")
    assert len(rounds) == 6 and len(trajectories) == 2
    assert rounds.features.arrow_schema.field("messages").type == SCHEMA.field("messages").type
    # Round rows: exactly the teacher's last request of the round plus its reply, byte for byte.
    requests = world["requests"]["subset-fill"]
    record = load(world["jpath"])
    judge_rows = sorted((r for r in rounds if r["env_id"] == "subset-fill"), key=lambda r: r["round"])
    reflection_requests = [
        r for r in requests if "Reflect, then write your state update" in r["messages"][-1]["content"]
    ]
    for row, sent, round_ in zip(judge_rows, reflection_requests, record.rounds):
        assert json.dumps(row["messages"][:-1]) == json.dumps(sent["messages"])
        assert row["messages"][-1] == {"role": "assistant", "content": round_.end.reflection.call.content}
        assert row["messages"][:-1] == round_.messages(None)
        assert row["held_out_score"] == round_.held_out
    assert [r["round"] for r in judge_rows] == [1, 2, 3, 4]
    assert judge_rows[0]["improvement"] == pytest.approx(1.0 - judge_rows[0]["first_held_out"])
    # Trajectory rows: the system prompt once, then every round's turns in order.
    row = next(r for r in trajectories if r["env_id"] == "subset-fill")
    assert [m["role"] for m in row["messages"]].count("system") == 1
    assert sum(1 for m in row["messages"] if m["role"] == "assistant") == sum(len(r.steps) + 1 for r in record.rounds)
    assert row["round"] is None and row["rounds"] == 4


def test_rows_render_through_smollm2_template_with_weights_on_assistant_turns(exported):
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl.data_utils import is_conversational

    from arex.teacher.local import find_gguf

    gguf = find_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    for config in ("rounds", "trajectories"):
        rows = load_dataset("parquet", data_files=str(exported["ds"] / config / "*.parquet"), split="train")
        for row in rows:
            assert is_conversational(row), row["messages"][:2]
            assert len(row["weights"]) == len(row["messages"])
            # every scripted reply is usable: each assistant turn trains, nothing else does
            assert [w > 0 for w in row["weights"]] == [m["role"] == "assistant" for m in row["messages"]]
            ids, weights = token_weights(tokenizer, row["messages"], row["weights"])
            text = tokenizer.decode(ids)
            assert text == tokenizer.apply_chat_template(row["messages"], tokenize=False)
            weighted = tokenizer.decode([t for t, w in zip(ids, weights) if w > 0])
            unweighted = tokenizer.decode([t for t, w in zip(ids, weights) if w == 0])
            for message, w in zip(row["messages"], row["weights"]):
                content = message["content"].strip()
                if not content:
                    continue
                if w > 0:
                    assert content in weighted
                else:
                    assert content in unweighted
            assert "<|im_start|>" not in weighted  # headers are prompt: a reply and the token closing it train
            assert weighted.count("<|im_end|>") == sum(1 for m, w in zip(row["messages"], row["weights"]) if w > 0)


def test_export_is_deterministic_and_the_card_describes_it(world, exported, tmp_path):
    ds = exported["ds"]
    again = export(kept_records(exported["root"] / "sel"), tmp_path / "again", exported["config"], world["envs"])
    write_card(tmp_path / "again", again, exported["config"], exported["selection"].report())

    def digest(folder):
        return {
            p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }

    assert digest(ds) == digest(tmp_path / "again")
    checksums = json.loads((ds / "checksums.json").read_text())
    assert checksums and all(
        hashlib.sha256((ds / rel).read_bytes()).hexdigest() == sha for rel, sha in checksums.items()
    )
    card = (ds / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert {c["config_name"] for c in front["configs"]} == {"rounds", "trajectories"}
    assert front["task_categories"] == ["text-generation"]
    first = exported["stats"].by_env["subset-fill"]["sum_first"]
    assert f"| subset-fill | algorithmic | 1 | 4 | {first:.4g} | 1 | 1 | {1 - first:+.4g} | 1/1 |" in card
    assert "| ml-diabetes | ml | 1 | 2 |" in card and "2 trajectories (1 near-duplicates removed)" in card
    assert "score_curve.png" in card and (ds / "score_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| not_reproducible |" not in card and "3 of 3 trajectories kept" in card
    assert "scripted-teacher" in card
    for rel, sha in checksums.items():
        assert rel in card and sha in card


def test_cli_select_export_push_end_to_end(world, tmp_path, monkeypatch):
    """The three verbs as a user runs them; the dataset lands on a local stand-in for the Hub."""
    from fake_hub import FakeHub, isolate_hf_client
    from typer.testing import CliRunner

    from arex.cli import app

    store = tmp_path / "store"
    for path in (world["jpath"], world["mpath"]):
        variant(world, path, store, path.stem)

    def tamper(lines):
        return [
            dict(line, grade={**line["grade"], "held_out_score": 0.99})
            if line["type"] == "round_end" and line["round"] == 4
            else line
            for line in lines
        ]

    variant(world, world["jpath"], store, "tampered", tamper)
    runner = CliRunner()
    result = runner.invoke(
        app, ["select", "--store", str(store), "--envs", str(world["envs"]), "--out", str(tmp_path / "sel")]
    )
    assert result.exit_code == 0, result.output
    assert "kept 2 of 3" in result.output and "not_reproducible" in result.output
    result = runner.invoke(
        app,
        [
            "export",
            "--selection",
            str(tmp_path / "sel"),
            "--envs",
            str(world["envs"]),
            "--out",
            str(tmp_path / "ds"),
            "-c",
            "export.reflection_weight=2.0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "exported 2 trajectories" in result.output
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "ds" / "rounds")
    reflection_weights = [row[-1] for row in table.column("weights").to_pylist()]
    assert set(reflection_weights) == {2.0}  # the config reached the rows
    with FakeHub() as hub:
        isolate_hf_client(monkeypatch, hub.endpoint, tmp_path / "hf-home")
        result = runner.invoke(
            app,
            [
                "push",
                "--dataset",
                str(tmp_path / "ds"),
                "--repo-id",
                "someone/arex-demo",
                "--token",
                "hf_test",
                "--endpoint",
                hub.endpoint,
            ],
        )
        assert result.exit_code == 0, result.output
        uploaded = hub.files("someone/arex-demo")
    local = {
        p.relative_to(tmp_path / "ds").as_posix(): p.read_bytes() for p in (tmp_path / "ds").rglob("*") if p.is_file()
    }
    assert ".arex-export" in local  # arex's own marker of the folder stays local: every other file is uploaded
    assert {k: v for k, v in uploaded.items() if k != ".gitattributes"} == {
        k: v for k, v in local.items() if k != ".arex-export"
    }
    # No token: a clear error, nothing sent.
    result = runner.invoke(
        app,
        [
            "push",
            "--dataset",
            str(tmp_path / "ds"),
            "--repo-id",
            "someone/arex-demo",
            "--endpoint",
            "http://127.0.0.1:9",
        ],
    )
    assert result.exit_code == 2 and "token" in result.output.lower()
