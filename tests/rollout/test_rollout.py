"""The rollout engine with the scripted teacher: long rollouts, resume after SIGKILL, exact records."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import docker
import pytest
from repo_paths import REPO
from solutions import EXACT_PY, USE_ALL

from arex.envs.runtime import load_env
from arex.envs.skills import load_skills
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.rollout.parse import parse_action, parse_reflection
from arex.sandbox import SandboxConfig
from arex.sandbox.docker import prune
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import Fault, RoundScript, ScriptedServer

ROOT = REPO
TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False, backoff_base_s=0.01, max_attempts=2)


@pytest.fixture(scope="module")
def envs(bundled_envs):
    """The bundled judge and ML envs, built once for the test run."""
    return {"judge": load_env(bundled_envs / "subset-fill"), "ml": load_env(bundled_envs / "ml-diabetes")}


def run(env, script, tmp_path, rollout=None, latency=0.0, samples=1, concurrency=1):
    rollout = rollout or RolloutConfig(rounds=3)
    with ScriptedServer(script, model="scripted-teacher", latency_s=latency) as server:
        summary = asyncio.run(
            run_batch(
                [env], TEACHER, rollout, SandboxConfig(), tmp_path / "store", samples, concurrency, server.base_url
            )
        )
        requests = list(server.requests)
    records = sorted((tmp_path / "store" / env.id).glob("*.jsonl"))
    return summary, [load(p) for p in records], requests


def held_out(record):
    return record.held_out


# -- parsing (pure) ------------------------------------------------------------------------------
def test_action_and_reflection_parsing():
    assert parse_action("I will look.\n```bash\nls -la\n```").command == "ls -la"
    assert parse_action("```\nsubmit\n```").kind == "submit"
    assert parse_action("no block here").kind == "invalid"
    assert "exactly one" in parse_action("```bash\nls\n```\n```bash\npwd\n```").error
    r = parse_reflection(
        "REVIEW: WA on test 3\n**DIAGNOSE:** overflow\nPLAN: use long long\nSTATE: use 64-bit sums; best 0.5 in round 2"
    )
    assert r.complete and r.diagnose == "overflow" and r.state.startswith("use 64-bit")
    partial = parse_reflection("I think it went fine.")
    assert not partial.complete and partial.state == "I think it went fine."


def test_bundled_skills_follow_the_format():
    skills = load_skills(ROOT / "skills")  # the catalogue, top-level in the checkout
    assert len(skills) >= 8
    names = {s.name for s in skills}
    for wanted in ("stress-test-brute-force", "cpp-fast-io", "avoid-overfitting-the-public-split"):
        assert wanted in names
    assert all(len(s.description) <= 1024 and s.description for s in skills)


# -- long rollouts ---------------------------------------------------------------------------------
@pytest.mark.docker
def test_30_round_judge_rollout_rises_where_the_script_improves(envs, tmp_path):
    def commands(n):
        if n == 1:
            return ["ls /skills | grep -e stress -e cpp && touch /skills/x", "head -3 solution.py"]
        if n == 12:
            return [f"cat > solution.py <<'EOF'\n{EXACT_PY}EOF", "python3 solution.py <<< '4 10\n6 5 5 3'"]
        return ["wc -l solution.py"]

    summary, [record], requests = run(envs["judge"], RoundScript(commands), tmp_path, RolloutConfig(rounds=30))
    assert [r.number for r in record.rounds] == list(range(1, 31))
    scores = held_out(record)
    assert len(set(scores[:11])) == 1 and 0.5 < scores[0] < 1.0, scores  # the greedy starter, unchanged
    assert scores[11:] == [1.0] * 19  # the exact solution from round 12 on
    assert record.end.status == "done" and record.rounds[-1].end.best.round == 12
    first = record.rounds[0].steps[0].observation
    assert "stress-test-brute-force" in first and "Read-only file system" in first  # skills mounted read-only
    assert summary["envs"]["subset-fill"]["mean_improvement"] == pytest.approx(1.0 - scores[0])
    # Every call's exact messages can be rebuilt from the record, byte for byte.
    rebuilt = []
    for round_ in record.rounds:
        rebuilt += [round_.messages(i) for i in range(len(round_.steps))]
        rebuilt.append(round_.messages(None))
    assert len(rebuilt) == len(requests) - 0
    for mine, sent in zip(rebuilt, requests):
        assert json.dumps(mine, ensure_ascii=False) == json.dumps(sent["messages"], ensure_ascii=False)
    # Bounded context: round 30 starts about as long as round 2.
    lengths = [len(json.dumps([m.model_dump() for m in r.start.context])) for r in record.rounds]
    assert lengths[29] < 1.3 * lengths[1]


@pytest.mark.docker
def test_30_round_ml_rollout_rises_where_the_script_improves(envs, tmp_path):

    def commands(n):
        return [USE_ALL] if n == 8 else []

    _, [record], _ = run(envs["ml"], RoundScript(commands), tmp_path, RolloutConfig(rounds=30))
    scores = held_out(record)  # negated RMSE: higher is better
    assert len(scores) == 30 and len(set(scores[:7])) == 1
    assert scores[7] > scores[6] + 2.0 and len(set(scores[7:])) == 1, scores
    assert record.rounds[7].end.grade.details["private"] < 60  # RMSE improved from ~62


@pytest.mark.docker
def test_full_history_context_grows_and_is_reconstructable(envs, tmp_path):
    _, [record], requests = run(
        envs["judge"], RoundScript(lambda n: ["true"]), tmp_path, RolloutConfig(rounds=3, context="full-history")
    )
    lengths = [len(r.start.context) for r in record.rounds]
    assert lengths[0] < lengths[1] < lengths[2]
    rebuilt = []
    for round_ in record.rounds:
        rebuilt += [round_.messages(i) for i in range(len(round_.steps))] + [round_.messages(None)]
    assert [json.dumps(m) for m in rebuilt] == [json.dumps(r["messages"]) for r in requests]


@pytest.mark.docker
def test_format_error_streak_ends_the_round_and_is_recorded(envs, tmp_path):
    def script(request, index):
        last = request["messages"][-1]["content"]
        if "Reflect, then write" in last:
            return "REVIEW: x\nDIAGNOSE: y\nPLAN: z\nSTATE: keep going"
        return "I am thinking about it, no command yet."

    _, [record], _ = run(envs["judge"], script, tmp_path, RolloutConfig(rounds=2, format_error_streak=3))
    assert [r.end.ending for r in record.rounds] == ["format_errors", "format_errors"]
    assert [s.action.kind for s in record.rounds[0].steps] == ["invalid"] * 3
    assert record.end.status == "done"


@pytest.mark.docker
def test_grading_containers_started_ahead_are_used_then_removed(envs):
    env = envs["judge"]
    mine = {"label": [f"arex.owner_pid={os.getpid()}", f"arex.name=judge-{env.id}"]}
    client = docker.from_env()
    session = env.open_grading()
    session.warm()
    with session.lease() as lease:  # waits for the warm-up instead of starting a second container
        box = lease.box
        assert box.exec("true").ok
    with session.lease() as lease:  # given back, cleaned, handed out again
        assert lease.box is box
    assert len(client.containers.list(all=True, filters=mine)) == 1
    session.close()
    for _ in range(2):  # close() right after warm(): whichever wins the race, nothing is left
        session = env.open_grading()
        session.warm()
        session.close()
    import threading

    for warming in [t for t in threading.enumerate() if t.name in (f"warm-{env.id}", f"clean-{env.id}")]:
        warming.join(timeout=60)  # the warm-ups have ended (an event, not a fixed sleep): what they started is gone
    assert client.containers.list(all=True, filters=mine) == []


@pytest.mark.docker
def test_budget_and_infrastructure_endings(envs, tmp_path):
    _, [record], _ = run(
        envs["judge"], RoundScript(lambda n: ["true"]), tmp_path / "a", RolloutConfig(rounds=5, max_tokens=3000)
    )
    assert record.end.status == "budget" and "token budget 3000" in record.end.reason
    # The teacher dies after 7 calls: an infrastructure failure, redone on the next run.
    script = RoundScript(lambda n: ["true"])
    dying = lambda request, index: script(request, index) if index < 7 else Fault.server_error()  # noqa: E731
    _, [record], _ = run(envs["judge"], dying, tmp_path / "b", RolloutConfig(rounds=4))
    assert record.end is None or record.end.status == "infra_failed"
    done_before = len(record.rounds)
    with ScriptedServer(script, model="scripted-teacher") as server:
        asyncio.run(
            run_batch(
                [envs["judge"]],
                TEACHER,
                RolloutConfig(rounds=4),
                SandboxConfig(),
                tmp_path / "b" / "store",
                1,
                1,
                server.base_url,
            )
        )
    [path] = (tmp_path / "b" / "store" / "subset-fill").glob("*.jsonl")
    again = load(path)
    assert done_before < 4 and [r.number for r in again.rounds] == [1, 2, 3, 4] and again.end.status == "done"


KILLABLE = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from arex.envs.runtime import load_env
    from arex.rollout.batch import run_batch
    from arex.rollout.config import RolloutConfig
    from arex.sandbox import SandboxConfig
    from arex.teacher.client import TeacherConfig
    from arex.teacher.scripted import RoundScript, ScriptedServer
    env, store = load_env(Path(sys.argv[1])), Path(sys.argv[2])
    script = RoundScript(lambda n: [f"echo round-{n} >> notes.txt", "sleep 0.3", "cat notes.txt"])
    with ScriptedServer(script, model="scripted-teacher", latency_s=0.2) as server:
        teacher = TeacherConfig(model="scripted-teacher", track_cost=False)
        asyncio.run(run_batch([env], teacher, RolloutConfig(rounds=6), SandboxConfig(), store, 1, 1, server.base_url))
    """
)


@pytest.mark.docker
def test_sigkill_mid_round_then_resume_loses_and_duplicates_nothing(envs, tmp_path):
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE, str(envs["judge"].dir), str(store)])
    path = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:  # wait until round 3 is under way, then kill
            found = list((store / "subset-fill").glob("*.jsonl")) if (store / "subset-fill").is_dir() else []
            if found:
                path = found[0]
                lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
                if any(x["type"] == "step" and x["round"] == 3 and x["step"] >= 1 for x in lines):
                    break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert path is not None
    cut = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    assert not any(x["type"] == "round_end" and x["round"] == 3 for x in cut), "killed too late to test mid-round"
    prune()  # the killed process could not remove its sandbox
    script = RoundScript(lambda n: [f"echo round-{n} >> notes.txt", "sleep 0.3", "cat notes.txt"])
    with ScriptedServer(script, model="scripted-teacher") as server:
        asyncio.run(
            run_batch(
                [envs["judge"]],
                TEACHER.model_copy(update={"max_attempts": 6}),
                RolloutConfig(rounds=6),
                SandboxConfig(),
                store,
                1,
                1,
                server.base_url,
            )
        )
    record = load(path)
    assert [r.number for r in record.rounds] == [1, 2, 3, 4, 5, 6]
    assert all([s.step for s in r.steps] == list(range(len(r.steps))) for r in record.rounds)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert sum(x["type"] == "round_start" for x in lines) == 6 and sum(x["type"] == "end" for x in lines) == 1
    # The workspace was restored from round 2's end: round 3's lost edit is not there twice.
    final_notes = record.rounds[-1].steps[2].observation
    assert final_notes.count("round-3") == 1 and all(f"round-{n}" in final_notes for n in range(1, 7))
