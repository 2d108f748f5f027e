"""`arex rollout --variants FILE`: named config variants into one store, each an ordinary store.

Runs on the fast fixtures (tests/conftest.py, tests/loop_kit.py: the one-class `tally` env kind on the
process test sandbox) with the scripted teacher over real HTTP."""

import asyncio
import json
import threading
from pathlib import Path

import pytest
from loop_kit import climbing, process_sandbox
from repo_paths import REPO
from typer.testing import CliRunner

from arex.cli import app
from arex.record.trajectory import load
from arex.rollout import batch as batch_module
from arex.rollout.batch import config_hash
from arex.selection.selector import SelectConfig, select
from arex.teacher.scripted import RoundScript, ScriptedServer
from arex.variants import load_variants, run_variants

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
    "-c",
    "teacher.max_attempts=2",
]


def variants_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "variants.yaml"
    path.write_text(text)
    return path


def cli(*args: str, base_url: str = "http://127.0.0.1:9/v1"):
    return runner.invoke(app, [*args, *BASE, "-c", f"teacher.base_url={base_url}"])


def records(store: Path) -> list:
    return [load(p) for p in sorted(store.glob("*/*.jsonl"))]


ONE_TWO = "variants:\n  one: [rollout.rounds=1]\n  two: [rollout.rounds=2, rollout.context=full-history]\n"


def test_two_variants_are_two_ordinary_stores_under_one_concurrency_limit(env, tmp_path, monkeypatch):
    active, most = [0], [0]
    run = batch_module.Rollout.run

    async def counted(self):
        active[0] += 1
        most[0] = max(most[0], active[0])
        try:
            return await run(self)
        finally:
            active[0] -= 1

    monkeypatch.setattr(batch_module.Rollout, "run", counted)
    file, out = variants_file(tmp_path, ONE_TWO), tmp_path / "ablation"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        result = cli(
            "rollout",
            "--envs",
            str(env.dir.parent),
            "--out",
            str(out),
            "--variants",
            str(file),
            "--samples",
            "2",
            "--concurrency",
            "1",
            base_url=server.base_url,
        )
    assert result.exit_code == 0, result.output
    assert most[0] == 1  # two variants × two samples, never two rollouts at once: the limit is shared
    one, two = records(out / "one"), records(out / "two")
    assert [len(t.rounds) for t in one] == [1, 1] and [len(t.rounds) for t in two] == [2, 2]
    assert {t.header.config["rounds"] for t in one} == {1} and {t.header.config["context"] for t in two} == {
        "full-history"
    }
    assert all(t.end.status == "done" for t in one + two)
    recorded = json.loads((out / "variants.json").read_text())["variants"]
    expected = {
        v.name: config_hash(v.config.teacher, v.config.rollout)
        for v in load_variants(file, BASE[1::2] + [f"teacher.base_url={server.base_url}"])
    }
    assert [(v["name"], v["overrides"], v["config_hash"]) for v in recorded] == [
        ("one", ["rollout.rounds=1"], expected["one"]),
        ("two", ["rollout.rounds=2", "rollout.context=full-history"], expected["two"]),
    ]
    assert {t.header.config_hash for t in two} == {expected["two"]}
    assert json.loads((out / "two" / "summary.json").read_text())["endings"] == {"done": 2}
    # a variant's folder is an ordinary store: selection reads it unchanged
    selection = select(out / "two", env.dir.parent, tmp_path / "sel", SelectConfig(), process_sandbox())
    assert len(selection.kept) + len(selection.dropped) == 2 and all(
        v.path.startswith(str(out / "two")) for v in selection.kept + selection.dropped
    )


def test_a_stopped_run_resumes_each_variant_and_skips_the_finished_one(env, tmp_path):
    file, out = (
        variants_file(tmp_path, "variants:\n  short: [rollout.rounds=1]\n  long: [rollout.rounds=3]\n"),
        tmp_path / "ablation",
    )
    plan = load_variants(
        file, ["sandbox.backend=process", "teacher.model=scripted-teacher", "teacher.track_cost=false"]
    )
    reached, release = threading.Event(), threading.Event()
    script = RoundScript(climbing)

    def stall_in_round_2_of_3(request, index):
        if "Round 2 of 3" in request["messages"][-1]["content"]:
            reached.set()
            release.wait(60)  # until the test has stopped the run
        return script(request, index)

    def short_ended() -> bool:  # its end line is written (the variants run side by side, in either order)
        lines = [line for p in (out / "short").glob("*/*.jsonl") for line in p.read_text().splitlines()]
        return any(
            line.startswith("{") and line.endswith("}") and json.loads(line).get("type") == "end" for line in lines
        )

    async def stop_in_round_2(base_url: str) -> None:
        task = asyncio.ensure_future(run_variants([env], plan, out, 1, 2, base_url, None, file))
        while not (reached.is_set() and short_ended()) and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()  # what Ctrl-C does
        with pytest.raises(asyncio.CancelledError):
            await task

    with ScriptedServer(stall_in_round_2_of_3, model="scripted-teacher") as server:
        try:
            asyncio.run(stop_in_round_2(server.base_url))
        finally:
            release.set()
    [short] = records(out / "short")
    [long] = records(out / "long")
    assert short.end.status == "done" and long.end is None and [r.number for r in long.rounds] == [1]
    finished = short.path.read_bytes()
    with ScriptedServer(script, model="scripted-teacher") as server:
        result = cli(
            "rollout",
            "--envs",
            str(env.dir.parent),
            "--out",
            str(out),
            "--variants",
            str(file),
            base_url=server.base_url,
        )
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert result.exit_code == 0, result.output
    assert prompts and not any("of 1" in p for p in prompts)  # the finished variant asked nothing
    assert short.path.read_bytes() == finished
    [again] = records(out / "long")
    # no duplicate rounds
    assert again.path == long.path and [r.number for r in again.rounds] == [1, 2, 3] and again.end.status == "done"
    assert (
        len(list((out / "short" / "tally").glob("*.jsonl"))) == 1
        and len(list((out / "long" / "tally").glob("*.jsonl"))) == 1
    )


def test_a_changed_variant_is_refused_naming_it(env, tmp_path):
    file, out = variants_file(tmp_path, ONE_TWO), tmp_path / "ablation"
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        first = cli(
            "rollout",
            "--envs",
            str(env.dir.parent),
            "--out",
            str(out),
            "--variants",
            str(file),
            base_url=server.base_url,
        )
    assert first.exit_code == 0, first.output
    before = (out / "variants.json").read_text()
    file.write_text("variants:\n  one: [rollout.rounds=1]\n  two: [rollout.rounds=4]\n")
    changed = cli("rollout", "--envs", str(env.dir.parent), "--out", str(out), "--variants", str(file))
    assert changed.exit_code == 2 and changed.output.count("\n") == 1, changed.output
    assert (
        changed.output.startswith("arex: variant 'two' in ")
        and "rollout.rounds=4" in changed.output
        and "new name" in changed.output
    )
    file.write_text(ONE_TWO)
    rebased = cli(
        "rollout",
        "--envs",
        str(env.dir.parent),
        "--out",
        str(out),
        "--variants",
        str(file),
        "-c",
        "rollout.steps_per_round=5",
    )
    assert rebased.exit_code == 2 and "variant 'one' has the overrides it ran with" in rebased.output, rebased.output
    assert (out / "variants.json").read_text() == before  # nothing recorded for a refused run
    # a new name is a new variant: the others stay on record
    file.write_text(ONE_TWO + "  three: [rollout.rounds=3]\n")
    with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
        added = cli(
            "rollout",
            "--envs",
            str(env.dir.parent),
            "--out",
            str(out),
            "--variants",
            str(file),
            base_url=server.base_url,
        )
    assert added.exit_code == 0, added.output
    assert [v["name"] for v in json.loads((out / "variants.json").read_text())["variants"]] == ["one", "two", "three"]
    assert [len(t.rounds) for t in records(out / "three")] == [3]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("variants:\n  fast: [rollout.no_such_key=1]\n", "variant 'fast' in "),
        ("variants:\n  fast: [rollout.rounds=zero]\n", "variant 'fast' in "),
        ("variants:\n  a/b: []\n", "the variant name 'a/b' cannot name a folder"),
        ("variants:\n  ..: []\n", "the variant name '..' cannot name a folder"),
        ("variants:\n  same: []\n  same: [rollout.rounds=2]\n", "the key 'same' appears twice"),
        ("variants:\n  Fast: []\n  fast: []\n", "differ only in case"),
        ("variants:\n  fast: rollout.rounds=2\n", "variant 'fast' must list its overrides"),
        ("fast: [rollout.rounds=2]\n", "must hold one key, 'variants:'"),
    ],
)
def test_bad_variants_files_are_one_clear_error(env, tmp_path, text, expected):
    file = variants_file(tmp_path, text)
    result = cli("rollout", "--envs", str(env.dir.parent), "--out", str(tmp_path / "out"), "--variants", str(file))
    assert result.exit_code == 2 and result.output.startswith("arex: ") and expected in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_an_unknown_key_names_the_variant_and_the_key(env, tmp_path):
    file = variants_file(tmp_path, "variants:\n  ok: []\n  fast: [rollout.roundz=2]\n")
    result = cli("rollout", "--envs", str(env.dir.parent), "--out", str(tmp_path / "out"), "--variants", str(file))
    assert (
        result.exit_code == 2
        and "variant 'fast'" in result.output
        and "rollout.roundz" in result.output
        and "rounds" in result.output
    ), result.output


def test_a_variants_store_and_an_ordinary_store_are_not_mixed(env, tmp_path):
    file, out = variants_file(tmp_path, ONE_TWO), tmp_path / "ablation"
    (out / "tally").mkdir(parents=True)
    (out / "tally" / "abc.jsonl").write_text("")
    result = cli("rollout", "--envs", str(env.dir.parent), "--out", str(out), "--variants", str(file))
    assert result.exit_code == 2 and "is an ordinary trajectory store" in result.output, result.output
    other = tmp_path / "other"
    other.mkdir()
    (other / "variants.json").write_text('{"variants": []}')
    result = cli("rollout", "--envs", str(env.dir.parent), "--out", str(other))
    assert result.exit_code == 2 and "holds variants" in result.output, result.output


def test_the_bundled_ablation_file_resolves_to_five_distinct_configurations():
    path = REPO / "configs" / "variants" / "ablation.yaml"
    variants = load_variants(path, [])
    assert [v.name for v in variants] == [
        "no-skills",
        "general-skills",
        "task-skills",
        "task-skills+2x-rounds",
        "feedback-none",
    ]
    rollout = {v.name: v.config.rollout for v in variants}
    assert (rollout["no-skills"].general_skills, rollout["no-skills"].task_skills) == (False, False)
    assert (rollout["general-skills"].general_skills, rollout["general-skills"].task_skills) == (True, False)
    assert (
        rollout["task-skills+2x-rounds"].rounds == 2 * rollout["task-skills"].rounds
        and rollout["feedback-none"].feedback == "none"
    )
    assert len({v.config_hash for v in variants}) == 5
