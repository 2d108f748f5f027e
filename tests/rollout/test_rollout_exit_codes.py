"""`arex rollout`'s exit code, through the real command line in a child process (tests/reliability_runner.py,
forked by the zygote) against the scripted teacher server: a batch that did not finish every rollout exits 6
and says why, grouped with counts; rollouts a fixable teacher error ended (a refused key, a model the endpoint
does not serve) are redone by the re-run, with the calls paid before it kept on their records."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

from reliability_kit import CountingServer, end_line, make_tally_env, record_spend

from arex.rollout.endings import Unfinished
from arex.teacher.client import REFUSED_KEY
from arex.teacher.scripted import Fault, RoundScript

ROUNDS = 2
REQUESTS_PER_ROUND = 3  # a command, submit, the reflection


def commands(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt"]


class PerEnv:
    """RoundScript's replies, with `faults[env][j]` instead at an env's j-th request."""

    def __init__(self, faults: dict[str, dict[int, Fault]]):
        self.base, self.faults, self.seen, self.lock = RoundScript(commands), faults, Counter(), threading.Lock()

    def __call__(self, request: dict, index: int):
        env = CountingServer.env_of(request)
        with self.lock:
            j = self.seen[env]
            self.seen[env] += 1
        return self.faults.get(env, {}).get(j) or self.base(request, index)


def arex(zygote, tmp_path: Path, server, store: Path, name: str) -> tuple[int, str]:
    """`arex rollout` on the envs in tmp_path/envs into `store`; its exit code and output."""
    overrides = {
        "teacher.base_url": server.base_url,
        "teacher.model": "scripted-teacher",
        "teacher.track_cost": "false",
        "teacher.max_attempts": "3",
        "teacher.backoff_base_s": "0.01",
        "sandbox.backend": "process",
        "rollout.rounds": str(ROUNDS),
    }
    args = ["cli", "rollout", "--envs", str(tmp_path / "envs"), "--out", str(store), "--concurrency", "2"]
    args += [arg for key, value in overrides.items() for arg in ("-c", f"{key}={value}")]
    log = tmp_path / f"{name}.out"
    child = zygote.start(args, log, {"AREX_REL_EVENTS": str(tmp_path / f"{name}.events")})
    code = child.wait(240)
    assert code is not None, f"arex rollout did not end: {log.read_text()[-3000:]}"
    return code, log.read_text()


def test_a_refused_key_exits_6_and_the_rerun_redoes_it_keeping_what_was_paid(zygote, tmp_path):
    """(A 403 and an unknown model are redone alike: tests/rollout/test_paid_calls.py.)"""
    envs = ["tally-a", "tally-b"]
    for env in envs:
        make_tally_env(tmp_path / "envs", env)
    store = tmp_path / "store"
    # Round 2's first call: a paid empty reply, then the refusal (it aborts the call, and the rollout).
    first_of_round_2 = REQUESTS_PER_ROUND
    faults = {env: {first_of_round_2: Fault.empty(), first_of_round_2 + 1: Fault.auth()} for env in envs}
    with CountingServer(PerEnv(faults)) as refusing:
        code, out = arex(zygote, tmp_path, refusing, store, "refused")
    assert code == Unfinished.exit_code, out[-3000:]
    assert "2 of 2 rollout(s) did not finish" in out and "teacher_error x2: " + REFUSED_KEY in out, out[-3000:]
    paths = {env: next((store / env).glob("*.jsonl")) for env in envs}
    for env, path in paths.items():
        billed = refusing.spend(env)[0]
        end = end_line(path)
        assert end["status"] == "teacher_error" and end["rounds"] == 1
        assert record_spend(path)[0] == end["tokens"] == billed > 0  # the empty reply's tokens too
    summary = json.loads((store / "summary.json").read_text())
    assert [(g["status"], g["count"], g["redone"]) for g in summary["failures"]] == [("teacher_error", 2, True)]

    with CountingServer(RoundScript(commands)) as fixed:  # the key fixed: the re-run redoes both
        code, out = arex(zygote, tmp_path, fixed, store, "fixed")
        assert code == 0, out[-3000:]
        for env, path in paths.items():
            end = end_line(path)
            assert (end["status"], end["rounds"]) == ("done", ROUNDS)
            assert record_spend(path)[0] == end["tokens"] == refusing.spend(env)[0] + fixed.spend(env)[0]
        assert fixed.stats["requests"] == 2 * REQUESTS_PER_ROUND  # round 2 only, of each
    assert json.loads((store / "summary.json").read_text())["failures"] == []


def test_an_infrastructure_failure_exits_6_naming_it_while_the_others_finish(zygote, tmp_path):
    for env in ("tally-a", "tally-b"):
        make_tally_env(tmp_path / "envs", env)
    store = tmp_path / "store"
    down = {"tally-a": {j: Fault.server_error() for j in range(3)}}  # its first call fails 3 times: unreachable
    with CountingServer(PerEnv(down)) as server:
        code, out = arex(zygote, tmp_path, server, store, "run")
    assert code == Unfinished.exit_code, out[-3000:]
    assert "1 of 2 rollout(s) did not finish" in out and "infra_failed x1: The teacher at" in out, out[-3000:]
    summary = json.loads((store / "summary.json").read_text())
    assert summary["endings"] == {"infra_failed": 1, "done": 1}
    [failure] = summary["failures"]
    assert (failure["status"], failure["count"], failure["redone"]) == ("infra_failed", 1, True)
    assert "failed 3 time(s)" in failure["reason"]
