"""`arex train-check DATASET --tokenizer PATH [--steps N]`: the check to run before renting GPUs.

It loads one config of an export the way a user does (`load_dataset("parquet", data_files=...)`),
puts rows through the tokenizer's chat template exactly as training will see them, shows one with
the tokens that carry loss highlighted, reports token lengths, and fails if a row trains nothing
or trains its prompt; rows with tool calls are refused under a chat template that would not print
them (`--chat-template` replaces the tokenizer's). With `--steps N` it runs N SFT steps of a tiny
model on the CPU (SmolLM2-135M dequantized from the bundled GGUF, or `--model`) on the shortest rows
and fails unless the loss
falls. The route matches what a user runs: calls rows through a stock `SFTTrainer`, token rows with
0/1 weights too, other weights (and conversations with per-message weights, masked here) through
`arex.dataset.train.WeightedSFTTrainer`.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from arex.dataset.config import config_folder
from arex.errors import ArexError, UserInputError


class TrainCheckFailed(ArexError):
    """The export would not train as intended (exit code 1); the message says which rows and why."""


@dataclass
class CheckedRow:
    """One row as training sees it: tokens, per-token weights, and the row as loaded."""

    input_ids: list[int]
    weights: list[float]
    row: dict
    refused: str = ""
    """Why arex would not tokenize this row (masks.SpecialTokenError); then it has no tokens."""


@dataclass
class CheckReport:
    """What `arex train-check` found; `problems` empty means the masks look right."""

    config: str
    rows: list[CheckedRow]
    problems: list[str] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    features: dict | None = None
    """The loaded rows' `datasets` features (the calls route rebuilds its rows with them)."""

    def lengths(self) -> dict[str, int]:
        values = sorted(len(r.input_ids) for r in self.rows)
        return (
            {
                "min": values[0],
                "median": int(statistics.median(values)),
                "p90": values[int(0.9 * (len(values) - 1))],
                "max": values[-1],
            }
            if values
            else {}
        )


def mask_problems(input_ids: list[int], weights: list[float]) -> list[str]:
    """What is wrong with one row's loss mask: nothing trained, or the prompt trained (its first
    token carries loss: an all-ones mask, or a mask shifted onto the prompt)."""
    if not any(w > 0 for w in weights):
        return ["no token carries loss"]
    if weights and weights[0] > 0:
        return ["the prompt is trained (its first token carries loss)"]
    return []


def export_configs(folder: Path) -> list[str]:
    """The configs of an export, from its card's front matter (else its folders)."""
    card = folder / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8")
        if text.startswith("---"):
            try:
                meta = yaml.safe_load(text.split("---", 2)[1]) or {}
                return [c["config_name"] for c in meta.get("configs", []) if isinstance(c, dict) and "config_name" in c]
            except (yaml.YAMLError, IndexError, TypeError):
                pass
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.parquet")))


def pick_config(folder: Path, wanted: str | None) -> str:
    """`wanted`, or the route that needs the least glue: token rows, then calls, then the first."""
    if not folder.is_dir():
        raise UserInputError(f"{folder} is not a folder; give the folder `arex export --out` wrote")
    configs = export_configs(folder)
    if not configs:
        raise UserInputError(
            f"{folder} holds no exported rows (no README.md configs, no parquet folders); run `arex export` first"
        )
    if wanted is not None:
        if wanted not in configs:
            raise UserInputError(f"--config {wanted} is not in {folder}; it has {', '.join(configs)}")
        return wanted
    return next((c for c in configs if c.endswith("-tokens")), "calls" if "calls" in configs else configs[0])


def load_rows(folder: Path, config: str, limit: int):
    """The config's rows, loaded as the card tells users to (parquet files, not the folder name)."""
    from datasets import load_dataset

    files = sorted((folder / config_folder(config)).glob("*.parquet"))
    if not files:
        raise UserInputError(f"{folder / config_folder(config)} holds no parquet files; re-run `arex export`")
    rows = load_dataset("parquet", data_files=[str(f) for f in files], split="train")
    return rows.select(range(min(limit, len(rows))))


def encode_rows(rows, config: str, tokenizer) -> list[CheckedRow]:
    """Tokens and weights per row: as stored for token rows, else through the chat template."""
    from arex.dataset.masks import Masker, SpecialTokenError
    from arex.dataset.rows import conversation, tools_of

    if config.endswith("-tokens"):
        out = [CheckedRow(list(r["input_ids"]), list(r["weights"]), r) for r in rows]
        biggest = max((max(r.input_ids, default=0) for r in out), default=0)
        if biggest >= len(tokenizer):
            raise UserInputError(
                f"the {config} rows hold token id {biggest}, beyond this tokenizer's {len(tokenizer)}: "
                "they were made with another tokenizer; give that one"
            )
        return out
    masker = Masker(tokenizer)
    out = []
    for row in rows:
        try:
            encoded = masker.encode(*conversation(config, row), tools_of(row))
        except SpecialTokenError as exc:  # special-token text outside any message's text: a problem row
            out.append(CheckedRow([], [], row, refused=str(exc)))
            continue
        out.append(CheckedRow(encoded.input_ids, encoded.weights, row))
    return out


def check(folder: Path, tokenizer, config: str | None = None, limit: int = 200) -> CheckReport:
    """Load, encode and check up to `limit` rows of one config."""
    name = pick_config(Path(folder), config)
    rows = load_rows(Path(folder), name, limit)
    if "tools" in rows.column_names and any(t for t in rows["tools"]):
        refuse_dropped_tool_calls(tokenizer)
    report = CheckReport(name, encode_rows(rows, name, tokenizer), features=dict(rows.features))
    for index, checked in enumerate(report.rows):
        found = [checked.refused] if checked.refused else mask_problems(checked.input_ids, checked.weights)
        report.problems += [f"row {index}: {p}" for p in found]
    return report


def refuse_dropped_tool_calls(tokenizer) -> None:
    """TrainCheckFailed when the rows hold tool calls and the template would not print them (whatever
    the config: token rows were made under the export's template, but a user trains calls or
    conversations under this one)."""
    from arex.dataset.masks import TemplateError
    from arex.dataset.train import require_tool_calls

    try:
        require_tool_calls(tokenizer)
    except TemplateError as exc:
        raise TrainCheckFailed(f"these rows hold tool calls, but {exc}") from None


def highlight(tokenizer, input_ids: list[int], weights: list[float], keep: int = 400):
    """A rich Text of the row: tokens with loss in bold green, the rest dim; long stretches
    without loss are cut in the middle (`keep` characters each side)."""
    from rich.text import Text

    text, run, run_trained = Text(), [], None

    def flush() -> None:
        piece = tokenizer.decode(run, clean_up_tokenization_spaces=False)
        if not run_trained and len(piece) > 2 * keep:
            piece = f"{piece[:keep]} … [{len(piece) - 2 * keep} characters] … {piece[-keep:]}"
        text.append(piece, style="bold green" if run_trained else "dim")

    for token, weight in zip(input_ids, weights):
        trained = weight > 0
        if run and trained != run_trained:
            flush()
            run = []
        run.append(token)
        run_trained = trained
    if run:
        flush()
    return text


def train_steps(report: CheckReport, tokenizer, steps: int, model_path: Path | None, rows: int = 1) -> list[float]:
    """N SFT steps on the `rows` shortest rows (one by default: a CPU step stays in seconds), by
    the route a user takes; the logged losses."""
    from datasets import Dataset, Features

    from arex.dataset.train import SFTConfig, SFTTrainer, WeightedSFTTrainer, load_model

    chosen = sorted(report.rows, key=lambda r: len(r.input_ids))[:rows]
    binary = all(w in (0.0, 1.0) for r in chosen for w in r.weights)
    if report.config == "calls":
        # The loaded features: tool-call arguments stay objects (arrow.json), the tools JSON text.
        keys = [k for k in ("prompt", "completion", "tools") if k in chosen[0].row]
        features = Features({k: report.features[k] for k in keys}) if report.features else None
        data, trainer_class = (
            Dataset.from_list([{k: r.row[k] for k in keys} for r in chosen], features=features),
            SFTTrainer,
        )
    else:
        data = Dataset.from_list(
            [
                {
                    "input_ids": r.input_ids,
                    "labels": [t if w > 0 else -100 for t, w in zip(r.input_ids, r.weights)],
                    "weights": r.weights,
                }
                for r in chosen
            ]
        )
        trainer_class = SFTTrainer if binary and report.config.endswith("-tokens") else WeightedSFTTrainer
    model = load_model(model_path)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:  # rows made for a bigger vocabulary
        model.resize_token_embeddings(len(tokenizer))
    with tempfile.TemporaryDirectory(prefix="arex-train-check-") as out:
        args = SFTConfig(
            output_dir=out,
            max_steps=steps,
            per_device_train_batch_size=len(chosen),
            learning_rate=1e-4,
            lr_scheduler_type="constant",
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            use_cpu=True,
            seed=0,
            max_length=max(len(r.input_ids) for r in chosen) + 8,
            bf16=False,
            activation_checkpointing=False,  # TRL's defaults; on a CPU bf16 is many times slower
        )
        trainer = trainer_class(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def run(
    console,
    dataset: Path,
    tokenizer_path: Path,
    config: str | None,
    steps: int,
    model: Path | None,
    limit: int,
    chat_template: str | None = None,
) -> CheckReport:
    """The command: check, show a sample and the lengths, train if asked; raise if anything is off."""
    from rich.table import Table

    from arex.dataset.masks import load_tokenizer

    if steps < 0:
        raise UserInputError(f"--steps expects 0 or more, got {steps}")
    tokenizer = load_tokenizer(tokenizer_path, key="--tokenizer", chat_template=chat_template)
    report = check(dataset, tokenizer, config, limit)
    if not report.rows:
        raise TrainCheckFailed(f"{dataset}: config {report.config} has no rows")
    sample = next((r for r in report.rows if not mask_problems(r.input_ids, r.weights)), report.rows[0])
    console.print(f"config {report.config}: a sample row as training sees it (bold green: tokens that carry loss)")
    console.print(highlight(tokenizer, sample.input_ids, sample.weights))
    table = Table("rows checked", "min", "median", "p90", "max", "tokens with loss")
    lengths = report.lengths()
    trained = sum(1 for r in report.rows for w in r.weights if w > 0) / max(1, sum(len(r.weights) for r in report.rows))
    table.add_row(str(len(report.rows)), *(str(lengths[k]) for k in ("min", "median", "p90", "max")), f"{trained:.1%}")
    console.print(table)
    if report.problems:
        shown = "; ".join(report.problems[:3]) + (
            f"; and {len(report.problems) - 3} more" if len(report.problems) > 3 else ""
        )
        raise TrainCheckFailed(
            f"{len(report.problems)} of {len(report.rows)} rows of {report.config} would not train as intended: {shown}"
        )
    if steps:
        report.losses = train_steps(report, tokenizer, steps, model)
        console.print("loss by step: " + ", ".join(f"{loss:.4f}" for loss in report.losses))
        if len(report.losses) < 2 or not report.losses[-1] < report.losses[0]:
            raise TrainCheckFailed(
                f"the loss did not fall over {steps} steps ({report.losses}); check the rows and the tokenizer"
            )
        console.print(f"the loss fell from {report.losses[0]:.4f} to {report.losses[-1]:.4f}")
    return report
