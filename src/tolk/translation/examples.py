"""Example translations shown to a chat model before its text (few-shot prompting).

A small instruction-tuned model follows a demonstration better than a description: shown a
source sentence and its human translation as an earlier turn of the conversation, it answers
in the target language more often, copies the source less, and keeps a placeholder where the
example kept one. The examples come from the parallel sample tolk ships (tolk/data/parallel:
FLORES-101 devtest lines 401-500, human translations; `tolk bench quality` scores lines 1-400,
so no example is ever a test sentence). They are the same for every request of a pair, so the
engine reads them once (prefix caching) and a batch shares them.

A segment with placeholders gets one example with placeholders, last (next to its text): a
sample sentence whose
translation carries a word of it unchanged (a number or a name), that word as a paired
placeholder on both sides and, where a second such word exists, that one as a standalone
placeholder (shown in the model's syntax, links or tags). The pairing of words across
the two sides is done by exact match only (no word alignment: no good library aligns Nepali or
Chinese to English offline, and a wrong alignment would teach the model to move markup), so
only words written the same in both languages (numbers, in the target's digits, and names)
are used.
"""

from __future__ import annotations

import re
from functools import cache

from tolk.budget import sample
from tolk.config import LONGEST_EXAMPLE, SHORTEST_EXAMPLE
from tolk.languages import Lang
from tolk.translation.document import PLACEHOLDER

# Example sentences of a useful length (the bounds of `prompt_example_chars`).
SHORTEST, LONGEST = SHORTEST_EXAMPLE, LONGEST_EXAMPLE
# Digits in the target's own script, where it has them (Nepali may write either kind).
_DIGITS = {"ne": str.maketrans("0123456789", "०१२३४५६७८९")}
# Words that may appear unchanged in a translation: numbers, and capitalised Latin names.
_WORD = re.compile(r"\b(?:\d{2,}|[A-Z][A-Za-z]{3,})\b")
# The sample's variety of a language where it has several: a request for another (Chinese in
# Traditional script, European Portuguese) gets no examples rather than the wrong variety's.
_VARIETIES = {"zh": {"zh", "zh-Hans", "zh-CN", "zh-Hans-CN"}, "pt": {"pt", "pt-BR"}}


@cache
def _pairs(source: str, target: str, longest: int = LONGEST) -> tuple[tuple[str, str], ...]:
    """The sample's (source, target) sentences of a pair whose source is SHORTEST to
    `longest` characters, in the sample's order."""
    sources, targets = sample(source), sample(target)
    if sources is None or targets is None or source == target:
        return ()
    return tuple(
        (s, t)
        for s, t in zip(sources, targets, strict=True)
        # '""' is a quotation mark the sample's German lost to a CSV round trip.
        if SHORTEST <= len(s) <= longest and '""' not in s + t
    )


def _unchanged(word: str, translation: str, target: str) -> str | None:
    """How `word` is written in the translation, if it is there once, unchanged (or its
    digits in the target's own)."""
    for written in dict.fromkeys((word, word.translate(_DIGITS.get(target, {})))):
        if len(re.findall(rf"(?<!\w){re.escape(written)}(?!\w)", translation)) == 1:
            return written
    return None


def _mark(sentence: str, word: str, tag: str) -> str:
    return re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", lambda _: tag.replace("{}", word), sentence)


@cache
def _markup_example(source: str, target: str, longest: int) -> tuple[str, str, str] | None:
    """A sample pair with its shared words as placeholders, in tolk's tag form, after the
    sample's sentence it was made from."""
    for original, t in _pairs(source, target, longest):
        s = original
        shared: list[tuple[str, str]] = []
        for word in dict.fromkeys(_WORD.findall(s)):
            written = _unchanged(word, t, target)
            if written is not None and s.count(word) == 1:
                shared.append((word, written))
        if not shared:
            continue
        (word, written), *rest = shared
        s, t = _mark(s, word, "<g1>{}</g1>"), _mark(t, written, "<g1>{}</g1>")
        if rest:
            (word, written), *_ = rest
            s, t = _mark(s, word, "<x2/>"), _mark(t, written, "<x2/>")
        return original, s, t
    return None


def examples(
    source: Lang, target: Lang, count: int, markup: bool = False, longest: int = LONGEST
) -> list[tuple[str, str]]:
    """Up to `count` (source text, translation) examples for a pair, each source sentence
    at most `longest` characters; with `markup`, the last one has placeholders, in tolk's
    tag form (tolk.translation.document.for_model shows them in the model's syntax). None
    outside the sample's languages."""
    if count <= 0 or not (_sampled(source) and _sampled(target)):
        return []
    marked = _markup_example(source.code, target.code, longest) if markup else None
    plain = [
        pair
        for pair in _pairs(source.code, target.code, longest)
        if marked is None or pair[0] != marked[0]
    ]
    chosen = plain[: count - 1 if marked else count]
    # The example with placeholders goes last, next to the text that has them.
    if marked is not None:
        chosen.append(marked[1:])
    return chosen


def _sampled(language: Lang) -> bool:
    return language.tag in _VARIETIES.get(language.code, {language.tag})


@cache
def showable(source: Lang, target: Lang) -> tuple[str, ...]:
    """Every translation tolk may show as an example for a pair (any `prompt_examples` up
    to its maximum, 8, and the markup example, at any `prompt_example_chars`), without
    placeholders: what `tolk bench quality` checks a system's outputs against for copies,
    whatever the server showed."""
    shown: list[str] = []
    # Each source length the sample has is a limit that may choose other examples.
    for longest in sorted({len(s) for s, _ in _pairs(source.code, target.code)}):
        shown += (t for _, t in examples(source, target, 8, longest=longest))
        marked = examples(source, target, 1, markup=True, longest=longest)
        shown += (PLACEHOLDER.sub(" ", t) for _, t in marked)
    return tuple(dict.fromkeys(shown))
