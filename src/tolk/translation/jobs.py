"""One segment as an engine request: its prompt's token ids and its output budget. The
benchmarks that feed an engine directly use it too, so both sides of a comparison get the
very same prompts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tolk.budget import DEFAULT_RATIO
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


def render(prompt: Prompt, tokenizer: Tokenizer) -> list[int]:
    """Token ids for a prompt: chat prompts through the model's own chat template."""
    if isinstance(prompt, ChatPrompt):
        text = tokenizer.apply_chat_template(
            prompt.messages, tokenize=False, add_generation_prompt=True
        )
        return tokenizer.encode(str(text), add_special_tokens=False)
    return tokenizer.encode(prompt.text)


def plan_job(
    settings: ModelSettings,
    tokenizer: Tokenizer,
    max_model_len: int,
    index: int,
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,
    ratio: float | None = None,
    show_examples: bool = True,
) -> EngineJob:
    """The engine request tolk makes of one segment: its prompt token ids and output budget
    (`ratio`: output tokens per source token for this pair, tolk.budget; the configured or
    default one if None; `show_examples`: the model's `prompt_examples`, or none, as for a
    retry). The benchmarks that feed an engine directly (tolk.bench.overhead,
    .versus) use it too, so both sides of a comparison get the very same prompts."""
    prompt = FORMATS[settings.prompt_format](
        for_model(text.strip(), settings.placeholders), source, target, terms, instructions
    )
    shown: list[tuple[str, str]] = []
    if show_examples and settings.prompt_examples and settings.prompt_format == "chat":
        assert isinstance(prompt, ChatPrompt)
        markup = PLACEHOLDER.search(text) is not None
        shown = examples(source, target, settings.prompt_examples, markup)
        syntax = settings.placeholders
        as_shown = [(for_model(s, syntax), for_model(t, syntax)) for s, t in shown]
        prompt = with_examples(prompt, as_shown, source, target)
    prompt_ids = render(prompt, tokenizer)
    source_tokens = len(tokenizer.encode(text, add_special_tokens=False))
    budget = output_budget(
        source_tokens,
        len(prompt_ids),
        ratio or settings.max_tokens_ratio or DEFAULT_RATIO,
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
