"""Statements: the samples written into the statement (`## Sample n`) and into the workspace
(`workspace/samples/<n>.in` / `.ans`), for formats whose statement leaves them out (Kattis)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SAMPLE_CHARS = 4000
"""A sample longer than this is cut in the statement (the workspace copy is whole)."""


@dataclass
class Sample:
    """One public sample: what the statement shows and what the workspace gets (None: nothing)."""

    shown_input: str | None = None
    shown_output: str | None = None
    interaction: str | None = None
    """A `.interaction` transcript (interactive problems): shown instead of input and output."""
    download_input: Path | bytes | None = None
    download_answer: Path | bytes | None = None


def _block(title: str, text: str, download: str | None) -> str:
    cut = len(text) > SAMPLE_CHARS
    body = text[:SAMPLE_CHARS] + ("\n…" if cut else "")
    fence = "```" if "```" not in body else "~~~~"
    note = f" (cut here; the whole file is `{download}`)" if cut and download else ""
    return f"{title}{note}:\n\n{fence}\n{body.rstrip(chr(10))}\n{fence}\n"


def sample_markdown(n: int, sample: Sample) -> str:
    parts = [f"## Sample {n}\n"]
    if sample.interaction is not None:
        parts.append(
            _block(
                "Interaction (lines starting with `<` come from the judge, `>` from your program)",
                sample.interaction,
                None,
            )
        )
    else:
        has_files = sample.download_input is not None
        parts.append(_block("Input", sample.shown_input or "", f"samples/{n}.in" if has_files else None))
        parts.append(_block("Output", sample.shown_output or "", f"samples/{n}.ans" if has_files else None))
    return "\n".join(parts)


def with_samples(statement: str, samples: list[Sample]) -> str:
    """The statement with its samples placed at `{{nextsample}}` / `{{remainingsamples}}` markers
    (Kattis statements may place them), the rest appended at the end."""
    blocks = [sample_markdown(n, s) for n, s in enumerate(samples, start=1)]
    queue = list(blocks)

    def place(m: re.Match) -> str:
        if m.group(1) == "nextsample":
            return queue.pop(0) if queue else ""
        rest, queue[:] = "\n".join(queue), []
        return rest

    text = re.sub(r"\{\{\s*(nextsample|remainingsamples)\s*\}\}", place, statement)
    if queue:
        text = text.rstrip("\n") + "\n\n" + "\n".join(queue)
    return text.rstrip("\n") + "\n"


def workspace_samples(samples: list[Sample]) -> dict[str, Path | bytes]:
    """`workspace/samples/<n>.in` and `.ans` for each sample with files to give (public data only)."""
    files: dict[str, Path | bytes] = {}
    for n, sample in enumerate(samples, start=1):
        if sample.download_input is not None and sample.download_answer is not None:
            files[f"workspace/samples/{n}.in"] = sample.download_input
            files[f"workspace/samples/{n}.ans"] = sample.download_answer
    return files
