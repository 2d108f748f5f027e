"""The dataset user's route (issue 32), over a real export: a text and a tools rollout of the `tally`
kind (tests/loop_kit.py, the scripted teacher over real HTTP, the process backend), selected and
exported under the bundled SmolLM2 tokenizer with the tool-aware qwen2_5 template. The README's and
the card's training snippets run as written on it (bundled model, a step or so each); the masks are
audited (every trained span is one assistant reply and its end token, nothing else, no private
data); the card is recounted from the shards; TRL keeps every exported calls row whole.

Only the fast checks run without the bundled model (tokenizers built in tests/tokenizer_kit.py)."""

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from loop_kit import climbing, process_sandbox, rollout
from repo_paths import REPO
from tokenizer_kit import CHATML, TEMPLATES, supervised_runs

from arex.dataset.export import ExportConfig, export, kept_records
from arex.dataset.masks import Masker, TemplateError, TokenStats, recommended_length, vocabulary_hash
from arex.envs.runtime import load_env
from arex.rollout.config import RolloutConfig
from arex.selection.selector import SelectConfig, select
from arex.teacher.scripted import RoundScript

CANARY = "arex-canary-7f3e9b1c5d2a4e6f"
END = "<|im_end|>"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, re.S)


def run_blocks(blocks: list[str], cwd: Path) -> dict:
    """Execute the blocks in order, in one namespace, from `cwd`, as a user pasting them would."""
    namespace: dict = {}
    here = Path.cwd()
    os.chdir(cwd)
    try:
        for block in blocks:
            exec(compile(block, "<snippet>", "exec"), namespace)
    finally:
        os.chdir(here)
    return namespace


# -- fast: no bundled model ----------------------------------------------------------------------------
def test_the_recommended_max_length_keeps_at_least_95_percent_of_rows_whole():
    for lengths in ([100 * i for i in range(1, 16)], [300] * 19 + [5000], list(range(1, 40, 2)), [257]):
        stats = TokenStats(lengths=lengths)
        recommended = stats.summary()["recommended_max_length"]
        assert recommended % 256 == 0 and sum(n <= recommended for n in lengths) >= 0.95 * len(lengths)
    # 15 rows: 14 of them is 93%, so the longest must fit (the old rule picked the 14th row)
    assert recommended_length(sorted([100 * i for i in range(1, 16)])) == 1536


def tiny_chatml(template: str):
    """A byte-level BPE over a few lines (milliseconds to train) with ChatML's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", END]
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=specials
    )
    core.train_from_iterator(["I will use bash to list the files.", "tool_call arguments command"], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=END, additional_special_tokens=specials)
    tokenizer.chat_template = template
    return tokenizer


def test_a_template_that_drops_tool_calls_is_refused_even_when_the_reply_names_the_tool():
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "I will use bash to list the files.", "tool_calls": [call]},
    ]
    plain = Masker(tiny_chatml(CHATML))  # prints content only; the reply's text names the tool
    with pytest.raises(TemplateError, match=r"drops an assistant turn's tool_calls.*qwen2_5"):
        plain.encode(messages, [0.0, 1.0])
    aware = Masker(tiny_chatml((TEMPLATES / "qwen2_5.jinja").read_text(encoding="utf-8")))
    encoded = aware.encode(messages, [0.0, 1.0])
    [trained] = supervised_runs(aware.tokenizer, encoded.input_ids, encoded.weights)
    assert '"command": "ls"' in trained and trained.endswith(END)


# -- the real export -----------------------------------------------------------------------------------
def short_prompts(path: Path) -> Path:
    """The bundled prompts with short system prompts and reflection rules (same placeholders)."""
    import yaml

    from arex.rollout.config import BUNDLED

    prompts = yaml.safe_load((BUNDLED / "prompts" / "default.yaml").read_text(encoding="utf-8"))
    act = {"system": "one shell command in a ```bash block, `submit` when ready", "system_tools": "one tool call"}
    for name, how in act.items():
        rules = "{reflection}{feedback_rules}\n# {title}\n{statement}\n"
        prompts[name] = f"Improve the solution over rounds: {how}." + rules
    prompts["reflection"] = "\nReflect with REVIEW, DIAGNOSE, PLAN and STATE (under {words} words).\n"
    path.write_text(yaml.safe_dump(prompts, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One text and one tools rollout (two climbing rounds each), selected, exported with calls and ready masks."""
    from loop_kit import PROCESS_BACKEND, TallyEnv

    from arex.envs import runtime
    from arex.sandbox.base import BACKENDS
    from arex.teacher.local import find_gguf

    root = tmp_path_factory.mktemp("readme")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(runtime.KINDS, "tally", TallyEnv)
        mp.setitem(BACKENDS, "process", PROCESS_BACKEND)
        folder = root / "envs" / "tally"
        (folder / "workspace").mkdir(parents=True)
        (folder / "private").mkdir()
        (folder / "task.yaml").write_text("kind: tally\nid: tally\ntitle: Count up\n")
        (folder / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
        (folder / "workspace" / "answer.txt").write_text("1\n")
        (folder / "private" / "canary.txt").write_text(CANARY + "\n")
        env = load_env(folder)
        # A tiny export: short prompts, no skills catalogue, no docs line, so rows are a few hundred tokens and
        # each CPU training step of the snippets costs seconds, not tens of seconds.
        prompts = short_prompts(root / "prompts.yaml")
        for fmt in ("text", "tools"):
            config = RolloutConfig(
                rounds=2, action_format=fmt, prompts=str(prompts), general_skills=False, task_skills=False, docs=False
            )
            rollout(env, RoundScript(climbing), root / "store", config)
        select(root / "store", root / "envs", root / "sel", SelectConfig(), process_sandbox())
        config = ExportConfig(
            granularities=("rounds", "trajectories", "calls"),
            tokenizer=str(find_gguf()),
            chat_template="qwen2_5",
            max_length=4096,
        )
        stats = export(kept_records(root / "sel"), root / "dataset", config, root / "envs")
    return {"root": root, "stats": stats, "gguf": find_gguf()}


def rows(folder: Path) -> list[dict]:
    return pq.read_table(folder).to_pylist()


def rendered_call(call: dict) -> str:
    """A tool call as qwen2.5's template prints it."""
    arguments = call["function"]["arguments"]
    arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    return f'<tool_call>\n{{"name": "{call["function"]["name"]}", "arguments": {json.dumps(arguments)}}}\n</tool_call>'


def reply_text(message: dict) -> str:
    calls = "\n".join(rendered_call(c) for c in message.get("tool_calls") or [])
    return (message["content"] or "") + (("\n" if message["content"] else "") + calls if calls else "")


@pytest.mark.local_model
def test_the_masks_train_exactly_each_assistant_reply_and_its_end_token(exported):
    from arex.dataset.train import load_tokenizer

    tokenizer = load_tokenizer(chat_template="qwen2_5")
    dataset = exported["root"] / "dataset"
    assert exported["stats"].tool_trajectories == 1 and exported["stats"].trajectories == 2
    audited = 0
    for granularity in ("rounds", "calls"):
        source = {(r["trajectory_id"], r["round"], r.get("step")): r for r in rows(dataset / granularity)}
        for row in rows(dataset / "tokens" / granularity):
            original = source[(row["trajectory_id"], row["round"], row["step"])]
            messages = original["prompt"] + original["completion"] if granularity == "calls" else original["messages"]
            weights = [0.0] * len(original["prompt"]) + [1.0] if granularity == "calls" else original["weights"]
            wanted = [reply_text(m) + END for m, w in zip(messages, weights) if m["role"] == "assistant" and w > 0]
            runs = supervised_runs(tokenizer, row["input_ids"], row["weights"])
            assert runs == wanted and row["labels"] == [
                t if w else -100 for t, w in zip(row["input_ids"], row["weights"])
            ]
            others = [
                m["content"] for m in messages if m["role"] in ("system", "user", "tool") and len(m["content"]) > 12
            ]
            assert not [o for o in others for run in runs if o in run]  # no system, user or tool text is trained
            audited += 1
    assert audited == exported["stats"].rows["rounds-tokens"] + exported["stats"].rows["calls-tokens"] > 10
    for shard in dataset.rglob("*"):  # no private data anywhere in the export
        assert not shard.is_file() or CANARY.encode() not in shard.read_bytes()


@pytest.mark.local_model
def test_the_card_recounts_from_the_shards_and_names_no_local_path(exported):
    from arex.dataset.train import load_tokenizer

    dataset, stats = exported["root"] / "dataset", exported["stats"]
    card = (dataset / "README.md").read_text()
    for config, count in stats.rows.items():
        folder = dataset / ("tokens/" + config[: -len("-tokens")] if config.endswith("-tokens") else config)
        assert len(rows(folder)) == count and f"{config}: {count} rows" in card
    checksums = json.loads((dataset / "checksums.json").read_text())
    for rel, digest in checksums.items():
        assert f"`{digest}`" in card and f"| {rel} | {pq.read_metadata(dataset / rel).num_rows} |" in card
    for granularity in ("rounds", "trajectories", "calls"):
        lengths = sorted(len(r["input_ids"]) for r in rows(dataset / "tokens" / granularity))  # none was cut
        recommended = -(-lengths[-(len(lengths) // 20) - 1] // 256) * 256 if len(lengths) >= 20 else None
        line = next(x for x in card.splitlines() if x.startswith(f"| {granularity} | {len(lengths)} |"))
        cells = line.strip("|").split("|")
        middle = lengths[int(0.5 * (len(lengths) - 1) + 0.5)]  # the card's median: the nearest-rank one
        assert [int(c) for c in cells[2:4]] + [int(cells[5])] == [lengths[0], middle, lengths[-1]]
        assert sum(n <= int(cells[6]) for n in lengths) >= 0.95 * len(lengths)
        assert recommended is None or int(cells[6]) == recommended
    tokenizer = load_tokenizer(chat_template="qwen2_5")
    assert f"Tokenizer of `{exported['gguf'].stem}` (vocabulary sha256 `{vocabulary_hash(tokenizer)}`" in card
    assert "qwen2_5 chat template" in card and "0 calls rows are left out" in card
    assert str(exported["gguf"].parent) not in card and str(exported["root"]) not in card and "/root" not in card


@pytest.mark.local_model
@pytest.mark.timeout(1500)  # five single-row CPU steps of a 135M model, on a loaded two-core host
def test_the_readme_and_card_training_snippets_run_as_written(exported):
    import torch

    from arex.dataset.train import load_model

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Training on an export") : readme.index("### The run report")]
    blocks = python_blocks(section)
    assert len(blocks) == 4 and "load_model()" in blocks[0] and "require_tool_calls(tokenizer)" in blocks[0]
    trained = run_blocks(blocks, exported["root"])  # ./dataset is the export
    fresh = load_model()
    changed = [n for n, p in trained["model"].named_parameters() if not torch.equal(p, fresh.get_parameter(n))]
    assert changed  # the snippets trained the model
    card = python_blocks((exported["root"] / "dataset" / "README.md").read_text())
    assert any("SFTTrainer(model=model, train_dataset=calls" in b for b in card)
    run_blocks(card, exported["root"] / "dataset")  # from the export folder, as the card says


@pytest.mark.local_model
def test_train_check_and_the_card_refuse_the_bundled_template_on_tool_rows(exported):
    from typer.testing import CliRunner

    from arex.cli import app
    from arex.dataset.train import load_tokenizer, require_tool_calls

    with pytest.raises(TemplateError, match="drops an assistant turn's tool_calls"):
        require_tool_calls(load_tokenizer())  # SmolLM2's own template prints only content
    args = ["train-check", str(exported["root"] / "dataset"), "--tokenizer", str(exported["gguf"]), "--config", "calls"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1 and "these rows hold tool calls" in refused.output, refused.output
    accepted = CliRunner().invoke(app, [*args, "--chat-template", "qwen2_5"])
    assert accepted.exit_code == 0, accepted.output


@pytest.mark.local_model
def test_trl_keeps_every_exported_calls_row_whole(exported, tmp_path):
    """A max_length under some calls rows: export leaves them out of calls/, and TRL, at that
    max_length, cuts none of the rest (each keeps its reply's end token, none is all masked)."""
    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    from arex.dataset.train import load_model, load_tokenizer

    lengths = sorted(len(r["input_ids"]) for r in rows(exported["root"] / "dataset" / "tokens" / "calls"))
    limit = lengths[len(lengths) // 2]
    config = ExportConfig(
        granularities=("calls",), tokenizer=str(exported["gguf"]), chat_template="qwen2_5", max_length=limit
    )
    stats = export(kept_records(exported["root"] / "sel"), tmp_path / "ds", config, exported["root"] / "envs")
    over = sum(n > limit for n in lengths)
    assert stats.calls_left_out == over > 0 and stats.rows["calls"] == len(lengths) - over
    assert f"{over} calls rows are left out of `calls/`" in (tmp_path / "ds" / "README.md").read_text()
    tokenizer = load_tokenizer(chat_template="qwen2_5")
    calls = load_dataset("parquet", data_files=str(tmp_path / "ds" / "calls" / "*.parquet"), split="train")
    args = SFTConfig(output_dir=str(tmp_path / "out"), max_length=limit, use_cpu=True, bf16=False, report_to=[])
    prepared = SFTTrainer(model=load_model(), train_dataset=calls, processing_class=tokenizer, args=args).train_dataset
    end = tokenizer.convert_tokens_to_ids(END)
    for example in prepared:
        labels = [t for t in example["labels"] if t != -100]
        assert labels and end in labels[-2:] and len(example["input_ids"]) <= limit
