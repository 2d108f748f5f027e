"""Tokenizers and trainer settings for the export tests, built here so they need no download.

Tokenizers for the template tests are byte-level BPEs trained on the version-1 fixture's records,
with each template's special tokens; TRL's chat templates are read from the installed package."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from repo_paths import FIXTURES

STORE = FIXTURES / "v1" / "store"
RECORDS = {
    "bounded": STORE / "subset-fill" / "d9aca56721dc2283.jsonl",  # 4 rounds, every reply usable
    "full": STORE / "subset-fill" / "d902a479abd0d1a0.jsonl",  # full-history context, 3 rounds
    "errors": STORE / "ml-diabetes" / "e354bdd22e369e95.jsonl",  # unusable replies; rounds end on format errors
}
TEMPLATES = Path(find_spec("trl").submodule_search_locations[0]) / "chat_templates"
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def bpe_tokenizer(template: str, specials: list[str]):
    """A byte-level BPE with `specials` as special tokens and `template` as its chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [p.read_text(encoding="utf-8") for p in RECORDS.values()]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    everything = ["<bos>", "<eos>", *specials]
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=everything,
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", additional_special_tokens=specials
    )
    tokenizer.chat_template = template
    return tokenizer


def supervised_runs(tokenizer, ids, weights) -> list[str]:
    """The text of each stretch of tokens that carries loss."""
    runs, current = [], []
    for token, weight in zip(ids, weights):
        if weight > 0:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs += [current] if current else []
    return [tokenizer.decode(r, clean_up_tokenization_spaces=False) for r in runs]


def sft_args(tmp_path, steps=3, batch=1):
    """A few CPU steps: float32 (TRL defaults to bf16, slow on a CPU), no activation checkpointing."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-4,
        lr_scheduler_type="constant",
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        max_length=512,
        bf16=False,
        activation_checkpointing=False,
    )
