"""Cutting a text into segments the engine translates side by side, and putting it back.

A text becomes `Segmented(gaps, segments)`: `gaps[0] + segments[0] + gaps[1] + ... +
segments[-1] + gaps[-1]` is the text, byte for byte. Everything that is not prose to
translate (line breaks, blank lines, indentation, list and quote markers, the whitespace
around and between sentences) lives in the gaps and is never shown to a model; `join`
puts translations back between the same gaps.

Split modes (the request's `split` option):

- `sentences` (default): every line is its own unit (newlines split, as DeepL's
  `split_sentences=1`), and a line longer than the model's `max_segment_tokens` is cut at
  sentence boundaries, consecutive sentences packed back together up to that budget so that
  each segment keeps as much context as fits.
- `paragraphs`: paragraphs (separated by blank lines; a list item or quote line starts a
  new one) are units and are never cut at sentences; single newlines inside a paragraph
  stay inside its segment (DeepL's `nonewlines`).
- `none`: the whole text, less its outer whitespace, is one segment.

Sentence boundaries come from sentencex (wikimedia; MIT; a 1.2 MB Rust wheel with its rules
built in, no model downloads). It was chosen by measurement (../shared/research/compat-apis.md,
section 4): 3 ms for 118 k characters of English against pysbd's 4.5 s, correct on the zh,
ja, hi and ne samples (danda `।`, `。！？`) where blingfire does not split on the danda, and
maintained, unlike pysbd. Only its boundary offsets are used, with the text between them
taken from the source, because its own chunks were seen to drop a blank line. Thai has no
sentence punctuation, so no rule-based splitter finds its sentences (pythainlp's model can,
at 67 MB); a Thai line over the budget, like any sentence over it, is cut at the last
whitespace that fits, else at the budget.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import sentencex  # type: ignore[import-untyped]

SplitMode = Literal["sentences", "paragraphs", "none"]
SPLIT_MODES: tuple[SplitMode, ...] = ("sentences", "paragraphs", "none")

Counter = Callable[[str], int]  # tokens in a string
# Tokens in each of many strings: one call (a fast tokenizer's batch, in Rust) instead of one
# per string, where a long line holds thousands of sentences.
ManyCounter = Callable[[Sequence[str]], list[int]]

# List bullets, numbers ("1.", "2)"), quote and heading markers.
_MARKER = r"(?:[-*+•‣◦▪–]|\d{1,9}[.)]|>|#{1,6})"
# Indentation, then markers, each with the spaces after it.
_LINE_PREFIX = re.compile(rf"[^\S\n]*(?:{_MARKER}(?:[^\S\n]+|$))*")
_BLANK_LINES = re.compile(r"\n[^\S\n]*\n\s*")  # a paragraph break, with all the space around it
_STARTS_ITEM = re.compile(rf"[^\S\n]*{_MARKER}[^\S\n]")


@dataclass(frozen=True)
class Segmented:
    gaps: tuple[str, ...]  # one more than segments
    segments: tuple[str, ...]

    def join(self, translations: Sequence[str]) -> str:
        """The text with each segment replaced by its translation, the gaps as they were."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        out = [self.gaps[0]]
        for translation, gap in zip(translations, self.gaps[1:], strict=True):
            out += [translation, gap]
        return "".join(out)


def approximate_tokens(text: str) -> int:
    """Tokens by a byte-level BPE, at most: one per UTF-8 byte. Used when no tokenizer is
    given; an upper bound keeps segments within budget."""
    return len(text.encode())


def segment(
    text: str,
    split: SplitMode = "sentences",
    *,
    language: str = "en",
    max_tokens: int = 200,
    count: Counter = approximate_tokens,
    count_many: ManyCounter | None = None,
) -> Segmented:
    """Cut `text` into segments (see the module's docstring); `language` picks the sentence
    rules, `count` measures a piece against `max_tokens` (`count_many`, if given, many pieces
    at once). Linear in the text, up to a log factor for pieces cut without sentences."""
    if split == "none":
        units: Iterator[tuple[int, int]] = _trimmed(text, 0, len(text))
    elif split == "paragraphs":
        units = _paragraphs(text)
    else:
        many = count_many or (lambda pieces: [count(p) for p in pieces])
        units = _sentence_units(text, language, max_tokens, count, many)
    gaps: list[str] = []
    segments: list[str] = []
    at = 0
    for start, end in units:
        gaps.append(text[at:start])
        segments.append(text[start:end])
        at = end
    gaps.append(text[at:])
    return Segmented(tuple(gaps), tuple(segments))


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The span [start, end) less its outer whitespace, if it has words to translate
    (numbers, punctuation and rules such as `---` stay as they are)."""
    piece = text[start:end]
    core = piece.strip()
    if any(c.isalpha() for c in core):
        lead = len(piece) - len(piece.lstrip())
        yield start + lead, start + lead + len(core)


def _lines(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Each line's content: after its indentation and list or quote markers."""
    at = start
    while at < end:
        newline = text.find("\n", at, end)
        line_end = end if newline < 0 else newline
        prefix = _LINE_PREFIX.match(text, at, line_end)
        content = prefix.end() if prefix else at
        if content == line_end:  # nothing but a marker (or a number): keep it as it is
            content = at
        yield from _trimmed(text, content, line_end)
        at = line_end + 1


def _paragraphs(text: str) -> Iterator[tuple[int, int]]:
    at = 0
    for brk in [*_BLANK_LINES.finditer(text), None]:
        end = brk.start() if brk else len(text)
        yield from _items(text, at, end)
        if brk:
            at = brk.end()


def _items(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """A paragraph's list items and quote lines each start a segment of their own."""
    starts = [start]
    at = text.find("\n", start, end)
    while at >= 0:
        if _STARTS_ITEM.match(text, at + 1, end):
            starts.append(at + 1)
        at = text.find("\n", at + 1, end)
    for item_start, item_end in zip(starts, [*starts[1:], end], strict=True):
        prefix = _LINE_PREFIX.match(text, item_start, item_end)
        content = prefix.end() if prefix and prefix.end() < item_end else item_start
        yield from _trimmed(text, content, item_end)


def _sentence_units(
    text: str, language: str, max_tokens: int, count: Counter, many: ManyCounter
) -> Iterator[tuple[int, int]]:
    for start, end in _lines(text, 0, len(text)):
        line = text[start:end]
        # Cheap first: no byte-level BPE makes more tokens than the line has bytes.
        if len(line.encode()) <= max_tokens or count(line) <= max_tokens:
            yield start, end
            continue
        yield from _pack(text, _sentences(text, start, end, language), max_tokens, count, many)


def _sentences(text: str, start: int, end: int, language: str) -> list[tuple[int, int]]:
    """Sentence spans of text[start:end], whitespace between them left out."""
    line = text[start:end]
    cuts = sorted(
        {
            b["start_index"]
            for b in sentencex.get_sentence_boundaries(language, line)
            if 0 < b["start_index"] < len(line)
        }
    )
    spans: list[tuple[int, int]] = []
    for a, b in zip([0, *cuts], [*cuts, len(line)], strict=True):
        spans += list(_trimmed(text, start + a, start + b))
    return spans


def _pack(
    text: str,
    sentences: list[tuple[int, int]],
    max_tokens: int,
    count: Counter,
    many: ManyCounter,
) -> Iterator[tuple[int, int]]:
    """Consecutive sentences joined up to the budget; a sentence over it cut on its own.

    Linear in the line: every sentence is counted once, alone and with the whitespace before
    it, in two batched calls, and a pack's tokens are the sum, instead of counting the growing
    pack again at each sentence (40,000 short sentences on one line took 52 s so). Byte-level
    BPE tokens do not cross the whitespace between sentences, so the sum is the pack's count,
    or within a token of it where punctuation runs meet; each pack is counted once more
    whole, and one over the budget (rare) is packed again exactly within its own span."""
    if not sentences:
        return
    alone = many([text[a:b] for a, b in sentences])
    joined = many([text[prev[1] : b] for prev, (_, b) in itertools.pairwise(sentences)])
    current: tuple[int, int] | None = None
    tokens = 0
    for i, (start, end) in enumerate(sentences):
        if current is not None:
            more = joined[i - 1]
            if tokens + more <= max_tokens:
                current, tokens = (current[0], end), tokens + more
                continue
            yield from _checked(text, current, max_tokens, count)
            current = None
        if alone[i] <= max_tokens:
            current, tokens = (start, end), alone[i]
        else:
            yield from _cut_long(text, start, end, max_tokens, count)
    if current is not None:
        yield from _checked(text, current, max_tokens, count)


def _checked(
    text: str, span: tuple[int, int], max_tokens: int, count: Counter
) -> Iterator[tuple[int, int]]:
    """A pack whose summed count fit: as it is if its own count fits too, else its words
    packed again by exact counts (a span within about the budget: bounded work)."""
    start, end = span
    if len(text[start:end].encode()) <= max_tokens or count(text[start:end]) <= max_tokens:
        yield span
        return
    current: tuple[int, int] | None = None
    for match in _NON_SPACE.finditer(text, start, end):
        if current is not None and count(text[current[0] : match.end()]) <= max_tokens:
            current = (current[0], match.end())
            continue
        if current is not None:
            yield current
        current = match.span()
        if count(match[0]) > max_tokens:
            yield from _cut_long(text, *current, max_tokens, count)
            current = None
    if current is not None:
        yield current


_NON_SPACE = re.compile(r"\S+")


def _cut_long(
    text: str, start: int, end: int, max_tokens: int, count: Counter
) -> Iterator[tuple[int, int]]:
    """A piece with no sentence boundary under the budget: cut at the last whitespace that
    fits, else (no spaces: Thai, Chinese without punctuation) wherever the budget ends.

    Each cut counts only text just past it (`_longest_fit`), never the whole rest: counting
    the rest at every cut made a 120,000-character line without spaces cost 5 s (quadratic)."""
    at = start
    while at < end:
        fit = _longest_fit(text, at, end, max_tokens, count)
        if fit >= end:
            yield from _trimmed(text, at, end)
            return
        # A space right after the budget's end is as good a cut as one inside it.
        space = max(text.rfind(" ", at + 1, fit + 1), text.rfind("\t", at + 1, fit + 1))
        cut = space if space > at else fit
        yield from _trimmed(text, at, cut)
        at = cut


def _longest_fit(text: str, start: int, end: int, max_tokens: int, count: Counter) -> int:
    """A cut in (start, end] with text[start:cut] within budget (at least one character):
    the largest, or one within 2% of the budget.

    Guesses from the characters per token seen so far (text of one kind cuts in two or three
    counts), every other guess halving the bracket once it is known, so the worst case stays
    logarithmic; no count is of more text than about twice the budget's."""
    tolerance = max_tokens // 50
    lo, hi = start + 1, end  # the cut lies in [lo, hi]; lo fits (one character always goes)
    guess = min(end, start + max(max_tokens, 1))
    bounded = False
    for step in range(128):
        n = count(text[start:guess])
        if n <= max_tokens:
            lo = guess
            if guess == end or n >= max_tokens - tolerance:
                return guess
        else:
            hi, bounded = guess - 1, True
        if lo >= hi:
            return lo
        estimate = start + (guess - start) * max_tokens // max(n, 1)
        if not bounded:
            guess = min(end, max(estimate, guess + 1))
        elif step % 2 == 0 and lo < estimate <= hi:
            guess = estimate
        else:
            guess = (lo + hi + 1) // 2
    return lo
