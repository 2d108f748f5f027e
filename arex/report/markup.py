"""Small HTML helpers shared by the report and the trajectory pages.

Everything from a record is model output: it goes through `esc` (text and attribute values) and
nothing else. The pages carry a Content-Security-Policy that allows no script, no network and
only inline styles and `data:` images, so a missed escape still could not run code or fetch.
"""

from __future__ import annotations

from html import escape

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1100px; \
padding: 0 16px; color: #1b1f24; background: #fff; }
h1 { font-size: 24px; margin-bottom: 4px; } \
h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
.muted { color: #57606a; } .small { font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 4px; padding: 8px; white-space: pre-wrap; \
word-break: break-word; max-height: 480px; overflow: auto; margin: 4px 0; }
details { margin: 6px 0; } details.round { border: 1px solid #d0d7de; border-radius: 6px; padding: 4px 10px; }
details.round > summary { font-weight: 600; cursor: pointer; padding: 4px 0; }
.step { border-left: 3px solid #d0d7de; padding-left: 10px; margin: 8px 0; } .step.invalid { border-color: #d62728; } \
.step.submit { border-color: #2ca02c; }
.diff .add { color: #116329; background: #dafbe1; display: block; } \
.diff .del { color: #82071e; background: #ffebe9; display: block; } .diff .hunk { color: #0550ae; display: block; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; } figure { margin: 0; }
svg.chart { background: #fff; border: 1px solid #d0d7de; border-radius: 4px; }
svg .axis { stroke: #57606a; } svg .grid { stroke: #eaeef2; } svg .line { fill: none; stroke-width: 2; } \
svg .band { opacity: 0.15; }
svg text { font: 11px system-ui, sans-serif; fill: #1b1f24; } svg .title { font-size: 13px; font-weight: 600; } \
svg .label { fill: #57606a; }
svg.spark { vertical-align: middle; } svg.spark circle.pt { fill: #1f77b4; } svg.spark circle.best { fill: #d62728; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; } dl.kv dt { color: #57606a; } \
dl.kv dd { margin: 0; }
"""


def esc(value: object) -> str:
    """Text (or an attribute value) safe to put in the page."""
    return escape(str(value), quote=True)


def page(title: str, body: str) -> str:
    """A whole self-contained page: inline style, no script, no outside resource."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def table(headers: list[str], rows: list[list[str]], cls: str = "", numeric: tuple[int, ...] = ()) -> str:
    """A table; `headers` are plain text (escaped), cells are markup (escape them first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def pre(text: str, limit: int = 20_000) -> str:
    """Preformatted text, clipped to `limit` characters (with a note)."""
    text = text or ""
    clipped = f"\n… ({len(text) - limit} more characters)" if len(text) > limit else ""
    return f"<pre>{esc(text[:limit])}{esc(clipped)}</pre>"
