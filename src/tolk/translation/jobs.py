"""One segment as an engine request: its prompt's token ids and its output budget. The
benchmarks that feed an engine directly use it too, so both sides of a comparison get the
very same prompts."""

from __future__ import annotations

import logging
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any, TypeVar

import cachetools

from tolk.budget import DEFAULT_RATIO, Budgets
from tolk.config import ModelSettings
from tolk.engine import Tokenizer
from tolk.languages import Lang
from tolk.translation.document import PLACEHOLDER, for_model, shows_links
from tolk.translation.examples import examples
from tolk.translation.glossary import Terms
from tolk.translation.prompts import (
    FORMATS,
    NO_INSTRUCTIONS,
    ChatPrompt,
    Instructions,
    Prompt,
    with_examples,
    with_links_told,
)


@dataclass(frozen=True)
class EngineJob:
    index: int
    prompt_ids: list[int]
    max_tokens: int
    source_tokens: int
    # The example translations its prompt showed (tolk.translation.examples), which the
    # output checks make sure it did not copy.
    examples: tuple[str, ...] = ()


log = logging.getLogger("tolk.translation")


class PromptEncoder:
    """Token ids of rendered chat prompts, each stretch between two special tokens encoded
    once and remembered.

    A fast tokenizer matches its added tokens (`<|im_start|>`, ...) first and encodes the
    text between them piece by piece, so a prompt's ids are its pieces' ids side by side.
    Every request of a pair repeats the same system turn and example turns: on the H100 at
    256 clients re-tokenising them was 26% of the event loop (docs/benchmarks.md, section
    13). Here only the pieces not seen lately (the segment's own turn) are encoded, through
    the tokenizer's Rust core. Used only where the added tokens are plain (no stripping,
    single-word or normalised matching, which would change how the text is cut), and its
    first prompts are checked against the tokenizer's own encoding: any difference turns
    it off for good, with a warning."""

    CHECKED = 64  # prompts compared with the full encoding first

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        added = dict(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        plain = all(
            not (t.lstrip or t.rstrip or t.single_word or t.normalized) for t in added.values()
        )
        self._ids = {t.content: i for i, t in added.items()}
        names = sorted(self._ids, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None
        self.usable = self._backend is not None and plain and self._split is not None
        self.tail_usable = True  # encode_counted may encode the segment apart (see there)
        self._checked = 0
        self._pieces: cachetools.LRUCache[str, list[int]] = cachetools.LRUCache(4096)

    def encode(self, text: str) -> list[int]:
        """`tokenizer.encode(text, add_special_tokens=False)`, from remembered pieces."""
        return self.encode_counted(text)[0]

    def encode_counted(self, text: str, tail: str = "") -> tuple[list[int], int | None]:
        """encode(text), and how many of its ids are `tail`'s (None where it was not cut out).

        The piece holding the segment ("user\n<the request>\n<the segment>") is new with every
        segment; the request before the segment's line is the pair's and remembered like the
        other pieces, and the segment is encoded once, alone: its tokens counted from that
        encoding rather than by a second one (at 256 clients on the H200 counting them apart
        was 5% of the event loop: docs/benchmarks.md, section 22). A line break ends a
        pre-token in the byte-level BPE tokenizers this is made for, so the ids are the same;
        `tail_usable` turns off for good, with a warning, if the first prompts show otherwise."""
        if not self.usable:
            return list(self._tokenizer.encode(text, add_special_tokens=False)), None
        assert self._split is not None
        assert self._backend is not None
        ids: list[int] = []
        counted: int | None = None
        pieces = self._split.split(text)
        cut = self._tail_piece(pieces, tail) if tail and self.tail_usable else -1
        for n, piece in enumerate(pieces):
            if n % 2:
                ids.append(self._ids[piece])
            elif n == cut:
                ids += self._piece(piece[: -len(tail)])
                own = self._backend.encode(tail, add_special_tokens=False).ids
                ids += own
                counted = len(own)
            elif piece:
                ids += self._piece(piece)
        if self._checked < self.CHECKED:
            self._checked += 1
            full = list(self._tokenizer.encode(text, add_special_tokens=False))
            if full != ids:
                self._differs(full, ids, cut >= 0)
                return full, None
        return ids, counted

    def _piece(self, piece: str) -> list[int]:
        """A text piece's ids, remembered."""
        known = self._pieces.get(piece)
        if known is None:
            assert self._backend is not None
            known = self._pieces[piece] = self._backend.encode(piece, add_special_tokens=False).ids
        return known

    @staticmethod
    def _tail_piece(pieces: list[str], tail: str) -> int:
        """The index of the last text piece (re.split puts them at even indices, the special
        tokens between) that is a line break and then `tail` at its end, or -1."""
        for n in range((len(pieces) - 1) // 2 * 2, -1, -2):
            piece = pieces[n]
            if piece.endswith(tail) and piece[: -len(tail)].endswith("\n"):
                return n
        return -1

    def _differs(self, full: list[int], ids: list[int], cut: bool) -> None:
        """A prompt whose remembered pieces (or its segment encoded apart, if `cut`) gave
        other ids than the tokenizer's own: that way is off from now on."""
        if cut:
            self.tail_usable = False
            what = "the segment encoded apart from its prompt line"
        else:
            self.usable = False
            what = "cached pieces"
        log.warning(
            "prompt token ids from %s differ from the tokenizer's own (%d vs %d ids); not "
            "used from now on",
            what,
            len(ids),
            len(full),
        )

    def count(self, text: str) -> int:
        """Tokens in plain text (no special tokens)."""
        if self._backend is not None:
            return len(self._backend.encode(text, add_special_tokens=False).ids)
        return len(self._tokenizer.encode(text, add_special_tokens=False))


Made = TypeVar("Made", "PromptEncoder", "ChatFrames")
_made: weakref.WeakKeyDictionary[Any, dict[type[Any], Any]] = weakref.WeakKeyDictionary()


def _one_per(tokenizer: Tokenizer, kind: type[Made]) -> Made:
    """The tokenizer's `kind` (one per tokenizer, made on first use)."""
    mine = _made.setdefault(tokenizer, {})
    found: Made | None = mine.get(kind)
    if found is None:
        found = mine[kind] = kind(tokenizer)
    return found


def encoder(tokenizer: Tokenizer) -> PromptEncoder:
    """The tokenizer's PromptEncoder."""
    return _one_per(tokenizer, PromptEncoder)


class ChatFrames:
    """A chat prompt's text through the model's chat template, the template run once per
    frame: everything but the last message's content (the system and example turns, the
    last message's role), rendered around a marker and remembered, the content put in the
    marker's place. The template is Jinja: run for every segment, it was 1.6% of the event
    loop at 256 clients on the H200 (docs/benchmarks.md, section 22). A template that does more with
    the last content than writing it out (or writes the marker twice) is run whole, for
    good, as are all templates whose first prompts show any difference, with a warning."""

    MARKER = "\ue000tolk-content\ue001"  # private-use characters: no text the template adds
    CHECKED = 64  # prompts compared with the whole template's rendering first

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._frames: cachetools.LRUCache[Any, tuple[str, str]] = cachetools.LRUCache(1024)
        self.usable = True
        self._checked = 0

    def _whole(self, messages: list[dict[str, str]]) -> str:
        text = self._tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return str(text)

    def render(self, messages: list[dict[str, str]]) -> str:
        if not self.usable or not messages:
            return self._whole(messages)
        *head, last = messages
        key = (tuple((m["role"], m["content"]) for m in head), last["role"])
        frame = self._frames.get(key)
        if frame is None:
            marked = self._whole([*head, {"role": last["role"], "content": self.MARKER}])
            if marked.count(self.MARKER) != 1:
                return self._off(messages, "writes the last message's content other than once")
            before, after = marked.split(self.MARKER)
            frame = self._frames[key] = (before, after)
        text = frame[0] + last["content"] + frame[1]
        if self._checked < self.CHECKED:
            self._checked += 1
            if text != (whole := self._whole(messages)):
                self.usable = False
                log.warning("chat template: a framed prompt differs from the whole; not framed")
                return whole
        return text

    def _off(self, messages: list[dict[str, str]], why: str) -> str:
        self.usable = False
        log.warning("chat template %s: run whole for every prompt", why)
        return self._whole(messages)


def frames(tokenizer: Tokenizer) -> ChatFrames:
    """The tokenizer's ChatFrames."""
    return _one_per(tokenizer, ChatFrames)


def render(prompt: Prompt, tokenizer: Tokenizer, segment: str = "") -> tuple[list[int], int | None]:
    """Token ids for a prompt (chat prompts through the model's own chat template), and how
    many of them are `segment`'s where it ends the prompt's last turn and was encoded apart
    (PromptEncoder.encode_counted), else None."""
    if isinstance(prompt, ChatPrompt):
        text = frames(tokenizer).render(list(prompt.messages))
        return encoder(tokenizer).encode_counted(text, segment)
    return list(tokenizer.encode(prompt.text)), None


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What one segment's prompt and budget are made with besides its text and language
    pair: the glossary's `terms` found in it, the request's `instructions`, `ratio` (output
    tokens per source token for the pair, tolk.budget; the configured or default one if
    None) and `show_examples` (the model's `prompt_examples`, or none, as for a retry)."""

    terms: Terms = ()
    instructions: Instructions = NO_INSTRUCTIONS
    ratio: float | None = None
    show_examples: bool = True


MODEL_DEFAULTS = JobSettings()


def plan_job(
    settings: ModelSettings,
    tokenizer: Tokenizer,
    max_model_len: int,
    index: int,
    text: str,
    pair: tuple[Lang, Lang],
    budgets: Budgets,
    terms: Terms = (),
) -> EngineJob:
    """The engine request tolk makes of one segment of `pair` (source, target) with `terms`
    and otherwise the model's
    own settings (no instructions, its examples, the pair's ratio from `budgets`, made as
    the engine makes its own: Budgets(counting(tokenizer), max_tokens_ratio)): what the
    benchmarks that feed an engine directly (tolk.bench.overhead, .versus) use, so both
    sides of a comparison get the very same prompts and budgets. The service's own is
    `build_job`."""
    source, target = pair
    how = JobSettings(terms, ratio=budgets.ratio(source, target))
    return build_job(settings, tokenizer, max_model_len, index, text, source, target, how)


def build_job(
    settings: ModelSettings,
    tokenizer: Tokenizer,
    max_model_len: int,
    index: int,
    text: str,
    source: Lang,
    target: Lang,
    how: JobSettings = MODEL_DEFAULTS,
) -> EngineJob:
    """The engine request tolk makes of one segment: its prompt token ids and output budget,
    as `how` says (JobSettings)."""
    segment = for_model(text.strip(), settings.placeholders)
    prompt = FORMATS[settings.prompt_format](segment, source, target, how.terms, how.instructions)
    shown: list[tuple[str, str]] = []
    if how.show_examples and settings.prompt_examples and settings.prompt_format == "chat":
        assert isinstance(prompt, ChatPrompt)
        markup = PLACEHOLDER.search(text) is not None
        shown = examples(
            source, target, settings.prompt_examples, markup, settings.prompt_example_chars
        )
        syntax = settings.placeholders
        as_shown = [(for_model(s, syntax), for_model(t, syntax)) for s, t in shown]
        asked = settings.prompt_example_turns == "asked"
        prompt = with_examples(prompt, as_shown, source, target, asked)
    told = settings.placeholders_told and shows_links(text.strip(), settings.placeholders)
    if told and isinstance(prompt, ChatPrompt):
        prompt = with_links_told(prompt, PLACEHOLDER.finditer(text))
    prompt_ids, counted = render(prompt, tokenizer, segment)
    # The segment as the prompt holds it is most often the text itself: then its tokens
    # were counted as the prompt was encoded.
    source_tokens = counted if counted is not None and segment == text else None
    if source_tokens is None:
        source_tokens = encoder(tokenizer).count(text)
    budget = output_budget(
        source_tokens,
        len(prompt_ids),
        how.ratio or settings.max_tokens_ratio or DEFAULT_RATIO,
        settings.max_tokens_extra,
        max_model_len,
    )
    translations = tuple(PLACEHOLDER.sub(" ", t) for _, t in shown)
    return EngineJob(index, prompt_ids, budget, source_tokens, translations)


def output_budget(
    source_tokens: int, prompt_tokens: int, ratio: float, extra: int, max_model_len: int
) -> int:
    """max_tokens for one text: follows the input length, never past the context."""
    room = max_model_len - prompt_tokens
    return max(0, min(math.ceil(source_tokens * ratio) + extra, room))
