"""The reflective loop, selection and export on a small env kind, without Docker or a model.

`TallyEnv` (tests/loop_kit.py) is a whole env kind in one class (the score is the number the agent leaves in
answer.txt), run on the `process` test backend (tests/process_sandbox.py) with the scripted
OpenAI-compatible server over real HTTP. What Docker adds (isolation, limits) is tested in the
full tier; what is tested here is the loop's own logic: the record, resuming, budgets, endings,
snapshots, and what selection and export make of the result."""

import asyncio
import json
import threading

import pyarrow.parquet as pq
import pytest
from loop_kit import TEACHER, TallyEnv, climbing, process_sandbox, rollout

from arex.dataset.export import ExportConfig, export, kept_records
from arex.envs.runtime import Env
from arex.record.snapshots import SnapshotStore, read_member
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.selection.selector import SelectConfig, select
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tally_env) -> Env:
    return tally_env


def test_a_new_kind_is_one_class_and_the_loop_records_every_call_exactly(env, tmp_path):
    assert isinstance(env, TallyEnv)
    summary, [t], requests = rollout(env, RoundScript(climbing), tmp_path / "store", RolloutConfig(rounds=4))
    assert summary["endings"] == {"done": 1}
    assert t.held_out == [0.2, 0.3, 0.4, 0.5] and t.end.best.round == 4
    assert [r.end.ending for r in t.rounds] == ["submitted"] * 4
    rebuilt = [r.messages(i) for r in t.rounds for i in range(len(r.steps))] + [r.messages(None) for r in t.rounds]
    sent = [req["messages"] for req in requests]
    assert len(sent) == len(rebuilt) == 4 * 4
    assert sorted(json.dumps(m) for m in rebuilt) == sorted(json.dumps(m) for m in sent)
    store = SnapshotStore(t.path.with_suffix("") / "snapshots")
    kept = {r.end.snapshot for r in t.rounds if store.has(r.end.snapshot)}
    assert kept == {t.rounds[0].end.snapshot, t.rounds[-1].end.snapshot}  # first, and best = last
    assert (
        read_member(store.path(t.rounds[-1].end.snapshot), "notes.txt", 1000) == b"round-1\nround-2\nround-3\nround-4\n"
    )


def test_a_rollout_stopped_mid_round_resumes_from_its_last_kept_workspace_once(env, tmp_path):
    store, config = tmp_path / "store", RolloutConfig(rounds=3)
    reached, release = threading.Event(), threading.Event()
    script = RoundScript(climbing)

    def stall_in_round_3(request, index):
        if "Round 3 of 3" in request["messages"][-1]["content"]:
            reached.set()
            release.wait(60)  # until the test has stopped the rollout
        return script(request, index)

    async def stop_in_round_3(base_url: str) -> None:
        task = asyncio.ensure_future(run_batch([env], TEACHER, config, process_sandbox(), store, 1, 1, base_url))
        while not reached.is_set() and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()  # what Ctrl-C does
        with pytest.raises(asyncio.CancelledError):
            await task

    with ScriptedServer(stall_in_round_3, model="scripted-teacher") as server:
        try:
            asyncio.run(stop_in_round_3(server.base_url))
        finally:
            release.set()
    [path] = sorted((store / env.id).glob("*.jsonl"))
    stopped = load(path)
    assert [r.number for r in stopped.rounds] == [1, 2] and stopped.end is None
    _, [resumed], _ = rollout(env, script, store, config)
    assert [r.number for r in resumed.rounds] == [1, 2, 3] and resumed.end.status == "done"
    archive = SnapshotStore(path.with_suffix("") / "snapshots").path(resumed.rounds[-1].end.snapshot)
    assert read_member(archive, "notes.txt", 1000) == b"round-1\nround-2\nround-3\n"
    _, [again], requests = rollout(env, script, store, config)
    assert requests == [] and again.path.read_bytes() == path.read_bytes()  # finished: nothing redone


def test_budgets_and_format_errors_end_where_they_should(env, tmp_path):
    def babble(request, index):
        return (
            "I will think about it."
            if "Reflect, then write" not in request["messages"][-1]["content"]
            else "REVIEW: a\nDIAGNOSE: b\nPLAN: c\nSTATE: d"
        )

    _, [t], _ = rollout(env, babble, tmp_path / "a", RolloutConfig(rounds=2, format_error_streak=3))
    assert [r.end.ending for r in t.rounds] == ["format_errors", "format_errors"]
    assert all(not s.usable and s.observation for r in t.rounds for s in r.steps)
    _, [b], _ = rollout(env, RoundScript(climbing), tmp_path / "b", RolloutConfig(rounds=5, max_tokens=1))
    # the first call spends the budget: the round stops acting, is graded and reflected, and no other starts
    assert b.end.status == "budget" and "token budget" in b.end.reason
    assert [r.end.ending for r in b.rounds] == ["budget"] and len(b.rounds[0].steps) == 1


def test_selection_regrades_and_export_trains_only_the_agents_turns(env, tmp_path):
    store = tmp_path / "store"
    rollout(env, RoundScript(climbing), store, RolloutConfig(rounds=3), samples=2)
    flat = RoundScript(lambda n: ["echo 1 > answer.txt"])
    rollout(env, flat, store, RolloutConfig(rounds=2, steps_per_round=3))
    envs = env.dir.parent
    selection = select(store, envs, tmp_path / "sel", SelectConfig(), process_sandbox())
    assert len(selection.kept) == 2
    assert [v.reasons for v in selection.dropped] == [["no_improvement"]]
    assert all(v.scores["regraded_last"] == 0.4 for v in selection.kept)
    stats = export(kept_records(tmp_path / "sel"), tmp_path / "dataset", ExportConfig(reflection_weight=2.0), envs)
    # the two samples replied alike: written once
    assert stats.rows == {"rounds": 3, "trajectories": 1} and len(stats.duplicates) == 1
    rows = pq.read_table(next((tmp_path / "dataset" / "rounds").glob("*.parquet"))).to_pylist()
    assert len(rows) == 3
    for row in rows:  # the two actions (a command, submit) 1, the reflection 2, the rest 0
        roles = [m["role"] for m in row["messages"]]
        assert roles.count("assistant") == 4
        assert row["weights"] == [0.0 if r != "assistant" else 1.0 for r in roles[:-1]] + [2.0]


def test_an_edited_protected_file_is_dropped(env, tmp_path):
    store = tmp_path / "store"
    rollout(
        env,
        RoundScript(lambda n: climbing(n) + (["echo mine > rules.txt"] if n == 2 else [])),
        store,
        RolloutConfig(rounds=2),
    )
    selection = select(store, env.dir.parent, tmp_path / "sel", SelectConfig(), process_sandbox())
    [verdict] = selection.dropped
    # the edit shows twice: as an attempt in the commands, and in the final workspace
    assert verdict.reasons == ["exploit_attempt:tamper", "protected_file_changed"]
    assert (
        "rules.txt" in verdict.details["protected_file_changed"]
        and "rules.txt" in verdict.details["exploit_attempt:tamper"]
    )


def test_full_history_rounds_rows_weigh_each_turn_once(env, tmp_path):
    store = tmp_path / "store"

    script = RoundScript(lambda n: [f"echo {n + 1} > answer.txt"])
    rollout(env, script, store, RolloutConfig(rounds=3, context="full-history"))
    [path] = sorted((store / "tally").glob("*.jsonl"))
    export(iter([path]), tmp_path / "dataset", ExportConfig(), env.dir.parent)
    rows = sorted(
        pq.read_table(next((tmp_path / "dataset" / "rounds").glob("*.parquet"))).to_pylist(), key=lambda r: r["round"]
    )
    trained = [sum(1 for w in row["weights"] if w > 0) for row in rows]
    assert trained == [3, 3, 3]  # per round: a command, submit, the reflection; earlier rounds carry no loss
    assert len(rows[2]["messages"]) > len(rows[0]["messages"])


def test_a_lost_reflection_call_replays_its_round_from_the_kept_workspace(env, tmp_path):
    """The round's snapshot was taken before the reflection call; the round counts only once its
    round_end is written, so the replay starts from the round before (each round's line once)."""
    from arex.teacher.scripted import Fault

    store, config = tmp_path / "store", RolloutConfig(rounds=3)
    script = RoundScript(climbing)

    def lose_round_2s_reflection(request, index):
        last = request["messages"][-1]["content"]
        if "Reflect, then write" in last and "round 2" in last.lower():
            return Fault.server_error()
        return script(request, index)

    _, [first], _ = rollout(env, lose_round_2s_reflection, store, config)
    assert first.end.status == "infra_failed" and [r.number for r in first.rounds] == [1]
    # the lost call is on the record
    assert [s.reason.startswith("a call failed after 2 attempt(s)") for s in first.spent] == [True]
    _, [again], _ = rollout(env, script, store, config)
    assert again.end.status == "done" and [r.number for r in again.rounds] == [1, 2, 3]
    archive = SnapshotStore(again.path.with_suffix("") / "snapshots").path(again.rounds[-1].end.snapshot)
    assert read_member(archive, "notes.txt", 1000) == b"round-1\nround-2\nround-3\n"
    # round 2's steps, made before the lost call, are paid: counted in the totals as spent
    assert [s.round for s in again.spent] == [2, 2] and again.spent[1].calls == 3
    recorded = sum(c.tokens for r in again.rounds for c in [*(s.call for s in r.steps), r.end.reflection.call]) + sum(
        s.tokens for s in again.spent
    )
    assert again.end.tokens == recorded and again.spent[1].tokens > 0


def test_sigterm_while_a_rollout_runs_leaves_it_open_to_resume(env, tmp_path, monkeypatch):
    """SIGTERM's handler raises SystemExit wherever the code is: that is a stop, not the end of a
    finished rollout."""
    from process_sandbox import ProcessSandbox

    store, config = tmp_path / "store", RolloutConfig(rounds=3)
    exec_ = ProcessSandbox.exec

    def exec_then_term(self, command, *args, **kwargs):
        if isinstance(command, str) and "round-2" in command:
            raise SystemExit(143)
        return exec_(self, command, *args, **kwargs)

    monkeypatch.setattr(ProcessSandbox, "exec", exec_then_term)
    with pytest.raises(SystemExit):
        rollout(env, RoundScript(climbing), store, config)
    [path] = sorted((store / env.id).glob("*.jsonl"))
    stopped = load(path)
    assert stopped.end is None and [r.number for r in stopped.rounds] == [1]
    monkeypatch.setattr(ProcessSandbox, "exec", exec_)
    _, [resumed], _ = rollout(env, RoundScript(climbing), store, config)
    assert resumed.end.status == "done" and [r.number for r in resumed.rounds] == [1, 2, 3]
