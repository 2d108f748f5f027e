"""Teacher faults: hundreds of calls with 30% faults through the real client and loop; no round is
lost, and every rollout's token and cost totals equal the scripted server's own counts exactly,
after every run and every re-run (issue 13, "Suites"). Budgets count the same tokens.

Faults, each per (env, request number) from a fixed seed, so a rollout meets the same faults
whatever the interleaving: 429 with a short Retry-After, 500, a stall longer than the client's
timeout, malformed JSON, an empty reply, a reply cut at max_tokens, an absurdly long reply, a
reply with several commands, a reply with none. The server bills what it answers with usage (a
reply, empty or cut); prices make every cost a multiple of $0.5, so totals compare with ==.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from reliability_kit import PRICE, CountingServer, end_line, make_tally_env, record_spend, rollout_args, run_child, show

from arex.envs.runtime import load_env
from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxConfig
from arex.teacher.client import TeacherConfig
from arex.teacher.scripted import Fault, Reply, RoundScript

pytestmark = pytest.mark.suite  # a reliability suite: run by `make test`, not `make test-fast`

SEED = 1313
FAULT_RATE = 0.3
STALL_S, TIMEOUT_S = 3.0, 1.0
TEACHER = TeacherConfig(
    model="scripted-teacher", prices={"scripted-teacher": PRICE}, timeout_s=TIMEOUT_S, max_attempts=3, max_wait_s=60,
    backoff_base_s=0.001, backoff_max_s=0.02,
)  # fmt: skip
FAULTS = [
    "rate_limit",
    "server_error",
    "stall",
    "malformed_json",
    "empty",
    "truncated",
    "absurdly_long",
    "many_actions",
    "no_action",
]
FORCED = {12: "empty", 13: "server_error", 14: "server_error"}
"""Per env: one call whose every attempt fails, the first after a paid (empty) reply: the call is
unreachable, the rollout an infrastructure failure that a re-run redoes."""
ROUNDS = 8


def commands(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt", "cat answer.txt"]


class FaultyScript:
    """RoundScript's replies, with a fault instead at 30% of each env's requests."""

    def __init__(self, seed: int, forced: dict[int, str] | None = None):
        self.base, self.seed, self.forced = RoundScript(commands), seed, forced or {}
        self.index: Counter = Counter()
        self.injected: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict, i: int):
        env = CountingServer.env_of(request)
        with self.lock:
            j = self.index[env]
            self.index[env] += 1
        rng = random.Random(f"{self.seed}:{env}:{j}")
        kind = self.forced.get(j) or (rng.choice(FAULTS) if rng.random() < FAULT_RATE else None)
        reply = self.base(request, i)
        if kind is None:
            return reply
        with self.lock:
            self.injected[kind] += 1
        return {
            "rate_limit": Fault.rate_limit(retry_after=0.01), "server_error": Fault.server_error(),
            "stall": Fault.timeout(delay_s=STALL_S),
            "malformed_json": Fault.malformed_json(), "empty": Fault.empty(), "truncated": Fault.truncated(),
            "absurdly_long": Reply(content="Let me think this through. " * 4000 + str(reply)),
            "many_actions": "Two at once.\n```bash\nls\n```\n```bash\ncat answer.txt\n```",
            "no_action": "I am not sure what to do next.",
        }[kind]  # fmt: skip


def spend_table(store: Path, server: CountingServer) -> list[dict]:
    """Per rollout: the server's tokens and cost, the sums over the record's calls, and its end line's."""
    rows = []
    for path in sorted(store.glob("*/*.jsonl")):
        env = path.parent.name
        billed_tokens, billed_cost = server.spend(env)
        tokens, cost = record_spend(path)
        end = end_line(path)
        rows.append({
            "env": env, "server": (billed_tokens, billed_cost), "record": (tokens, cost),
            "end": None if end is None else (end["tokens"], end["cost_usd"]),
            "status": None if end is None else end["status"],
        })  # fmt: skip
    return rows


def test_teacher_faults_lose_no_round_and_totals_match_the_server(tmp_path, tally_kind, capsys):
    envs = [load_env(make_tally_env(tmp_path / "envs", f"f{i}")) for i in range(5)]
    script = FaultyScript(SEED, FORCED)
    config = RolloutConfig(rounds=ROUNDS, steps_per_round=5)
    mismatches, runs, endings = [], 0, []
    with CountingServer(script, model="scripted-teacher") as server:
        while runs < 12:
            runs += 1
            summary = asyncio.run(
                run_batch(
                    envs, TEACHER, config, SandboxConfig(backend="process"), tmp_path / "store", 1, 5, server.base_url
                )
            )
            endings.append(summary["endings"])
            for row in spend_table(tmp_path / "store", server):
                if row["record"] != row["server"] or (row["end"] is not None and row["end"] != row["server"]):
                    mismatches.append({"run": runs, **row})
            if summary["endings"] == {"done": len(envs)}:
                break
        requests, billed = server.stats["requests"], server.stats["replies"]
        final = spend_table(tmp_path / "store", server)
    done = [load(p) for p in sorted((tmp_path / "store").glob("*/*.jsonl"))]
    lost = sum(ROUNDS - len(t.rounds) for t in done) + ROUNDS * (len(envs) - len(done))
    injected = sum(script.injected.values())
    server_tokens, record_tokens = sum(r["server"][0] for r in final), sum(r["record"][0] for r in final)
    server_cost, record_cost = sum(r["server"][1] for r in final), sum(r["record"][1] for r in final)
    show(capsys, "teacher faults", {
        "requests (HTTP attempts)": requests,
        "faults injected":
            f"{injected} ({injected / requests:.0%}): "
            + ", ".join(f"{k} {v}" for k, v in sorted(script.injected.items())),
        "replies billed by the server": billed,
        "runs until every rollout was done": f"{runs} (endings per run: {endings})",
        "rounds lost": lost,
        "tokens: server / record / end lines":
            f"{server_tokens} / {record_tokens} / {sum((r['end'] or (0, 0))[0] for r in final)}",
        "cost $: server / record / end lines":
            f"{server_cost:g} / {record_cost:g} / {sum((r['end'] or (0, 0))[1] for r in final):g}",
        "rollout totals differing from the server (over all runs)": len(mismatches),
        "first differences":
            [(m["run"], m["env"], m["server"], m["record"], m["end"], m["status"]) for m in mismatches[:6]],
    })  # fmt: skip
    assert requests >= 200 and 0.25 <= injected / requests <= 0.4
    assert lost == 0 and all(t.end is not None and t.end.status == "done" for t in done)
    assert mismatches == []


def test_budgets_count_paid_attempts_of_a_failed_call(tmp_path, tally_kind):
    """A reflection whose attempts all fail, the first after a paid 20,000-token reply: the tokens
    count, so the re-run is over its budget at once and asks the teacher nothing."""
    env = load_env(make_tally_env(tmp_path / "envs", "budget"))
    healthy = RoundScript(lambda n: [])
    failing = {
        1: Reply(content="word " * 20_000, finish_reason="length"),
        2: Fault.server_error(),
        3: Fault.server_error(),
    }
    config = RolloutConfig(rounds=3, max_tokens=10_000)
    with CountingServer(lambda request, i: failing.get(i) or healthy(request, i), model="scripted-teacher") as server:
        first = asyncio.run(
            run_batch(
                [env], TEACHER, config, SandboxConfig(backend="process"), tmp_path / "store", 1, 1, server.base_url
            )
        )
        assert first["endings"] == {"infra_failed": 1}
        asked = server.stats["requests"]
        server.script = healthy
        asyncio.run(
            run_batch(
                [env], TEACHER, config, SandboxConfig(backend="process"), tmp_path / "store", 1, 1, server.base_url
            )
        )
        [path] = (tmp_path / "store" / "budget").glob("*.jsonl")
        end, billed = end_line(path), server.spend("budget")
        assert (end["status"], server.stats["requests"] - asked) == ("budget", 0), (
            end,
            server.stats["requests"] - asked,
        )
        assert (end["tokens"], end["cost_usd"]) == billed and record_spend(path) == billed


# -- kills ------------------------------------------------------------------------------------------------
def test_totals_after_kills_miss_only_the_calls_in_flight(tmp_path, zygote, capsys):
    """Kills right after a reply arrives, or while its record line is half written: after resuming,
    the record holds every call the server billed except those the killed process held only in
    memory (it reports them), and its end line says the same."""
    env = make_tally_env(tmp_path / "envs", "k")
    rng = random.Random(SEED + 1)
    spec = {
        "envs": [str(env)],
        "store": str(tmp_path / "store"),
        "samples": 1,
        "concurrency": 1,
        "teacher": TEACHER.model_dump(),
        "rollout": {"rounds": 8},
    }
    kills, in_flight = Counter(), [0, 0.0]
    with CountingServer(RoundScript(commands), model="scripted-teacher") as server:
        spec["base_url"] = server.base_url
        for i in range(8):
            phase = ["call", "reflect", "write"][i % 3]
            pause = f"{phase}:{rng.randint(1, 6)}" + (f":{rng.uniform(0.1, 0.9):.2f}" if phase == "write" else "")
            outcome = run_child(rollout_args(spec), tmp_path / "events.log", pause, zygote=zygote)
            kills[outcome.where] += 1
            in_flight = [in_flight[0] + outcome.tokens, in_flight[1] + outcome.cost]
        run_child(rollout_args(spec), tmp_path / "events.log", zygote=zygote)
        billed = server.spend("k")
    [path] = (tmp_path / "store" / "k").glob("*.jsonl")
    recorded, end = record_spend(path), end_line(path)
    expected = (billed[0] - in_flight[0], billed[1] - in_flight[1])
    show(capsys, "teacher spend across kills", {
        "kills": ", ".join(f"{k} {v}" for k, v in sorted(kills.items())),
        "tokens: server / in flight at kills / record / end line":
            f"{billed[0]} / {in_flight[0]} / {recorded[0]} / {end['tokens']}",
        "cost $: server / in flight at kills / record / end line":
            f"{billed[1]:g} / {in_flight[1]:g} / {recorded[1]:g} / {end['cost_usd']:g}",
        "share of billed tokens recorded": f"{recorded[0] / billed[0]:.1%} (expected {expected[0] / billed[0]:.1%})",
    })  # fmt: skip
    assert end["status"] == "done" and end["rounds"] == 8
    assert recorded == expected and (end["tokens"], end["cost_usd"]) == expected
