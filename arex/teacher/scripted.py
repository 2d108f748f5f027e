"""A scripted, deterministic OpenAI-compatible server on loopback, for tests and benchmarks.

It answers /v1/chat/completions from a script (a list of replies consumed in order, or a function
of the request) with configurable latency and injectable faults, and keeps its own counts (tokens
reported, requests, peak concurrency) so the real client can be checked against them. A reply may
carry tool calls (`Reply(tool_calls=(tool_call("bash", {"command": "ls"}),))`), sent as OpenAI's
`tool_calls` with `finish_reason: tool_calls`; `RoundScript` acts through tool calls whenever the
request offers tools.

    with ScriptedServer(["hello", Fault.rate_limit(retry_after=1), "again"]) as server:
        client = TeacherClient(config, base_url=server.base_url)
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence, Union

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str | None) -> int:
    """The server's tokenizer: words and punctuation marks. Deterministic, cheap."""
    return len(_TOKEN.findall(text or ""))


@dataclass(frozen=True)
class Reply:
    content: str = ""
    reasoning: str | None = None
    finish_reason: str = "stop"
    latency_s: float | None = None
    """Overrides the server's latency for this reply."""
    tool_calls: tuple[dict, ...] | None = None
    """OpenAI tool calls (see `tool_call`); a call without an id gets one from the server."""


def tool_call(name: str, arguments: dict | str, id: str | None = None) -> dict:
    """One tool call of a scripted reply; `arguments` as a dict, or as raw (maybe malformed) text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": text}}


@dataclass(frozen=True)
class Fault:
    """A failure the server produces instead of a reply."""

    kind: str
    retry_after: float | None = None
    delay_s: float = 0.0
    body: str = ""
    """The raw body of a `not_object` reply."""

    @staticmethod
    def rate_limit(retry_after: float | None = 1.0) -> "Fault":
        return Fault("rate_limit", retry_after=retry_after)

    @staticmethod
    def server_error() -> "Fault":
        return Fault("server_error")

    @staticmethod
    def timeout(delay_s: float = 5.0) -> "Fault":
        """Stall longer than the client's timeout, then answer nothing useful."""
        return Fault("timeout", delay_s=delay_s)

    @staticmethod
    def malformed_json() -> "Fault":
        return Fault("malformed_json")

    @staticmethod
    def not_object(body: str = "[]") -> "Fault":
        """A 200 reply whose body is JSON but not an object: an array, a string, a number."""
        return Fault("not_object", body=body)

    @staticmethod
    def empty() -> "Fault":
        return Fault("empty")

    @staticmethod
    def truncated() -> "Fault":
        return Fault("truncated")

    @staticmethod
    def auth() -> "Fault":
        return Fault("auth")

    @staticmethod
    def forbidden() -> "Fault":
        return Fault("forbidden")

    @staticmethod
    def context_length() -> "Fault":
        return Fault("context_length")

    @staticmethod
    def model_not_found() -> "Fault":
        return Fault("model_not_found")


Item = Union[str, Reply, Fault]
Script = Union[Sequence[Item], Callable[[dict, int], Item]]

_ERRORS = {
    "rate_limit": (429, "rate_limit_exceeded", "Rate limit reached, slow down."),
    "server_error": (500, "server_error", "The server had an error while processing your request."),
    "auth": (401, "invalid_api_key", "Incorrect API key provided."),
    "forbidden": (403, "permission_denied", "This key may not use this model."),
    "context_length": (
        400,
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens; your messages resulted in 9001 tokens.",
    ),
    "model_not_found": (404, "model_not_found", "The model does not exist or you do not have access to it."),
}


class ScriptedServer:
    def __init__(
        self, script: Script, model: str = "scripted-teacher", latency_s: float = 0.0, host: str = "127.0.0.1"
    ):
        self.script = script
        self.model = model
        self.latency_s = latency_s
        self.requests: list[dict[str, Any]] = []
        self.stats = {
            "requests": 0,
            "replies": 0,
            "in_flight": 0,
            "max_in_flight": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
        }
        self._lock = threading.Lock()
        self._previous_messages: list[dict] = []
        self._httpd = ThreadingHTTPServer((host, 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- behaviour --------------------------------------------------------------------------
    def _next_item(self, request: dict) -> Item:
        with self._lock:
            index = self.stats["requests"]
            self.stats["requests"] += 1
            self.requests.append(request)
        if callable(self.script):
            return self.script(request, index)
        if index >= len(self.script):
            return Fault("exhausted")
        return self.script[index]

    def _prompt_usage(self, messages: list[dict]) -> tuple[int, int]:
        per_message = [
            count_tokens(_text(m.get("content")))
            + count_tokens(json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")
            + 4
            for m in messages
        ]
        plain = [_plain(m) for m in messages]  # a cache matches content: prompt-cache marks are no part of it
        with self._lock:
            shared = 0
            for ours, theirs in zip(plain, self._previous_messages):
                if ours != theirs:
                    break
                shared += 1
            self._previous_messages = plain
        return sum(per_message), sum(per_message[:shared])

    def _completion(self, request: dict, reply: Reply) -> dict:
        prompt, cached = self._prompt_usage(request.get("messages", []))
        calls = [dict(call) for call in reply.tool_calls or ()]
        completion = (
            count_tokens(reply.content)
            + count_tokens(reply.reasoning)
            + count_tokens(json.dumps(calls) if calls else "")
        )
        with self._lock:
            self.stats["replies"] += 1
            self.stats["prompt_tokens"] += prompt
            self.stats["completion_tokens"] += completion
            self.stats["cached_tokens"] += cached
            number = self.stats["replies"]
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or (None if calls else "")}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        finish = reply.finish_reason
        if calls:
            message["tool_calls"] = [
                {**call, "id": call.get("id") or f"call_{number}_{k}"} for k, call in enumerate(calls)
            ]
            finish = "tool_calls" if finish == "stop" else finish
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": "fp_scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"scripted": self})


class _Handler(BaseHTTPRequestHandler):
    """Serves one ScriptedServer (`scripted`, set on a subclass per server)."""

    scripted: ScriptedServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms ACK stall

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout fault)

    def _error(self, status: int, code: str, message: str, headers=None) -> None:
        body = {"error": {"message": message, "type": code, "code": code, "param": None}}
        self._send(status, json.dumps(body).encode(), headers)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            listing = {
                "object": "list",
                "data": [{"id": self.scripted.model, "object": "model", "created": 0, "owned_by": "arex-scripted"}],
            }
            self._send(200, json.dumps(listing).encode())
        else:
            self._error(404, "not_found", f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        server = self.scripted
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, "not_found", f"no route {self.path}")
            return
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            self._error(400, "invalid_json", "request body is not JSON")
            return
        with server._lock:
            server.stats["in_flight"] += 1
            server.stats["max_in_flight"] = max(server.stats["max_in_flight"], server.stats["in_flight"])
        try:
            self._answer(request)
        finally:
            with server._lock:
                server.stats["in_flight"] -= 1

    def _answer(self, request: dict) -> None:
        server = self.scripted
        item = server._next_item(request)
        if isinstance(item, str):
            item = Reply(content=item)
        latency = item.latency_s if isinstance(item, Reply) and item.latency_s is not None else server.latency_s
        if latency:
            time.sleep(latency)
        if isinstance(item, Reply):
            self._send(200, json.dumps(server._completion(request, item)).encode())
        else:
            self._fault(request, item)

    def _fault(self, request: dict, fault: Fault) -> None:
        server = self.scripted
        if fault.kind == "exhausted":
            self._error(500, "script_exhausted", f"scripted server: the script has only {len(server.script)} replies")
        elif fault.kind in _ERRORS:
            status, code, message = _ERRORS[fault.kind]
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            self._error(status, code, message, headers)
        elif fault.kind == "timeout":
            time.sleep(fault.delay_s)
            self._error(504, "timeout", "scripted stall")
        elif fault.kind == "malformed_json":
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "message": {"role": "assist')
        elif fault.kind == "not_object":
            self._send(200, fault.body.encode())
        elif fault.kind == "empty":
            self._send(200, json.dumps(server._completion(request, Reply(content=""))).encode())
        elif fault.kind == "truncated":
            self._send(
                200,
                json.dumps(server._completion(request, Reply(content="I will first", finish_reason="length"))).encode(),
            )
        else:
            self._error(500, "unknown_fault", f"unknown fault kind {fault.kind!r}")


def _plain(message: dict) -> dict:
    """A message without prompt-cache marks: its content as text."""
    if not isinstance(message.get("content"), list):
        return message
    return {**message, "content": _text(message.get("content"))}


def _text(content: Any) -> str:
    """Message content as text (OpenAI allows a list of parts)."""
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


class RoundScript:
    """A scripted agent for the reflective loop: per round, some commands, then `submit`, then a
    reflection. Use as the `script` of a ScriptedServer.

    `commands(round_number)` gives the commands of a round (a command may also be a whole `Reply`
    or `Fault`, sent as it is). The round is read from the last "Round N of M" header in the
    request; the position inside the round from the assistant replies after it. When the request
    offers tools, commands go out as `bash` tool calls and `submit` as a `submit` call.
    """

    _ROUND = re.compile(r"Round (\d+) of \d+")

    def __init__(self, commands: Callable[[int], list[str]], reflection: Callable[[int], str] | None = None):
        self.commands = commands
        self.reflection = reflection or (
            lambda n: (
                f"REVIEW: round {n} graded.\nDIAGNOSE: see the feedback.\nPLAN: keep improving.\nSTATE: after round "
                f"{n}, keep the best solution in place."
            )
        )

    def __call__(self, request: dict, index: int) -> Item:
        messages = request.get("messages", [])
        header_at, number = 0, 1
        for i, message in enumerate(messages):
            if message.get("role") == "user":
                match = self._ROUND.search(_text(message.get("content")))
                if match and _text(message.get("content")).startswith("Round"):
                    header_at, number = i, int(match.group(1))
        last = _text(messages[-1].get("content")) if messages else ""
        if "Reflect, then write your state update" in last:
            return self.reflection(number)
        done = sum(1 for m in messages[header_at:] if m.get("role") == "assistant")
        commands = self.commands(number)
        tools = bool(request.get("tools"))
        if done < len(commands):
            command = commands[done]
            if not isinstance(command, str):
                return command
            return (
                Reply(tool_calls=(tool_call("bash", {"command": command}),))
                if tools
                else f"Next step.\n```bash\n{command}\n```"
            )
        return Reply(tool_calls=(tool_call("submit", {}),)) if tools else "Ready.\n```bash\nsubmit\n```"
