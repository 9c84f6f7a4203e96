"""Reading a chat-completions request as a translation: what text, which languages, and the
form of answer the app that sent it parses (docs/research/chat-apps.md).

Recognised, in this order:

1. `translation_options` (Qwen-MT, Zotero's Qwen-MT service): `target_lang`, `source_lang`
   ("auto", a name or a code), `terms` [{source, target}] (`tm_list`, `domains` ignored); the
   last user message is the text. Explicit: an unreadable or unknown language raises.
2. An app's own request, from the last user message (and the first, system, message):
   Weblate's JSON (5.17 and 2026.x, `{"target_language", "strings": [...]}`) and its
   `\\n==WEBLATE_PART==\\n`-joined strings (up to 5.16), KISS Translator's batch JSON
   (`{"targetLanguage", "segments": [{id, text}]}`), and the single-text prompts of Zotero,
   KISS (non-batch), OpenAI Translator, Pot, Easydict and Bob 3, or their generic forms
   (`Translate into X:`, `Translate from X to Y:`, `Translate the following X text into Y:`).
3. A model named `tolk-<target>` or `tolk-<source>-<target>` (BCP-47 tags): the last user
   message is the text, unless 2. read it. Then the app's shape and languages win; the name's
   pair stands in for a target the prompt names and tolk cannot resolve, and its source for
   a source the prompt leaves out when both name the same target. An unknown language in the
   name raises.

Anything else is None: the endpoint answers it as a plain chat. A shape whose languages do
not resolve is None too (the model would answer the prompt as any chat model does).

Bounded work on hostile bodies: only the first and the last messages are read (the last user
message for `translation_options`), prompts are parsed with `str.startswith`/`find` within
fixed windows (no regular expression runs over user text), `json.loads` runs only on a message
that starts with `{` or `[` (its RecursionError caught), and at most MAX_TEXTS texts are taken.
"""

from __future__ import annotations

import itertools
import json
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tolk.languages import InvalidLanguageCode, lang

MAX_TEXTS = 1000  # texts per request (Weblate and KISS batch many strings into one)
MAX_TERMS = 1000  # glossary entries read from a request; more are ignored
MAX_NAME = 64  # the longest language name or code read from a prompt
_HEAD = 256  # how far into a message an instruction (`Translate into German:`) may end

Resolve = Callable[[str], str | None]

# Shapes, as ChatTranslation.shape names them (and X-Tolk-Chat reports them).
TRANSLATION_OPTIONS = "translation_options"
MODEL = "model"
WEBLATE_PARTS = "weblate-parts"
WEBLATE_JSON = "weblate-json"
KISS_BATCH = "kiss-batch"
PROMPT = "prompt"

WEBLATE_SEPARATOR = "\n==WEBLATE_PART==\n"


class ChatTranslationError(ValueError):
    """A request that asks for a translation explicitly (translation_options, a tolk-<pair>
    model) and cannot be one: the endpoint's 400."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class UnknownLanguage(ChatTranslationError):
    """A language tolk cannot resolve, where the request names one explicitly."""

    def __init__(self, name: str, field: str = "translation_options") -> None:
        super().__init__(f"'{name}' is not a language this server knows", field)
        self.name = name


class TooManyTexts(ChatTranslationError):
    def __init__(self, count: int, field: str = "messages") -> None:
        super().__init__(f"{count} texts in one request; at most {MAX_TEXTS} are taken", field)
        self.count = count


@dataclass(frozen=True)
class ChatTranslation:
    """A chat-completions request read as a translation."""

    shape: str  # see the constants above; single-text prompts are "prompt" or "prompt:<app>"
    texts: tuple[str, ...]  # what to translate, in order
    source: str | None  # a language tag, None to detect
    target: str  # a language tag
    terms: tuple[tuple[str, str], ...] = ()  # glossary (Qwen-MT terms, Weblate's, KISS's)
    ids: tuple[int | str, ...] = ()  # KISS's segment ids, echoed in the answer
    # Characters the app strips from either end of a non-streamed reply (Pot `"`, Bob 3
    # `"「『』」`): a translation that starts or ends with one gets a `"` more there.
    unquote: str = ""

    def answer(self, translations: Sequence[str], sources: Sequence[str] = ()) -> str:
        """The assistant message content the app parses back into `translations`; `sources`
        are the detected source languages per text (KISS batch reports them)."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        if self.shape == WEBLATE_PARTS:
            return WEBLATE_SEPARATOR.join(translations)
        if self.shape == WEBLATE_JSON:
            return json.dumps(list(translations), ensure_ascii=False)
        if self.shape == KISS_BATCH:
            items = [
                {
                    "id": ident,
                    "text": text,
                    "sourceLanguage": (sources[i] if i < len(sources) else None)
                    or self.source
                    or "",
                }
                for i, (ident, text) in enumerate(zip(self.ids, translations, strict=True))
            ]
            return json.dumps({"translations": items}, ensure_ascii=False)
        text = translations[0]
        core = text.strip()
        if self.unquote and core:
            if core[0] in self.unquote:
                text = '"' + text
            if core[-1] in self.unquote:
                text += '"'
        return text


# -- languages -----------------------------------------------------------------------------

_AUTO = frozenset(
    {"auto", "autodetect", "auto detect", "detect", "automatic", "unknown", "und"}
    | {"\u81ea\u52a8", "\u81ea\u52a8\u68c0\u6d4b"}  # 自动, 自动检测
)
# Names the apps send that are neither the English nor the native name langcodes gives a tag
# (its names are "Chinese (Simplified)", "bahasa Indonesia"...): Pot, KISS,
# Qwen-MT and Easydict write "Simplified Chinese", Easydict 简体中文白话文 for Chinese, Bob
# 3 翻译成简体白话文, KISS "Indonesia" and "Melayu".
_ALIASES = {
    "simplified chinese": "zh-Hans",
    "traditional chinese": "zh-Hant",
    "chinese simplified": "zh-Hans",
    "chinese traditional": "zh-Hant",
    "classical chinese": "lzh",
    "brazilian portuguese": "pt-BR",
    "european portuguese": "pt-PT",
    "latin american spanish": "es-419",
    "farsi": "fa",
    "myanmar": "my",
    "tagalog": "fil",
    "indonesia": "id",
    "melayu": "ms",
    "bahasa melayu": "ms",
    "norsk bokmal": "nb",
    "bokmal": "nb",
    "bokm\u00e5l": "nb",
    # The names Google Translate (and the apps copying its list) uses where CLDR differs.
    "bengali": "bn",
    "oriya": "or",
    "kirghiz": "ky",
    "uighur": "ug",
    "sinhalese": "si",
    "pushto": "ps",
    "panjabi": "pa",
    "haitian": "ht",
    "scots gaelic": "gd",
    "gaelic": "gd",
    "dhivehi": "dv",
    "chichewa": "ny",
    "frisian": "fy",
    "myanmar burmese": "my",
    "kurdish kurmanji": "ku",
    "kurdish sorani": "ckb",
    "sorani": "ckb",
    "maori": "mi",
    "kirundi": "rn",
    "greenlandic": "kl",
    "slovene": "sl",
    "castilian": "es",
    "azeri": "az",
    "\u7b80\u4f53\u4e2d\u6587": "zh-Hans",  # 简体中文
    "\u7e41\u9ad4\u4e2d\u6587": "zh-Hant",  # 繁體中文
    "\u7e41\u4f53\u4e2d\u6587": "zh-Hant",  # 繁体中文
    "\u7b80\u4f53\u4e2d\u6587\u767d\u8bdd\u6587": "zh-Hans",  # 简体中文白话文 (Easydict)
    "\u7e41\u4f53\u4e2d\u6587\u767d\u8bdd\u6587": "zh-Hant",  # 繁体中文白话文 (Easydict)
    "\u7b80\u4f53\u4e2d\u6587\u6587\u8a00\u6587": "lzh",  # 简体中文文言文 (Easydict)
    "\u7b80\u4f53\u767d\u8bdd\u6587": "zh-Hans",  # 简体白话文 (Bob)
    "\u7e41\u4f53\u767d\u8bdd\u6587": "zh-Hant",  # 繁体白话文 (Bob)
    "\u7ca4\u8bed": "yue",  # 粤语
    "\u7ca4\u8bed\u767d\u8bdd\u6587": "yue",  # 粤语白话文 (Bob)
    "\u53e4\u6587": "lzh",  # 古文 (Bob)
    "\u6587\u8a00\u6587": "lzh",  # 文言文
}
# Tags named beside the two-letter languages: the variants and three-letter languages the
# apps list (Pot, Easydict, Qwen-MT, KISS, Bob).
_EXTRA_TAGS = (
    "zh-Hans", "zh-Hant", "pt-BR", "pt-PT", "es-419", "yue", "fil", "lzh", "ceb", "haw",
    "hmn", "ckb", "sr-Latn", "sr-Cyrl", "mn-Cyrl",
)  # fmt: skip
_GETTEXT_MODIFIERS = {"latin": "Latn", "cyrillic": "Cyrl"}  # Weblate's sr@latin, uz@cyrillic
_CODE = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")
_NAME_PUNCTUATION = str.maketrans(
    {c: " " for c in "-_(),\uff08\uff09\uff0c"}  # also the full-width parentheses, comma
)


def _norm(name: str) -> str:
    return " ".join(name.casefold().translate(_NAME_PUNCTUATION).split())


def is_auto(name: str) -> bool:
    """Whether a source language as written means "detect it" (auto, Auto, AutoDetect...)."""
    return _norm(name) in _AUTO


@lru_cache(maxsize=1)
def _name_index() -> dict[str, str]:
    """Normalised English and native names of every two-letter language (and _EXTRA_TAGS),
    from tolk.languages (langcodes' CLDR names), to their tags; built once, in about 0.4 s.
    Exact names only: langcodes' own name search also matches prefixes and obscure
    languages ("pirate", "Shakespearean English"), which a prompt must not turn into a
    translation."""
    langs = []
    for first, second in itertools.product(string.ascii_lowercase, repeat=2):
        try:
            langs.append(lang(first + second))
        except InvalidLanguageCode:
            continue
    langs += [lang(tag) for tag in _EXTRA_TAGS]
    index: dict[str, str] = {}
    for described in langs:  # English names first: they win a clash with a native name
        index.setdefault(_norm(described.name), described.tag)
    for described in langs:
        index.setdefault(_norm(described.name_in(described.tag)), described.tag)
    index.update({_norm(name): tag for name, tag in _ALIASES.items()})
    return index


def language_tag(name: str) -> str | None:
    """The tolk tag for a language as an app writes it: a code (`de`, `DE`, `de-DE`, `pt_BR`,
    `zh-Hans`, `sr@latin`, `deu`), an English name (`German`, `Simplified Chinese`,
    `Portuguese (Brazil)`) or a native one (`Deutsch`, `Français`, `简体中文`, `日本語`,
    `नेपाली`); None for "auto" and for what it does not know. A tag gives itself."""
    raw = name.strip()
    if not raw or len(raw) > MAX_NAME:  # only short names reach the cache
        return None
    return _language_tag(raw)


@lru_cache(maxsize=4096)
def _language_tag(raw: str) -> str | None:
    if is_auto(raw):
        return None
    code, _, modifier = raw.partition("@")
    if _CODE.fullmatch(code):
        script = _GETTEXT_MODIFIERS.get(modifier.lower())
        try:
            return lang(f"{code}-{script}" if script else code).tag
        except InvalidLanguageCode:
            pass
    index = _name_index()
    tag = index.get(_norm(raw))
    if tag is None and "(" in raw:  # "Tamil (India)", "Persian (Farsi)": the language alone
        tag = index.get(_norm(raw[: raw.index("(")]))
    return tag


# -- reading messages ----------------------------------------------------------------------


def _text(message: Any, *, media: bool = False) -> str | None:
    """A message's text: its content string, or its text parts joined with newlines (as
    vLLM joins them); None when it has none, or other parts and `media` is off."""
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if not isinstance(part, Mapping):
            return None
        text = part.get("text")
        if part.get("type") == "text" and isinstance(text, str):
            texts.append(text)
        elif not media:
            return None
    return "\n".join(texts)


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _json(text: str) -> Any:
    """The JSON a message holds, or None; only for a message that starts with { or [."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _taken(texts: list[str]) -> tuple[str, ...]:
    if len(texts) > MAX_TEXTS:
        raise TooManyTexts(len(texts))
    return tuple(texts)


def _pairs(entries: Any) -> tuple[tuple[str, str], ...]:
    """Glossary entries: [{source, target}] (Qwen-MT, Weblate 2026) or {term: translation}
    (Weblate 5.17, KISS: an empty translation keeps the term); malformed ones skipped."""
    out: list[tuple[str, str]] = []
    if isinstance(entries, Mapping):
        for term, target in itertools.islice(entries.items(), MAX_TERMS):
            if isinstance(term, str) and isinstance(target, str) and term:
                out.append((term, target or term))
    elif isinstance(entries, list):
        for entry in entries[:MAX_TERMS]:
            if isinstance(entry, Mapping):
                term, target = entry.get("source"), entry.get("target")
                if isinstance(term, str) and isinstance(target, str) and term and target:
                    out.append((term, target))
    return tuple(out)


@dataclass(frozen=True)
class _Found:
    """An app shape read from the messages, its languages still as the app wrote them."""

    shape: str
    texts: tuple[str, ...]
    source: str | None
    target: str
    terms: tuple[tuple[str, str], ...] = ()
    ids: tuple[int | str, ...] = ()
    unquote: str = ""


# -- Weblate and KISS batch ------------------------------------------------------------------


def _structured(data: Any) -> _Found | None:
    """Weblate 5.17 / 2026.x JSON, or KISS Translator's batch JSON."""
    if not isinstance(data, Mapping):
        return None
    target, strings = data.get("target_language"), data.get("strings")
    if isinstance(target, str) and isinstance(strings, list):
        if len(strings) > MAX_TEXTS:
            raise TooManyTexts(len(strings))
        texts = []
        for item in strings:
            text = _weblate_source(item)
            if text is None:
                return None
            texts.append(text)
        source = data.get("source_language")
        return _Found(
            WEBLATE_JSON,
            _taken(texts),
            source if isinstance(source, str) else None,
            target,
            _pairs(data.get("glossary")),
        )
    target, segments = data.get("targetLanguage"), data.get("segments")
    if isinstance(target, str) and isinstance(segments, list):
        if len(segments) > MAX_TEXTS:
            raise TooManyTexts(len(segments))
        ids: list[int | str] = []
        texts = []
        for segment in segments:
            if not isinstance(segment, Mapping):
                return None
            ident, text = segment.get("id"), segment.get("text")
            if isinstance(ident, bool) or not isinstance(ident, int | str):
                return None
            if not isinstance(text, str):
                return None
            ids.append(ident)
            texts.append(text)
        return _Found(
            KISS_BATCH, _taken(texts), None, target, _pairs(data.get("glossary")), tuple(ids)
        )
    return None


def _weblate_source(item: Any) -> str | None:
    """A Weblate string's text: its `source` (placeholders in it as @@PHn@@ text), else its
    2026.x `parts` joined (text parts' text, placeholders' ids)."""
    if not isinstance(item, Mapping):
        return None
    source = item.get("source")
    if isinstance(source, str):
        return source
    parts = item.get("parts")
    if not isinstance(parts, list):
        return None
    pieces = []
    for part in parts:
        if not isinstance(part, Mapping):
            return None
        piece = part.get("text") if part.get("type") == "text" else part.get("id")
        if not isinstance(piece, str):
            return None
        pieces.append(piece)
    return "".join(pieces)


_WEBLATE5 = "You are a highly skilled translation assistant, adept at translating text\n"
_WEBLATE5_FROM = "from language '"
_WEBLATE5_TO = "'\nto language '"
_WEBLATE5_GLOSSARY = "Use the following glossary during the translation:\n"
# Requests that are no one-to-one translation: rephrasing (three variants of an existing
# translation) and plurals (as many translations as the target has plural forms).
_WEBLATE5_NOT_TRANSLATION = (
    "you answer three rephrased translation strings",
    "IMPORTANT PLURAL CONTEXT for ",
)


def _weblate5(system: str, user: str) -> _Found | None:
    """Weblate up to 5.16: the pair in the system prompt, strings joined by the separator
    (a single string is sent alone, without the separator paragraph); the oldest 5.x sent a
    JSON list of strings and read one back."""
    start = system.find(_WEBLATE5, 0, len(_WEBLATE5) + 8)
    if start < 0:
        return None
    at = start + len(_WEBLATE5)
    if not system.startswith(_WEBLATE5_FROM, at):
        return None
    at += len(_WEBLATE5_FROM)
    middle = system.find(_WEBLATE5_TO, at, at + MAX_NAME + len(_WEBLATE5_TO))
    if middle < 0:
        return None
    end = system.find("'\n", middle + len(_WEBLATE5_TO), middle + len(_WEBLATE5_TO) + MAX_NAME)
    if end < 0:
        return None
    source, target = system[at:middle], system[middle + len(_WEBLATE5_TO) : end]
    if any(marker in system for marker in _WEBLATE5_NOT_TRANSLATION):
        return None
    terms = _weblate5_glossary(system)
    if "You receive an input as JSON list of strings" in system:
        data = _json(user)
        if not isinstance(data, list) or not all(isinstance(t, str) for t in data):
            return None
        return _Found(WEBLATE_JSON, _taken(data), source, target, terms)
    texts = [user]
    if WEBLATE_SEPARATOR.strip() in system:
        texts = user.split(WEBLATE_SEPARATOR, MAX_TEXTS)
        if len(texts) > MAX_TEXTS:
            raise TooManyTexts(user.count(WEBLATE_SEPARATOR) + 1)
    return _Found(WEBLATE_PARTS, tuple(texts), source, target, terms)


def _weblate5_glossary(system: str) -> tuple[tuple[str, str], ...]:
    """The TSV glossary (`source<TAB>target` lines) after GLOSSARY_PROMPT's heading."""
    start = system.find(_WEBLATE5_GLOSSARY)
    if start < 0:
        return ()
    block = system[start + len(_WEBLATE5_GLOSSARY) :]
    terms: list[tuple[str, str]] = []
    for line in block.split("\n"):
        if not line.strip() or len(terms) >= MAX_TERMS:
            break
        term, tab, target = line.partition("\t")
        if tab and term and target and "\t" not in target:
            terms.append((term, target))
    return tuple(terms)


# -- single-text prompts ---------------------------------------------------------------------

# System prompts that name the app (docs/research/chat-apps.md, "Fingerprints").
_SYSTEM_APPS = (
    ("You are a professional translation engine, please translate the text into a "
     "colloquial, professional, elegant and fluent content", "pot"),
    ("You are a translation expert proficient in various languages, focusing solely on "
     "translating text without interpretation.", "easydict"),
    ("You are a translation engine that can only translate text and cannot interpret it.",
     "bob"),
    ("You are a professional, authentic machine translation engine.", "kiss"),
)  # fmt: skip
# What the app strips from the ends of a non-streamed reply (Pot: one `"` each end after
# trimming; Bob 3: one of 『「" at the start and 』」" at the end).
_UNQUOTE = {"pot": '"', "bob": '"\u300c\u300e\u300f\u300d'}

_ZOTERO_HEAD = (
    "As an academic expert with specialized knowledge in various fields, please provide a "
    "proficient and precise translation from "
)
_ZOTERO_MIDDLE = (
    " of the academic text enclosed in \U0001f524. It is crucial to maintaining the original "
    "phrase or sentence and ensure accuracy while utilizing the appropriate language. The "
    "text is as follows:  \U0001f524 "
)
_ZOTERO_TAIL = (
    " \U0001f524  Please provide the translated result without any additional explanation "
    "and remove \U0001f524."
)
_ZOTERO_CONTEXT = "Context from the academic paper:\n"
_ZOTERO_CONTEXT_TEXT = "\n\nText to translate: "

_KISS_TASK = "# Task\nTranslate the Source Text below to "
_KISS_SOURCE = "\n\nSource Text: "
_KISS_TAIL = "\n\nTranslated Text:"
_KISS_GLOSSARY = "# Glossary:\n"

_OPENAI_TRANSLATOR = "Only reply the result and nothing else. "

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# One layer of wrapping a generic prompt's text may have.
_WRAPPERS = (
    ('"""', '"""'),
    ("'''", "'''"),
    ("\U0001f524", "\U0001f524"),
    ('"', '"'),
    ("\u201c", "\u201d"),
    ("\u300c", "\u300d"),
)


def _zotero(text: str) -> _Found | None:
    """Zotero PDF-Translate's default academic prompt; its codes are `en-US`, `de-DE`."""
    if not (text.startswith(_ZOTERO_HEAD) and text.endswith(_ZOTERO_TAIL)):
        return None
    at = len(_ZOTERO_HEAD)
    middle = text.find(_ZOTERO_MIDDLE, at, at + 2 * MAX_NAME + len(_ZOTERO_MIDDLE))
    end = len(text) - len(_ZOTERO_TAIL)
    if middle < 0 or middle + len(_ZOTERO_MIDDLE) > end:
        return None
    source, to, target = text[at:middle].partition(" to ")
    if not to:
        return None
    body = text[middle + len(_ZOTERO_MIDDLE) : end]
    if body.startswith(_ZOTERO_CONTEXT):  # "attach paper context": title, abstract, text
        cut = body.find(_ZOTERO_CONTEXT_TEXT)
        if cut < 0:
            return None
        body = body[cut + len(_ZOTERO_CONTEXT_TEXT) :]
    return _Found(f"{PROMPT}:zotero", (body,), source, target)


def _kiss(text: str) -> _Found | None:
    """KISS Translator's non-batch Markdown template; its glossary is `- term: translation`
    lines."""
    task = text.find(_KISS_TASK)
    if task < 0 or (task > 0 and text[task - 1] != "\n") or not text.endswith(_KISS_TAIL):
        return None
    at = task + len(_KISS_TASK)
    dot = text.find(".\n", at, at + MAX_NAME + 2)
    if dot < 0:
        return None
    start = text.find(_KISS_SOURCE, dot)
    end = len(text) - len(_KISS_TAIL)
    if start < 0 or start + len(_KISS_SOURCE) > end:
        return None
    terms: list[tuple[str, str]] = []
    heading = text.rfind(_KISS_GLOSSARY, 0, task)
    if heading >= 0:
        for line in text[heading + len(_KISS_GLOSSARY) : task].split("\n"):
            term, colon, target = line.removeprefix("- ").partition(": ")
            if line.startswith("- ") and colon and term and len(terms) < MAX_TERMS:
                terms.append((term, target or term))
    body = text[start + len(_KISS_SOURCE) : end]
    return _Found(f"{PROMPT}:kiss", (body,), None, text[at:dot], tuple(terms))


def _instruction(text: str) -> tuple[str | None, str, int] | None:
    """(source, target, where the text starts) for an instruction that ends at the first
    colon of the message's first line: `Translate into X:`, `Please translate to X:`,
    `Translate from X to Y:`, `Translate the following [X] text into Y[ text]:`, `翻译成X:`."""
    head = text[:_HEAD]
    colon = head.find(":")
    newline = head.find("\n")
    if colon < 0 or 0 <= newline < colon:
        return None
    words = head[:colon]
    low = words.translate(_ASCII_LOWER)  # ASCII only: the indexes stay those of `words`
    source: str | None = None
    if words.startswith(("\u7ffb\u8bd1\u6210", "\u7ffb\u8b6f\u6210")):  # 翻译成, 翻譯成
        return None, words[3:].strip(), colon + 1
    at = 7 if low.startswith("please ") else 0
    if not low.startswith("translate ", at):
        return None
    at += len("translate ")
    if low.startswith("the following ", at):
        at += len("the following ")
        if low.startswith(("text into ", "text to "), at):
            at = low.index(" ", at + len("text ")) + 1
        else:
            cut = _first(low, (" text into ", " text to "), at)
            if cut is None:
                return None
            source = words[at : cut[0]].strip()
            at = cut[1]
        target = words[at:]
        if target.translate(_ASCII_LOWER).endswith(" text"):
            target = target[: -len(" text")]
    elif low.startswith("from ", at):
        cut = _first(low, (" into ", " to "), at + len("from "))
        if cut is None:
            return None
        source, target = words[at + len("from ") : cut[0]].strip(), words[cut[1] :]
    elif low.startswith(("into ", "to "), at):
        target = words[low.index(" ", at) + 1 :]
    else:
        return None
    target = target.strip()
    if not target or len(target) > MAX_NAME or (source is not None and not source):
        return None
    return source, target, colon + 1


def _first(text: str, needles: tuple[str, ...], start: int) -> tuple[int, int] | None:
    """(start, end) of the earliest of `needles` in text[start:]."""
    found = [(i, i + len(n)) for n in needles if (i := text.find(n, start)) >= 0]
    return min(found) if found else None


def _unwrap(text: str) -> str:
    """A generic prompt's text without surrounding blanks and one layer of quotes or a
    code fence."""
    text = text.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        newline = text.find("\n")
        if 0 <= newline <= len(text) - 3:
            return text[newline + 1 : -3].strip()
    for opening, closing in _WRAPPERS:
        if (
            text.startswith(opening)
            and text.endswith(closing)
            and len(text) >= len(opening) + len(closing)
        ):
            return text[len(opening) : len(text) - len(closing)].strip()
    return text


def _prompt(text: str, app: str | None, stream: bool) -> _Found | None:
    """An instruction line and the text after it: OpenAI Translator's, Pot's, Easydict's,
    Bob 3's exact templates, or the generic forms."""
    shift = 0
    head = text.find(_OPENAI_TRANSLATOR, 0, 4 * _HEAD)
    if head == 0 or (head >= 2 and text.startswith("\n\n", head - 2)):
        app, shift = "openai-translator", head + len(_OPENAI_TRANSLATOR)
    read = _instruction(text[shift:] if shift else text)
    if read is None:
        return None
    source, target, colon = read
    rest = text[shift + colon :]
    if app in ("openai-translator", "bob") and rest.startswith("\n\n"):
        body = rest[2:]  # `…:\n\n${text}`
    elif rest.startswith('\n"""\n') and rest.endswith('\n"""') and len(rest) >= 9:
        body = rest[5:-4]  # Pot: `Translate into $to:\n"""\n$text\n"""`
        if text.startswith("Translate into "):
            app = app or "pot"
    elif rest.startswith(' """') and rest.endswith('"""') and len(rest) >= 7:
        body = rest[4:-3]  # Easydict: `Translate the following X text into Y text: """…"""`
        if text.startswith("Translate the following ") and source:
            app = app or "easydict"
    else:
        body = _unwrap(rest)
    if not body.strip():
        return None
    shape = f"{PROMPT}:{app}" if app else PROMPT
    unquote = "" if stream else _UNQUOTE.get(app or "", "")
    return _Found(shape, (body,), source, target, unquote=unquote)


def _app_shape(system: str, user: str, media: bool, stream: bool) -> _Found | None:
    """What app sent this conversation, from its system prompt and last user message."""
    found = _weblate5(system, user) if system else None
    if found is not None or media:  # pictures are context to Weblate; elsewhere, a chat
        return found
    data = _json(user)
    if data is not None:
        return _structured(data)
    app = next((name for mark, name in _SYSTEM_APPS if mark in system[:1024]), None)
    return _zotero(user) or _kiss(user) or _prompt(user, app, stream)


# -- recognising a request -------------------------------------------------------------------


def recognise(body: Mapping[str, Any], resolve: Resolve = language_tag) -> ChatTranslation | None:
    """The translation a chat-completions body asks for, or None for a plain chat.

    Raises UnknownLanguage (and ChatTranslationError, TooManyTexts) where the request is a
    translation by its own account (translation_options, a tolk-<pair> model) and cannot be
    served as one, or holds more than MAX_TEXTS texts."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    options = body.get("translation_options")
    if options is not None:
        return _translation_options(options, messages, resolve)
    pair = _model_pair(body.get("model"), resolve)
    last = messages[-1]
    if _role(last) != "user":
        return None
    user = _text(last, media=True)
    if user is None:
        return None
    media = _text(last) is None
    first = messages[0]
    system = ""
    if len(messages) > 1 and _role(first) in ("system", "developer"):
        system = _text(first) or ""
    found = _app_shape(system, user, media, body.get("stream") is True)
    if found is not None:
        target = _resolved(found.target, resolve)
        if target is not None:
            source = None
            if found.source is not None and not is_auto(found.source):
                source = _resolved(found.source, resolve)
            elif found.source is None and pair is not None and pair[1] == target:
                source = pair[0]  # `tolk-en-de` and "Translate into German:"
            return ChatTranslation(
                found.shape, found.texts, source, target, found.terms, found.ids, found.unquote
            )
        if pair is None:
            return None
        return ChatTranslation(
            found.shape, found.texts, *pair, found.terms, found.ids, found.unquote
        )
    if pair is None or media:
        return None
    return ChatTranslation(MODEL, (user,), *pair)


def _resolved(name: str, resolve: Resolve) -> str | None:
    name = name.strip()
    return resolve(name) if name and len(name) <= MAX_NAME else None


def _translation_options(options: Any, messages: list[Any], resolve: Resolve) -> ChatTranslation:
    """Qwen-MT's convention: the last user message is the text."""
    field = "translation_options"
    if not isinstance(options, Mapping):
        raise ChatTranslationError("translation_options must be an object", field)
    target_name, source_name = options.get("target_lang"), options.get("source_lang")
    if not isinstance(target_name, str) or not target_name.strip():
        raise ChatTranslationError(
            "translation_options.target_lang must name the target language", f"{field}.target_lang"
        )
    target = _resolved(target_name, resolve)
    if target is None:
        raise UnknownLanguage(target_name, f"{field}.target_lang")
    source = None
    if source_name is not None:
        if not isinstance(source_name, str):
            raise ChatTranslationError(
                "translation_options.source_lang must be a language or 'auto'",
                f"{field}.source_lang",
            )
        if source_name.strip() and not is_auto(source_name):
            source = _resolved(source_name, resolve)
            if source is None:
                raise UnknownLanguage(source_name, f"{field}.source_lang")
    text = next((_text(m) for m in reversed(messages) if _role(m) == "user"), None)
    if text is None:
        raise ChatTranslationError(
            "translation_options translates the last user message's text, and there is none",
            "messages",
        )
    return ChatTranslation(
        TRANSLATION_OPTIONS, (text,), source, target, _pairs(options.get("terms"))
    )


def _model_pair(model: Any, resolve: Resolve) -> tuple[str | None, str] | None:
    """The pair in a model named `tolk-<target>` or `tolk-<source>-<target>`, tags in BCP-47
    spelling: a script (`Hans`) or an upper-case region (`BR`) belongs to the tag before it,
    so `tolk-en-pt-BR` is English to Brazilian Portuguese and `tolk-zh-Hans` is a target."""
    if not isinstance(model, str) or model[:5].lower() != "tolk-":
        return None
    rest = model[5:]
    if not rest or len(rest) > 2 * MAX_NAME + 1:
        raise UnknownLanguage(rest, "model")
    groups: list[list[str]] = []
    for subtag in rest.split("-"):
        script = len(subtag) == 4 and subtag.isalpha()
        region = (len(subtag) == 2 and subtag.isalpha() and subtag.isupper()) or (
            len(subtag) == 3 and subtag.isdigit()
        )
        if groups and (script or region):
            groups[-1].append(subtag)
        else:
            groups.append([subtag])
    if len(groups) == 2:
        source_name, target_name = ("-".join(g) for g in groups)
        target = resolve(target_name)
        source = None if is_auto(source_name) else resolve(source_name)
        if target is not None and (source is not None or is_auto(source_name)):
            return source, target
        if (_CODE.fullmatch(source_name) or is_auto(source_name)) and _CODE.fullmatch(
            target_name
        ):  # tolk-en-xx, tolk-xx-de: a pair of codes, one unknown
            raise UnknownLanguage(target_name if target is None else source_name, "model")
    whole = resolve(rest)
    if whole is None:
        raise UnknownLanguage(rest, "model")
    return None, whole
