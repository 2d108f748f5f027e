"""Training-ready export (issue 17): calls rows, token masks under TRL's chat templates, rows cut to
max_length, the card's measurements, cache-safe loading, `arex train-check`, and SFT steps of
SmolLM2-135M through a stock SFTTrainer with no glue (`local_model`). No Docker.

Records are the version-1 fixture's, with every non-assistant text cut to its first line so that
rows are a few hundred tokens (cheap to train on a CPU). Tokenizers for the template tests are
byte-level BPEs built here (tests/tokenizer_kit.py), with each template's special tokens, so they need no
download.
"""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tokenizer_kit import CHATML, RECORDS, TEMPLATES, bpe_tokenizer, sft_args, supervised_runs

from arex.dataset.export import ExportConfig, export
from arex.dataset.masks import Masker, TemplateError, load_tokenizer
from arex.dataset.rows import merge_turns
from arex.dataset.train_check import mask_problems
from arex.errors import UserInputError
from arex.record.trajectory import load

# Each template's special tokens, and the one that closes an assistant turn (gpt-oss: the last one differs).
SPECIALS = {
    "llama3": (["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], "<|eot_id|>"),
    "qwen2_5": (["<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    "qwen3": (["<|im_start|>", "<|im_end|>"], "<|im_end|>"),
    "gemma3": (["<start_of_turn>", "<end_of_turn>"], "<end_of_turn>"),
    "phi3": (["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"], "<|end|>"),
    "deepseekv3": (
        ["<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"],
        "<｜end▁of▁sentence｜>",
    ),
    "deepseek_r1_distill": (
        ["<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"],
        "<｜end▁of▁sentence｜>",
    ),
    "gptoss": (
        ["<|start|>", "<|message|>", "<|end|>", "<|return|>", "<|channel|>", "<|constrain|>", "<|call|>"],
        "<|end|>",
    ),
    "cohere": (
        [
            "<BOS_TOKEN>",
            "<|START_OF_TURN_TOKEN|>",
            "<|END_OF_TURN_TOKEN|>",
            "<|SYSTEM_TOKEN|>",
            "<|USER_TOKEN|>",
            "<|CHATBOT_TOKEN|>",
        ],
        "<|END_OF_TURN_TOKEN|>",
    ),
}


def _short(text):
    return text.splitlines()[0][:60] if text else text


def shorten(source: Path, target: Path, edit=None) -> Path:
    """The record with every text the teacher did not write cut to its first line (the same text
    always gives the same cut, so a full-history context still repeats the rounds before it)."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["type"] == "round_start":
            row["context"] = [
                m if m["role"] == "assistant" else {**m, "content": _short(m["content"])} for m in row["context"]
            ]
        elif row["type"] == "step" and row["observation"]:
            row["observation"] = _short(row["observation"])
        elif row["type"] == "round_end":
            row["reflect_prompt"], row["feedback"] = _short(row["reflect_prompt"]), _short(row["feedback"])
        lines.append(edit(row) if edit else row)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return target


def _invalid_first_step_of_round_2(row):
    """Round 2's first reply becomes unusable (as if it had no bash block)."""
    if row["type"] == "step" and row["round"] == 2 and row["step"] == 0:
        row["action"] = {"kind": "invalid", "command": "", "error": "no bash block"}
    return row


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    out = {name: shorten(path, root / path.parent.name / path.name) for name, path in RECORDS.items()}
    out["full"] = shorten(RECORDS["full"], root / "subset-fill" / RECORDS["full"].name, _invalid_first_step_of_round_2)
    return out


@pytest.fixture(scope="module")
def chatml(tmp_path_factory):
    """A ChatML tokenizer saved as a folder, as `export.tokenizer` takes it."""
    folder = tmp_path_factory.mktemp("tokenizer")
    bpe_tokenizer(CHATML, ["<|im_start|>", "<|im_end|>"]).save_pretrained(folder)
    return folder


def rows_of(folder: Path) -> list[dict]:
    return pq.read_table(folder).to_pylist()


# -- rows -------------------------------------------------------------------------------------------
def test_calls_rows_hold_each_usable_calls_exact_request_and_reply(store, tmp_path):
    stats = export(iter(store.values()), tmp_path / "ds", ExportConfig(granularities=("calls",)), None)
    calls = rows_of(tmp_path / "ds" / "calls")
    expected, unusable = [], 0
    for path in sorted(store.values()):  # export orders records as given
        for round_ in load(path).rounds:
            for index, step in enumerate(round_.steps):
                if step.usable:
                    expected.append((round_.messages(index), step.call.content, "action", index))
                unusable += not step.usable
            reflection = round_.end.reflection.call
            expected.append((round_.messages(None), reflection.content, "reflection", None))
    assert unusable == 7 and stats.skipped_calls == unusable
    got = sorted((r["trajectory_id"], r["round"], -1 if r["step"] is None else r["step"]) for r in calls)
    assert len(calls) == len(expected) == len(got) and stats.rows == {"calls": len(expected)}
    by_key = {json.dumps([r["prompt"], r["completion"][0]["content"]]): r for r in calls}
    for prompt, reply, kind, step in expected:
        # the exact request (same-role turns joined)
        row = by_key[json.dumps([merge_turns(prompt, [0.0] * len(prompt))[0], reply])]
        assert (
            row["completion"] == [{"role": "assistant", "content": reply}]
            and row["kind"] == kind
            and row["step"] == step
        )
        assert row["prompt"][-1]["role"] == "user"  # TRL itself trains on these rows: the SFT test below


def test_consecutive_turns_are_merged_and_full_history_turns_keep_their_own_weights(store, tmp_path):
    config = ExportConfig(reflection_weight=2.0)
    export(iter(store.values()), tmp_path / "ds", config, None)
    rounds = rows_of(tmp_path / "ds" / "rounds")
    for row in rounds:
        roles = [m["role"] for m in row["messages"]]
        assert all(a != b for a, b in zip(roles, roles[1:])), roles
    errors = load(store["errors"])
    raw = errors.rounds[0].messages(None)
    assert [m["role"] for m in raw[-2:]] == ["user", "user"]  # last observation, then the reflect prompt
    merged = next(r for r in rounds if r["trajectory_id"] == errors.header.key and r["round"] == 1)
    assert merged["messages"][-2]["content"] == raw[-2]["content"] + "\n\n" + raw[-1]["content"]
    export(iter([store["errors"]]), tmp_path / "apart", ExportConfig(merge_consecutive=False), None)
    apart = next(r for r in rows_of(tmp_path / "apart" / "rounds") if r["round"] == 1)
    assert apart["messages"][:-1] == raw
    # Full history: a rounds row trains only its own round; the trajectory row gives every turn its own weight.
    full = load(store["full"])
    row3 = next(r for r in rounds if r["trajectory_id"] == full.header.key and r["round"] == 3)
    context = len(full.rounds[2].start.context)
    assert set(row3["weights"][:context]) == {0.0} and row3["weights"][context:] == [1.0, 0.0, 1.0, 0.0, 2.0]
    [trajectory] = [r for r in rows_of(tmp_path / "ds" / "trajectories") if r["trajectory_id"] == full.header.key]
    replies = [w for m, w in zip(trajectory["messages"], trajectory["weights"]) if m["role"] == "assistant"]
    # action, submit, reflection per round; round 2's first reply unusable
    assert replies == [
        1.0,
        1.0,
        2.0,
        0.0,
        1.0,
        2.0,
        1.0,
        1.0,
        2.0,
    ]


# -- masks ------------------------------------------------------------------------------------------
def _conversation(store):
    """A merged rounds row with an unusable reply (0) and a reflection weighted 2."""
    messages, weights = load(store["full"]).rounds[1].messages(None), None
    messages = messages + [{"role": "assistant", "content": load(store["full"]).rounds[1].end.reflection.call.content}]
    weights = [0.0] * len(messages)
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            weights[i] = 1.0
    weights[-1] = 2.0
    weights[next(i for i, m in enumerate(messages) if m["role"] == "assistant" and "REVIEW" not in m["content"])] = 0.0
    return merge_turns(messages, weights)[:2]


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_supervised_tokens_are_exactly_the_assistant_turns_under_each_template(store, name):
    specials, closing = SPECIALS[name]
    tokenizer = bpe_tokenizer((TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8"), specials)
    masker = Masker(tokenizer)
    assert masker.name == f"the {name} chat template"
    messages, weights = _conversation(store)
    encoded = masker.encode(messages, weights)
    assert tokenizer.decode(encoded.input_ids, clean_up_tokenization_spaces=False) == masker.render(messages)
    wanted = [(m["content"], w) for m, w in zip(messages, weights) if m["role"] == "assistant" and w > 0]
    last = "<|return|>" if name == "gptoss" else closing
    expected = [content.strip() + (last if i == len(wanted) - 1 else closing) for i, (content, _) in enumerate(wanted)]
    runs = supervised_runs(tokenizer, encoded.input_ids, encoded.weights)
    assert runs == expected
    assert sorted({w for w in encoded.weights if w}) == [1.0, 2.0]  # each turn keeps its own weight
    assert not mask_problems(encoded.input_ids, encoded.weights)
    # The check can fail: all-zero and all-one masks are caught, and their text is not the turns.
    for broken in ([0.0] * len(encoded.weights), [1.0] * len(encoded.weights)):
        assert mask_problems(encoded.input_ids, broken)
        assert supervised_runs(tokenizer, encoded.input_ids, broken) != expected


def test_masks_are_linear_one_render_pair_and_two_tokenizations_per_row():
    """Two batch tokenizations, not one per message: the template's markup (special tokens parsed)
    and the messages' text (parsed as plain text)."""
    tokenizer = bpe_tokenizer(CHATML, ["<|im_start|>", "<|im_end|>"])
    calls = {"render": 0, "tokenize": 0}
    render, tokenize = tokenizer.apply_chat_template, tokenizer.__call__

    class Counting:
        """The tokenizer, counting chat-template renders and tokenizations."""

        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def apply_chat_template(self, *a, **k):
            calls["render"] += 1
            return render(*a, **k)

        def __call__(self, *a, **k):
            calls["tokenize"] += 1
            return tokenize(*a, **k)

    masker = Masker(Counting())
    messages = [{"role": "system", "content": "sys"}] + [
        {"role": r, "content": f"{r} turn {i}"} for i in range(120) for r in ("user", "assistant")
    ]
    encoded = masker.encode(messages, [float(m["role"] == "assistant") for m in messages])
    assert len(messages) == 241 and calls == {"render": 2, "tokenize": 2}
    assert len(supervised_runs(tokenizer, encoded.input_ids, encoded.weights)) == 120


def test_templates_arex_cannot_follow_are_named_in_one_sentence(store):
    specials, _ = SPECIALS["gemma3"]
    gemma = bpe_tokenizer((TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8"), specials)
    raw = load(store["errors"]).rounds[0].messages(None)  # two user turns in a row, unmerged
    with pytest.raises(TemplateError, match=r"^the gemma3 chat template refuses this conversation .*merge_consecutive"):
        Masker(gemma).encode(raw, [0.0] * len(raw))
    shouting = bpe_tokenizer(CHATML.replace("m['content']", "m['content'] | upper"), ["<|im_start|>", "<|im_end|>"])
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok then"}]
    with pytest.raises(TemplateError, match=r"rewrites the text of message 0 \(user\)"):
        Masker(shouting).encode(messages, [0.0, 1.0])
    plain = bpe_tokenizer("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}", [])
    with pytest.raises(TemplateError, match=r"closes assistant message 1 with '\\n', not a special token"):
        Masker(plain).encode(messages, [0.0, 1.0])


# -- token rows in the export -----------------------------------------------------------------------
def test_token_rows_are_cut_at_round_boundaries_and_the_card_counts_it(store, chatml, tmp_path):
    lengths = {}  # per record: token lengths of its rounds rows and its trajectory row
    for name, path in store.items():
        stats = export(iter([path]), tmp_path / f"whole-{name}", ExportConfig(tokenizer=str(chatml)), None)
        lengths[name] = {g: t.lengths for g, t in stats.tokens.items()}
    limit = max(lengths["bounded"]["rounds"])  # each bounded round fits alone, its trajectory does not
    assert (
        lengths["bounded"]["trajectories"][0] > limit
        and lengths["full"]["rounds"][0] <= limit < lengths["full"]["trajectories"][0]
    )
    assert min(lengths["errors"]["rounds"]) > limit  # none of its rounds fits
    stats = export(
        iter(store.values()),
        tmp_path / "ds",
        ExportConfig(tokenizer=str(chatml), max_length=limit, reflection_weight=2.0),
        None,
    )
    tokenizer = load_tokenizer(chatml)
    parts = rows_of(tmp_path / "ds" / "tokens" / "trajectories")
    assert all(len(p["input_ids"]) <= limit for p in parts) and all(
        len(p["input_ids"]) == len(p["labels"]) == len(p["weights"]) for p in parts
    )
    bounded, full, errors = (load(store[n]) for n in ("bounded", "full", "errors"))
    covered = sorted((p["first_round"], p["last_round"]) for p in parts if p["trajectory_id"] == bounded.header.key)
    assert (
        len(covered) > 1
        and covered[0][0] == 1
        and covered[-1][1] == 4
        and all(b[0] == a[1] + 1 for a, b in zip(covered, covered[1:]))
    )
    system = "<|im_start|>system\n" + bounded.rounds[0].start.context[0].content + "<|im_end|>\n"
    for part in (p for p in parts if p["trajectory_id"] == bounded.header.key):
        assert tokenizer.decode(part["input_ids"]).startswith(system)  # each part starts from the system prompt
        assert part["labels"] == [t if w > 0 else -100 for t, w in zip(part["input_ids"], part["weights"])]
    # Under full history a round's context is every round before it: only the first round can start a part.
    assert [(p["first_round"], p["last_round"]) for p in parts if p["trajectory_id"] == full.header.key] == [(1, 1)]
    assert not [p for p in parts if p["trajectory_id"] == errors.header.key]
    t = stats.tokens["trajectories"]
    assert (t.split, t.dropped, t.dropped_rounds) == (2, 1, 2 + 3)
    every_round = [n for name in store for n in lengths[name]["rounds"]]
    assert stats.tokens["rounds"].dropped == sum(n > limit for n in every_round) > 0
    card = (tmp_path / "ds" / "README.md").read_text()
    summary = t.summary()
    assert (
        f"| trajectories | 3 | {summary['min']} | {summary['median']} | {summary['p90']} | {summary['max']} | "
        f"{summary['recommended_max_length']} | {t.rows} | 2 | 1 | 5 | 0 |" in card
    )
    assert summary["recommended_max_length"] % 256 == 0 and summary["recommended_max_length"] >= summary["p90"]
    assert "WeightedSFTTrainer" in card  # reflections weigh 2: the stock trainer would train them as 1


def test_card_measures_reflection_adherence_instead_of_promising_it(store, tmp_path):
    export(iter(store.values()), tmp_path / "ds", ExportConfig(), None)
    card = (tmp_path / "ds" / "README.md").read_text()
    reflections = [r.end.reflection for p in store.values() for r in load(p).rounds]
    parts = [
        sum(bool(getattr(x, part).strip()) for x in reflections) for part in ("review", "diagnose", "plan", "state")
    ]
    complete, total = sum(x.complete for x in reflections), len(reflections)
    assert 0 < complete < total  # the fixture has reflections with and without the sections
    row = " | ".join(f"{n}/{total} ({n / total:.0%})" for n in [*parts, complete])
    assert f"| {row} |" in card
    assert "reflect (REVIEW, DIAGNOSE, PLAN, STATE)" not in card


@pytest.mark.heavy
def test_two_exports_in_folders_named_alike_load_their_own_rows(store, tmp_path):
    from datasets import load_dataset

    export(iter([store["bounded"]]), tmp_path / "a" / "dataset", ExportConfig(), None)
    export(iter([store["errors"]]), tmp_path / "b" / "dataset", ExportConfig(), None)
    cache = tmp_path / "hf-cache"
    ids = {}
    for name in ("a", "b"):
        folder = tmp_path / name / "dataset"
        by_folder = load_dataset(str(folder), "rounds", split="train", cache_dir=str(cache))
        by_files = load_dataset(
            "parquet", data_files=str(folder / "rounds" / "*.parquet"), split="train", cache_dir=str(cache)
        )
        assert set(by_folder["trajectory_id"]) == set(by_files["trajectory_id"])
        ids[name] = set(by_files["trajectory_id"])
    assert ids["a"] != ids["b"]


def test_a_tokenizer_that_is_not_there_is_one_sentence(tmp_path):
    with pytest.raises(UserInputError, match=r"^export.tokenizer: .*nope does not exist; .*never downloads"):
        load_tokenizer(tmp_path / "nope")
    (tmp_path / "vocab.txt").write_text("a\n")
    with pytest.raises(UserInputError, match=r"is a file but not a \.gguf file"):
        load_tokenizer(tmp_path / "vocab.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserInputError, match=r"could not load a tokenizer from .*empty"):
        load_tokenizer(tmp_path / "empty")
    from arex.config import load_config

    with pytest.raises(
        UserInputError, match=r"section 'export': max_length counts tokens, so it needs export.tokenizer"
    ):
        load_config(["export.max_length=1024"])


# -- arex train-check -------------------------------------------------------------------------------
def test_train_check_shows_the_trained_tokens_and_fails_on_a_broken_mask(store, chatml, tmp_path):
    from typer.testing import CliRunner

    from arex.cli import app

    export(
        iter(store.values()),
        tmp_path / "ds",
        ExportConfig(tokenizer=str(chatml), granularities=("rounds", "calls")),
        None,
    )
    runner = CliRunner()
    result = runner.invoke(app, ["train-check", str(tmp_path / "ds"), "--tokenizer", str(chatml)])
    assert result.exit_code == 0, result.output
    assert "config rounds-tokens" in result.output and "tokens with loss" in result.output
    result = runner.invoke(app, ["train-check", str(tmp_path / "ds"), "--tokenizer", str(chatml), "--config", "calls"])
    assert result.exit_code == 0 and "config calls" in result.output, result.output
    shard = next((tmp_path / "ds" / "tokens" / "rounds").glob("*.parquet"))
    table = pq.read_table(shard)
    ones = table.set_column(
        table.schema.get_field_index("weights"),
        "weights",
        [[[1.0] * len(w) for w in table.column("weights").to_pylist()]],
    )
    pq.write_table(ones, shard)
    result = runner.invoke(app, ["train-check", str(tmp_path / "ds"), "--tokenizer", str(chatml)])
    assert result.exit_code == 1 and "the prompt is trained" in result.output, result.output
    result = runner.invoke(app, ["train-check", str(tmp_path / "ds"), "--tokenizer", str(chatml), "--config", "nope"])
    assert result.exit_code == 2 and "--config nope is not in" in result.output


# -- training SmolLM2-135M through stock TRL (the bundled GGUF) -------------------------------------
def _shortest(rows, size):
    """The row with the fewest characters (one short row keeps a CPU step to seconds)."""
    return rows.select([min(range(len(rows)), key=lambda i: size(rows[i]))])


@pytest.mark.local_model
def test_stock_sft_trainer_trains_calls_and_token_rows_with_no_glue(store, smol, tmp_path):
    from datasets import load_dataset
    from trl import SFTTrainer

    from arex.dataset.train import load_model

    tokenizer = load_tokenizer(smol["tokenizer"])
    export(
        iter([store["bounded"]]),
        tmp_path / "ds",
        ExportConfig(granularities=("rounds", "calls"), tokenizer=str(smol["tokenizer"]), max_length=512),
        None,
    )
    cache = str(tmp_path / "hf-cache")
    calls = load_dataset(
        "parquet", data_files=str(tmp_path / "ds" / "calls" / "*.parquet"), split="train", cache_dir=cache
    )
    tokens = load_dataset(
        "parquet", data_files=str(tmp_path / "ds" / "tokens" / "rounds" / "*.parquet"), split="train", cache_dir=cache
    )
    calls = _shortest(calls, lambda r: len(json.dumps(r["prompt"] + r["completion"])))
    tokens = _shortest(tokens, lambda r: len(r["input_ids"]))
    for rows in (calls, tokens):
        trainer = SFTTrainer(
            model=load_model(smol["model"]), args=sft_args(tmp_path), train_dataset=rows, processing_class=tokenizer
        )
        prepared = trainer.train_dataset
        for source, example in zip(rows, prepared):
            supervised = supervised_runs(
                tokenizer, example["input_ids"], [float(label != -100) for label in example["labels"]]
            )
            # TRL's completion-only loss: the reply, its closing token, the template's newline
            if "completion" in source:
                assert supervised == [source["completion"][0]["content"] + "<|im_end|>\n"]
            else:  # the token rows' labels, used as they are: every reply with its closing token
                assert example["labels"] == source["labels"]
                round_ = load(store["bounded"]).rounds[source["round"] - 1]
                replies = [s.call.content for s in round_.steps] + [round_.end.reflection.call.content]
                assert supervised == [reply + "<|im_end|>" for reply in replies]
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        assert len(losses) == 3 and losses[-1] < losses[0], losses


@pytest.mark.local_model
def test_weighted_trainer_applies_per_token_weights(store, smol, tmp_path):
    import torch
    from datasets import Dataset

    from arex.dataset.train import WeightedCollator, WeightedSFTTrainer, load_model

    tokenizer = load_tokenizer(smol["tokenizer"])
    export(
        iter([store["bounded"]]),
        tmp_path / "ds",
        ExportConfig(tokenizer=str(smol["tokenizer"]), reflection_weight=2.0),
        None,
    )
    rows = sorted(rows_of(tmp_path / "ds" / "tokens" / "rounds"), key=lambda r: len(r["input_ids"]))[:1]
    trainer = WeightedSFTTrainer(
        model=load_model(smol["model"]),
        args=sft_args(tmp_path, steps=2),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    assert isinstance(trainer.data_collator, WeightedCollator)
    batch = next(iter(trainer.get_train_dataloader()))  # the stock trainer would drop `weights` here
    assert set(batch) == {"input_ids", "attention_mask", "labels", "weights"}
    ones = {**batch, "weights": (batch["labels"] != -100).float()}
    with torch.no_grad():
        stock = trainer.model(**{k: v for k, v in batch.items() if k != "weights"}).loss  # the model's own mean loss
        as_ones = trainer.compute_loss(trainer.model, dict(ones))
        weighted = trainer.compute_loss(trainer.model, dict(batch))
    assert torch.isclose(as_ones, stock, rtol=1e-4)  # 0/1 weights: exactly the stock loss
    assert weighted > as_ones * 1.05  # reflections count twice
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and losses[-1] < losses[0], losses


@pytest.mark.local_model
def test_train_check_runs_steps_and_shows_the_loss_falls(store, smol, tmp_path):
    from typer.testing import CliRunner

    from arex.cli import app

    export(iter([store["bounded"]]), tmp_path / "ds", ExportConfig(granularities=("calls",)), None)
    args = [
        "train-check",
        str(tmp_path / "ds"),
        "--tokenizer",
        str(smol["tokenizer"]),
        "--steps",
        "3",
        "--model",
        str(smol["model"]),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "loss by step:" in result.output and "the loss fell from" in result.output
