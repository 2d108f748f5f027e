"""The teacher client against the scripted OpenAI-compatible server, over real HTTP on loopback."""

import asyncio
import threading
import time

import pytest
from pydantic import ValidationError

from arex.teacher.client import Price, TeacherClient, TeacherConfig, TeacherError
from arex.teacher.scripted import Fault, Reply, ScriptedServer, count_tokens

MODEL = "scripted-teacher"
PRICE = Price(input=3.0, cached_input=1.5, output=15.0)
MESSAGES = [
    {"role": "system", "content": "You improve solutions."},
    {"role": "user", "content": "Make it faster, please."},
]


def config(**overrides) -> TeacherConfig:
    # A timeout no loopback reply comes near, however busy the machine: only the timeout fault
    # (which stalls far longer than its own, shorter timeout) may ever reach it.
    base = dict(
        model=MODEL, prices={MODEL: PRICE}, timeout_s=30.0, backoff_base_s=0.01, backoff_max_s=3.0, max_attempts=4
    )
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
    "timeout": Fault.timeout(delay_s=60),  # 30 times the client's timeout below: which ends first is never in doubt
    "malformed JSON": Fault.malformed_json(),
    "empty content": Fault.empty(),
    "truncated reply": Fault.truncated(),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_retries_recover_from_each_fault(fault):
    items = [FAULTS[fault], "the good reply"]
    arrivals: list[float] = []  # the server's own log of when each request reached it

    def script(request, index):
        arrivals.append(time.monotonic())
        return items[index] if index < len(items) else Fault.server_error()

    with ScriptedServer(script, model=MODEL) as server:
        call, _ = run(one_call(server, config(timeout_s=2.0) if fault == "timeout" else config()))
    assert (call.content, call.status, call.retries) == ("the good reply", "ok", 1)
    assert server.stats["requests"] == 2
    assert call.attempts[0].error and call.attempts[1].error is None
    if fault.startswith("429"):
        # A lower bound the server saw: a busy machine can only lengthen the gap, never shorten it.
        gap = arrivals[1] - arrivals[0]
        assert gap >= 1.0, (
            f"Retry-After: 1 not honoured (the retry reached the server {gap:.2f}s after the 429's request)"
        )
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
    assert {"auth": "api_key", "context_length": "context window", "model_not_found": "teacher.model"}[kind] in str(
        info.value
    )


def test_attempt_cap_then_unreachable():
    with ScriptedServer([Fault.server_error()] * 10, model=MODEL) as server:
        with pytest.raises(TeacherError) as info:
            run(one_call(server, config(max_attempts=3)))
        assert server.stats["requests"] == 3
    assert info.value.kind == "unreachable" and "failed 3 time(s)" in str(info.value)
    assert len(info.value.attempts) == 3


def test_total_wait_cap():
    # Each retry waits the 0.6 s the server asks for, and none starts once 1 s has passed since the
    # first attempt: so at most 3 requests, however slow the machine (slowness means fewer), where
    # the attempt cap alone would allow 20. Judged by the server's count, not by a clock.
    with ScriptedServer([Fault.rate_limit(retry_after=0.6)] * 20, model=MODEL) as server:
        with pytest.raises(TeacherError, match="unreachable|failed") as info:
            run(one_call(server, config(max_attempts=20, max_wait_s=1.0)))
        assert 1 <= server.stats["requests"] <= 3, server.stats
    assert len(info.value.attempts) == server.stats["requests"]


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

    # In flight = inside `reply`, which ends before the reply is sent: a client that has had its
    # reply and sent its next request is never counted twice (the server's own in_flight, which
    # drops only after sending, can count it twice when the server thread is slow to get there).
    lock, seen = threading.Lock(), {"now": 0, "max": 0}
    deadline = time.monotonic() + 60

    def reply(request, index):
        with lock:
            seen["now"] += 1
            seen["max"] = max(seen["max"], seen["now"])
        # The first replies wait until 4 requests are in at once (polled, with one generous
        # deadline), so reaching the limit does not depend on how fast a busy machine sends them.
        while seen["max"] < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)  # time for a request over the limit, if any, to arrive meanwhile
        with lock:
            seen["now"] -= 1
        return f"reply {index}"

    with ScriptedServer(reply, model=MODEL) as server:
        results = run(burst(server))
        assert server.stats["requests"] == 50 and len(results) == 50
    assert seen["max"] == 4, seen


def test_token_and_cost_totals_match_the_server_exactly():
    script = [
        "first",
        Fault.empty(),
        "second reply, longer",
        Fault.truncated(),
        Fault.server_error(),
        "third",
        "fourth and last",
    ]

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
    expected_cost = (
        (stats["prompt_tokens"] - stats["cached_tokens"]) * 3.0
        + stats["cached_tokens"] * 1.5
        + stats["completion_tokens"] * 15.0
    ) / 1e6
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


def test_cached_tokens_cost_the_cached_price_and_the_input_price_only_when_none_is_given():
    url = "http://127.0.0.1:9/v1"  # no request is made: cost is arithmetic on the counts a server reported
    cached = TeacherClient(config(), base_url=url)
    fallback = TeacherClient(config(prices={MODEL: Price(input=3.0, output=15.0)}), base_url=url)
    assert cached.cost(1000, 800, 10) == pytest.approx((200 * 3.0 + 800 * 1.5 + 10 * 15.0) / 1e6)
    assert fallback.cost(1000, 800, 10) == pytest.approx((1000 * 3.0 + 10 * 15.0) / 1e6)
    assert TeacherConfig().prices[TeacherConfig().model].cached_input == 0.0  # the default table names it
