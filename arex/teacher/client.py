"""The teacher client: any OpenAI-compatible chat endpoint, with retries, limits and accounting.

Transient failures (429, 5xx, timeouts, broken connections, malformed bodies, a 200 whose body is
no chat completion, empty or truncated replies) are retried with jittered exponential backoff that
honours Retry-After, until `max_wait_s` has passed since the first attempt (and within
`max_attempts`, if set). Failures retrying cannot fix (authentication, context length, model not
found, other bad requests) abort at once. Every attempt's tokens are counted, those of a call that
then failed too (`TeacherError.attempts`): a retried response was still paid for. A reply from
another model than the configured one is recorded as such (`Reply.model`) and warned about once.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import re
import time
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletion
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_random_exponential,
)

from arex.errors import ArexError
from arex.specs import Attempt, TeacherCall, TeacherIdentity, Usage
from arex.teacher.cache import marked
from arex.teacher.config import LOCAL_MODEL, LocalServerConfig, Price, TeacherConfig  # noqa: F401 (re-exported)


class Reply(TeacherCall):
    """A TeacherCall with the reply's tool calls, when the request offered tools."""

    tool_calls: list[dict[str, Any]] | None = None
    """OpenAI format: `{id, type, function: {name, arguments}}`, `arguments` the JSON text as sent."""


def _tool_calls(message) -> list[dict[str, Any]] | None:
    """The message's tool calls as plain dicts (a field the server left out is empty, never an error)."""
    calls = getattr(message, "tool_calls", None) if message is not None else None
    if not calls:
        return None
    out = []
    for call in calls:
        function = getattr(call, "function", None)
        arguments = getattr(function, "arguments", None)
        if arguments is not None and not isinstance(arguments, str):  # a server that sent an object
            arguments = json.dumps(arguments, ensure_ascii=False)
        name = getattr(function, "name", None)
        function = {"name": name if isinstance(name, str) else "", "arguments": arguments or ""}
        out.append(
            {
                "id": getattr(call, "id", None) or "",
                "type": getattr(call, "type", None) or "function",
                "function": function,
            }
        )
    return out


class TeacherError(ArexError, RuntimeError):
    """A call that cannot succeed. `kind` says which: auth, context_length, model_not_found,
    bad_request (all abort at once) or unreachable (retries exhausted: an infrastructure failure)."""

    exit_code = 5

    def __init__(self, kind: str, message: str, attempts: list[Attempt] | None = None):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts or []


log = logging.getLogger("arex")
_SNAPSHOT = r"-(\d{4}-\d{2}-\d{2}|\d{4}|\d{8})"
"""How a dated snapshot's name extends its model's (gpt-4o-2024-08-06, gpt-4-0613, claude-...-20241022)."""


class _Malformed(Exception):
    """A 200 reply whose body is JSON but no chat completion (an array, a string, a field of the wrong
    shape): retried like a body that is not JSON."""


class _BadReply(Exception):
    """A reply that arrived but is unusable (empty, truncated): retried like a fault."""

    def __init__(self, call: Reply):
        super().__init__(call.status)
        self.call = call


_RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIConnectionError,  # includes APITimeoutError
    openai.APIResponseValidationError,
    json.JSONDecodeError,
    _Malformed,
    _BadReply,
)
_limits: dict[tuple[str, int], asyncio.Semaphore] = {}


def _endpoint_limit(base_url: str, concurrency: int) -> asyncio.Semaphore:
    """One semaphore per endpoint per event loop, shared by every client in the process."""
    key = (base_url, id(asyncio.get_running_loop()))
    if key not in _limits:
        _limits[key] = asyncio.Semaphore(concurrency)
    return _limits[key]


class Limiter(Protocol):
    """Where the permits of teacher.concurrency live when they are shared beyond one process
    (e.g. a Ray actor for a cluster: arex.rollout.ray_executor). `slot()` is held for one attempt."""

    def slot(self) -> AbstractAsyncContextManager: ...


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    if headers.get("retry-after-ms"):
        try:
            return float(headers["retry-after-ms"]) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _shape(body: Any) -> str:
    """What a 200 reply's body was, for the attempt's error."""
    if isinstance(body, ChatCompletion):
        return "a JSON object that is no chat completion"
    names = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return f"the body is {names.get(type(body), 'null' if body is None else type(body).__name__)}, not an object"


REFUSED_KEY = "The teacher endpoint refused the API key"
NO_SUCH_MODEL = "The teacher endpoint does not serve this model"
FIXABLE = (REFUSED_KEY, NO_SUCH_MODEL)
"""How the messages of the aborts the user fixes in the configuration begin (401/403, 404): a rollout
one of them ended is redone by a re-run (arex.rollout.endings.redone), as an unreachable teacher's."""


def _classify(exc: BaseException) -> TeacherError:
    text = str(exc)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return TeacherError(
            "auth", f"{REFUSED_KEY} ({text}). Set teacher.api_key or the variable in teacher.api_key_env."
        )
    if isinstance(exc, openai.NotFoundError):
        return TeacherError("model_not_found", f"{NO_SUCH_MODEL} ({text}). Check teacher.model and teacher.base_url.")
    if isinstance(exc, openai.BadRequestError):
        code = (getattr(exc, "code", None) or "").lower()
        lowered = text.lower()
        if "context_length" in code or (
            "context" in lowered and any(w in lowered for w in ("length", "window", "maximum", "too long"))
        ):
            return TeacherError(
                "context_length",
                (
                    f"The prompt exceeds the teacher's context window ({text}). "
                    "Shorten the context or use a longer-context model."
                ),
            )
        return TeacherError("bad_request", f"The teacher rejected the request ({text}).")
    return TeacherError("bad_request", f"The teacher failed with a non-retryable error: {type(exc).__name__}: {text}")


class TeacherClient:
    """Async chat client for one OpenAI-compatible endpoint."""

    def __init__(self, config: TeacherConfig, base_url: str | None = None, limiter: Limiter | None = None):
        self.config = config
        self.limiter = limiter  # None: the per-process semaphore of the endpoint (_endpoint_limit)
        self.base_url = (base_url or config.base_url or "").rstrip("/")
        if not self.base_url:
            raise TeacherError(
                "bad_request", "No teacher endpoint: set teacher.base_url, or let the pipeline start the local teacher."
            )
        api_key = config.api_key or os.environ.get(config.api_key_env) or "not-needed"
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key, timeout=config.timeout_s, max_retries=0
        )
        self.usage = Usage()
        self.others: set[str] = set()
        """Models other than the configured one that served replies (each warned about once)."""
        self.price = config.prices.get(config.model) if config.track_cost else None

    def sampling(self, **overrides: Any) -> dict[str, Any]:
        cfg = self.config
        params = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_tokens": cfg.max_tokens}
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        if cfg.stop:
            params["stop"] = list(cfg.stop)
        params.update(overrides)
        return params

    def cost(self, prompt: int, cached: int, completion: int) -> float:
        if self.price is None:
            return 0.0
        cached_price = self.price.cached_input if self.price.cached_input is not None else self.price.input
        return ((prompt - cached) * self.price.input + cached * cached_price + completion * self.price.output) / 1e6

    async def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **overrides: Any
    ) -> Reply:
        """One call with retries, offering `tools` (OpenAI tool definitions) if given. Returns a
        Reply (status ok, empty or truncated); raises TeacherError."""
        cfg = self.config
        sampling = self.sampling(**overrides)
        attempts: list[Attempt] = []
        started = time.monotonic()
        capped = stop_after_attempt(cfg.max_attempts) if cfg.max_attempts else stop_never
        retrying = AsyncRetrying(
            stop=stop_after_delay(cfg.max_wait_s) | capped,
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _RETRYABLE)),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    call = await self._attempt(messages, sampling, attempts, tools)
        except _BadReply as bad:
            call = bad.call  # retries ran out: keep the last reply, marked empty/truncated
        except _RETRYABLE as exc:
            self._account(attempts, final=None)
            raise TeacherError(
                "unreachable",
                f"The teacher at {self.base_url} failed {len(attempts)} time(s) in {time.monotonic() - started:.0f}s; "
                f"last error: {type(exc).__name__}: {exc}",
                attempts,
            ) from None
        except openai.OpenAIError as exc:
            self._account(attempts, final=None)
            error = _classify(exc)
            error.attempts = attempts  # the replies paid for before it (empty, truncated, malformed)
            raise error from None
        call.attempts = attempts
        call.retries = len(attempts) - 1
        call.latency_s = round(time.monotonic() - started, 4)
        self._account(attempts, final=call)
        return call

    def _account(self, attempts: list[Attempt], final: Reply | None) -> None:
        prompt = sum(a.prompt_tokens for a in attempts)
        cached = sum(a.cached_tokens for a in attempts)
        completion = sum(a.completion_tokens for a in attempts)
        cost = self.cost(prompt, cached, completion)
        if final is not None:
            final.prompt_tokens, final.cached_tokens = prompt, cached
            final.completion_tokens, final.cost_usd = completion, cost
        u = self.usage
        u.calls += 1
        u.retries += max(0, len(attempts) - 1)
        u.prompt_tokens += prompt
        u.cached_tokens += cached
        u.completion_tokens += completion
        u.cost_usd += cost

    def _wait(self, retry_state) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hinted = _retry_after(exc) if exc is not None else None
        if hinted is None:
            wait = wait_random_exponential(multiplier=self.config.backoff_base_s, max=self.config.backoff_max_s)
            hinted = wait(retry_state)
        # No longer than the wait budget has left: the last attempt starts when it is used up, not before.
        left = self.config.max_wait_s - (retry_state.seconds_since_start or 0.0)
        return max(0.0, min(hinted, self.config.backoff_max_s, left))

    async def _attempt(self, messages, sampling, attempts: list[Attempt], tools=None) -> Reply:
        record = Attempt()
        attempts.append(record)
        t0 = time.monotonic()
        try:
            async with (
                self.limiter.slot()
                if self.limiter is not None
                else _endpoint_limit(self.base_url, self.config.concurrency)
            ):
                # The messages ride in extra_body (sent as they are, taking precedence over `messages`): create()
                # walks each of them against the SDK's TypedDicts on every call, O(context) CPU (~25 ms at 90
                # messages, most of a step's host CPU), for JSON that is plain already (bench/agent_overhead.py).
                response = await self._client.chat.completions.create(
                    model=self.config.model,
                    messages=[],
                    extra_body={**(self.config.extra_body or {}), "messages": self._wire(messages)},
                    **({"tools": tools} if tools else {}),
                    **sampling,
                )
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"[:500]
            record.latency_s = round(time.monotonic() - t0, 4)
            raise
        record.latency_s = round(time.monotonic() - t0, 4)
        try:
            return self._reply(response, record, messages, sampling)
        except (AttributeError, TypeError, IndexError, ValueError) as exc:  # where a chat completion has its fields
            record.error = f"malformed reply: {_shape(response)}: {type(exc).__name__}: {exc}"[:500]
            raise _Malformed(record.error) from None

    def _reply(self, response: Any, record: Attempt, messages, sampling) -> Reply:
        """The Reply of a 200 `response`; AttributeError, TypeError, IndexError or ValueError if its body
        has not the shape of a chat completion (its usage, once read, stays on `record`: it was paid for)."""
        if not isinstance(response, ChatCompletion):
            raise TypeError("not a JSON object")
        usage = response.usage
        if usage is not None:
            record.prompt_tokens = usage.prompt_tokens or 0
            record.completion_tokens = usage.completion_tokens or 0
            details = getattr(usage, "prompt_tokens_details", None)
            record.cached_tokens = (getattr(details, "cached_tokens", None) or 0) if details else 0
        counts = (record.prompt_tokens, record.completion_tokens, record.cached_tokens)
        if not all(type(n) is int and n >= 0 for n in counts):  # noqa: E721 - a bool is no count
            record.prompt_tokens = record.completion_tokens = record.cached_tokens = 0
            raise TypeError(f"the token counts {counts} are not counts")
        choice = response.choices[0] if response.choices else None
        message = choice.message if choice else None
        content = (message.content if message else None) or ""
        if not isinstance(content, str):
            raise TypeError(f"content is a {type(content).__name__}")
        reasoning = None
        if message is not None:
            reasoning = getattr(message, "reasoning_content", None)
            reasoning = reasoning or (message.model_extra or {}).get("reasoning_content")
        finish = choice.finish_reason if choice else None
        tool_calls = _tool_calls(message)
        acted = bool(tool_calls) and sampling.get("tool_choice") != "none"  # a call it was told not to make is no reply
        status = "truncated" if finish == "length" else ("empty" if not content.strip() and not acted else "ok")
        record.status = status
        call = Reply(
            messages=messages,
            sampling=sampling,
            content=content,
            tool_calls=tool_calls,
            reasoning_content=reasoning,
            finish_reason=finish,
            status=status,
            model=self._served(response.model),
            system_fingerprint=getattr(response, "system_fingerprint", None),
        )
        if (status == "empty" and self.config.retry_empty) or (status == "truncated" and self.config.retry_truncated):
            record.error = f"{status} reply"
            raise _BadReply(call)
        return call

    def _served(self, model: Any) -> str:
        """The model that served a reply (the configured one if the server does not say); another
        one than configured is warned about, once per client and model."""
        asked = self.config.model
        if not isinstance(model, str) or not model:
            return asked
        if model != asked and not re.fullmatch(re.escape(asked) + _SNAPSHOT, model) and model not in self.others:
            self.others.add(model)
            log.warning(
                f"the teacher at {self.base_url} answered as model '{model}', not the configured '{asked}'; "
                "each call's record names the model that served it. Check teacher.model and teacher.base_url"
            )
        return model

    def _wire(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as sent: with prompt-cache breakpoints when teacher.cache_breakpoints is on."""
        return marked(messages) if self.config.cache_breakpoints else messages

    async def identity(self) -> TeacherIdentity:
        """The endpoint, the model asked for, and what the server reports about itself."""
        try:
            listing = await self._client.models.list()
            models = [m.model_dump() for m in listing.data]
        except openai.OpenAIError as exc:
            models = [{"error": f"{type(exc).__name__}: {exc}"[:300]}]
        return TeacherIdentity(
            base_url=self.base_url,
            model=self.config.model,
            server_models=models,
            client=f"openai-python {openai.__version__}",
        )

    async def close(self) -> None:
        await self._client.close()
