"""Export settings (no export code: the config loads without pyarrow)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

GRANULARITIES = ("rounds", "trajectories")
MARKER = ".arex-export"
"""The file arex writes into every export folder (JSON: format, arex version, the files it wrote).
Only a folder carrying it is replaced by a later `arex export`; `arex push` uploads it too."""
MARKER_FORMAT = 1


class ExportConfig(BaseModel):
    """How kept trajectories become training rows."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    granularities: tuple[Literal["rounds", "trajectories"], ...] = GRANULARITIES
    """Which row sets to write: rounds (one row per round), trajectories (one per trajectory)."""
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
    dedupe: bool = True
    """Write near-duplicate trajectories (same assistant turns) once."""
    compression: str = "zstd"
    """Parquet compression codec."""
    license: str = "apache-2.0"
    """License named in the dataset card."""
    pretty_name: str = "arex self-improvement trajectories"
    """Title of the dataset card."""
