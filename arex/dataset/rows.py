"""Training rows of one trajectory, for `arex export` (the schemas are in `arex.dataset.schema`).

- `rounds`: one row per round, the round's last request (context, commands and observations, the
  reflect prompt) and the reflection; `weights` one per message.
- `trajectories`: one row per trajectory, the rounds joined (the system prompt once).
- `calls`: one prompt/completion row per usable teacher call: `prompt` is the exact messages the
  call saw, `completion` its reply. TRL trains it with completion-only loss and no glue.
  Unusable replies (unparseable, empty, truncated) are left out and counted.
- token rows (`tokens/<granularity>/`, with `export.tokenizer`): the same rows as `input_ids`,
  `labels` (-100 where no loss) and per-token `weights`, cut to `export.max_length`.

Weights: an acting turn `action_weight`, a reflection `reflection_weight`, an unusable reply
`invalid_weight`, everything else 0. A turn keeps its own weight wherever it is the turn being
trained: in `rounds` rows under full history, the earlier rounds in the context carry 0 (they are
trained in their own rounds' rows, once each), and in `trajectories` rows each turn keeps the
weight of the round it came from.

With `merge_consecutive` (the default), consecutive turns of one role and weight are joined with a
blank line: a round that ends on a step limit or on format errors has its last observation and the
reflect prompt as two user turns in a row, which strict templates (gemma3, cohere) refuse.

`tools` action format: assistant turns keep their `tool_calls` (as sent back to the teacher, the
arguments JSON text), each tool result is a `tool` message with its `tool_call_id`, and every row
has a `tools` column (the tool definitions, JSON text). Turns with tool calls and tool results are
never merged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from arex.dataset.config import ExportConfig
from arex.dataset.masks import Encoded, Segment
from arex.record.trajectory import Round, Trajectory


def _plain(message: dict) -> bool:
    """A turn that is text alone (no tool calls, not a tool result), which may be joined to another."""
    return message["role"] != "tool" and not message.get("tool_calls")


def merge_turns(messages: list[dict], weights: list[float]) -> tuple[list[dict], list[float], list[int]]:
    """Consecutive text turns of one role and weight joined by a blank line; and, per input
    message, the index of the turn it went into. Tool calls and tool results stay as they are."""
    out, out_weights, where = [], [], []
    for message, weight in zip(messages, weights):
        if (
            out
            and out[-1]["role"] == message["role"]
            and out_weights[-1] == weight
            and _plain(out[-1])
            and _plain(message)
        ):
            out[-1] = {"role": message["role"], "content": out[-1]["content"] + "\n\n" + message["content"]}
        else:
            out.append(dict(message))
            out_weights.append(weight)
        where.append(len(out) - 1)
    return out, out_weights, where


@dataclass
class Built:
    """One trajectory's rows by granularity, and what token rows need to cut trajectory rows."""

    rows: dict[str, list[dict]]
    segments: list[Segment] = field(default_factory=list)
    """Where each round begins in the trajectory row's messages."""
    skipped_calls: int = 0
    """Unusable replies left out of the calls rows."""
    scores: dict[int, tuple] = field(default_factory=dict)
    """Round number → (public, held-out) score."""


class RowBuilder:
    """Turns one loaded trajectory into rows of every granularity."""

    def __init__(self, config: ExportConfig):
        self.config = config

    def _merged(self, messages: list[dict], weights: list[float]) -> tuple[list[dict], list[float], list[int]]:
        if self.config.merge_consecutive:
            return merge_turns(messages, weights)
        return messages, weights, list(range(len(messages)))

    def _round_messages(self, round_: Round) -> tuple[list[dict], list[float]]:
        """The round's last request (context, steps, reflect prompt) and the reflection reply,
        unmerged. The context carries no loss (see the module docstring)."""
        c = self.config
        messages = round_.messages(None)
        weights = [0.0] * len(messages)
        position = len(round_.start.context)
        for step in round_.steps:
            weights[position] = c.action_weight if step.usable else c.invalid_weight
            position += len(step.turns())  # the reply, then its tool results and/or observation
        reflection = round_.end.reflection.call
        messages.append({"role": "assistant", "content": reflection.content})
        weights.append(c.reflection_weight if reflection.status == "ok" else c.invalid_weight)
        return messages, weights

    def _meta(self, t: Trajectory) -> dict:
        header, held = t.header, t.held_out
        return {
            "trajectory_id": header.key,
            "env_id": header.env_id,
            "env_kind": header.env_kind,
            "domain": header.domain or header.env_kind,
            "rounds": len(held),
            "first_held_out": held[0],
            "best_held_out": max(held),
            "final_held_out": held[-1],
            "baseline_score": header.baseline_score,
            "improvement": max(held) - held[0],
            "teacher": header.teacher.model,
            "config_hash": header.config_hash,
            "arex_version": header.arex_version,
            # `tools` format: the tool definitions, as JSON text (what TRL's trainers take as `tools`)
            **({"tools": json.dumps(header.tools, ensure_ascii=False)} if header.tools else {}),
        }

    def _calls(self, round_: Round, meta: dict) -> tuple[list[dict], int]:
        """One row per usable call of the round: its exact request and its reply."""
        c, grade = self.config, round_.end.grade
        scores = {"round": round_.number, "public_score": grade.public_score, "held_out_score": grade.held_out_score}
        rows, skipped = [], 0
        replies = [(i, step.call.turn(), step.usable, "action", c.action_weight) for i, step in enumerate(round_.steps)]
        reflection = round_.end.reflection.call
        replies.append(
            (
                None,
                {"role": "assistant", "content": reflection.content},
                reflection.status == "ok",
                "reflection",
                c.reflection_weight,
            )
        )
        for index, reply, usable, kind, weight in replies:
            if not usable:
                skipped += 1
                continue
            prompt = round_.messages(index)
            prompt = self._merged(prompt, [0.0] * len(prompt))[0]
            completion = [reply]
            rows.append(
                {
                    "prompt": prompt,
                    "completion": completion,
                    "weight": weight,
                    "kind": kind,
                    **meta,
                    **scores,
                    "step": index,
                }
            )
        return rows, skipped

    def rows(self, t: Trajectory) -> Built:
        meta = self._meta(t)
        wanted = set(self.config.granularities)
        built = Built({g: [] for g in self.config.granularities})
        joined: list[dict] = []
        joined_weights: list[float] = []
        starts: list[tuple[int, int, bool]] = []  # (index in joined, round, holds its own context)
        for round_ in t.rounds:
            messages, weights = self._round_messages(round_)
            grade = round_.end.grade
            built.scores[round_.number] = (grade.public_score, grade.held_out_score)
            if "rounds" in wanted:
                merged, merged_weights, _ = self._merged(messages, weights)
                built.rows["rounds"].append(
                    {
                        "messages": merged,
                        "weights": merged_weights,
                        **meta,
                        "round": round_.number,
                        "public_score": grade.public_score,
                        "held_out_score": grade.held_out_score,
                    }
                )
            if "calls" in wanted:
                calls, skipped = self._calls(round_, meta)
                built.rows["calls"] += calls
                built.skipped_calls += skipped
            if messages[: len(joined)] == joined:  # full-history: the round repeats what came before
                start, alone = len(joined), not joined
            else:  # bounded: a fresh context; the system prompt is said once
                start = 1 if joined and messages and messages[0]["role"] == "system" and messages[0] == joined[0] else 0
                alone = True
            starts.append((len(joined), round_.number, alone))
            joined += messages[start:]
            joined_weights += weights[start:]
        if "trajectories" in wanted:
            final = t.rounds[-1].end.grade
            merged, merged_weights, where = self._merged(joined, joined_weights)
            built.rows["trajectories"].append(
                {
                    "messages": merged,
                    "weights": merged_weights,
                    **meta,
                    "round": None,
                    "public_score": final.public_score,
                    "held_out_score": final.held_out_score,
                }
            )
            built.segments = [
                Segment(where[i] if i < len(where) else len(merged), number, alone) for i, number, alone in starts
            ]
        return built


def tools_of(row: dict) -> list[dict] | None:
    """A row's tool definitions (its `tools` column, JSON text), or None."""
    tools = row.get("tools")
    return json.loads(tools) if isinstance(tools, str) else tools


def conversation(granularity: str, row: dict) -> tuple[list[dict], list[float]]:
    """A row as one conversation with a weight per message (a calls row: prompt, then reply)."""
    if granularity == "calls":
        return row["prompt"] + row["completion"], [0.0] * len(row["prompt"]) + [row["weight"]]
    return row["messages"], row["weights"]


def token_row(
    granularity: str, row: dict, encoded: Encoded, part: tuple[Segment, Segment] | None, scores: dict[int, tuple]
) -> dict:
    """A token row: the source row's metadata, the rounds it covers (a trajectory part takes its
    last round's scores), and its tokens."""
    keep = {
        k: v
        for k, v in row.items()
        if k not in ("messages", "weights", "prompt", "completion", "weight", "kind", "tools")
    }
    keep.setdefault("step", None)
    if granularity == "trajectories" and part is not None:
        keep["first_round"], keep["last_round"] = part[0].round, part[1].round
        keep["public_score"], keep["held_out_score"] = scores[part[1].round]
    else:
        keep["first_round"] = keep["last_round"] = row["round"]
    return {"input_ids": encoded.input_ids, "labels": encoded.labels, "weights": encoded.weights, **keep}
