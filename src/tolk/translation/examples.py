"""Example translations shown to a chat model before its text (few-shot prompting).

A small instruction-tuned model follows a demonstration better than a description: shown a
source sentence and its human translation as an earlier turn of the conversation, it answers
in the target language more often, copies the source less, and keeps a placeholder where the
example kept one. The examples come from the parallel sample tolk ships (tolk/data/parallel:
FLORES-101 devtest lines 401-500, human translations; `tolk bench quality` scores lines 1-400,
so no example is ever a test sentence). They are the same for every request of a pair, so the
engine reads them once (prefix caching) and a batch shares them.

A segment with placeholders gets one example with placeholders, last (next to its text): one
sentence written for tolk in every language of the sample (tolk/data/parallel/markup.tsv),
three words of it marked as paired placeholders on both sides, aligned by hand (no good library
aligns Nepali or Chinese to English offline, and a wrong alignment would teach the model to
move markup), shown in the model's syntax (links or tags). The marked words are translated,
and move where the target's word order moves them: an example made, as before, from a sample
sentence's words written the same in both languages (a number or a name) taught the 0.5B Qwen
to leave the words of a link untranslated and to drop emphasis, and on the CPU 6 of 24 HTML
units' first tries kept their placeholders with it against 9 with this one
(docs/benchmarks.md, section 29).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from tolk.budget import sample
from tolk.config import LONGEST_EXAMPLE, SHORTEST_EXAMPLE
from tolk.languages import Lang
from tolk.translation.document import PLACEHOLDER

# Example sentences of a useful length (the bounds of `prompt_example_chars`).
SHORTEST, LONGEST = SHORTEST_EXAMPLE, LONGEST_EXAMPLE
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


@cache
def _marked() -> dict[str, str]:
    """The markup example's sentence in each language that has it (data/parallel/markup.tsv)."""
    text = (resources.files("tolk") / "data" / "parallel" / "markup.tsv").read_text("utf-8")
    rows = (line.split("\t", 1) for line in text.splitlines() if line and line[0] != "#")
    return {code: sentence for code, sentence in rows}


def _markup_example(source: str, target: str) -> tuple[str, str] | None:
    """The example with placeholders for a pair, in tolk's tag form, if both languages have
    it."""
    marked = _marked()
    if source == target or source not in marked or target not in marked:
        return None
    return marked[source], marked[target]


def examples(
    source: Lang, target: Lang, count: int, markup: bool = False, longest: int = LONGEST
) -> list[tuple[str, str]]:
    """Up to `count` (source text, translation) examples for a pair, each sample sentence
    at most `longest` characters; with `markup`, the last one is the markup example (its
    sentence 62 characters in English, whatever `longest`), in tolk's tag form
    (tolk.translation.document.for_model shows them in the model's syntax). None outside
    the sample's languages."""
    if count <= 0 or not (_sampled(source) and _sampled(target)):
        return []
    marked = _markup_example(source.code, target.code) if markup else None
    chosen = list(_pairs(source.code, target.code, longest)[: count - 1 if marked else count])
    # The example with placeholders goes last, next to the text that has them.
    if marked is not None:
        chosen.append(marked)
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
