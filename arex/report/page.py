"""The run report page (`report.html`), rendered from the `Report` model alone: every number on
it is in report.json too."""

from __future__ import annotations

from urllib.parse import quote

from arex.report.markup import esc, page, table
from arex.report.stats import Report, Score, VariantStats
from arex.report.svg import Series, line_chart, num, sparkline
from arex.selection.exploits import exploit_sentence

DEFINITIONS = (
    "Best so far: a rollout's highest held-out score up to that round; a rollout that stopped earlier carries "
    "its best forward, so the line is the mean over every rollout with a score by then (n; 'played': how many "
    "played the round), the band ± the spread (population standard deviation). An invalid submission has no score. "
    "Still improving at round r: a later or equal round beats every round before r (round 1: the env's baseline, "
    "when recorded). Final score: each rollout's best held-out score, mean ± spread (n rollouts)."
)
NORMALISED = (
    "Normalised: per env, the share of the gap from its baseline (recorded, else the lowest score any rollout "
    "reached) to its best-known score (the highest any rollout of any variant reached): 0 = baseline, 1 = best "
    "known (a rollout with no score yet counts as 0). Envs with different metrics are only averaged normalised; "
    "the band is the 95% confidence interval "
    "of the mean (1.96 standard errors)."
)
SPEND = (
    "A round's spend is every call made in it (its steps, its reflection, and calls paid for in a round that was "
    "cut and played again, or that failed). Cached share: the prompt tokens the server reported as served from its "
    "prompt cache (priced at teacher.prices' cached_input, or at the input price where none is given). Output: "
    "completion tokens of acting replies and of reflections."
)
COST = (
    "Cost per round: the variant's cost over the complete rounds played. Per kept trajectory: the whole variant's "
    "cost (dropped rollouts were paid for too) over the trajectories its selection kept (give --selection). "
    "Reflection budget: the words the prompt asked for (rollout.reflection_words) and the max_tokens reflection "
    "calls were sent with (rollout.reflection_tokens, else teacher.max_tokens), as recorded."
)


def score_cell(score: Score) -> str:
    """A final-score cell as the stage-wise table prints it."""
    return "—" if score.mean is None else f"{num(score.mean)} ± {num(score.spread)} (n={score.n})"


def _env_cell(e) -> str:
    if e is None:
        return "—"
    if not e.graded:
        return "no graded round"
    normalised = f" · normalised {num(e.normalised.mean)}" if e.normalised.mean is not None else ""
    return score_cell(e.final) + normalised


def _stagewise(report: Report) -> str:
    rows = []
    for v in report.variants:
        by_env = {e.env: e for e in v.envs}
        rows.append(
            [esc(v.name), esc(" ".join(map(str, v.overrides)) or "—")]
            + [esc(_env_cell(by_env.get(env))) for env in report.envs]
            + [esc(score_cell(v.overall))]
        )
    metrics = {e.env: e.metric for v in report.variants for e in v.envs}
    head = [f"{env} ({metrics[env]})" if metrics.get(env) else env for env in report.envs]
    return (
        "<h2>Stage-wise results</h2>"
        + table(["variant", "overrides", *head, "overall (normalised)"], rows, "stagewise")
        + f'<p class="small muted">{esc(NORMALISED)}</p>'
    )


def _scaling(report: Report) -> str:
    """The headline: the test-time scaling curve, one line per variant (AREX-2's figure)."""
    series = [
        Series(v.name, [p.round for p in v.scaling], [p.mean for p in v.scaling], [p.ci for p in v.scaling])
        for v in report.variants
        if v.scaling
    ]
    if not series:
        return '<h2>Test-time scaling</h2><p class="muted">no env has a graded round to normalise: no curve</p>'
    chart = line_chart("test-time scaling: normalised best held-out so far", series, "normalised best so far")
    rows = [
        [esc(v.name), str(p.round), esc(f"{num(p.mean)} ± {num(p.ci)}"), str(p.n)]
        for v in report.variants
        for p in v.scaling
    ]
    return (
        f'<h2>Test-time scaling</h2><figure class="scaling">{chart}</figure>'
        f'<p class="small muted">Mean over every rollout of every env. {esc(NORMALISED)}</p>'
        "<details><summary>the numbers</summary>"
        + table(["variant", "round", "normalised best so far (± 95% CI)", "rollouts"], rows, "scaling", (1, 2, 3))
        + "</details>"
    )


def _curve_table(report: Report, env: str) -> str:
    rows = []
    for v in report.variants:
        for e in v.envs:
            if e.env == env:
                rows += [
                    [
                        esc(v.name),
                        str(p.round),
                        esc(f"{num(p.mean)} ± {num(p.spread)}"),
                        str(p.n),
                        str(p.ran),
                        esc(num(e.improving[p.round - 1])),
                    ]
                    for p in e.best_curve
                ]
    head = ["variant", "round", "best so far", "rollouts", "played", "still improving"]
    numbers = table(head, rows, f"curve curve-{esc(env)}", (1, 2, 3, 4, 5))
    return f"<details><summary>the numbers</summary>{numbers}</details>"


def _curves(report: Report) -> str:
    out = ["<h2>Best held-out score by round</h2>", f'<p class="small muted">{esc(DEFINITIONS)}</p>']
    for env in report.envs:
        best, still = [], []
        for v in report.variants:
            for e in v.envs:
                if e.env == env and e.best_curve:
                    xs = [p.round for p in e.best_curve]
                    best.append(Series(v.name, xs, [p.mean for p in e.best_curve], [p.spread for p in e.best_curve]))
                    still.append(Series(v.name, xs, e.improving))
        if not best:
            out.append(
                f'<h3>{esc(env)}</h3><p class="no-graded muted">no graded round: {esc(_why_empty(report, env))}</p>'
            )
            continue
        out.append(f'<h3>{esc(env)}</h3><div class="charts">')
        chart = line_chart(f"{env}: best held-out so far", best, "best held-out score")
        out.append(f'<figure class="curve" data-env="{esc(env)}">{chart}</figure>')
        chart = line_chart(f"{env}: rollouts still improving", still, "fraction", y_range=(0.0, 1.0))
        out.append(f'<figure class="improving" data-env="{esc(env)}">{chart}</figure>')
        out.append("</div>" + _curve_table(report, env))
    return "\n".join(out)


def _why_empty(report: Report, env: str) -> str:
    stats = [e for v in report.variants for e in v.envs if e.env == env]
    played = sum(len(e.improving) for e in stats)
    invalid = sum(e.invalid for e in stats)
    if not played:
        return "no rollout of it completed a round"
    return f"every round's submission was invalid ({invalid}) or could not be graded, so there is nothing to plot"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "—"


def _spend(report: Report) -> str:
    series = [
        Series(v.name, [s.round for s in v.spend], [float(s.tokens) for s in v.spend])
        for v in report.variants
        if v.spend
    ]
    rows = [
        [
            esc(v.name),
            str(s.round),
            str(s.calls),
            str(s.tokens),
            f"{s.cost_usd:.4f}",
            _share(s.cached_tokens, s.prompt_tokens),
            str(s.acting_output),
            str(s.reflection_output),
        ]
        for v in report.variants
        for s in v.spend
    ]
    chart = (
        f'<figure class="spend">{line_chart("tokens per round (all rollouts)", series, "tokens")}</figure>'
        if series
        else ""
    )
    head = ["variant", "round", "calls", "tokens", "cost (USD)", "cached share", "acting output", "reflection output"]
    return (
        "<h2>Tokens and cost per round</h2>"
        + chart
        + table(head, rows, "spend", (1, 2, 3, 4, 5, 6, 7))
        + f'<p class="small muted">{esc(SPEND)}</p>'
        + _cost(report)
    )


def _usd(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _cost(report: Report) -> str:
    """Each variant's teacher bill: cached share, output by kind, cost per round and per kept trajectory."""
    rows = []
    for v in report.variants:
        c = v.cost
        budget = ", ".join(map(str, c.reflection_words)) or "—"
        budget += " words / " + (", ".join(map(str, c.reflection_tokens)) or "—") + " tokens"
        rows.append(
            [
                esc(v.name),
                str(c.rollouts),
                str(c.rounds),
                str(c.prompt_tokens),
                _share(c.cached_tokens, c.prompt_tokens),
                f"{c.acting_output / c.rounds:.1f}" if c.rounds else "—",
                f"{c.reflection_output / c.rounds:.1f}" if c.rounds else "—",
                esc(budget),
                f"{c.cost_usd:.4f}",
                _usd(c.cost_per_round),
                "—" if c.kept is None else str(c.kept),
                _usd(c.cost_per_kept),
            ]
        )
    head = [
        "variant",
        "rollouts",
        "rounds",
        "prompt tokens",
        "cached share",
        "acting output / round",
        "reflection output / round",
        "reflection budget",
        "cost (USD)",
        "per round",
        "kept",
        "per kept trajectory",
    ]
    return table(head, rows, "cost", (1, 2, 3, 4, 5, 6, 8, 9, 10, 11)) + f'<p class="small muted">{esc(COST)}</p>'


def _endings(report: Report) -> str:
    rows = [[esc(v.name), esc(e.status), esc(e.reason), str(e.count)] for v in report.variants for e in v.endings]
    return "<h2>Endings</h2>" + table(["variant", "status", "reason", "rollouts"], rows, "endings", (3,))


def _drops(report: Report) -> str:
    if report.selections is None:
        return ""
    out = ["<h2>Selection</h2>"]
    for s in report.selections:
        who = s.variant or "the whole store"
        out.append(f'<p>{esc(who)}: kept {s.kept} of {s.total} <span class="small muted">({esc(s.path)})</span></p>')
        exploits = exploit_sentence({d.reason: {"count": d.count} for d in s.drops})
        if exploits:
            out.append(f"<p>{esc(who)}: {esc(exploits)}</p>")
    rows = [
        [
            esc(d.variant or "—"),
            esc(d.reason),
            str(d.count),
            esc(", ".join(d.ids[:6]) + (" …" if len(d.ids) > 6 else "")),
        ]
        for s in report.selections
        for d in s.drops
    ]
    return "\n".join(out) + table(["variant", "drop reason", "trajectories", "ids"], rows, "drops", (2,))


def _trajectories(v: VariantStats) -> str:
    rows = []
    for t in v.trajectories:
        link = f'<a href="{esc(quote(t.page))}">{esc(t.key)}</a>'
        best = num(t.best) if t.best is not None else "—"
        verdict = {"kept": "kept", "dropped": "dropped: " + ", ".join(t.drop_reasons)}.get(t.selection, "—")
        rows.append(
            [esc(t.env), str(t.sample), link, str(t.rounds), best, esc(t.status), esc(verdict), sparkline(t.held_out)]
        )
    unreadable = "".join(f"<li>{esc(u.path)}: {esc(u.reason)}</li>" for u in v.unreadable)
    extra = f'<p>Records that could not be read:</p><ul class="unreadable">{unreadable}</ul>' if unreadable else ""
    return (
        f"<h3>{esc(v.name)} ({v.rollouts} rollouts)</h3>"
        + table(
            ["env", "sample", "trajectory", "rounds", "best", "ending", "selection", "held-out by round"],
            rows,
            "trajectories",
            (1, 3, 4),
        )
        + extra
    )


def _evaluation(report: Report) -> str:
    """The benchmark's own score (`arex eval`'s eval.json): headline, per-problem table, curve, absent problems."""
    found = report.evaluation
    if found is None:
        return ""
    if "error" in found:
        return f"<h2>Benchmark</h2><p>{esc(found['error'])}</p>"
    name, out = found.get("score_name", "score"), [f"<h2>Benchmark: {esc(found.get('benchmark'))}</h2>"]
    out.append(f"<p>{esc(found.get('evaluated'))} of {esc(found.get('problems'))} problems evaluated.</p>")
    for v in found["variants"]:
        cost = v["usage"]["cost_usd"]
        out.append(
            f"<p><b>{esc(v.get('name') or 'result')}: {esc(name)} {num(v['score'])}</b> ± {num(v['spread'])} over "
            f"{esc(v['samples'])} sample(s) (min {num(v['min'])}, max {num(v['max'])}); cost ${cost:.4f}</p>"
        )
        keys = list(dict.fromkeys(k for p in v["problems"] if p["status"] != "absent" for k in p["columns"]))
        rows = [
            [esc(p["problem"]), "not evaluated", *[""] * (5 + len(keys))]
            if p["status"] == "absent"
            else [
                esc(p["problem"]),
                *(_cell(p.get(k)) for k in ("value", "min", "max")),
                *(_cell(p["columns"].get(k)) for k in keys),
                _cell(p["rounds"]),
                _cell(p["tokens"]),
                esc(f"{p['cost_usd']:.4f}"),
            ]  # fmt: skip
            for p in v["problems"]
        ]
        out.append(table(["problem", name, "min", "max", *keys, "rounds", "tokens", "cost $"], rows))
        curve = [[esc(c["round"]), num(c["score"]), num(c["spread"])] for c in v["curve"]]
        out.append("<p>Score after each round (best so far):</p>" + table(["round", name, "spread"], curve))
    for a in found.get("absent", []):
        out.append(f"<p>Not evaluated: problem {esc(a['problem'])}: {esc(a['reason'])}</p>")
    return "\n".join(out)


def _cell(value) -> str:
    return num(value) if isinstance(value, (int, float)) else esc("—" if value is None else value)


def report_page(report: Report) -> str:
    names = ", ".join(v.name for v in report.variants)
    body = [
        "<h1>arex run report</h1>",
        (
            f'<p class="muted">store {esc(report.store)} · variants: {esc(names)} · envs: '
            f"{esc(', '.join(report.envs))} · arex {esc(report.arex_version)}</p>"
        ),
        _evaluation(report),
        _scaling(report),
        _stagewise(report),
        _curves(report),
        _spend(report),
        _endings(report),
        _drops(report),
        "<h2>Trajectories</h2>",
        "\n".join(_trajectories(v) for v in report.variants),
    ]
    return page("arex run report", "\n".join(body))
