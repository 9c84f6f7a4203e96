"""A chat completion that is not a translation: what `vllm serve` would answer, for an app
whose prompt tolk does not recognise (the OpenAI-compatible endpoint serves it so that such an
app still works), under the same admission, deadline and engine as a translation.

The conversation is rendered with the model's own chat template and tokenised off the event
loop (its cost grows with the conversation, which the body size limit bounds); the request is
admitted as one sequence of the model's capacity, refused when its prompt leaves no room in the
model's context, and stopped at the deadline (its engine request aborted).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tolk.config import SamplingSettings
from tolk.engine import ModelEngine
from tolk.errors import PayloadTooLarge
from tolk.translation.request import ChatMessage, ChatRequest


@dataclass(frozen=True)
class ChatCompletion:
    model: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" or "length", as OpenAI's clients read it
    engine_seconds: float


def prompt_ids(engine: ModelEngine, messages: Sequence[ChatMessage]) -> list[int]:
    """The conversation in the model's chat template, as token ids (in the preparation pool)."""
    conversation = [{"role": m.role, "content": m.content} for m in messages]
    # Rendered, then encoded, as tolk's own prompts are (translation.jobs): the template
    # writes the special tokens itself.
    text = engine.tokenizer.apply_chat_template(
        conversation, add_generation_prompt=True, tokenize=False
    )
    return list(engine.tokenizer.encode(str(text), add_special_tokens=False))


def sampling(engine: ModelEngine, asked: ChatRequest) -> SamplingSettings:
    """The model's configured decoding, with the request's temperature and top_p over it."""
    update: dict[str, Any] = {}
    if asked.temperature is not None:
        update["temperature"] = asked.temperature
    if asked.top_p is not None:
        update["top_p"] = asked.top_p
    return engine.settings.sampling.model_copy(update=update)


async def complete(engine: ModelEngine, ids: Sequence[int], asked: ChatRequest) -> ChatCompletion:
    """One chat completion of `ids` (prompt_ids') on `engine`, admitted as one sequence
    (Translator.chat runs it under the request's deadline)."""
    room = engine.max_model_len - len(ids)
    if room < 1:
        raise PayloadTooLarge(
            f"the conversation is {len(ids)} tokens; model '{engine.name}' takes at most "
            f"{engine.max_model_len - 1} before its answer: send a shorter one",
            limit=engine.max_model_len,
        )
    max_tokens = min(room, asked.max_tokens) if asked.max_tokens else room
    with engine.admit(1):
        started = time.monotonic()
        (generation,) = await engine.generate_n(list(ids), max_tokens, sampling(engine, asked))
    return ChatCompletion(
        model=engine.name,
        text=generation.text,
        prompt_tokens=len(ids),
        completion_tokens=generation.completion_tokens,
        finish_reason="length" if generation.finish_reason == "length" else "stop",
        engine_seconds=time.monotonic() - started,
    )
