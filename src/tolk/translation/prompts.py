"""Prompt formats per model family, each as its model card documents it.

A format turns (text, source, target) into either chat messages, which the model's own chat
template renders, or a plain completion prompt; and cleans the model's output of template
artefacts. Formats:

- `chat`: any instruction-tuned model with a chat template (Qwen, Gemma, Llama, Mistral...).
- `hunyuan-mt`: tencent/Hunyuan-MT-7B. Chinese instruction when Chinese is on either side,
  English instruction otherwise; sent as a user turn through the chat template.
- `seed-x`: ByteDance-Seed/Seed-X-Instruct/PPO. Plain completion ending in the target tag,
  "Translate the following English sentence into Chinese:\\n<text> <zh>".
- `tower`: Unbabel/TowerInstruct. User turn "Translate the following text from X into
  Y.\\nX: <text>\\nY:".
- `alma`: haoranxu/ALMA(-R). Plain completion "Translate this from X to Y:\\nX: <text>\\nY:".
- `translategemma`: google/translategemma. One user turn with structured content
  ({type, source_lang_code, target_lang_code, text}); the model's template builds the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tolk.languages import Lang


@dataclass(frozen=True)
class ChatPrompt:
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class CompletionPrompt:
    text: str


Prompt = ChatPrompt | CompletionPrompt
Terms = Sequence[tuple[str, str]]  # glossary entries found in the text: (source, target)


@dataclass(frozen=True)
class Instructions:
    """What a request asks of the translation besides the text: a register (DeepL's
    `formality`), context that informs it but is not translated, and free instructions
    (DeepL's `custom_instructions`). Only formats with an instruction-following prompt take
    them (INSTRUCTED); the service refuses them, or drops the `prefer_` kind, elsewhere."""

    formality: Literal["more", "less"] | None = None
    prefer: bool = False  # DeepL's prefer_more/prefer_less: dropped where unsupported
    context: str | None = None
    custom: tuple[str, ...] = ()
    # Not a translation but a rewrite (DeepL Write's rephrase), with this aim: the chat
    # format only (tolk.translation.policy.instructions_for refuses it elsewhere).
    rewrite: str | None = None

    def __bool__(self) -> bool:
        return bool(self.formality or self.context or self.custom or self.rewrite)

    @classmethod
    def of(
        cls, formality: str = "default", context: str | None = None, custom: Sequence[str] = ()
    ) -> Instructions:
        """From DeepL's values: formality default|more|less|prefer_more|prefer_less (DeepL
        also takes formal/informal, which its clients map to prefer_*)."""
        value = formality.strip().lower()
        value = {"formal": "prefer_more", "informal": "prefer_less"}.get(value, value)
        register = value.removeprefix("prefer_")
        return cls(
            formality="more" if register == "more" else "less" if register == "less" else None,
            prefer=value.startswith("prefer_"),
            context=context or None,
            custom=tuple(custom),
        )

    def text(self) -> str:
        """The generic wording, one line each, ending in a newline (or empty)."""
        lines = []
        if self.formality == "more":
            lines.append("Use a formal register (formal forms of address).")
        elif self.formality == "less":
            lines.append("Use an informal register (informal forms of address).")
        lines += [f"{c.strip().rstrip('.')}." for c in self.custom if c.strip()]
        if self.context:
            lines.append(
                "For reference only, the text comes from this context (do not translate the "
                f"context): {' '.join(self.context.split())}"
            )
        return "".join(f"{line}\n" for line in lines)


NO_INSTRUCTIONS = Instructions()


class Builder(Protocol):
    def __call__(
        self,
        text: str,
        source: Lang,
        target: Lang,
        terms: Terms = (),
        instructions: Instructions = NO_INSTRUCTIONS,
    ) -> Prompt: ...


def _user(content: Any) -> ChatPrompt:
    return ChatPrompt([{"role": "user", "content": content}])


def glossary_instruction(terms: Terms) -> str:
    """The generic wording, for formats whose model card gives none."""
    if not terms:
        return ""
    listed = "; ".join(f'"{s}" as "{t}"' for s, t in terms)
    return f"Translate these terms as given: {listed}.\n"


# tolk's placeholders for inline markup (tolk.translation.document writes them).
_TAGS = re.compile(r"</?g\d+>|<x\d+\s*/>")


def markup_instruction(text: str) -> str:
    """For a segment with placeholders: what to do with them (generic wording)."""
    tags = list(dict.fromkeys(_TAGS.findall(text)))
    if not tags:
        return ""
    return (
        f"The text contains the tags {' '.join(tags)}: copy every tag into the translation "
        "exactly once, unchanged, around the words it marks.\n"
    )


TOLD_MARKS = 12  # the most placeholders a system message names (a hostile text may hold 1000s)


def with_links_told(prompt: ChatPrompt, marks: Iterable[re.Match[str]]) -> ChatPrompt:
    """A chat prompt whose text shows its placeholders as links and code spans, with a
    system message naming them and asking for each once (`models[].placeholders_told`).
    `marks`: the masked text's PLACEHOLDER matches (groups: closing, pair, atom), as
    tolk.translation.document writes them, read only until the first TOLD_MARKS are named
    and one more is seen."""
    named: dict[str, None] = {}  # in order, each once
    for mark in marks:
        closing, pair, atom = mark.groups("")
        if not closing:
            named[f"`{atom}`" if atom else f"[...]({pair})"] = None
            if len(named) > TOLD_MARKS:
                break
    if not named:
        return prompt
    listed = " ".join(list(named)[:TOLD_MARKS])
    if len(named) > TOLD_MARKS:
        listed += " and the others"
    told = (
        f"You are a translator. The text contains the markup {listed}: write each of them "
        "exactly once in the translation, a link around the translated words it marks, its "
        "number unchanged."
    )
    return ChatPrompt([{"role": "system", "content": told}, *prompt.messages])


def chat(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,
) -> Prompt:
    if instructions.rewrite:
        into = "" if source.code == target.code else f" in {target.name}"
        task = (
            f"Rewrite the following {source.name} text{into}: {instructions.rewrite} "
            "Reply with the rewritten text only, without explanations, notes or quotation "
            "marks.\n"
        )
    else:
        task = (
            f"Translate the following {source.name} text into {target.name}. "
            "Reply with the translation only, without explanations, notes or quotation marks.\n"
        )
    prompt = _user(f"{task}{glossary_instruction(terms)}{instructions.text()}\n{text}")
    # The tags' instruction goes in a system message: in the user's message, between the
    # request and the text, the 0.5B Qwen took it for text and translated it into its answer
    # (docs/benchmarks.md, "Quality": markup).
    if tags := markup_instruction(text):
        system = {"role": "system", "content": f"You are a translator. {tags.strip()}"}
        prompt = ChatPrompt([system, *prompt.messages])
    return prompt


def with_examples(
    prompt: ChatPrompt,
    examples: Sequence[tuple[str, str]],
    source: Lang,
    target: Lang,
    asked: bool = True,
) -> ChatPrompt:
    """A chat prompt with example translations as earlier turns (tolk.translation.examples):
    each example asked in the same words as the text (or, not `asked`, its sentence alone),
    answered with its human translation. A system message stays first."""
    turns: list[dict[str, Any]] = []
    for text, translation in examples:
        if asked:
            request = chat(text, source, target)
            assert isinstance(request, ChatPrompt)
            turn = request.messages[-1]
        else:
            turn = {"role": "user", "content": text}
        turns += [turn, {"role": "assistant", "content": translation}]
    system = [m for m in prompt.messages if m["role"] == "system"]
    rest = [m for m in prompt.messages if m["role"] != "system"]
    return ChatPrompt([*system, *turns, *rest])


_CHINESE = {"zh", "yue"}


def hunyuan_mt(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,
) -> Prompt:
    # The model card's terminology intervention: a "refer to these translations" line, then
    # a line per term. Other instructions go before it, in the generic wording.
    glossary = "".join(f"{s} 翻译成 {t}\n" for s, t in terms)
    glossary = f"参考下面的翻译：\n{glossary}\n" if glossary else ""
    glossary = instructions.text() + glossary
    if source.code in _CHINESE or target.code in _CHINESE:
        return _user(
            f"{glossary}把下面的文本翻译成{target.name_in('zh')}，不要额外解释。\n\n{text}"
        )
    return _user(
        f"{glossary}Translate the following segment into {target.name}, without additional "
        f"explanation.\n\n{text}"
    )


def seed_x(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,  # not INSTRUCTED: no room for them
) -> Prompt:
    return CompletionPrompt(
        f"{glossary_instruction(terms)}"
        f"Translate the following {source.base_name} sentence into {target.base_name}:\n"
        f"{text} <{target.code}>"
    )


def tower(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,
) -> Prompt:
    return _user(
        f"Translate the following text from {source.base_name} into {target.base_name}.\n"
        f"{glossary_instruction(terms)}{instructions.text()}"
        f"{source.base_name}: {text}\n{target.base_name}:"
    )


def alma(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,  # not INSTRUCTED: no room for them
) -> Prompt:
    return CompletionPrompt(
        f"{glossary_instruction(terms)}"
        f"Translate this from {source.base_name} to {target.base_name}:\n"
        f"{source.base_name}: {text}\n{target.base_name}:"
    )


def translategemma(
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,  # not INSTRUCTED: no room for them
) -> Prompt:
    # Its chat template takes only the structured text to translate: no room for a glossary
    # (do-not-translate terms still hold: they are placeholders, not instructions).
    return _user(
        [
            {
                "type": "text",
                "source_lang_code": source.tag,
                "target_lang_code": target.tag,
                "text": text,
            }
        ]
    )


FORMATS: dict[str, Builder] = {
    "chat": chat,
    "hunyuan-mt": hunyuan_mt,
    "seed-x": seed_x,
    "tower": tower,
    "alma": alma,
    "translategemma": translategemma,
}

# Target languages with a formal/informal register, as DeepL lists `supports_formality`.
FORMAL_REGISTERS = frozenset({"de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru"})

# Formats whose prompt is an instruction to a chat model, so Instructions can be added to it.
INSTRUCTED = frozenset({"chat", "hunyuan-mt", "tower"})

# Markers that are template artefacts whenever they show up in decoded text.
_ARTEFACTS = re.compile(
    r"<\|im_end\|>|<\|im_start\|>(?:assistant)?|<\|endoftext\|>|<\|eot_id\|>|<end_of_turn>"
    r"|<start_of_turn>(?:model)?|</s>|<s>|<\|extra_0\|>|<\|eos\|>"
)
_QUOTES = {'"': '"', "“": "”", "«": "»", "「": "」"}
# Characters no translation carries and XML 1.0 forbids or discourages: the C0 controls but
# tab and the line breaks, DEL and the C1 controls, U+FFFE and U+FFFF. A byte-level model
# has a token for each control byte and can write them; returned in an XML or HTML reply
# they make it unparseable (a DeepL `tag_handling: xml` client fails on the document).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def clean(output: str, source_text: str, target: Lang) -> str:
    """The translation without template artefacts, control characters, an echoed
    target-language label, or quotation marks the source did not have."""
    text = _ARTEFACTS.sub("", output)
    text = _CONTROLS.sub(lambda m: m.group() if m.group() in source_text else "", text)
    text = re.sub(rf"\s*<{re.escape(target.code)}>\s*$", "", text)  # Seed-X's target tag
    text = text.strip()
    for label in (target.name, target.base_name, "Translation"):
        if text.startswith(f"{label}:"):
            text = text[len(label) + 1 :].lstrip()
            break
    source = source_text.strip()
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1] and not source.startswith(text[0]):
        text = text[1:-1].strip()
    return text


def keep_outer_whitespace(source_text: str, translation: str) -> str:
    """Give the translation the source's leading and trailing whitespace (newlines etc.)."""
    stripped = source_text.strip()
    if not stripped:
        return source_text
    start = source_text.index(stripped)
    return source_text[:start] + translation + source_text[start + len(stripped) :]
