"""What a translation asks for, whatever API it came through: one frozen value the APIs
build and the service reads (tolk.translation.service.Translator); and what a plain chat
completion asks for (OpenAI's endpoint, for a conversation that is not a translation:
tolk.translation.chat)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tolk.translation.formats import Format
from tolk.translation.html_format import DEFAULT_RULES, TagRules
from tolk.translation.prompts import NO_INSTRUCTIONS, Instructions
from tolk.translation.segment import SplitMode

# The segment cache (tolk.store.segment_cache): looked up and written ("use"), written only
# ("refresh": translated anew, as HTTP's Cache-Control: no-cache), or neither ("off": no-store).
MemoryMode = Literal["use", "refresh", "off"]


@dataclass(frozen=True)
class MemoryRequest:
    """A translation memory the request names (tolk.store.memories) and its match threshold
    (0-100)."""

    id: str
    threshold: float


@dataclass(frozen=True)
class GlossaryRequest:
    """A request's glossary: its own entries, the ids of configured (or API-made)
    glossaries whose entries it uses, and terms that must come back untranslated."""

    entries: Mapping[str, str] = field(default_factory=dict)
    ids: Sequence[str] = ()
    do_not_translate: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class TranslationRequest:
    """Everything about a translation but its texts (or files). `source_lang` None or
    "auto": detected; `deadline`: seconds, before the per-round allowance
    (tolk.translation.policy.work_deadline); `format` and `rules`: how texts are parsed (a
    file's format comes from the file); `alternatives`: how many other translations of each
    text to return besides the one chosen (sampled outputs, tolk.translation.service);
    `memory`: how the segment cache is used. Built with keywords only."""

    target_lang: str
    deadline: float
    source_lang: str | None = None
    model: str | None = None
    split: SplitMode = "sentences"
    format: Format = "text"
    glossary: GlossaryRequest = field(default_factory=GlossaryRequest)
    instructions: Instructions = NO_INSTRUCTIONS
    rules: TagRules = DEFAULT_RULES
    alternatives: int = 0
    memory: MemoryMode = "use"
    translation_memory: MemoryRequest | None = None


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """A plain chat completion: the conversation, the decoding asked for (None: the model's
    configured sampling), the most tokens to write (None: what the context leaves)."""

    messages: Sequence[ChatMessage]
    deadline: float
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
