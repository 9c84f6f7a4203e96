"""Glossaries: term translations given to the model for the segments they occur in, and
terms that must not be translated at all.

A request may carry `glossary` (source term -> target term), a `glossary_id` naming one of
the server's configured glossaries for the language pair, and `do_not_translate` terms.
Glossary terms found in a segment (case-insensitively, as whole words where the term starts
and ends with a word character) are handed to the prompt format, which words them the way its
model card does (or the generic instruction). A model follows a glossary usually, not always.
`do_not_translate` terms are cut out of the text and become standalone placeholders, so they
come back byte for byte whatever the model does (tolk.translation.document).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

import ahocorasick  # type: ignore[import-not-found]  # (a C extension without stubs)

from tolk.errors import InvalidRequest
from tolk.translation.document import Document, Piece, Tag, Text, Unit

Terms = tuple[tuple[str, str], ...]  # (source term, target term) pairs found in a segment


def _fold(text: str) -> str:
    """`text` lower-cased character by character, its length kept (so offsets in it are
    offsets in `text`): str.lower() where that keeps the length, as it does but for a few
    characters (İ)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


class TermMatcher:
    """Where terms occur in a text: leftmost first, the longest term at a place first,
    case-insensitively, as whole words where a term starts or ends with a word character,
    never overlapping: what one regex alternation of every term (longest first) found, but
    in time linear in the text, through an Aho-Corasick automaton (pyahocorasick) built once
    per set of terms. The alternation cost text x terms: 100,000 glossary entries took 7.4 s
    to compile and 1.4 s per line to search; 5,500 do-not-translate terms 2 s per 10 KB."""

    def __init__(self, terms: Iterable[str]) -> None:
        self._automaton = ahocorasick.Automaton()
        for term in terms:
            if term:
                key = _fold(term)
                word_start, word_end = bool(_WORD.match(term)), bool(_WORD.match(term[-1]))
                self._automaton.add_word(key, (len(key), word_start, word_end))
        self.empty = len(self._automaton) == 0
        if not self.empty:
            self._automaton.make_automaton()

    def finditer(self, text: str) -> Iterator[tuple[int, int]]:
        """The (start, end) of each occurrence."""
        if self.empty:
            return
        folded = _fold(text)
        at = 0
        while at < len(folded):
            found = self._first(text, folded, at)
            if found is None:
                return
            yield found
            at = found[1]

    def _first(self, text: str, folded: str, at: int) -> tuple[int, int] | None:
        """The first occurrence starting at or after `at` that stands as a whole word where
        its term wants one; a longest match that does not may give way to a shorter term at
        the same place that ends where a word does, else the search goes on from the next
        place a term can start: a word's first character (a term starting with one needs a
        word boundary before it) or a non-word character, never inside a word. So each word
        or non-word character is tried at most once, each try scanning at most a term's
        length (MAX_TERM_CHARS): a 110,000-character word under a 1,024-character term is one
        try, not 110,000 (7.8 s)."""
        while at < len(folded):
            hit = next(iter(self._automaton.iter_long(folded, at)), None)
            if hit is None:
                return None
            end, value = hit
            start = end + 1 - value[0]
            if self._stands(text, start, end + 1, value):
                return start, end + 1
            for stop in reversed(_word_ends(text, start, end)):  # shorter terms there
                shorter = self._automaton.get(folded[start:stop], None)
                if shorter is not None and self._stands(text, start, stop, shorter):
                    return start, stop
            following = _START.search(text, start + 1)
            if following is None:
                return None
            at = following.start()
        return None

    @staticmethod
    def _stands(text: str, start: int, end: int, value: tuple[int, bool, bool]) -> bool:
        _, word_start, word_end = value
        if word_start and start > 0 and _WORD.match(text[start - 1]):
            return False
        return not (word_end and end < len(text) and _WORD.match(text[end]))


_WORD = re.compile(r"\w")
# A word's last character (seeing the character after it), or a non-word character: the
# only places a shorter term can end and stand.
_END = re.compile(r"\w(?!\w)|\W")
# Where a term can start: a non-word character, or a word's first character.
_START = re.compile(r"\W|(?<!\w)\w")

# The longest term a glossary or do_not_translate list may hold (checked where a request's
# glossary is made): the work of finding a term at a place grows with its length.
MAX_TERM_CHARS = 1024


def _word_ends(text: str, start: int, end: int) -> list[int]:
    """Offsets in (start, end) right after a word's last character or a non-word character
    (the match itself, ending at `end`, was tried already)."""
    window = min(len(text), end + 1)  # one character more: whether a word goes on
    return [m.end() for m in _END.finditer(text, start, window) if m.end() < end]


@functools.lru_cache(maxsize=32)
def _matcher(terms: frozenset[str]) -> TermMatcher:
    """One automaton per set of terms: a stored glossary is used by request after request."""
    return TermMatcher(terms)


class Glossary:
    def __init__(self, entries: Mapping[str, str] | None = None, protected: Sequence[str] = ()):
        self.entries = dict(entries or {})
        self.protected = tuple(protected)
        for term in (*self.entries, *self.protected):
            if len(term) > MAX_TERM_CHARS:
                raise InvalidRequest(
                    f"a glossary or do_not_translate term of {len(term)} characters; at most "
                    f"{MAX_TERM_CHARS} are accepted (it begins {term[:40]!r})",
                    field="glossary",
                    limit=MAX_TERM_CHARS,
                )
        self._entries = _matcher(frozenset(self.entries))
        self._protected = _matcher(frozenset(self.protected))
        self._lookup = {_fold(k): v for k, v in self.entries.items()}

    def __bool__(self) -> bool:
        return bool(self.entries or self.protected)

    def terms(self, segment: str) -> Terms:
        """The glossary entries that occur in `segment`, in order of first occurrence."""
        found: dict[str, str] = {}
        for start, end in self._entries.finditer(segment):
            term = segment[start:end]
            found.setdefault(term, self._lookup[_fold(term)])
        return tuple(found.items())

    def protect(self, document: Document) -> Document:
        """`document` with every do-not-translate term in its text as a placeholder."""
        if self._protected.empty:
            return document
        units = tuple(_protected_unit(u, self._protected) for u in document.units)
        return dataclasses.replace(document, units=units)


def _protected_unit(unit: Unit, matcher: TermMatcher) -> Unit:
    found = [list(matcher.finditer(p.text)) if isinstance(p, Text) else [] for p in unit.pieces]
    if not any(found):
        return unit
    ids = max((p.id for p in unit.pieces if isinstance(p, Tag)), default=0)
    pieces: list[Piece] = []
    for piece, spans in zip(unit.pieces, found, strict=True):
        if not isinstance(piece, Text) or not spans:
            pieces.append(piece)
            continue
        at = 0
        for start, end in spans:
            before = piece.text[at:start]
            if before:
                pieces.append(Text(before, unit.escape(before)))
            ids += 1
            pieces.append(Tag(unit.escape(piece.text[start:end]), "atom", ids))
            at = end
        if piece.text[at:]:
            pieces.append(Text(piece.text[at:], unit.escape(piece.text[at:])))
    return Unit(tuple(pieces), unit.escape, unit.check)
