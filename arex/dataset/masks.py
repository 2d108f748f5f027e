"""Per-token loss weights under a chat template, in linear time, and rows cut to a token budget.

A conversation is rendered twice: once with every message's text replaced by a unique slot
(`ArexSlot…`), which gives the template's frame (the headers and end-of-turn markers between
messages), and once as it is. Walking both texts side by side finds where each message's text
lies in the real rendering, however the template frames turns (a date header, a `<think>` block on
the last turn, `<|return|>` instead of `<|end|>`), with no re-rendering per message (the old
prefix method was quadratic and refused every template whose prefixes are not concatenations).
The supervised text of an assistant turn is its text plus the special token that ends it (the
model must learn to stop); headers and every other message carry no loss. A template that
rewrites a message's text beyond trimming, drops or reorders messages, or ends a reply with no
special token raises a `TemplateError` naming the template.

Tool calls (`tools` action format): an assistant turn with `tool_calls` is supervised from the end
of its assistant header (the template's generation prompt, found once per tool list) or the start
of its text, through its tool calls, to the special token that closes it; `tool` results carry no
loss. The conversation is rendered with the row's `tools`. A template that does not render the
calls inside that stretch (one without tool support) raises a `TemplateError` naming it.

Text written during a rollout (replies, command output, feedback, tool-call arguments) is data,
never markup: the template's markup between messages is tokenized with special-token parsing and
each message's text without (`split_special_tokens`), so a reply or an output holding
`<|im_end|>\n<|im_start|>assistant` stays those characters and cannot open a turn in the row. Each
row is checked: its special tokens must number exactly those the template inserts (counted from the
rendering with every text replaced, and with neutral tool calls); a row that holds more (a tool
call's arguments, a tokenizer that merges text into a special token) raises `SpecialTokenError`
and is left out of the export, counted in `TokenStats.refused`.

The tokenizer is a local folder or a `.gguf` file, loaded with `local_files_only=True`: arex never
downloads one. transformers is imported only here (and only when a tokenizer is given).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from arex.errors import UserInputError


class TemplateError(UserInputError):
    """A chat template whose turns arex cannot locate; the message names the template."""


class SpecialTokenError(UserInputError):
    """A row whose tokens hold special tokens the chat template did not put there: text the agent,
    its programs or a tool call wrote would be read as turn markup. The row is left out."""


def load_tokenizer(spec: str | Path, key: str = "export.tokenizer", chat_template: str | None = None):
    """A fast tokenizer with a chat template from a local folder or a `.gguf` file (never downloaded);
    `chat_template` replaces its own (`chat_template_text`: a template TRL ships, by name, or a .jinja file)."""
    tokenizer = _load_tokenizer(Path(spec).expanduser(), key)
    if chat_template:
        tokenizer.chat_template = chat_template_text(chat_template)
    tokenizer.arex_name = tokenizer_name(Path(spec).expanduser())
    return tokenizer


def chat_template_text(spec: str) -> str:
    """A chat template by the name of one TRL ships (`qwen2_5`: tool-aware, and made for the same
    `<|im_start|>`/`<|im_end|>` tokens as the bundled SmolLM2) or a `.jinja` file."""
    named = {name: text for text, name in _known_templates().items()}
    if spec in named:
        return named[spec]
    path = Path(spec).expanduser()
    if path.suffix == ".jinja" and path.is_file():
        return path.read_text(encoding="utf-8")
    raise UserInputError(
        f"chat template {spec!r} is neither a .jinja file nor a template TRL ships "
        f"(e.g. {', '.join(n for n in ('qwen2_5', 'qwen3', 'llama3') if n in named) or 'none found'})"
    )


def tokenizer_name(path: Path) -> str:
    """A tokenizer's name without the local path: a `.gguf` file's name, else the model's Hub id from
    the folder's config.json, else the folder's name."""
    if path.is_file():
        return path.stem
    for name in ("config.json", "tokenizer_config.json"):
        try:
            given = json.loads((path / name).read_text(encoding="utf-8")).get("_name_or_path") or ""
        except (OSError, ValueError, AttributeError):
            continue
        if given and not Path(given).is_absolute() and not given.startswith((".", "~")):
            return given
    return path.resolve().name


def vocabulary_hash(tokenizer) -> str:
    """sha256 of the vocabulary (every token and its id, added tokens included), first 16 hex digits:
    the same for every copy of a tokenizer, wherever it is stored."""
    import hashlib

    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]


def _gguf_tokenizer(path: Path, auto):
    """A `.gguf` file's tokenizer, converted once (arex.dataset.converted)."""
    from arex.dataset.converted import converted

    return converted(
        "tokenizers",
        path,
        "tokenizer.json",
        lambda: auto.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True),
        lambda folder: auto.from_pretrained(folder, local_files_only=True),
    )


def _load_tokenizer(path: Path, key: str):
    if not path.exists():
        raise UserInputError(
            f"{key}: {path} does not exist; give a local tokenizer folder or a .gguf file "
            "(arex never downloads a tokenizer)"
        )
    if path.is_file() and path.suffix != ".gguf":
        raise UserInputError(
            f"{key}: {path} is a file but not a .gguf file; give a tokenizer folder "
            "(with tokenizer.json) or a .gguf file"
        )
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserInputError(
            f"{key} needs transformers (and gguf for a .gguf file): pip install transformers gguf"
        ) from None
    try:
        if path.is_file():
            tokenizer = _gguf_tokenizer(path, AutoTokenizer)
        else:
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, ImportError, KeyError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(
            f"{key}: could not load a tokenizer from {path} ({reason}); "
            "give a folder saved with save_pretrained or a .gguf file"
        ) from None
    if not getattr(tokenizer, "is_fast", False):
        raise UserInputError(
            f"{key}: the tokenizer in {path} is not a fast (Rust) tokenizer, which masks need for character offsets; "
            "save one with tokenizer.json"
        )
    if not tokenizer.chat_template:
        raise UserInputError(
            f"{key}: the tokenizer in {path} has no chat template; set tokenizer.chat_template and save it again"
        )
    return tokenizer


@lru_cache(maxsize=1)
def _known_templates() -> dict[str, str]:
    """The chat templates TRL ships, by text → name (TRL is not imported: its files are read)."""
    spec = find_spec("trl")
    folders = [Path(p) / "chat_templates" for p in (spec.submodule_search_locations or [])] if spec else []
    return {
        path.read_text(encoding="utf-8").strip(): path.stem
        for folder in folders
        if folder.is_dir()
        for path in sorted(folder.glob("*.jinja"))
    }


def template_name(tokenizer) -> str:
    """'the qwen3 chat template' for a template TRL ships; else the tokenizer's own name."""
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = template.get("default", "")
    name = _known_templates().get((template or "").strip())
    if name:
        return f"the {name} chat template"
    # arex_name: set by load_tokenizer, never a local path (the name goes into cards and errors)
    owner = getattr(tokenizer, "arex_name", None) or Path(tokenizer.name_or_path or "this tokenizer").name
    return f"the chat template of {owner}"


def _candidates(content: str) -> list[str]:
    """How templates may render a message's text: as is, trimmed, or (qwen3, deepseek) without
    the reasoning before `</think>`."""
    out: list[str] = []
    variants = [content, content.strip(), content.lstrip("\n"), content.strip("\n"), content.rstrip(), content.lstrip()]
    if "</think>" in content:
        variants.append(content.split("</think>")[-1].lstrip("\n"))
    for variant in variants:
        if variant not in out:
            out.append(variant)
    return out


def _templated(messages: list[dict]) -> list[dict]:
    """Messages as chat templates take them: no null tool fields (rows loaded with `datasets` have
    them on every message) and tool-call arguments as objects, not JSON text."""
    out = []
    for message in messages:
        message = {**{k: v for k, v in message.items() if v is not None}, "content": message.get("content") or ""}
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": _arguments(c["function"].get("arguments"))}}
                for c in message["tool_calls"]
            ]
        out.append(message)
    return out


def _arguments(value) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


@dataclass
class Encoded:
    """One conversation as tokens: ids, per-token loss weights, and where each message begins."""

    input_ids: list[int]
    weights: list[float]
    starts: list[int]
    """Token index where each message's rendering (its header included) begins."""

    @property
    def labels(self) -> list[int]:
        """`input_ids` with -100 on tokens that carry no loss (what TRL's trainers read)."""
        return [t if w > 0 else -100 for t, w in zip(self.input_ids, self.weights)]

    @property
    def supervised(self) -> bool:
        return any(w > 0 for w in self.weights)


class Masker:
    """Tokenizes conversations and weights their tokens under one tokenizer's chat template."""

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "is_fast", False):
            raise UserInputError("token masks need a fast (Rust) tokenizer: character offsets locate the turns")
        self.tokenizer = tokenizer
        self.name = template_name(tokenizer)
        specials = set(tokenizer.all_special_tokens)
        specials |= {
            t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)
        }
        specials = sorted((s for s in specials if s), key=len, reverse=True)  # longest first: `<|end|>` before `<|e`
        # The token closing a reply follows its text at once in every template TRL ships; allowing a
        # gap would take the next turn's opening token (`\n<|im_start|>`) for a closing one.
        self._end = re.compile("|".join(map(re.escape, specials))) if specials else None
        self._headers: dict[str, str] = {}
        self._tools_ok: set[str] = set()
        decoder = getattr(tokenizer, "added_tokens_decoder", {})
        self._special_ids = set(tokenizer.all_special_ids)
        self._special_ids |= {i for i, t in decoder.items() if getattr(t, "special", False)}

    def render(self, messages: list[dict], tools: list[dict] | None = None, **kwargs) -> str:
        from jinja2 import TemplateError as JinjaError

        try:
            return self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False, **kwargs)
        except (JinjaError, ValueError, TypeError) as exc:
            raise TemplateError(
                f"{self.name} refuses this conversation ({exc}); "
                "export with export.merge_consecutive: true, or use another tokenizer"
            ) from None

    def _frames(self, messages: list[dict], tools: list[dict] | None = None) -> tuple[list[str], list[int]]:
        """The template's text between messages (rendered with slots), and which messages appear."""
        nonce = "7c1e"
        # a slot must not occur in real text
        while any(nonce in (m["content"] + json.dumps(m.get("tool_calls") or "")).lower() for m in messages):
            nonce += "q"
        skeleton = self.render(
            [{**m, "content": f"ArexSlot{nonce}x{i}x" if m["content"] else ""} for i, m in enumerate(messages)], tools
        )
        frames, order, last = [], [], 0
        for match in re.finditer(f"ArexSlot{nonce}x(\\d+)x", skeleton, re.IGNORECASE):  # a template may change case
            frames.append(skeleton[last : match.start()])
            order.append(int(match.group(1)))
            last = match.end()
        frames.append(skeleton[last:])
        if order != sorted(set(order)):
            raise TemplateError(
                f"{self.name} repeats or reorders messages, so their tokens cannot be located; use another tokenizer"
            )
        dropped = [
            i for i, m in enumerate(messages) if m["role"] == "assistant" and m["content"] and i not in set(order)
        ]
        if dropped:
            raise TemplateError(
                f"{self.name} leaves out assistant message {dropped[0]}, so it cannot be trained; use another tokenizer"
            )
        return frames, order

    def spans(self, messages: list[dict], tools: list[dict] | None = None) -> tuple[str, list[tuple[int, int] | None]]:
        """The rendered text and, per message, where its text lies in it (None: not rendered)."""
        frames, order = self._frames(messages, tools)
        text = self.render(messages, tools)
        spans: list[tuple[int, int] | None] = [None] * len(messages)
        pos = 0
        for k, index in enumerate(order):
            if not text.startswith(frames[k], pos):
                raise TemplateError(
                    f"{self.name} frames message {index} differently for its real text than for a placeholder, "
                    "so its tokens cannot be located; use another tokenizer"
                )
            pos += len(frames[k])
            for text_form in _candidates(messages[index]["content"]):
                if text.startswith(text_form, pos) and text.startswith(frames[k + 1], pos + len(text_form)):
                    break
            else:
                raise TemplateError(
                    f"{self.name} rewrites the text of message {index} ({messages[index]['role']}) beyond trimming, "
                    "so its tokens cannot be located; use another tokenizer"
                )
            spans[index] = (pos, pos + len(text_form))
            pos += len(text_form)
        if text[pos:] != frames[-1]:
            raise TemplateError(
                f"{self.name} ends this conversation differently for its real text than for a placeholder; "
                "use another tokenizer"
            )
        return text, spans

    def _reply_end(self, text: str, end: int, index: int) -> int:
        """Where an assistant turn ends: after the special token that closes it."""
        match = self._end.match(text, end) if self._end else None
        if match is None:
            raise TemplateError(
                f"{self.name} closes assistant message {index} with {text[end : end + 24]!r}, "
                "not a special token of this tokenizer, "
                "so the model could not learn to stop; use the tokenizer made for this template"
            )
        return match.end()

    def check_tool_calls(self, tools: list[dict] | None = None) -> None:
        """TemplateError unless the template prints an assistant turn's tool calls, name and arguments
        (probed once per tool list). A template that prints only `content` (the bundled SmolLM2's)
        would train every tool-call turn as an empty reply, whatever the reply's text says."""
        key = json.dumps(tools, sort_keys=True)
        if key in self._tools_ok:
            return
        call = {"id": "call_0", "type": "function", "function": {"name": "arexprobe", "arguments": {"q": "arexvalue"}}}
        probe = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
        text = self.render(probe, tools)
        if "arexprobe" not in text or "arexvalue" not in text:
            raise TemplateError(
                f"{self.name} drops an assistant turn's tool_calls, so tool-call rows would train as empty replies; "
                "use a tool-aware template (export.chat_template / --chat-template qwen2_5 fits the bundled SmolLM2)"
            )
        self._tools_ok.add(key)

    def _assistant_header(self, tools: list[dict] | None) -> str:
        """What the template puts before an assistant reply: its generation prompt."""
        key = json.dumps(tools, sort_keys=True)
        if key not in self._headers:
            probe = [{"role": "user", "content": "x"}]
            bare, prompted = self.render(probe, tools), self.render(probe, tools, add_generation_prompt=True)
            if not prompted.startswith(bare) or len(prompted) == len(bare):
                raise TemplateError(
                    f"{self.name} has no generation prompt to find where a tool-call turn begins; "
                    "use a tool-aware template such as qwen2.5's or qwen3's"
                )
            self._headers[key] = prompted[len(bare) :]
        return self._headers[key]

    def _tool_turn(
        self, text: str, spans: list, index: int, message: dict, begin: int, tools: list[dict] | None
    ) -> tuple[int, int]:
        """Where an assistant turn with tool calls lies: from its text (or the end of its header,
        searched from `begin`) to the special token that closes it, its calls inside."""
        limit = next((s[0] for s in spans[index + 1 :] if s is not None), len(text))
        if spans[index] is not None:
            start, after = spans[index]
        else:
            header = self._assistant_header(tools)
            at = text.find(header, begin, limit)
            start = after = at + len(header) if at >= 0 else -1
        close = self._end.search(text, after, limit) if self._end and start >= 0 else None
        names = [c["function"]["name"] for c in message["tool_calls"]]
        if close is None or not all(name in text[start : close.start()] for name in names):
            raise TemplateError(
                f"{self.name} does not render the tool calls of assistant message {index} inside its turn, "
                "so they cannot be trained; "
                "use a tool-aware template such as qwen2.5's or qwen3's"
            )
        return start, close.end()

    def encode(self, messages: list[dict], weights: list[float], tools: list[dict] | None = None) -> Encoded:
        """Tokens of the rendered conversation (with `tools`, the tool definitions); each takes the
        weight of the assistant turn it belongs to (text, tool calls and closing special token), 0
        elsewhere. Linear in the conversation. Message text never becomes a special token; a row
        that would hold more special tokens than the template inserts raises SpecialTokenError."""
        messages = _templated(messages)
        if any(m.get("tool_calls") for m in messages):
            self.check_tool_calls(tools)
        text, spans = self.spans(messages, tools)
        ranges, owned = self._ranges(text, spans, messages, weights, tools)
        ids, offsets, markup = self._tokenize(text, spans)
        found = sum(i in self._special_ids for i in ids)
        # Without tool calls the markup is the template's rendering of slots alone; a call's name and
        # arguments are agent-written text inside the markup, so then the template's own count is
        # taken from the conversation rendered with neutral calls.
        own = self._own_specials(messages, tools) if any(m.get("tool_calls") for m in messages) else markup
        if found != own:
            raise SpecialTokenError(self._smuggled(messages, found, own))
        token_weights, r = [0.0] * len(ids), 0
        for t, (s, e) in enumerate(offsets):
            while r < len(ranges) and ranges[r][1] <= s:
                r += 1
            if r < len(ranges) and e > ranges[r][0] and s < ranges[r][1]:
                token_weights[t] = ranges[r][2]
        starts, t = [], 0
        for begin in owned:
            while t < len(offsets) and offsets[t][0] < begin:
                t += 1
            starts.append(t)
        return Encoded(ids, token_weights, starts)

    def _ranges(self, text: str, spans: list, messages: list[dict], weights: list[float], tools) -> tuple[list, list]:
        """The weighted character ranges (start, end, weight) of the assistant turns, and where each
        message's rendering begins."""
        ranges, owned, previous = [], [], 0
        for index, (message, span) in enumerate(zip(messages, spans)):
            owned.append(previous)
            if message["role"] == "assistant" and message.get("tool_calls"):
                span = self._tool_turn(text, spans, index, message, previous, tools)
                end = span[1]
            elif span is None:
                continue
            else:
                end = self._reply_end(text, span[1], index) if message["role"] == "assistant" else span[1]
            if message["role"] == "assistant" and weights[index]:
                ranges.append((span[0], end, float(weights[index])))
            previous = end
        return ranges, owned

    def _tokenize(self, text: str, spans: list) -> tuple[list[int], list[tuple[int, int]], int]:
        """Tokens and character offsets of `text`, and how many special tokens its markup holds.
        The template's markup (the text between messages) is tokenized with special-token parsing,
        each message's text without: a reply or a command output holding `<|im_end|>` stays those
        characters, never an end of turn. One batch call for each kind."""
        cuts, pos = [], 0
        for start, end in (s for s in spans if s is not None):  # in text order (spans checks it)
            cuts += [(pos, start, True), (start, end, False)]
            pos = end
        cuts = [c for c in [*cuts, (pos, len(text), True)] if c[1] > c[0]]
        pieces = {}
        for markup in (True, False):
            chosen = [c for c in cuts if c[2] is markup]
            if not chosen:
                continue
            texts = [text[a:b] for a, b, _ in chosen]
            encoded = self.tokenizer(
                texts, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=not markup
            )
            pieces.update(zip(chosen, zip(encoded["input_ids"], encoded["offset_mapping"])))
        ids, offsets, specials = [], [], 0
        for cut in cuts:
            piece_ids, piece_offsets = pieces[cut]
            ids += piece_ids
            offsets += [(cut[0] + s, cut[0] + e) for s, e in piece_offsets]
            specials += sum(i in self._special_ids for i in piece_ids) if cut[2] else 0
        return ids, offsets, specials

    def _own_specials(self, messages: list[dict], tools: list[dict] | None) -> int:
        """The special tokens the template inserts for this conversation: rendered with every text
        a plain word and every tool call an empty call of a plain name, tokenized with parsing on."""
        neutral = []
        for m in messages:
            calls = {"tool_calls": [_neutral_call(c) for c in m["tool_calls"]]} if m.get("tool_calls") else {}
            neutral.append({**m, "content": "x" if m["content"] else "", **calls})
        skeleton = self.render(neutral, tools)
        ids = self.tokenizer(skeleton, add_special_tokens=False, split_special_tokens=False)["input_ids"]
        return sum(i in self._special_ids for i in ids)

    def _smuggled(self, messages: list[dict], found: int, own: int) -> str:
        """Why a row is refused, with the first special-token text found in its messages."""
        texts = (m["content"] + json.dumps(m.get("tool_calls") or "", ensure_ascii=False) for m in messages)
        example = next((match.group(0) for t in texts if self._end for match in [self._end.search(t)] if match), None)
        held = f" (a message or tool call holds {example!r})" if example else ""
        return (
            f"this row would hold {found} special tokens under {self.name}, which inserts {own}{held}: "
            "text written during the rollout would be trained as turn markup, so the row is left out"
        )


def _neutral_call(call: dict) -> dict:
    return {**call, "function": {**call["function"], "name": "f", "arguments": {}}}


@dataclass(frozen=True)
class Segment:
    """The messages one round adds to a trajectory row: from `start` on; `alone` if they hold
    the round's whole context (bounded mode), so a row part may begin there."""

    start: int
    round: int
    alone: bool


@dataclass
class TokenStats:
    """Per granularity: token lengths of whole rows (before any split) and what the limit did."""

    lengths: list[int] = field(default_factory=list)
    rows: int = 0
    split: int = 0
    """Rows written as several parts (cut at round boundaries)."""
    dropped: int = 0
    """Rows left out whole: longer than max_length with no round boundary to cut at."""
    dropped_rounds: int = 0
    """Rounds of split rows that fit in no part (a round alone over max_length)."""
    unsupervised: int = 0
    """Rows left out because no token carries loss."""
    refused: int = 0
    """Rows left out because their text would yield special tokens (SpecialTokenError)."""
    refusals: list[str] = field(default_factory=list)
    """Why, for the first few refused rows."""

    def summary(self) -> dict:
        values = sorted(self.lengths)
        if not values:
            return {}

        def pick(q: float) -> int:
            return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]

        return {
            "min": values[0],
            "median": pick(0.5),
            "p90": pick(0.9),
            "max": values[-1],
            "recommended_max_length": recommended_length(values),
        }


def recommended_length(sorted_lengths: list[int], share: float = 0.95) -> int:
    """The smallest multiple of 256 that keeps at least `share` of the rows whole: the length of the
    ceil(share × n)-th shortest row, rounded up (15 rows: all 15, since 14 of 15 is under 95%)."""
    keep = sorted_lengths[max(0, math.ceil(share * len(sorted_lengths)) - 1)]
    return -(-keep // 256) * 256


class TokenRows:
    """Tokenized rows of at most `max_length` tokens; counts what it splits and drops."""

    def __init__(self, masker: Masker, max_length: int | None):
        self.masker, self.max_length = masker, max_length

    def parts(
        self,
        messages: list[dict],
        weights: list[float],
        segments: list[Segment],
        stats: TokenStats,
        tools: list[dict] | None = None,
    ) -> list[tuple[Encoded, int, int]]:
        """(encoded, first segment, last segment) per row part. Rounds and calls rows have one
        segment: over the limit they are dropped. A trajectory row is cut at round boundaries. A row
        holding special-token text the template did not insert is refused whole (counted, with why)."""
        try:
            return self._parts(messages, weights, segments, stats, tools)
        except SpecialTokenError as exc:
            stats.refused += 1
            if len(stats.refusals) < 10:
                stats.refusals.append(str(exc))
            return []

    def _parts(self, messages, weights, segments, stats: TokenStats, tools) -> list[tuple[Encoded, int, int]]:
        whole = self.masker.encode(messages, weights, tools)
        stats.lengths.append(len(whole.input_ids))
        if not whole.supervised:
            stats.unsupervised += 1
            return []
        if self.max_length is None or len(whole.input_ids) <= self.max_length:
            return [(whole, 0, len(segments) - 1)]
        if len(segments) < 2:
            stats.dropped += 1
            return []
        parts = self._cut(messages, weights, segments, whole, stats, tools)
        parts = [p for p in parts if p[0].supervised]
        if parts:
            stats.split += 1
        else:
            stats.dropped += 1
        return parts

    def _cut(
        self, messages, weights, segments, whole: Encoded, stats: TokenStats, tools=None
    ) -> list[tuple[Encoded, int, int]]:
        """Greedy: each part starts at a round that holds its own context and takes rounds while
        the estimate (from the whole row's token positions) fits; then it is rendered exactly."""
        bounds = [s.start for s in segments] + [len(messages)]
        at = whole.starts + [len(whole.input_ids)]
        size = [at[bounds[j + 1]] - at[bounds[j]] for j in range(len(segments))]
        head = 1 if messages and messages[0]["role"] == "system" else 0
        out, k = [], 0
        while k < len(segments):
            if k and not segments[k].alone:  # under full history a round's context is every round before it
                stats.dropped_rounds += 1
                k += 1
                continue
            lead = at[head] if k and messages[bounds[k]]["role"] != "system" else 0
            m, total = k, lead + size[k]
            while m + 1 < len(segments) and total + size[m + 1] <= self.max_length:
                m += 1
                total += size[m]
            encoded = None
            while m >= k:
                part = self._part(messages, weights, bounds, k, m, head if lead else 0)
                encoded = self.masker.encode(*part, tools)
                if len(encoded.input_ids) <= self.max_length:
                    break
                m -= 1
            if m < k:
                stats.dropped_rounds += 1
                k += 1
                continue
            out.append((encoded, k, m))
            k = m + 1
        return out

    @staticmethod
    def _part(messages, weights, bounds, k: int, m: int, head: int) -> tuple[list[dict], list[float]]:
        """Rounds k..m, after the system prompt when round k's messages do not start with one."""
        lo, hi = bounds[k], bounds[m + 1]
        return messages[:head] + messages[lo:hi], [0.0] * head + list(weights[lo:hi])
