"""Teacher settings (no client code: the config loads without importing the OpenAI SDK)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

LOCAL_MODEL = "smollm2-135m-instruct"


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    input: float
    """Uncached prompt tokens."""
    output: float
    """Completion tokens."""
    cached_input: float | None = None
    """Prompt tokens the server reports as served from its prompt cache (`cached_tokens` of the usage).
    Unset: they are priced at `input`, which overstates the cost of a provider that bills them lower."""


class LocalServerConfig(BaseModel):
    """The bundled local teacher (llama-cpp-python serving SmolLM2-135M-Instruct)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    port: int = 0
    """Port on 127.0.0.1; 0 picks a free one."""
    n_ctx: int = 8192
    """Context window in tokens."""
    n_threads: int = 2
    """CPU threads for generation."""
    startup_timeout_s: float = 180.0
    """How long to wait for the server to answer before giving up."""


class TeacherConfig(BaseModel):
    """Which model generates trajectories, how to sample it, and how to treat its failures."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. Unset: arex starts the local teacher."""
    model: str = LOCAL_MODEL
    """Model name sent with each request."""
    api_key: str | None = None
    """API key; unset reads the variable named by api_key_env."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key when api_key is unset."""
    temperature: float = 0.7
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_tokens: int = 1024
    """Completion length cap per call; hitting it is a 'truncated' reply."""
    seed: int | None = None
    """Sampling seed, where the server supports one."""
    stop: list[str] | None = None
    """Stop sequences."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra request fields for servers that take them (e.g. vLLM's top_k)."""
    timeout_s: float = 300.0
    """Per-attempt HTTP timeout."""
    concurrency: int = 8
    """Calls in flight at once per endpoint, shared by every rollout in this process."""
    max_attempts: int | None = Field(default=None, ge=1)
    """Attempts per call, first one included; unset: as many as `max_wait_s` leaves room for."""
    max_wait_s: float = Field(default=600.0, ge=0)
    """How long a call retries: no retry starts once this long has passed since its first attempt (each
    wait is cut to what is left), then it is declared unreachable. An attempt itself may take up to timeout_s."""
    backoff_base_s: float = 1.0
    """First backoff step; later steps grow exponentially, with full jitter."""
    backoff_max_s: float = 60.0
    """Longest single wait (Retry-After included)."""
    retry_empty: bool = True
    """Retry replies with no content; if retries run out the call is recorded as 'empty'."""
    retry_truncated: bool = True
    """Retry replies cut at max_tokens; if retries run out the call is recorded as 'truncated'."""
    cache_breakpoints: bool = False
    """Mark prompt-cache breakpoints (`cache_control` on the system prompt and the last message) for
    endpoints and gateways that cache only where a request marks it (Anthropic-style APIs). Off: requests
    carry no marks (vLLM, SGLang and OpenAI cache prefixes without them)."""
    track_cost: bool = True
    """Compute cost from `prices`. An unknown price is an error unless this is off."""
    prices: dict[str, Price] = Field(
        default_factory=lambda: {LOCAL_MODEL: Price(input=0.0, cached_input=0.0, output=0.0)}
    )
    """Price per model name, USD per million tokens: input, cached_input (prompt tokens served from the
    server's prompt cache; unset: the input price) and output."""
    local: LocalServerConfig = Field(default_factory=LocalServerConfig)
    """Settings for the bundled local teacher."""

    @model_validator(mode="after")
    def _known_price(self) -> "TeacherConfig":
        if self.track_cost and self.model not in self.prices:
            raise ValueError(
                f"no price for model '{self.model}': add teacher.prices.{self.model} "
                "(input, output, cached_input in USD per million tokens) or set teacher.track_cost=false"
            )
        return self
