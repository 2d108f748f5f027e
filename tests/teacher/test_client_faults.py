"""The teacher client's accounting under the faults a paying user meets, over real HTTP against the
scripted server: bodies that are JSON but no object, aborts after paid attempts, a reply from
another model, and a wait budget that the attempts fill."""

import asyncio
import logging

import pytest

from arex.teacher.client import TeacherClient, TeacherConfig, TeacherError
from arex.teacher.scripted import Fault, ScriptedServer

MODEL = "scripted-teacher"
MESSAGES = [{"role": "user", "content": "Make it faster, please."}]


def config(**overrides) -> TeacherConfig:
    base = dict(model=MODEL, track_cost=False, timeout_s=30.0, backoff_base_s=0.01, backoff_max_s=0.05)
    return TeacherConfig(**{**base, **overrides})


async def calls(server: ScriptedServer, cfg: TeacherConfig, n: int = 1):
    client = TeacherClient(cfg, base_url=server.base_url)
    try:
        return [await client.chat(MESSAGES) for _ in range(n)], client
    finally:
        await client.close()


BODIES = [
    "[1, 2]",
    '"a string"',
    "42",
    "null",
    '{"choices": "x"}',
    '{"choices": [7]}',
    '{"choices": [{"message": {"content": 5}}]}',
    '{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": "many", "completion_tokens": 1}}',
]


@pytest.mark.parametrize("body", BODIES)
def test_a_body_that_is_no_chat_completion_is_retried_as_malformed(body):
    with ScriptedServer([Fault.not_object(body), "the good reply"], model=MODEL) as server:
        [call], _ = asyncio.run(calls(server, config(max_attempts=3)))
    assert (call.content, call.retries) == ("the good reply", 1)
    assert "malformed reply" in call.attempts[0].error, call.attempts[0].error


def test_a_body_that_stays_malformed_ends_unreachable_not_with_a_bug():
    with ScriptedServer([Fault.not_object("[]")] * 3, model=MODEL) as server:
        with pytest.raises(TeacherError) as info:
            asyncio.run(calls(server, config(max_attempts=3)))
        assert server.stats["requests"] == 3
    assert info.value.kind == "unreachable" and "malformed reply" in str(info.value)


@pytest.mark.parametrize("abort", [Fault.auth(), Fault.model_not_found(), Fault.context_length()])
def test_paid_attempts_before_an_abort_are_in_the_error(abort):
    # An empty and a truncated reply were paid for; then the call aborts at once.
    with ScriptedServer([Fault.empty(), Fault.truncated(), abort, "never"], model=MODEL) as server:
        with pytest.raises(TeacherError) as info:
            asyncio.run(calls(server, config(max_attempts=5)))
        paid = (server.stats["prompt_tokens"], server.stats["completion_tokens"])
    attempts = info.value.attempts
    assert len(attempts) == 3 and paid[0] > 0 and paid[1] > 0
    assert (sum(a.prompt_tokens for a in attempts), sum(a.completion_tokens for a in attempts)) == paid
    assert attempts[-1].error and attempts[-1].prompt_tokens == 0


def test_a_reply_from_another_model_is_recorded_and_warned_about_once(caplog):
    with caplog.at_level(logging.WARNING, logger="arex"):
        with ScriptedServer(["one", "two", "three"], model="cheaper-model") as server:
            replies, _ = asyncio.run(calls(server, config(), 3))
    assert [r.model for r in replies] == ["cheaper-model"] * 3
    warned = [r.getMessage() for r in caplog.records if "cheaper-model" in r.getMessage()]
    assert len(warned) == 1 and MODEL in warned[0], warned


def test_a_dated_snapshot_of_the_configured_model_is_no_other_model(caplog):
    # OpenAI answers "gpt-4o" with "gpt-4o-2024-08-06": the same model, not worth a warning.
    with caplog.at_level(logging.WARNING, logger="arex"):
        with ScriptedServer(["one"], model=f"{MODEL}-2024-08-06") as server:
            [reply], _ = asyncio.run(calls(server, config()))
    assert reply.model == f"{MODEL}-2024-08-06"
    assert not [r for r in caplog.records if "2024-08-06" in r.getMessage()]


def test_retries_go_on_until_the_wait_budget_is_used():
    # Nine server errors, then a reply: within a 120 s budget of retrying (waits of at most 0.05 s
    # here) the call succeeds, where a fixed count of attempts would have given up. Judged by the
    # server's count, not by a clock.
    with ScriptedServer([Fault.server_error()] * 9 + ["at last"], model=MODEL) as server:
        [call], _ = asyncio.run(calls(server, config(max_wait_s=120)))
        assert server.stats["requests"] == 10
    assert (call.content, call.retries) == ("at last", 9)


def test_an_attempt_cap_still_caps_when_set():
    with ScriptedServer([Fault.server_error()] * 9 + ["at last"], model=MODEL) as server:
        with pytest.raises(TeacherError, match="failed 4 time"):
            asyncio.run(calls(server, config(max_wait_s=120, max_attempts=4)))
        assert server.stats["requests"] == 4
