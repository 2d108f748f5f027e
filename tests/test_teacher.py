"""The teacher client against the scripted OpenAI-compatible server, over real HTTP on loopback."""

import asyncio
import time

import pytest
from pydantic import ValidationError

from arex.teacher.client import Price, TeacherClient, TeacherConfig, TeacherError
from arex.teacher.scripted import Fault, Reply, ScriptedServer, count_tokens

MODEL = "scripted-teacher"
PRICE = Price(input=3.0, cached_input=1.5, output=15.0)
MESSAGES = [{"role": "system", "content": "You improve solutions."}, {"role": "user", "content": "Make it faster, please."}]


def config(**overrides) -> TeacherConfig:
    base = dict(model=MODEL, prices={MODEL: PRICE}, timeout_s=0.5, backoff_base_s=0.01, backoff_max_s=3.0, max_attempts=4)
    base.update(overrides)
    return TeacherConfig(**base)


def run(coro):
    return asyncio.run(coro)


async def one_call(server: ScriptedServer, cfg: TeacherConfig, messages=MESSAGES):
    client = TeacherClient(cfg, base_url=server.base_url)
    try:
        return await client.chat(messages), client
    finally:
        await client.close()


FAULTS = {
    "429 with Retry-After": Fault.rate_limit(retry_after=1.0),
    "500": Fault.server_error(),
    "timeout": Fault.timeout(delay_s=1.5),
    "malformed JSON": Fault.malformed_json(),
    "empty content": Fault.empty(),
    "truncated reply": Fault.truncated(),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_retries_recover_from_each_fault(fault):
    with ScriptedServer([FAULTS[fault], "the good reply"], model=MODEL) as server:
        started = time.monotonic()
        call, client = run(one_call(server, config()))
        elapsed = time.monotonic() - started
    assert (call.content, call.status, call.retries) == ("the good reply", "ok", 1)
    assert server.stats["requests"] == 2
    assert call.attempts[0].error and call.attempts[1].error is None
    if fault.startswith("429"):
        assert elapsed >= 1.0, f"Retry-After: 1 not honoured (retried after {elapsed:.2f}s)"
    if fault == "timeout":
        assert "Timeout" in call.attempts[0].error


@pytest.mark.parametrize(
    "fault, kind",
    [(Fault.auth(), "auth"), (Fault.context_length(), "context_length"), (Fault.model_not_found(), "model_not_found")],
)
def test_abort_list_aborts_at_once(fault, kind):
    with ScriptedServer([fault, "never reached"], model=MODEL) as server:
        with pytest.raises(TeacherError) as info:
            run(one_call(server, config()))
        assert server.stats["requests"] == 1, "a non-retryable error was retried"
    assert info.value.kind == kind
    assert {"auth": "api_key", "context_length": "context window", "model_not_found": "teacher.model"}[kind] in str(info.value)


def test_attempt_cap_then_unreachable():
    with ScriptedServer([Fault.server_error()] * 10, model=MODEL) as server:
        with pytest.raises(TeacherError) as info:
            run(one_call(server, config(max_attempts=3)))
        assert server.stats["requests"] == 3
    assert info.value.kind == "unreachable" and "failed 3 time(s)" in str(info.value)
    assert len(info.value.attempts) == 3


def test_total_wait_cap():
    with ScriptedServer([Fault.rate_limit(retry_after=0.6)] * 20, model=MODEL) as server:
        started = time.monotonic()
        with pytest.raises(TeacherError, match="unreachable|failed"):
            run(one_call(server, config(max_attempts=20, max_wait_s=1.0)))
        assert time.monotonic() - started < 3.0
        assert server.stats["requests"] < 5


def test_persistent_empty_reply_is_recorded_not_accepted():
    with ScriptedServer([Fault.empty()] * 3, model=MODEL) as server:
        call, client = run(one_call(server, config(max_attempts=3)))
    assert call.status == "empty" and call.content == "" and call.retries == 2
    assert client.usage.prompt_tokens == server.stats["prompt_tokens"]  # the empty replies were paid for


def test_truncated_reply_without_retry_is_marked():
    with ScriptedServer([Reply(content="half an ans", finish_reason="length")], model=MODEL) as server:
        call, _ = run(one_call(server, config(retry_truncated=False)))
    assert (call.status, call.finish_reason, call.retries) == ("truncated", "length", 0)


def test_call_record_has_exact_request_and_reasoning():
    with ScriptedServer([Reply(content="ACTION", reasoning="think first")], model=MODEL) as server:
        call, _ = run(one_call(server, config(temperature=0.3, seed=7)))
        sent = server.requests[0]
    assert call.messages == MESSAGES == sent["messages"]
    assert call.sampling == {"temperature": 0.3, "top_p": 1.0, "max_tokens": 1024, "seed": 7}
    assert {k: sent[k] for k in call.sampling} == call.sampling
    assert call.reasoning_content == "think first" and call.system_fingerprint == "fp_scripted"
    assert call.completion_tokens == count_tokens("ACTION") + count_tokens("think first")


def test_concurrency_limit_holds_under_50_simultaneous_requests():
    async def burst(server):
        # Two clients on the same endpoint share one limit.
        clients = [TeacherClient(config(concurrency=4, timeout_s=30), base_url=server.base_url) for _ in range(2)]
        calls = [clients[i % 2].chat([{"role": "user", "content": f"request {i}"}]) for i in range(50)]
        results = await asyncio.gather(*calls)
        for c in clients:
            await c.close()
        return results

    with ScriptedServer(lambda request, i: f"reply {i}", model=MODEL, latency_s=0.05) as server:
        results = run(burst(server))
        assert server.stats["requests"] == 50 and len(results) == 50
        assert server.stats["max_in_flight"] == 4, server.stats


def test_token_and_cost_totals_match_the_server_exactly():
    script = ["first", Fault.empty(), "second reply, longer", Fault.truncated(), Fault.server_error(), "third", "fourth and last"]

    async def conversation(server):
        client = TeacherClient(config(), base_url=server.base_url)
        messages = list(MESSAGES)
        for _ in range(4):
            call = await client.chat(messages)
            messages = messages + [{"role": "assistant", "content": call.content}, {"role": "user", "content": "again"}]
        await client.close()
        return client

    with ScriptedServer(script, model=MODEL) as server:
        client = run(conversation(server))
        stats = dict(server.stats)
    usage = client.usage
    assert stats["cached_tokens"] > 0, "the conversation should hit the server's prefix cache"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (
        stats["prompt_tokens"],
        stats["completion_tokens"],
        stats["cached_tokens"],
    )
    expected_cost = ((stats["prompt_tokens"] - stats["cached_tokens"]) * 3.0 + stats["cached_tokens"] * 1.5 + stats["completion_tokens"] * 15.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected_cost, rel=1e-12)
    assert (usage.calls, usage.retries) == (4, 3)


def test_identity_records_what_the_server_reports():
    with ScriptedServer([], model=MODEL) as server:
        client = TeacherClient(config(), base_url=server.base_url)
        identity = run(client.identity())
    assert identity.base_url == server.base_url and identity.model == MODEL
    assert identity.server_models[0]["id"] == MODEL and identity.server_models[0]["owned_by"] == "arex-scripted"
    assert identity.client.startswith("openai-python ")


def test_unknown_price_is_an_error_unless_cost_tracking_is_off():
    with pytest.raises(ValidationError, match="no price for model 'mystery'"):
        TeacherConfig(model="mystery")
    assert TeacherConfig(model="mystery", track_cost=False).model == "mystery"


def test_unreachable_endpoint_is_an_infrastructure_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = TeacherClient(config(max_attempts=2), base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(TeacherError) as info:
        run(client.chat(MESSAGES))
    assert info.value.kind == "unreachable" and "Connection" in str(info.value)
