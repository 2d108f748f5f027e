"""A small LaTeX → Markdown converter for problem statements (the subset problem packages use).

`\\problemname{T}` → `# T`; `\\section{...}` / `\\section*{...}` and the Input/Output/Interaction
environments → `## ...`; `\\textbf`, `\\emph`/`\\textit`, `\\texttt`; itemize/enumerate lists;
tabular → Markdown tables; verbatim/lstlisting → code blocks; math (`$...$`, `$$...$$`, `\\[...\\]`,
equation-like environments) kept as is; figures and `\\illustration` dropped with a note; any other
macro stripped to the text of its arguments. `\\nextsample` / `\\remainingsamples` become the
`{{nextsample}}` / `{{remainingsamples}}` markers Markdown statements use.
"""

from __future__ import annotations

import re

_VERBATIM = re.compile(r"\\begin\{(verbatim|lstlisting|Verbatim)\}(?:\[[^\]]*\])?\n?(.*?)\\end\{\1\}", re.S)
_MATH = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$"
    r"|\\\[(.+?)\\\]"
    r"|\\begin\{(equation|align|gather|multline|eqnarray|displaymath)(\*?)\}(.+?)\\end\{\3\4\}"
    r"|(?<!\\)\$(.+?)(?<!\\)\$"
    r"|\\\((.+?)\\\)",
    re.S,
)
_COMMENT = re.compile(r"(?<!\\)%.*")
_NAME = re.compile(r"[A-Za-z]+\*?|.", re.S)
_INDENT = "\x02"  # one list level, turned into spaces after lines are stripped
_KEEP = "\x00"  # brackets a protected piece's number

_SYMBOLS = {
    "\\": "\n",
    "%": "%",
    "&": "&",
    "_": "_",
    "#": "#",
    "$": "$",
    "{": "{",
    "}": "}",
    " ": " ",
    ",": " ",
    ";": " ",
    "!": "",
    "-": "",
    "'": "",
    "`": "",
    '"': "",
    "~": "~",
    "^": "^",
}
_WORDS = {
    "ldots": "…",
    "dots": "…",
    "textellipsis": "…",
    "cdots": "⋯",
    "LaTeX": "LaTeX",
    "TeX": "TeX",
    "newline": "\n",
    "par": "\n\n",
    "item": "",
    "hline": "",
    "cline": "",
}
_FORMATS = {
    "textbf": "**{}**",
    "bf": "{}",
    "emph": "*{}*",
    "textit": "*{}*",
    "it": "{}",
    "texttt": "`{}`",
    "tt": "{}",
    "url": "<{}>",
    "textsc": "{}",
    "underline": "{}",
    "sout": "~~{}~~",
}
_HEADINGS = {
    "problemname": "#",
    "section": "##",
    "section*": "##",
    "subsection": "###",
    "subsection*": "###",
    "subsubsection": "####",
    "subsubsection*": "####",
    "paragraph": "####",
}
_SECTION_ENVS = {"Input": "Input", "Output": "Output", "Interaction": "Interaction"}
_DROPPED_ENVS = {"figure", "figure*", "wrapfigure"}
_LISTS = {"itemize": "- ", "enumerate": "1. ", "description": "- "}
_NO_ARGS = {
    "noindent", "medskip", "bigskip", "smallskip", "centering", "raggedright", "clearpage", "newpage", "protect",
    "displaystyle", "tiny", "scriptsize", "footnotesize", "small", "normalsize", "large", "Large", "LARGE", "huge",
    "Huge",
}  # fmt: skip
_SPACING = {"vspace", "vspace*", "hspace", "hspace*", "label", "vskip", "def", "htmlPixelsInCm"}


def latex_to_markdown(text: str, constants: dict | None = None) -> str:
    kept: list[str] = []

    def keep(piece: str) -> str:
        kept.append(piece)
        return f"{_KEEP}{len(kept) - 1}{_KEEP}"

    text = _VERBATIM.sub(lambda m: "\n\n" + keep(_fence(m.group(2))) + "\n\n", text)
    text = "\n".join(_COMMENT.sub("", line) for line in text.split("\n"))
    text = _MATH.sub(lambda m: keep(_math(m)), text)
    body = _Converter(constants or {}, keep).run(text)
    body = body.replace("---", "—").replace("--", "–").replace("``", '"').replace("''", '"')
    lines = [line.strip() for line in body.split("\n")]
    body = "\n".join(line.replace(_INDENT, "  ") for line in lines)
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    for _ in range(3):  # a protected piece may hold another one (math in a table cell)
        body = re.sub(f"{_KEEP}(\\d+){_KEEP}", lambda m: kept[int(m.group(1))], body)
    return body


def _fence(code: str) -> str:
    fence = "```" if "```" not in code else "~~~~"
    return f"{fence}\n{code.rstrip()}\n{fence}"


def _math(m: re.Match) -> str:
    display, bracket, env, star, env_body, inline, paren = m.groups()
    if inline is not None:
        return f"${inline}$"
    if paren is not None:
        return f"${paren}$"
    if env is not None:
        return f"$$\n\\begin{{{env}{star}}}{env_body}\\end{{{env}{star}}}\n$$"
    return f"$${display if display is not None else bracket}$$"


class _Converter:
    def __init__(self, constants: dict, keep) -> None:
        self.constants, self.keep, self.lists = constants, keep, []

    def run(self, text: str) -> str:
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                piece, i = self.command(text, i + 1)
                out.append(piece)
            elif c == "{":
                inner, i = _group(text, i)
                out.append(self.run(inner))
            elif c == "}":
                i += 1
            else:
                out.append(" " if c == "~" else c)
                i += 1
        return "".join(out)

    def command(self, text: str, i: int) -> tuple[str, int]:
        """The Markdown for the macro whose name starts at text[i], and where it ends."""
        m = _NAME.match(text, i)
        if m is None:
            return "", i
        name, i = m.group(0), m.end()
        if len(name) == 1 and not name.isalpha():
            return _SYMBOLS.get(name, name), i
        if name in ("begin", "end"):
            return self.environment(text, i) if name == "begin" else ("", _skip_args(text, i, 1)[1])
        if name == "item":
            label, i = _optional(text, i)
            while i < len(text) and text[i] in " \t\n":
                i += 1
            marker = _LISTS.get(self.lists[-1], "- ") if self.lists else "- "
            return "\n" + _INDENT * max(0, len(self.lists) - 1) + marker + (
                f"**{self.run(label)}** " if label else ""
            ), i
        if name in _WORDS:
            return _WORDS[name], i
        if name in _NO_ARGS:
            return "", i
        return self.with_args(name, text, i)

    def with_args(self, name: str, text: str, i: int) -> tuple[str, int]:
        if name in _SPACING:
            return "", _skip_args(text, i, 1)[1]
        if name in ("nextsample", "remainingsamples"):
            return f"\n\n{{{{{name}}}}}\n\n", i
        if name == "illustration":
            args, i = _skip_args(text, i, 3)
            caption = self.run(args[2]).strip() if len(args) > 2 else ""
            return f"\n\n> Illustration omitted{': ' + caption if caption else '.'}\n\n", i
        if name == "includegraphics":
            return "*(image omitted)*", _skip_args(text, i, 1)[1]
        if name == "href":
            args, i = _skip_args(text, i, 2)
            return (f"[{self.run(args[1])}]({args[0]})" if len(args) == 2 else ""), i
        if name == "constant":
            args, i = _skip_args(text, i, 1)
            key = args[0].strip() if args else ""
            return str(self.constants.get(key, key)), i
        args, i = _skip_args(text, i, 1 if name in _FORMATS or name in _HEADINGS else 9)
        inner = " ".join(self.run(a).strip() for a in args)
        if name in _HEADINGS:
            return (f"\n\n{_HEADINGS[name]} {inner}\n\n" if inner else ""), i
        if name in _FORMATS:
            return (_FORMATS[name].format(inner) if inner else ""), i
        return inner, i  # an unknown macro: the text of its arguments

    def environment(self, text: str, i: int) -> tuple[str, int]:
        args, i = _skip_args(text, i, 1)
        env = args[0].strip() if args else ""
        body, end = _environment_body(text, i, env)
        if env in _DROPPED_ENVS:
            caption = re.search(r"\\caption\{((?:[^{}]|\{[^{}]*\})*)\}", body)
            note = f": {self.run(caption.group(1)).strip()}" if caption else ""
            return f"\n\n> Figure omitted{note or '.'}\n\n", end
        if env == "tabular":
            return self.table(_skip_args(body, 0, 1)[1], body), end
        if env in ("minipage", "wrapfigure"):
            body = body[_skip_args(body, 0, 1)[1] :]
        if env in _LISTS:
            self.lists.append(env)
            try:  # a tight list: no blank line before an item
                items = re.sub(r"\n[ \t]*\n(?=[ \t\x02]*(?:- |1\. ))", "\n", self.run(body))
                return "\n" + items + "\n\n", end
            finally:
                self.lists.pop()
        if env in _SECTION_ENVS:
            return f"\n\n## {_SECTION_ENVS[env]}\n\n" + self.run(body) + "\n\n", end
        return "\n" + self.run(body) + "\n", end

    def table(self, start: int, body: str) -> str:
        rows = [r for r in re.split(r"\\\\", body[start:]) if r.replace("\\hline", "").strip()]
        cells = [
            [self.run(c).replace("\n", " ").strip() for c in re.split(r"(?<!\\)&", row.replace("\\hline", ""))]
            for row in rows
        ]
        if not cells:
            return ""
        width = max(len(r) for r in cells)
        lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in cells]
        lines.insert(1, self.keep("|" + "---|" * width))
        return "\n\n" + "\n".join(lines) + "\n\n"


def _group(text: str, i: int) -> tuple[str, int]:
    """The content of the brace group opening at text[i], and the index after its closing brace."""
    depth, j = 0, i
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
        j += 1
    return text[i + 1 :], len(text)  # unbalanced: the rest


def _optional(text: str, i: int) -> tuple[str, int]:
    j = i
    while j < len(text) and text[j] in " \t":
        j += 1
    if j < len(text) and text[j] == "[":
        end = text.find("]", j)
        if end != -1:
            return text[j + 1 : end], end + 1
    return "", i


def _skip_args(text: str, i: int, most: int) -> tuple[list[str], int]:
    """Up to `most` brace arguments (optional [..] ones skipped) after a macro, and where they end."""
    args = []
    while len(args) < most:
        _, i = _optional(text, i)
        j = i
        while j < len(text) and text[j] in " \t\n" and text[j : j + 2] != "\n\n":
            j += 1
        if j >= len(text) or text[j] != "{":
            break
        arg, i = _group(text, j)
        args.append(arg)
    return args, i


def _environment_body(text: str, i: int, env: str) -> tuple[str, int]:
    """The text up to the matching \\end{env} (nested ones of the same name counted), and the index after it."""
    opening, closing = f"\\begin{{{env}}}", f"\\end{{{env}}}"
    depth, j = 1, i
    while True:
        next_open, next_close = text.find(opening, j), text.find(closing, j)
        if next_close == -1:
            return text[i:], len(text)
        if next_open != -1 and next_open < next_close:
            depth, j = depth + 1, next_open + len(opening)
            continue
        depth -= 1
        if depth == 0:
            return text[i:next_close], next_close + len(closing)
        j = next_close + len(closing)
