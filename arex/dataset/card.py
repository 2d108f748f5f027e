"""The dataset card (`README.md` beside the shards, Hub front matter) and its score curve."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from arex import __version__
from arex.dataset.config import ExportConfig, config_folder
from arex.dataset.stats import ExportStats
from arex.record.storage import naming
from arex.selection.exploits import exploit_sentence

CURVE = "score_curve.png"


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def plot_curves(stats: ExportStats, path: Path) -> bool:
    """Best-so-far held-out score by round (mean over the trajectories that reached it, and the
    min-max band), one panel per env: scales differ by metric."""
    if not stats.by_env:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    envs = sorted(stats.by_env)
    cols = min(3, len(envs))
    rows = (len(envs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, env_id in zip(axes.flat, envs):
        curve = stats.by_env[env_id]["curve"]  # per round: [count, sum, min, max] of best-so-far
        xs = list(range(1, len(curve) + 1))
        ax.fill_between(xs, [p[2] for p in curve], [p[3] for p in curve], alpha=0.2, label="min-max")
        ax.plot(
            xs,
            [p[1] / p[0] for p in curve],
            marker="o",
            markersize=3,
            label=f"mean of {stats.by_env[env_id]['trajectories']}",
        )
        ax.set_title(env_id, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel("best held-out score so far")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(envs) :]:
        ax.axis("off")
    fig.tight_layout()
    # No timestamps in the file: the same data gives the same image.
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return True


def _stats_table(stats: ExportStats) -> list[str]:
    lines = [
        "| env | domain | trajectories | rounds | mean first | mean best | mean final | mean improvement | improved |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for env_id, env in sorted(stats.by_env.items()):
        n = env["trajectories"]
        lines.append(
            f"| {env_id} | {env['domain']} | {n} | {env['rounds']} | {env['sum_first'] / n:.4g} | "
            f"{env['sum_best'] / n:.4g} | {env['sum_final'] / n:.4g} | "
            f"{(env['sum_best'] - env['sum_first']) / n:+.4g} | {env['improved']}/{n} |"
        )
    return lines


def write_card(out: Path, stats: ExportStats, config: ExportConfig, selection: dict | None) -> Path:
    """Write `out/README.md` (and the curve image); returns the card's path. `arex.dataset.export.export`
    calls it on its staging folder, so the card is in place before the export is swapped in."""

    with naming(out / CURVE):
        has_curve = plot_curves(stats, out / CURVE)
    lines = ["---", yaml.safe_dump(_front_matter(stats, config), sort_keys=False).strip(), "---", ""]
    # One section per function, in page order: a new measurement is one more entry.
    sections = [
        _contents(stats, config),
        _training(stats, config),
        ["## Score improvement", "", *_stats_table(stats), ""],
        [f"![Best held-out score so far, by round]({CURVE})", ""] if has_curve else [],
        _reflections(stats),
        _token_lengths(stats),
        _teacher_cost(stats, selection),
        _selection(selection),
        _decontamination(stats.decontamination),
        _provenance(stats),
    ]
    lines += [line for section in sections for line in section]
    path = out / "README.md"
    with naming(path):
        path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _config_bytes(stats: ExportStats) -> dict[str, int]:
    """Bytes of each config's shards, by config name."""
    sizes = {name: 0 for name in stats.rows}
    for name in sizes:
        prefix = config_folder(name) + "/"
        sizes[name] = sum(
            s["bytes"] for rel, s in stats.shards.items() if rel.startswith(prefix) and "/" not in rel[len(prefix) :]
        )
    return sizes


def _front_matter(stats: ExportStats, config: ExportConfig) -> dict:
    """The Hub's YAML header: license, tags, size and one dataset config per row set. Each
    config's `download_size` (its shards' bytes) also keys `datasets`' cache of a local folder
    load, which otherwise goes by the folder's name alone and mixes up two exports named alike."""
    names = list(stats.rows)
    return {
        "pretty_name": config.pretty_name,
        "license": config.license,
        "language": ["en"],
        "task_categories": ["text-generation"],
        "tags": ["agents", "self-improvement", "reflection", "sft", "arex"],
        "size_categories": [_size_category(sum(stats.rows.get(g, 0) for g in config.granularities))],
        "configs": [
            {
                "config_name": g,
                "data_files": [{"split": "train", "path": f"{config_folder(g)}/*.parquet"}],
                **({"default": True} if i == 0 else {}),
            }
            for i, g in enumerate(names)
        ],
        "dataset_info": [{"config_name": g, "download_size": size} for g, size in _config_bytes(stats).items()],
    }


def _contents(stats: ExportStats, config: ExportConfig) -> list[str]:
    """Title, what the trajectories are, what the files hold and how to load them."""
    domains: dict[str, int] = {}
    for env in stats.by_env.values():
        domains[env["domain"]] = domains.get(env["domain"], 0) + env["trajectories"]
    return [
        f"# {config.pretty_name}",
        "",
        "Long-horizon self-improvement trajectories synthesized by arex "
        f"{__version__}: a teacher model worked on each task for many rounds of act → submit → feedback → "
        "reflect → revise (it was asked to reflect under REVIEW, DIAGNOSE, PLAN and STATE headings; how often it "
        "did is measured under Reflections). Whole trajectories were kept by re-checked final score and rule "
        "adherence; failed rounds inside kept trajectories stay, since they teach recovery.",
        "",
        "## Contents",
        "",
        f"- {stats.trajectories} trajectories ({len(stats.duplicates)} near-duplicates removed); "
        + "; ".join(f"{g}: {n} rows" for g, n in stats.rows.items())
        + (f"; {stats.skipped_calls} unusable replies left out of calls" if "calls" in stats.rows else ""),
        "- by domain: " + (", ".join(f"{d} {n}" for d, n in sorted(domains.items())) or "none"),
        "",
        "Configs: `rounds` has one row per round holding exactly the messages the teacher saw in that round "
        "(context, commands and observations, the reflect prompt) and its reflection; `trajectories` has one "
        "row per trajectory, the rounds joined; `calls` (if present) one `prompt`/`completion` row per usable "
        "teacher call; `<config>-tokens` (if present) the same rows pre-tokenized (`input_ids`, `labels` with "
        "-100 where no loss, per-token `weights`). "
        + ("Consecutive turns of one role are joined with a blank line. " if config.merge_consecutive else "")
        + "Columns: `messages` (list of `{role, content}`, as TRL's "
        "SFTTrainer reads), `weights` (one per message: "
        f"{config.action_weight:g} on acting assistant turns, {config.reflection_weight:g} on reflections, "
        f"{config.invalid_weight:g} on unusable replies, 0 on system/user turns), and metadata "
        "(trajectory_id, env_id, env_kind, domain, round, rounds, public/held-out scores, first/best/final "
        "held-out, baseline, improvement, teacher, config_hash, arex_version). Scores are higher-is-better: "
        "metrics to minimise (e.g. RMSE) are negated.",
        "",
        "```python",
        "from datasets import load_dataset",
        f'# from the Hub: load_dataset("<this repo\'s id>", "{next(iter(stats.rows), "rounds")}", split="train")',
        (
            'rows = load_dataset("parquet", data_files="'
            f'{config_folder(next(iter(stats.rows), "rounds"))}/*.parquet", split="train")  # in the export folder'
        ),
        "```",
        "",
        'Load a local copy through `"parquet"` as above: `load_dataset(<folder>, <config>)` caches by the folder\'s '
        "name, so two exports in folders named alike (both `dataset`) could return the first one's rows.",
        "",
        *_tool_calls(stats),
    ]


def _tool_calls(stats: ExportStats) -> list[str]:
    """How tool-call rows look, when the export has any."""
    if not stats.tool_trajectories:
        return []
    return [
        f"Tool calls: {stats.tool_trajectories} of {stats.trajectories} trajectories acted through tool calls. "
        "Their assistant turns carry `tool_calls` (`[{id, type, function: {name, arguments}}]`, "
        "the arguments a JSON object), each "
        "tool result is a `tool` message with its `tool_call_id`, and the `tools` column holds the tool definitions "
        "(JSON text) that TRL's SFTTrainer passes to the chat template. Train them under a template that prints "
        "`tool_calls` (Qwen2.5's or Qwen3's; for the bundled SmolLM2, `load_tokenizer(chat_template=\"qwen2_5\")`, "
        "the same turn tokens): a template that prints only `content` trains every tool-call turn as an empty "
        "reply, so the snippets below call `require_tool_calls`, which refuses one, and so does "
        "`arex train-check`. Only the first tool call of a reply ran; any others were answered as not run.",
        "",
    ]


def _selection(selection: dict | None) -> list[str]:
    """How many trajectories were kept, by which criteria, and why the others were dropped."""
    lines = ["## Selection", ""]
    if not selection:
        return lines + ["No selection report was given.", ""]
    return lines + [
        (
            f"{selection['kept']} of {selection['total']} trajectories kept "
            f"(criteria hash `{selection['criteria_hash']}`)."
        ),
        "",
        "Criteria:",
        "",
        "```yaml",
        yaml.safe_dump(selection["criteria"], sort_keys=False).strip(),
        "```",
        "",
        "| drop reason | trajectories |",
        "|---|---:|",
        *[f"| {reason} | {row['count']} |" for reason, row in selection["drops"].items()],
        "",
        *([exploit_sentence(selection["drops"]), ""] if exploit_sentence(selection["drops"]) else []),
    ]


def _decontamination(account: dict | None) -> list[str]:
    """The evaluation sets checked, and each env found in one: removed or flagged, and why."""
    if account is None:
        return []
    named = ", ".join(f"`{name}`" for name in account["eval_sets"]) or "none named at export"
    found = [(e["env"], o) for e in account["at_build"] for o in e["overlaps"]]
    found += [(env, o) for env, overlaps in account["found"].items() for o in overlaps]
    lines = ["## Decontamination", "", f"Evaluation sets checked: {named}."]
    if not found:
        return lines + ["", "No env overlaps an evaluation set.", ""]
    action = {"refused": "removed", "flagged": "flagged (kept)"}
    table = [
        (env, action.get(o["action"], o["action"]), o["eval_set"], o["item"], "; ".join(o["signals"]))
        for env, o in found
    ]
    return lines + [
        f"{account['left_out']} trajectories left out at export; envs removed at build never reached it.",
        "",
        "| env | action | evaluation set | item | evidence |",
        "|---|---|---|---|---|",
        *["| " + " | ".join(" ".join(str(c).split()).replace("|", "\\|") for c in row) + " |" for row in table],
        "",
    ]


LOCAL_PATHS = ("prompts", "skills_dir")
"""Rollout settings that name a file or folder of the machine that ran the rollouts."""


def _public_config(cfg: dict) -> dict:
    """A rollout config as the card may publish it: a prompts file or skills folder by its name only (the
    rollout key already holds their content), never the path of the machine that ran the rollouts."""
    return {k: Path(str(v)).name if k in LOCAL_PATHS and v else v for k, v in cfg.items()}


def _provenance(stats: ExportStats) -> list[str]:
    """Teachers, rollout configs and the data files with their checksums."""
    lines = ["## Provenance", "", "Teachers:", ""]
    for name, teacher in sorted(stats.teachers.items()):
        lines.append(f"- `{name}`, sampling `{json.dumps(teacher.get('sampling'), sort_keys=True)}`")
    lines += ["", "Rollout configs (by hash):", ""]
    for chash, cfg in sorted(stats.configs.items()):
        lines += [
            f"<details><summary><code>{chash}</code></summary>",
            "",
            "```yaml",
            yaml.safe_dump(_public_config(cfg), sort_keys=True).strip(),
            "```",
            "",
            "</details>",
            "",
        ]
    lines += ["Data files (sha256):", "", "| file | rows | bytes | sha256 |", "|---|---:|---:|---|"]
    lines += [f"| {rel} | {s['rows']} | {s['bytes']} | `{s['sha256']}` |" for rel, s in sorted(stats.shards.items())]
    lines.append("")
    return lines


def _reflections(stats: ExportStats) -> list[str]:
    """Measured reflection adherence: the share of reflections having each section."""
    counts = stats.reflections
    total = counts.get("total", 0)
    if not total:
        return []
    share = " | ".join(
        f"{counts[part]}/{total} ({counts[part] / total:.0%})"
        for part in ("review", "diagnose", "plan", "state", "complete")
    )
    return [
        "## Reflections",
        "",
        f"Measured over the {total} reflections of the exported trajectories: how many had each section (non-empty).",
        "",
        "| REVIEW | DIAGNOSE | PLAN | STATE | all four |",
        "|---:|---:|---:|---:|---:|",
        f"| {share} |",
        "",
    ]


def _per(amount: float, count: int, digits: int) -> str:
    return f"{amount / count:.{digits}f}" if count else "—"


def _teacher_cost(stats: ExportStats, selection: dict | None) -> list[str]:
    """What the exported trajectories' teacher calls cost: cached share of the prompt tokens, output by
    kind per round, the reflection budget they ran under, cost per round and per kept trajectory."""
    u = stats.usage
    if not u.calls:
        return []
    share = f"{u.cached_share:.1%}" if u.cached_share is not None else "—"
    budgets = "; ".join(
        f"{words if words is not None else 'no'} words asked in the prompt, max_tokens "
        f"{cap if cap is not None else '—'} ({n} trajector{'y' if n == 1 else 'ies'})"
        for (words, cap), n in sorted(stats.reflection_budgets.items(), key=lambda kv: -kv[1])
    )
    lines = [
        "## Teacher cost",
        "",
        f"Measured over the {stats.trajectories} exported trajectories' own teacher calls ({u.calls} calls, "
        f"{u.rounds} complete rounds; calls of a round cut short and played again, or of a call that failed, "
        "included). Cached share: prompt tokens the server reported as served from its prompt cache, priced at "
        "`teacher.prices` `cached_input` (the input price where none was given). Output: completion tokens of "
        "acting replies and of reflections, per round.",
        "",
        "| prompt tokens | cached share | acting output / round | reflection output / round | cost (USD) "
        "| cost / round | cost / kept trajectory |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {u.prompt_tokens} | {share} | {_per(u.acting_output, u.rounds, 1)} | "
        f"{_per(u.reflection_output, u.rounds, 1)} | {u.cost_usd:.4f} | {_per(u.cost_usd, u.rounds, 4)} | "
        f"{_per(u.cost_usd, stats.trajectories, 4)} |",
        "",
        f"Reflection budget (`rollout.reflection_words` in the prompt, `rollout.reflection_tokens` as the reflection "
        f"calls' max_tokens): {budgets}.",
        "",
    ]
    if not u.cost_usd:
        lines += ["No cost was recorded: the teacher ran with `teacher.track_cost` off or at a price of 0.", ""]
    if selection:
        lines += [
            f"Selection dropped {selection['total'] - selection['kept']} of {selection['total']} trajectories, which "
            "were paid for too: `arex report <store> --selection <selection folder>` divides the whole run's cost by "
            "the trajectories kept.",
            "",
        ]
    return lines


def _token_lengths(stats: ExportStats) -> list[str]:
    """Token lengths per row set (before any split) and what max_length did."""
    if not stats.tokens:
        return []
    tok = stats.tokenizer or {}
    limit = tok.get("max_length")
    lines = [
        "## Token lengths",
        "",
        f"Tokenizer of `{tok.get('name')}` (vocabulary sha256 `{tok.get('vocabulary')}`, the first 16 hex digits "
        "of `arex.dataset.masks.vocabulary_hash`), under "
        f"{tok.get('template')}; max_length {limit if limit else 'none (no row was cut)'}. "
        "Lengths are of whole rows, before any cut; "
        "the recommended max_length keeps at least 95% of rows whole (rounded up to 256).",
        "",
        *(
            [
                f"{stats.calls_left_out} calls rows are left out of `calls/` with their token rows (longer than "
                "max_length, no token with loss, or refused), so TRL never cuts a reply or trains an empty one.",
                "",
            ]
            if "calls" in stats.tokens
            else []
        ),
        (
            "| rows of | rows | min | median | p90 | max | recommended max_length | written | split | dropped "
            "| rounds lost | no loss |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for granularity, t in stats.tokens.items():
        s = t.summary()
        cells = [s.get(k, "-") for k in ("min", "median", "p90", "max", "recommended_max_length")]
        lines.append(
            f"| {granularity} | {len(t.lengths)} | "
            + " | ".join(map(str, cells))
            + f" | {t.rows} | {t.split} | {t.dropped} | {t.dropped_rounds} | {t.unsupervised} |"
        )
    return lines + [""]


def _bundled_name() -> str | None:
    """The bundled model's name (its GGUF file's), or None when arex[local] is not installed."""
    try:
        from arex.teacher.local import find_gguf

        return Path(find_gguf()).stem
    except Exception:  # no bundled model: the snippets name the tokenizer's model instead
        return None


def _setup(stats: ExportStats, config: ExportConfig) -> list[str]:
    """The snippets' first lines: the model and its tokenizer (tool-aware for tool-call rows)."""
    tok = stats.tokenizer or {}
    name = tok.get("name")
    bundled = name is None or name == _bundled_name()
    where = "" if bundled else f'"<a local copy of {name}>"'
    template = config.chat_template or ("qwen2_5" if stats.tool_trajectories and bundled else None)
    args = ", ".join(a for a in (where, f'chat_template="{template}"' if template else "") if a)
    lines = [
        "import torch",
        "from datasets import load_dataset",
        "from trl import SFTConfig, SFTTrainer",
        "from arex.dataset.train import load_model, load_tokenizer"
        + (", require_tool_calls" if stats.tool_trajectories else ""),
        "",
        f"model = load_model({where})"
        + ("  # SmolLM2-135M, bundled with arex[local]; or a local folder / .gguf" if bundled else ""),
        f"tokenizer = load_tokenizer({args})"
        + ("  # tool-aware: prints tool calls and the tool definitions" if template else ""),
    ]
    if stats.tool_trajectories:
        lines.append("require_tool_calls(tokenizer)  # stops here under a chat template that drops tool_calls")
    return lines + [
        "gpu = torch.cuda.is_available()  # on a CPU: float32, one row and one step to try the route",
        'cpu = {} if gpu else {"use_cpu": True, "bf16": False, "max_steps": 1, "per_device_train_batch_size": 1}',
    ]


def _args(max_length: int) -> str:
    return f'args=SFTConfig(output_dir="out", max_length={max_length}, **cpu)'


def _training(stats: ExportStats, config: ExportConfig) -> list[str]:
    """How to train on each config with TRL, as one program that runs as written from the export
    folder (or a clone of this repo): the routes that put the loss on the right tokens."""
    lines = ["## Training", "", "Run from the export folder (or a clone of this dataset repo):", ""]
    lines += ["```python", *_setup(stats, config)]
    binary = all(w in (0.0, 1.0) for w in (config.action_weight, config.reflection_weight, config.invalid_weight))
    notes = []
    if "calls" in stats.rows:
        measured = stats.tokens.get("calls")  # with export.max_length every longer calls row was left out
        length = config.max_length or (measured.summary().get("recommended_max_length") if measured else None)
        lines += [
            "",
            "# calls: prompt/completion rows; SFTTrainer trains only the completions (its default for this format)",
            'calls = load_dataset("parquet", data_files="calls/*.parquet", split="train")',
            "SFTTrainer(model=model, train_dataset=calls, processing_class=tokenizer, "
            f"{_args(length or 4096)}).train()",
        ]
        if not length:
            notes.append(
                "The calls rows' token lengths were not measured (export with `export.tokenizer`), so max_length "
                "4096 is a guess: a row longer than it would be cut by TRL and lose its reply's end."
            )
    tokens = [g for g in stats.rows if g.endswith("-tokens")]
    if tokens:
        trainer = "SFTTrainer" if binary else "WeightedSFTTrainer"
        measured = stats.tokens.get(tokens[0][: -len("-tokens")])
        length = config.max_length or (measured.summary().get("recommended_max_length") if measured else None) or 4096
        lines += [
            "",
            f"# {tokens[0]}: labels are -100 where the weight is 0"
            + ("" if binary else "; WeightedSFTTrainer applies the weights that are not 0/1"),
            *([] if binary else ["from arex.dataset.train import WeightedSFTTrainer"]),
            f'rows = load_dataset("parquet", data_files="{config_folder(tokens[0])}/*.parquet", split="train")',
            f"{trainer}(model=model, train_dataset=rows, processing_class=tokenizer, {_args(length)}).train()",
        ]
    lines += ["```", "", *notes, *([""] if notes else [])]
    lines += [
        "`rounds` and `trajectories` hold conversations with one weight per message. Given to SFTTrainer as they are, "
        "every token is trained (system prompt and observations included) and `weights` is dropped: train on "
        "`calls` or on `-tokens` rows (`arex export -c export.tokenizer=<tokenizer> -c export.max_length=<n>`), "
        "and check with `arex train-check <export folder> --tokenizer <tokenizer>` first.",
        "",
    ]
    return lines
