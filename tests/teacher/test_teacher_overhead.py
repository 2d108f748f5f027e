"""The teacher client sends the conversation as plain JSON: the OpenAI SDK's per-call walk of every
message against its TypedDicts (O(context) CPU, most of a step's host CPU in bench/agent_overhead.py)
is not run on it, and the server still receives every message as given."""

from __future__ import annotations

import asyncio

import openai.resources.chat.completions.completions as completions

from arex.teacher.client import TeacherClient, TeacherConfig
from arex.teacher.scripted import ScriptedServer


def test_messages_skip_the_sdk_transform_and_arrive_whole(monkeypatch):
    walked: list[int] = []
    original = completions.async_maybe_transform

    async def counting(data, expected_type):
        if isinstance(data, dict) and "messages" in data:
            walked.append(len(data["messages"]))
        return await original(data, expected_type)

    monkeypatch.setattr(completions, "async_maybe_transform", counting)
    conversation = [{"role": "system", "content": "act"}] + [
        {"role": r, "content": f"{r} {i}"} for i in range(30) for r in ("user", "assistant")
    ][:-1]

    async def call():
        client = TeacherClient(
            TeacherConfig(model="scripted-teacher", track_cost=False, extra_body={"top_k": 3}), base_url=server.base_url
        )
        try:
            return await client.chat(conversation)
        finally:
            await client.close()

    with ScriptedServer(["done"]) as server:
        reply = asyncio.run(call())
    assert reply.content == "done" and reply.messages == conversation
    assert walked == [0]  # create() ran, with no message to walk
    request = server.requests[0]
    assert request["messages"] == conversation and request["top_k"] == 3 and request["model"] == "scripted-teacher"
