"""The dataset card's Teacher cost section (issue 33): cached share of prompt tokens, output per round
split into acting replies and reflections, the reflection budget, cost per round and per kept
trajectory, checked against numbers computed here from the records' raw lines. No Docker.

The records are the version-1 fixture's (the scripted server reported cached prompt tokens), each
call's cost re-priced here as a priced teacher would have written it, one record given a `spent`
line and the reflection budget a newer arex records."""

import json
from pathlib import Path

from tokenizer_kit import RECORDS

from arex.dataset.export import ExportConfig, export
from arex.teacher.config import Price

PRICE = Price(input=3.0, cached_input=0.3, output=15.0)


def priced(call: dict) -> float:
    uncached = call["prompt_tokens"] - call["cached_tokens"]
    return (uncached * PRICE.input + call["cached_tokens"] * PRICE.cached_input + call["completion_tokens"] * 15) / 1e6


SPENT = {"type": "spent", "round": 2, "calls": 2, "prompt_tokens": 900, "completion_tokens": 40, "cached_tokens": 800}


def repriced(source: Path, target: Path, words: int | None, spent: bool) -> list[dict]:
    lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    for row in lines:
        if row["type"] == "header" and words is not None:
            row["config"]["reflection_words"] = words
        for call in [row.get("call"), (row.get("reflection") or {}).get("call")]:
            if call:
                call["cost_usd"] = priced(call)
    if spent:
        lines.insert(-1, {**SPENT, "cost_usd": priced(SPENT), "reason": "a call failed after 2 attempt(s)"})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return lines


def test_the_card_shows_cached_share_output_and_cost_per_kept_trajectory(tmp_path):
    records = {}
    for (name, source), words, spent in zip(sorted(RECORDS.items()), (80, 80, None), (True, False, False)):
        target = tmp_path / "store" / source.parent.name / source.name
        records[target] = repriced(source, target, words, spent)
    selection = {"total": 5, "kept": 3, "criteria_hash": "c0ffee", "criteria": {}, "drops": {}}
    export(list(records), tmp_path / "ds", ExportConfig(dedupe=False), None, selection=selection)
    card = (tmp_path / "ds" / "README.md").read_text()

    every = [line for lines in records.values() for line in lines]
    acting = [line["call"] for line in every if line["type"] == "step"]
    reflections = [line["reflection"]["call"] for line in every if line["type"] == "round_end"]
    paid = acting + reflections + [line for line in every if line["type"] == "spent"]
    prompt, cached = sum(c["prompt_tokens"] for c in paid), sum(c["cached_tokens"] for c in paid)
    cost = sum(priced(c) for c in paid)
    rounds = len(reflections)
    assert 0 < cached < prompt and rounds > 0
    acting_out = sum(c["completion_tokens"] for c in acting)
    reflection_out = sum(c["completion_tokens"] for c in reflections)
    row = (
        f"| {prompt} | {cached / prompt:.1%} | {acting_out / rounds:.1f} | {reflection_out / rounds:.1f} | "
        f"{cost:.4f} | {cost / rounds:.4f} | {cost / len(records):.4f} |"
    )
    assert "## Teacher cost" in card and row in card, card[card.index("## Teacher cost") :][:1500]
    # priced at the full input price the bill would be higher: the cached price is the one used
    assert cost < sum(priced(c) + c["cached_tokens"] * (PRICE.input - PRICE.cached_input) / 1e6 for c in paid)
    # as recorded: the header's reflection_words (none before it existed), the reflection calls' max_tokens
    for budget in ("80 words asked in the prompt, max_tokens 1024", "80 words asked in the prompt, max_tokens 384"):
        assert f"{budget} (1 trajectory)" in card
    assert "no words asked in the prompt, max_tokens 1024 (1 trajectory)" in card
    assert "Selection dropped 2 of 5 trajectories" in card
    assert "No cost was recorded" not in card
