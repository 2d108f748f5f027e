"""Charts as inline SVG: no image files, no scripts, and the data stays in the page.

Every plotted point is a `<circle>` carrying `data-series`, `data-x` and `data-y` (the value
plotted) and a `<title>` (its tooltip), so a reader, or a test, can check a chart against the
numbers in report.json. Text from outside (series names) is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
W, H = 520, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 130, 34, 44


@dataclass
class Series:
    name: str
    xs: list[int]
    ys: list[float]
    spread: list[float] = field(default_factory=list)
    """Half-width of the band drawn around each point (none if empty)."""


def num(value: float) -> str:
    """A value as the charts and tables print it."""
    return f"{value:.4g}"


def _tick_label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10_000 else num(round(value, 12))


def _step(span: float) -> float:
    """A round tick step (1, 2 or 5 × 10^k) giving about five intervals over `span`."""
    raw = span / 5
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _ticks(lo: float, hi: float) -> list[float]:
    step = _step(hi - lo)
    first = math.ceil(lo / step - 1e-9)
    return [k * step for k in range(first, math.floor(hi / step + 1e-9) + 1)]


def _y_range(series: list[Series]) -> tuple[float, float]:
    """The y axis: every point and band, widened to round tick values."""
    values = [
        y + s * sign for ser in series for y, s in zip(ser.ys, ser.spread or [0.0] * len(ser.ys)) for sign in (-1, 1)
    ]
    values = [v for v in values if math.isfinite(v)]
    lo, hi = min(values, default=0.0), max(values, default=1.0)
    if hi - lo < 1e-12:
        pad = abs(hi) * 0.1 or 0.5
        lo, hi = lo - pad, hi + pad
    step = _step(hi - lo)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step


def _axes(x_lo: int, x_hi: int, y_lo: float, y_hi: float, px, py, x_label: str, y_label: str) -> list[str]:
    out = [
        f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/>',
    ]
    for y in _ticks(y_lo, y_hi):
        out.append(f'<line class="grid" x1="{LEFT}" y1="{py(y):.1f}" x2="{W - RIGHT}" y2="{py(y):.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{_tick_label(y)}</text>')
    step = max(1, (x_hi - x_lo + 1) // 12 + (1 if (x_hi - x_lo + 1) % 12 else 0))
    for x in range(x_lo, x_hi + 1, step):
        out.append(f'<text class="tick" x="{px(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x}</text>')
    out.append(
        f'<text class="label" x="{(LEFT + W - RIGHT) / 2:.1f}" y="{H - 8}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    out.append(
        f'<text class="label" x="14" y="{(TOP + H - BOTTOM) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2:.1f})">{escape(y_label)}</text>'
    )
    return out


def _series(ser: Series, color: str, px, py) -> list[str]:
    name = escape(ser.name)
    out = [f'<g class="series" data-series="{name}">']
    if ser.spread and any(ser.spread):
        upper = [f"{px(x):.1f},{py(y + s):.1f}" for x, y, s in zip(ser.xs, ser.ys, ser.spread)]
        lower = [f"{px(x):.1f},{py(y - s):.1f}" for x, y, s in reversed(list(zip(ser.xs, ser.ys, ser.spread)))]
        out.append(f'<polygon class="band" fill="{color}" points="{" ".join(upper + lower)}"/>')
    points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(ser.xs, ser.ys))
    out.append(f'<polyline class="line" stroke="{color}" points="{points}"/>')
    for i, (x, y) in enumerate(zip(ser.xs, ser.ys)):
        spread = f" ± {num(ser.spread[i])}" if ser.spread else ""
        out.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}" data-series="{name}" data-x="{x}" '
            f'data-y="{y!r}"><title>{name}, round {x}: {num(y)}{spread}</title></circle>'
        )
    out.append("</g>")
    return out


def line_chart(
    title: str, series: list[Series], y_label: str, x_label: str = "round", y_range: tuple[float, float] | None = None
) -> str:
    """A line chart of `series` (x: integers), with a band of ± spread and a legend."""
    xs = [x for s in series for x in s.xs]
    x_lo, x_hi = min(xs, default=1), max(xs, default=1)
    y_lo, y_hi = y_range or _y_range(series)

    def px(x: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * ((x - x_lo) / (x_hi - x_lo) if x_hi > x_lo else 0.5)

    def py(y: float) -> float:
        return H - BOTTOM - (H - TOP - BOTTOM) * (y - y_lo) / (y_hi - y_lo)

    body = [
        (
            f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
            f'role="img" aria-label="{escape(title)}">'
        ),
        f"<title>{escape(title)}</title>",
    ]
    body.append(f'<text class="title" x="{LEFT}" y="20">{escape(title)}</text>')
    body += _axes(x_lo, x_hi, y_lo, y_hi, px, py, x_label, y_label)
    for i, ser in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        body += _series(ser, color, px, py)
        y = TOP + 8 + 18 * i
        body.append(
            f'<rect x="{W - RIGHT + 14}" y="{y - 8}" width="12" height="12" fill="{color}"/>'
            f'<text class="legend" x="{W - RIGHT + 32}" y="{y + 2}">{escape(ser.name[:22])}</text>'
        )
    body.append("</svg>")
    return "\n".join(body)


def sparkline(
    values: list[float | None], width: int = 160, height: int = 36, label: str = "held-out score by round"
) -> str:
    """A small inline chart of one rollout's held-out score per round; each point a circle with
    `data-round` and `data-value`. A round with no score (None: an invalid submission, or grading
    failed) is a hollow mark on the bottom edge titled so, outside the scale: the worst value an
    invalid ML submission records (-1e6) would flatten every real score."""
    if not values:
        return '<svg class="spark" width="0" height="0"></svg>'
    valid = [v for v in values if v is not None]
    lo, hi = min(valid, default=0.0), max(valid, default=0.0)
    span = hi - lo or 1.0

    def at(i: int, v: float | None) -> tuple[float, float]:
        x = 4 + (width - 8) * (i / (len(values) - 1) if len(values) > 1 else 0.5)
        if v is None:
            return x, height - 3.0
        return x, height - 4 - (height - 8) * ((v - lo) / span if hi > lo else 0.5)

    coords = [at(i, v) for i, v in enumerate(values)]
    shown = ", ".join("invalid submission" if v is None else num(v) for v in values)
    out = [
        '<svg class="spark" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
    ]
    out.append(f"<title>{escape(label)}: {shown}</title>")
    line = " ".join(f"{x:.1f},{y:.1f}" for (x, y), v in zip(coords, values) if v is not None)
    out.append(f'<polyline class="line" stroke="{PALETTE[0]}" points="{line}"/>')
    best = values.index(hi) if valid else -1
    for i, ((x, y), v) in enumerate(zip(coords, values)):
        if v is None:
            out.append(
                f'<circle class="invalid" cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="none" stroke="{PALETTE[1]}" '
                f'data-round="{i + 1}" data-value="invalid"><title>round {i + 1}: invalid submission</title></circle>'
            )
            continue
        cls = "best" if i == best else "pt"
        out.append(
            f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="2.5" data-round="{i + 1}" '
            f'data-value="{v!r}"><title>round {i + 1}: {num(v)}</title></circle>'
        )
    out.append("</svg>")
    return "".join(out)
