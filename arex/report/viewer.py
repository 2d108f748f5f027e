"""One trajectory as a page: its rounds as collapsible sections (`<details>`), each with the
actions and what the agent saw, the submission's diff against the previous round, the feedback,
the reflection and the state update; a sparkline of the held-out score per round at the top.

Every string from the record is escaped (`markup.esc`): it is model output."""

from __future__ import annotations

import difflib

from arex.record.trajectory import Reflection, Round, Step, Trajectory
from arex.report.markup import esc, page, pre
from arex.report.stats import best_so_far, ending_of, round_score, scores
from arex.report.svg import num, sparkline

DIFF_LINES = 600
"""Diff lines shown per round; the rest is counted."""


def _score(value: float | None) -> str:
    return "none" if value is None else num(value)


def _meta(t: Trajectory, variant: str) -> str:
    h = t.header
    status, reason = ending_of(t)
    tokens = (
        t.end.tokens
        if t.end
        else sum(c.tokens for r in t.rounds for c in [*(s.call for s in r.steps), r.end.reflection.call])
    )
    best = t.end.best if t.end and t.end.best else (t.rounds[-1].end.best if t.rounds else None)
    rows = [
        ("variant", variant),
        ("env", f"{h.env_id} ({h.env_kind})"),
        ("key", h.key),
        ("sample", h.sample),
        ("teacher", h.teacher.model),
        ("action format", h.action_format),
        ("rounds", len(t.rounds)),
        ("ending", f"{status}: {reason}"),
        ("baseline held-out", _score(h.baseline_score)),
        ("best held-out", f"{num(best.held_out)} (round {best.round})" if best else "none"),
        ("tokens", tokens),
        ("cost (USD)", f"{t.end.cost_usd:.4f}" if t.end else "n/a"),
    ]
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows) + "</dl>"


def _step(step: Step) -> str:
    action = step.action
    kind = action.kind
    # Steps count from 1 within their round, as rounds do (the record's index is step.step, from 0).
    parts = [f'<div class="step {esc(kind)}"><div class="small muted">step {step.step + 1}: {esc(kind)}']
    if step.exec is not None:
        parts.append(f" · exit {step.exec.exit_code} ({esc(step.exec.status)}, {step.exec.seconds:.2f}s)")
    parts.append(f" · call {esc(step.call.status)}, {step.call.tokens} tokens</div>")
    if kind == "command":
        parts.append(pre(action.command))
    elif kind == "invalid":
        parts.append(
            f"<div>not run: {esc(action.error)}</div>"
            f"<details><summary>the reply</summary>{pre(step.call.content)}</details>"
        )
    shown = step.shown
    if shown is not None:
        parts.append(f"<details><summary>observation ({len(shown)} characters)</summary>{pre(shown)}</details>")
    parts.append("</div>")
    return "".join(parts)


def _diff_line(line: str) -> str:
    kind = "hunk" if line.startswith(("+++", "---", "@@")) else {"+": "add", "-": "del"}.get(line[:1])
    return f'<span class="{kind}">{esc(line)}</span>' if kind else f"{esc(line)}\n"


def _diff(previous: str | None, current: str) -> str:
    if previous is None:
        return (
            f"<h3>Submission (first round)</h3>{pre(current)}"
            if current
            else '<h3>Submission</h3><p class="muted">none</p>'
        )
    if previous == current:
        return '<h3>Submission</h3><p class="muted">unchanged from the previous round</p>'
    lines = list(
        difflib.unified_diff(previous.splitlines(), current.splitlines(), "previous round", "this round", lineterm="")
    )
    shown = "".join(_diff_line(line) for line in lines[:DIFF_LINES])
    more = f'<p class="muted">… {len(lines) - DIFF_LINES} more diff lines</p>' if len(lines) > DIFF_LINES else ""
    return f'<h3>Submission diff against the previous round</h3><pre class="diff">{shown}</pre>{more}'


def _reflection(reflection: Reflection) -> str:
    if not reflection.complete:
        return f"<h3>Reflection (incomplete: shown as written)</h3>{pre(reflection.call.content)}"
    parts = "".join(
        f"<dt>{label}</dt><dd>{pre(text)}</dd>"
        for label, text in (("review", reflection.review), ("diagnose", reflection.diagnose), ("plan", reflection.plan))
    )
    return f'<h3>Reflection</h3><dl class="kv">{parts}</dl>'


def _round(round_: Round, previous: str | None, best: float | None) -> str:
    end = round_.end
    grade = end.grade
    score = round_score(round_)
    held = num(score) if score is not None else ("invalid submission" if grade.details.get("invalid") else "none")
    summary = (
        f"Round {round_.number}: {end.ending}, held-out {held} "
        f"(public {_score(grade.public_score) if score is not None else 'none'}), best so far {_score(best)}"
    )
    context = round_.start.context[-1].content if round_.start.context else ""
    body = [
        f'<details class="round" id="round-{round_.number}"><summary>{esc(summary)}</summary>',
        f"<details><summary>what the round started from</summary>{pre(context)}</details>",
        f"<h3>Actions ({len(round_.steps)})</h3>",
        "".join(_step(s) for s in round_.steps) or '<p class="muted">none</p>',
        _diff(previous, end.submission),
        f"<h3>Feedback</h3>{pre(end.feedback)}",
        f'<p class="small muted">grading problem: {esc(grade.infra_error)}</p>' if grade.infra_error else "",
        _reflection(end.reflection),
        f"<h3>State update</h3>{pre(end.state)}",
        "</details>",
    ]
    return "\n".join(body)


def trajectory_page(t: Trajectory, variant: str, report_href: str) -> str:
    """The page of one trajectory; `report_href` links back to the report."""
    h = t.header
    title = f"{h.env_id} · sample {h.sample} · {variant}"
    bests = best_so_far(t)
    rounds, previous = [], None
    for round_, best in zip(t.rounds, bests):
        rounds.append(_round(round_, previous, best))
        previous = round_.end.submission
    body = [
        f'<p class="small"><a href="{esc(report_href)}">← run report</a></p>',
        f"<h1>Trajectory {esc(title)}</h1>",
        _meta(t, variant),
        f"<h2>Held-out score by round</h2>{sparkline(scores(t), 360, 70)}",
        f"<h2>Rounds ({len(t.rounds)})</h2>",
        "\n".join(rounds) or '<p class="muted">no complete round</p>',
    ]
    return page(f"Trajectory {title}", "\n".join(body))
