"""Every paid call in a record, on the fast tier's `tally` kind with the scripted server over real HTTP:
a step whose sandbox dies under its command, the attempts paid before a refusal, a refusal the user
fixes (redone by a re-run), a reply from another model than configured."""

from __future__ import annotations

import asyncio
import logging

import pytest
from loop_kit import TEACHER, process_sandbox
from process_sandbox import ProcessSandbox
from reliability_kit import CountingServer, record_spend, total_billed

from arex.record.trajectory import load
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox import SandboxError
from arex.teacher.scripted import Fault, RoundScript, ScriptedServer

pytestmark = pytest.mark.usefixtures("tally_kind")
CONFIG = RolloutConfig(rounds=2)
TEACHER3 = TEACHER.model_copy(update={"max_attempts": 3})


def commands(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt", f"cat answer.txt # round {n}"]


def run(env, server, store, teacher=TEACHER3) -> dict:
    return asyncio.run(run_batch([env], teacher, CONFIG, process_sandbox(), store, 1, 1, server.base_url))


def test_a_step_whose_sandbox_dies_under_its_command_keeps_its_paid_call(tally_env, tmp_path, monkeypatch):
    store, exec_ = tmp_path / "store", ProcessSandbox.exec

    def dies_in_round_2(self, command, *args, **kwargs):
        if isinstance(command, str) and "# round 2" in command:
            raise SandboxError("the sandbox's container died (exit 137) while running a command")
        return exec_(self, command, *args, **kwargs)

    monkeypatch.setattr(ProcessSandbox, "exec", dies_in_round_2)
    with CountingServer(RoundScript(commands), model="scripted-teacher") as server:
        summary = run(tally_env, server, store)
        billed = total_billed(server)
    assert summary["endings"] == {"infra_failed": 1}
    [path] = sorted((store / tally_env.id).glob("*.jsonl"))
    first = load(path)
    assert first.end.reason.startswith("sandbox: ") and [r.number for r in first.rounds] == [1]
    assert [s.reason.startswith("a step's command did not finish (SandboxError") for s in first.spent] == [True]
    assert record_spend(path)[0] == first.end.tokens == billed  # the step's call too, though no step line holds it

    monkeypatch.setattr(ProcessSandbox, "exec", exec_)
    with CountingServer(RoundScript(commands), model="scripted-teacher") as again:
        summary = run(tally_env, again, store)
        billed += total_billed(again)
    done = load(path)
    assert summary["endings"] == {"done": 1} and [r.number for r in done.rounds] == [1, 2]
    assert record_spend(path)[0] == done.end.tokens == billed


@pytest.mark.parametrize("refusal", [Fault.forbidden(), Fault.model_not_found()])
def test_a_refusal_the_user_fixes_is_redone_with_the_attempts_paid_before_it(tally_env, tmp_path, refusal):
    store = tmp_path / "store"
    with ScriptedServer(
        [Fault.empty(), refusal], model="scripted-teacher"
    ) as server:  # the first call: paid, then refused
        summary = run(tally_env, server, store)
        billed = total_billed(server)
    [path] = sorted((store / tally_env.id).glob("*.jsonl"))
    refused = load(path)
    assert summary["endings"] == {"teacher_error": 1} and billed > 0
    assert [s.calls for s in refused.spent] == [1] and refused.spent[0].tokens == billed == refused.end.tokens
    with ScriptedServer(RoundScript(commands), model="scripted-teacher") as fixed:
        summary = run(tally_env, fixed, store)
        billed += total_billed(fixed)
    done = load(path)
    assert summary["endings"] == {"done": 1} and [r.number for r in done.rounds] == [1, 2]
    assert record_spend(path)[0] == done.end.tokens == billed


def test_a_reply_from_another_model_is_on_the_record_and_warned_about_once(tally_env, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="arex"):
        with ScriptedServer(RoundScript(commands), model="a-cheaper-model") as server:
            run(tally_env, server, tmp_path / "store")
    [path] = sorted((tmp_path / "store" / tally_env.id).glob("*.jsonl"))
    record = load(path)
    calls = [c for r in record.rounds for c in [*(s.call for s in r.steps), r.end.reflection.call]]
    assert len(calls) == 8 and {c.model for c in calls} == {"a-cheaper-model"}
    warned = [r.getMessage() for r in caplog.records if "a-cheaper-model" in r.getMessage()]
    assert len(warned) == 1 and "'scripted-teacher'" in warned[0], warned
