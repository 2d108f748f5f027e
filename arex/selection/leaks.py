"""The net under grading isolation: a trajectory holding hidden-test content is never kept.

The sandbox and the judge keep hidden tests away from the agent; if a hole opens anyway (a new
grading surface, a hostile package's checker quoting its answers), what crossed it shows up in the
record: in the feedback, in what the agent was shown, in what it wrote. `hidden_content` searches
every such text of a record for the env's private data (arex.envs.task_skills.PrivateData: the
canary, each hidden test file's content and lines of at least MIN_NEEDLE characters that public
text does not hold, ML label rows and runs), in the forms an agent smuggling it would use too:
whitespace removed or changed (joined, split over lines), reversed, and base64-encoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path

from arex.envs.task_skills import MIN_NEEDLE, PrivateData
from arex.record.trajectory import Trajectory

KEY = MIN_NEEDLE  # characters of a needle's start looked up at each position of a text
_B64 = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_SPACE = re.compile(r"\s+")


@dataclass
class _Needle:
    text: str
    where: str


class HiddenContent:
    """One env's private data, ready to be searched for in many texts."""

    def __init__(self, env_dir: Path):
        self.private = PrivateData(Path(env_dir))
        self.canaries = [_SPACE.sub("", c) for c in self.private.canaries]
        self._index: dict[str, list[_Needle]] = {}
        for needle, where in self.private.needles.items():
            for form, how in ((needle, ""), (_SPACE.sub("", needle), ", whitespace removed")):
                if len(form) >= KEY:
                    self._index.setdefault(form[:KEY], []).append(_Needle(form, where + how))

    def find(self, text: str) -> str | None:
        """Where `text` holds private data (a phrase), or None."""
        for form, how in _forms(text):
            joined = _SPACE.sub("", form)
            for canary in self.canaries:
                if canary in joined:
                    return f"the env's canary{how}"
            found = self._search(" ".join(form.split())) or self._search(joined)
            if found:
                return f"content of {found}{how}"
            if not how:  # label rows and runs are words: the plain text is where they can be
                plain = self.private.find(form)
                if plain:
                    return plain.removeprefix("it contains ")
        return None

    def _search(self, text: str) -> str | None:
        index = self._index
        if not index:
            return None
        for i in range(len(text) - KEY + 1):
            for needle in index.get(text[i : i + KEY], ()):
                if text.startswith(needle.text, i):
                    return needle.where
        return None


def _forms(text: str) -> list[tuple[str, str]]:
    """`text` as it is, reversed, and each base64 run in it decoded (with how it was changed)."""
    forms = [(text, ""), (text[::-1], ", reversed")]
    for match in _B64.finditer(text):
        run = match.group(0)
        try:
            decoded = base64.b64decode(
                run + "=" * (-len(run) % 4), altchars=b"-_" if "-" in run or "_" in run else None
            )
        except (binascii.Error, ValueError):
            continue
        forms.append((decoded.decode("utf-8", "replace"), ", base64-encoded"))
    return forms


def texts_of(t: Trajectory) -> list[tuple[str, str]]:
    """(where, text) of everything in a record that the agent saw or wrote after its task."""
    out = []
    for round_ in t.rounds:
        n = round_.number
        for step in round_.steps:
            out.append((f"round {n} step {step.step} reply", step.call.content or ""))
            out += [
                (f"round {n} step {step.step} observation", text)
                for text in [step.observation or "", *(step.tool_results or [])]
            ]
        end = round_.end
        out += [
            (f"round {n} feedback", end.feedback),
            (f"round {n} reflection", end.reflection.call.content or ""),
            (f"round {n} state", end.state),
        ]
    return [(where, text) for where, text in out if text]


def find_in(t: Trajectory, hidden: HiddenContent) -> str | None:
    """The first place in the record holding hidden content, as a sentence, or None."""
    for where, text in texts_of(t):
        found = hidden.find(text)
        if found:
            return f"{where} holds {found}"
    return None
