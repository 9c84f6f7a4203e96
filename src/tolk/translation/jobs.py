"""One segment as an engine request: its prompt's token ids and its output budget. The
benchmarks that feed an engine directly use it too, so both sides of a comparison get the
very same prompts."""

from __future__ import annotations

import logging
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any

import cachetools

from tolk.budget import DEFAULT_RATIO, Budgets
from tolk.config import ModelSettings
from tolk.engine import Tokenizer
from tolk.languages import Lang
from tolk.translation.document import PLACEHOLDER, for_model
from tolk.translation.examples import examples
from tolk.translation.glossary import Terms
from tolk.translation.prompts import (
    FORMATS,
    NO_INSTRUCTIONS,
    ChatPrompt,
    Instructions,
    Prompt,
    with_examples,
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
        self._checked = 0
        self._pieces: cachetools.LRUCache[str, list[int]] = cachetools.LRUCache(4096)

    def encode(self, text: str) -> list[int]:
        """`tokenizer.encode(text, add_special_tokens=False)`, from remembered pieces."""
        if not self.usable:
            return list(self._tokenizer.encode(text, add_special_tokens=False))
        assert self._split is not None
        assert self._backend is not None
        ids: list[int] = []
        for n, piece in enumerate(self._split.split(text)):
            if n % 2:
                ids.append(self._ids[piece])
            elif piece:
                known = self._pieces.get(piece)
                if known is None:
                    known = self._pieces[piece] = self._backend.encode(
                        piece, add_special_tokens=False
                    ).ids
                ids += known
        if self._checked < self.CHECKED:
            self._checked += 1
            full = list(self._tokenizer.encode(text, add_special_tokens=False))
            if full != ids:
                self.usable = False
                log.warning(
                    "prompt token ids from cached pieces differ from the tokenizer's own "
                    "(%d vs %d ids); encoding whole prompts from now on",
                    len(ids),
                    len(full),
                )
                return full
        return ids

    def count(self, text: str) -> int:
        """Tokens in plain text (no special tokens)."""
        if self._backend is not None:
            return len(self._backend.encode(text, add_special_tokens=False).ids)
        return len(self._tokenizer.encode(text, add_special_tokens=False))


_encoders: weakref.WeakKeyDictionary[Any, PromptEncoder] = weakref.WeakKeyDictionary()


def encoder(tokenizer: Tokenizer) -> PromptEncoder:
    """The tokenizer's PromptEncoder (one per tokenizer, made on first use)."""
    found = _encoders.get(tokenizer)
    if found is None:
        found = _encoders[tokenizer] = PromptEncoder(tokenizer)
    return found


def render(prompt: Prompt, tokenizer: Tokenizer) -> list[int]:
    """Token ids for a prompt: chat prompts through the model's own chat template."""
    if isinstance(prompt, ChatPrompt):
        text = tokenizer.apply_chat_template(
            prompt.messages, tokenize=False, add_generation_prompt=True
        )
        return encoder(tokenizer).encode(str(text))
    return tokenizer.encode(prompt.text)


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
    prompt = FORMATS[settings.prompt_format](
        for_model(text.strip(), settings.placeholders), source, target, how.terms, how.instructions
    )
    shown: list[tuple[str, str]] = []
    if how.show_examples and settings.prompt_examples and settings.prompt_format == "chat":
        assert isinstance(prompt, ChatPrompt)
        markup = PLACEHOLDER.search(text) is not None
        shown = examples(source, target, settings.prompt_examples, markup)
        syntax = settings.placeholders
        as_shown = [(for_model(s, syntax), for_model(t, syntax)) for s, t in shown]
        prompt = with_examples(prompt, as_shown, source, target)
    prompt_ids = render(prompt, tokenizer)
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
