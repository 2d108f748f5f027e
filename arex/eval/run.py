"""`arex eval`'s run, the same for every benchmark: the adapter's envs, the model run on them by
arex.rollout (the CLI hands the batches over: `arex rollout`'s own path, variants included), and
the benchmark's score of every record, written as `<out>/eval.json` and `<out>/eval.md`.

Numbers, per variant (a plain run is one variant named null):
- per problem: the adapter's `Score.value` averaged over samples (with its min and max), its
  numeric columns averaged, rounds, the value after each round (`curve`), endings, tokens and
  cost; problems not evaluated are listed with the reason (`absent`);
- the headline: per sample, the adapter's `aggregate` of the problems' values; then the mean over
  samples and the spread (population standard deviation, min, max). A rollout whose record cannot
  be read counts 0 for its problem and sample, and is listed;
- the curve: the headline after each round k, every rollout scored on its first k rounds (a rollout
  that ended before k keeps its last score): the test-time scaling curve, best-so-far where the
  benchmark's protocol takes the best submission;
- tokens and cost: every paid call of the records (arex.record.usage).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from statistics import fmean, pstdev

from arex.envs.runtime import Env, load_env
from arex.errors import UserInputError
from arex.eval.base import Benchmark, Item, Source
from arex.record.storage import write_error
from arex.record.trajectory import RecordError, load
from arex.record.usage import Usage, usage_of

EVAL_JSON, EVAL_MD = "eval.json", "eval.md"
ENVS = "envs"
"""The folder of `<out>` the adapter writes its envs into."""
MARK = ".arex-eval"
"""The file that marks `<out>/envs` as made by arex eval."""


def prepare(benchmark: Benchmark, source: Source) -> tuple[list[Item], list[Env]]:
    """The benchmark's problems and the envs of those that can be evaluated; UserInputError if none can."""
    _claim(source.envs)
    items = benchmark.problems(source)
    envs = [load_env(item.env) for item in items if item.env is not None]
    if not envs:
        why = next((f" (first: problem {i.id}: {i.absent})" for i in items if i.absent), "")
        raise UserInputError(f"no problem of {source.folder} can be evaluated{why}")
    return items, envs


def _claim(envs: Path) -> None:
    """Make `envs` the eval's own folder (marked), or refuse one arex eval did not make: an adapter
    writes env folders into it, and must never write over what it did not make."""
    if envs.exists() and not (envs / MARK).is_file():
        raise UserInputError(
            f"{envs} exists and was not made by arex eval (it has no {MARK}); give --out a folder of its own"
        )
    try:
        envs.mkdir(parents=True, exist_ok=True)
        (envs / MARK).write_text("env folders written by arex eval\n", encoding="utf-8")
    except OSError as exc:
        raise write_error(exc, envs) from None


def evaluate(benchmark: Benchmark, items: list[Item], envs: list[Env], batches: dict, out: Path, folder: Path) -> dict:
    """Score every variant's records (`batches`: variant name or None → its run summary, as
    arex.rollout.batch writes it) and write eval.json and eval.md into `out`; returns eval.json's content."""
    by_id = {env.id: env for env in envs}
    result = {
        "benchmark": benchmark.name,
        "score_name": benchmark.score_name,
        "folder": str(folder),
        "problems": len(items),
        "evaluated": len(envs),
        "absent": [{"problem": i.id, "reason": i.absent} for i in items if i.env is None],
        "variants": [_variant(benchmark, items, by_id, name, summary) for name, summary in batches.items()],
    }
    _write(out / EVAL_JSON, json.dumps(result, indent=2) + "\n")
    _write(out / EVAL_MD, render(result))
    return result


def _variant(benchmark: Benchmark, items: list[Item], by_id: dict[str, Env], name, summary: dict) -> dict:
    samples = max((line["sample"] for line in summary["results"]), default=0) + 1
    runs: dict[tuple[str, int], dict] = {}
    unreadable = []
    for line in summary["results"]:
        env = by_id[line["env"]]
        try:
            record = load(Path(line["path"]))
        except (RecordError, OSError) as exc:
            unreadable.append({"env": env.id, "sample": line["sample"], "reason": str(exc)})
            continue
        ends = [r.end for r in record.rounds]
        scores = [benchmark.score(env, ends[:k]) for k in range(1, len(ends) + 1)] or [benchmark.score(env, [])]
        runs[(env.id, line["sample"])] = {
            "curve": [s.value for s in scores],
            "score": scores[-1],
            "rounds": len(ends),
            "status": record.end.status if record.end is not None else line["status"],
            "usage": usage_of(record),
        }
    problems = [_problem(item, by_id, runs, samples) for item in items]
    evaluated = [p for p in problems if p["status"] != "absent"]
    rounds = max((r["rounds"] for r in runs.values()), default=0)

    def headline(k: int | None) -> list[float]:
        """Per sample: the aggregate after k rounds (None: after all of them)."""
        return [benchmark.aggregate([_value(runs.get((p["env"], s)), k) for p in evaluated]) for s in range(samples)]

    total = Usage()
    for run in runs.values():
        total.add(run["usage"])
    return {
        "name": name,
        "samples": samples,
        **_spread(headline(None)),
        "per_sample": headline(None),
        "curve": [{"round": k, **_spread(headline(k))} for k in range(1, rounds + 1)],
        "problems": problems,
        "unreadable": unreadable,
        "usage": asdict(total),
    }


def _value(run: dict | None, k: int | None) -> float:
    """A rollout's value after k rounds (its last one if it ended before k); 0 for a missing rollout."""
    if run is None:
        return 0.0
    curve = run["curve"]
    return curve[-1] if k is None else curve[min(k, len(curve)) - 1]


def _spread(values: list[float]) -> dict:
    return {"score": fmean(values), "spread": pstdev(values), "min": min(values), "max": max(values)}


def _problem(item: Item, by_id: dict[str, Env], runs: dict, samples: int) -> dict:
    if item.env is None:
        return {"problem": item.id, "env": None, "status": "absent", "reason": item.absent}
    env_id = next(e.id for e in by_id.values() if e.dir.resolve() == item.env.resolve())
    mine = [runs[(env_id, s)] for s in range(samples) if (env_id, s) in runs]
    values = [r["score"].value for r in mine] + [0.0] * (samples - len(mine))  # unreadable: 0
    columns: dict[str, float | str | None] = {}
    for key in dict.fromkeys(k for r in mine for k in r["score"].columns):
        got = [r["score"].columns.get(key) for r in mine]
        numbers = [g for g in got if isinstance(g, (int, float))]
        columns[key] = fmean(numbers) if numbers else next((g for g in got if g is not None), None)
    usage = Usage()
    for r in mine:
        usage.add(r["usage"])
    rounds = max((r["rounds"] for r in mine), default=0)
    missing = [0.0] * (samples - len(mine))  # an unreadable record counts 0, as in `value`
    curve = [fmean([_value(r, k) for r in mine] + missing) for k in range(1, rounds + 1)]
    endings: dict[str, int] = {}
    for r in mine:
        endings[r["status"]] = endings.get(r["status"], 0) + 1
    return {
        "problem": item.id,
        "env": env_id,
        "status": "evaluated",
        "value": fmean(values),
        "min": min(values),
        "max": max(values),
        "columns": columns,
        "rollouts": len(mine),
        "rounds": fmean([r["rounds"] for r in mine]) if mine else 0,
        "curve": curve,
        "endings": endings,
        "tokens": usage.prompt_tokens + usage.output_tokens,
        "cost_usd": round(usage.cost_usd, 6),
    }


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a full disk leaves the previous file as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(exc, path, "the rollouts are kept; re-run the same command to score them again") from None


def _num(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # tokens: every digit
    return f"{value:.4g}" if isinstance(value, float) else ("-" if value is None else str(value))


def render(result: dict) -> str:
    """eval.md: the headline, the per-problem table, the problems not evaluated, the curve, the spend."""
    lines = [f"# {result['benchmark']} evaluation", "", f"Benchmark folder: `{result['folder']}`; "
             f"{result['evaluated']} of {result['problems']} problems evaluated.", ""]  # fmt: skip
    for v in result["variants"]:
        lines += _render_variant(result, v)
    if result["absent"]:
        lines += ["## Not evaluated", "", "| problem | why |", "|---|---|"]
        lines += [f"| {a['problem']} | {a['reason']} |" for a in result["absent"]]
        lines.append("")
    return "\n".join(lines)


def _render_variant(result: dict, v: dict) -> list[str]:
    title = f"## Variant {v['name']}" if v["name"] else "## Result"
    usage = v["usage"]
    lines = [
        title,
        "",
        f"**{result['score_name']}: {v['score']:.2f}** (mean over {v['samples']} sample(s); spread "
        f"{v['spread']:.2f}, min {v['min']:.2f}, max {v['max']:.2f})",
        "",
        f"Tokens: {usage['prompt_tokens'] + usage['output_tokens']} ({usage['prompt_tokens']} prompt, "
        f"{usage['cached_tokens']} of them cached, {usage['output_tokens']} output); cost ${usage['cost_usd']:.4f}",
        "",
    ]
    keys = list(dict.fromkeys(k for p in v["problems"] if p["status"] != "absent" for k in p["columns"]))
    lines += ["| problem | " + " | ".join([result["score_name"], "min", "max", *keys, "rounds", "tokens", "cost $"])
              + " |", "|---" * (7 + len(keys)) + "|"]  # fmt: skip
    for p in v["problems"]:
        if p["status"] == "absent":
            lines.append(f"| {p['problem']} | not evaluated |" + " |" * (6 + len(keys)))
            continue
        cells = [p["value"], p["min"], p["max"], *(p["columns"].get(k) for k in keys), p["rounds"], p["tokens"]]
        lines.append(f"| {p['problem']} | " + " | ".join(_num(c) for c in cells) + f" | {p['cost_usd']:.4f} |")
    lines += ["", "Score after each round (best-so-far over the rounds played):", "", "| round | score | spread |"]
    lines += ["|---|---|---|", *(f"| {c['round']} | {c['score']:.2f} | {c['spread']:.2f} |" for c in v["curve"]), ""]
    if v["unreadable"]:
        lines += [f"Unreadable records (scored 0): {len(v['unreadable'])}", ""]
    return lines


def show(result: dict, console, as_json: bool) -> None:
    """The eval's end on the terminal: per variant, the per-problem table, the headline and the
    curve (with --json: eval.json's content on stdout, nothing else)."""
    from rich.markup import escape
    from rich.table import Table

    if as_json:
        print(json.dumps(result, indent=2))
        return
    for v in result["variants"]:
        keys = list(dict.fromkeys(k for p in v["problems"] if p["status"] != "absent" for k in p["columns"]))
        spread = ["min", "max"] if v["samples"] > 1 else []  # one sample: no spread to show (80 columns)
        title = f"variant {v['name']}" if v["name"] else None
        table = Table("problem", result["score_name"], *spread, *keys, "rounds", "tokens", "cost $", title=title)
        for p in v["problems"]:
            if p["status"] == "absent":
                table.add_row(escape(p["problem"]), "not evaluated", *[""] * (3 + len(spread) + len(keys)))
                continue
            columns = [p["columns"].get(k) for k in keys]
            cells = [p["value"], *(p[k] for k in spread), *columns, p["rounds"], p["tokens"]]
            table.add_row(escape(p["problem"]), *(escape(_num(c)) for c in cells), f"{p['cost_usd']:.4f}")
        console.print(table)
        curve = ", ".join(f"{c['round']}: {c['score']:.2f}" for c in v["curve"])
        console.print(
            f"{result['score_name']}: {v['score']:.2f} over {v['samples']} sample(s) (spread {v['spread']:.2f}, "
            f"min {v['min']:.2f}, max {v['max']:.2f}); by round: {curve or '-'}; cost ${v['usage']['cost_usd']:.4f}",
            soft_wrap=True, markup=False, highlight=False,
        )  # fmt: skip
    for a in result["absent"]:
        console.print(f"not evaluated: problem {a['problem']}: {a['reason']}", soft_wrap=True, markup=False)
