"""Export settings (no export code: the config loads without pyarrow)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

GRANULARITIES = ("rounds", "trajectories", "calls")
"""Every row set export can write; `calls` is opt-in (it repeats each call's context)."""
DEFAULT_GRANULARITIES = ("rounds", "trajectories")
TOKENS_DIR = "tokens"
"""Pre-tokenized rows go to `tokens/<granularity>/`, Hub config `<granularity>-tokens`."""


def config_folder(config_name: str) -> str:
    """The folder of a Hub config: `rounds` → `rounds`, `rounds-tokens` → `tokens/rounds`."""
    if config_name.endswith("-tokens"):
        return f"{TOKENS_DIR}/{config_name[: -len('-tokens')]}"
    return config_name


MARKER = ".arex-export"
"""The file arex writes into every export folder (JSON: format, arex version, the files it wrote).
Only a folder carrying it is replaced by a later `arex export`; `arex push` leaves it out (it guards
the local folder and means nothing on the Hub)."""
MARKER_FORMAT = 1


class ExportConfig(BaseModel):
    """How kept trajectories become training rows."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    granularities: tuple[Literal["rounds", "trajectories", "calls"], ...] = DEFAULT_GRANULARITIES
    """Which row sets to write: rounds (one row per round), trajectories (one per trajectory),
    calls (one prompt/completion row per usable teacher call: TRL's completion-only loss, no glue)."""
    shard_mb: float = 256.0
    """Target size of one parquet file (a shard is closed once it reaches this)."""
    batch_rows: int = 64
    """Rows buffered before they are written as one parquet row group."""
    action_weight: float = 1.0
    """Training weight of an assistant turn that acts (a command or `submit`)."""
    reflection_weight: float = 1.0
    """Training weight of the assistant's reflection at the end of a round (raise to stress it)."""
    invalid_weight: float = 0.0
    """Weight of assistant turns that could not be used (unparseable, empty or truncated replies)."""
    merge_consecutive: bool = True
    """Join consecutive turns of the same role into one (the last observation and the reflect prompt
    are two user turns in a row, which templates such as gemma3's and cohere's reject)."""
    tokenizer: str | None = None
    """A local tokenizer folder or `.gguf` file (never downloaded): also write pre-tokenized rows
    (`input_ids`, `labels`, per-token `weights`) under `tokens/`, and token lengths in the card."""
    chat_template: str | None = None
    """With `tokenizer`: render rows under this chat template instead of the tokenizer's own: the
    name of a template TRL ships (`qwen2_5` is tool-aware and fits the bundled SmolLM2's tokens) or a
    `.jinja` file. Tool-call rows need a template that prints `tool_calls`."""
    max_length: int | None = Field(default=None, gt=0)
    """With `tokenizer`: the longest pre-tokenized row; longer trajectories are split at round
    boundaries, longer rounds and calls are dropped (both counted in the card); a calls row whose
    token row is left out is left out of `calls/` too, so TRL never cuts a reply mid-way."""
    dedupe: bool = True
    """Write near-duplicate trajectories (same assistant turns) once."""
    compression: str = "zstd"
    """Parquet compression codec."""
    license: str = "apache-2.0"
    """License named in the dataset card."""
    pretty_name: str = "arex self-improvement trajectories"
    """Title of the dataset card."""

    @model_validator(mode="after")
    def _length_needs_a_tokenizer(self) -> "ExportConfig":
        if self.chat_template is not None and self.tokenizer is None:
            raise ValueError("chat_template applies to export.tokenizer's rows, so it needs export.tokenizer")
        if self.max_length is not None and self.tokenizer is None:
            raise ValueError(
                "max_length counts tokens, so it needs export.tokenizer (a local tokenizer folder or .gguf file)"
            )
        return self
