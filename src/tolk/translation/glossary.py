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
import re
from collections.abc import Mapping, Sequence

from tolk.translation.document import Document, Piece, Tag, Text, Unit

Terms = tuple[tuple[str, str], ...]  # (source term, target term) pairs found in a segment


def _pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    alternatives = []
    # Longest first, so "batch size" wins over "batch".
    for term in sorted(set(terms), key=len, reverse=True):
        left = r"(?<!\w)" if re.match(r"\w", term) else ""
        right = r"(?!\w)" if re.search(r"\w$", term) else ""
        alternatives.append(f"{left}{re.escape(term)}{right}")
    return re.compile("|".join(alternatives), re.IGNORECASE)


class Glossary:
    def __init__(self, entries: Mapping[str, str] | None = None, protected: Sequence[str] = ()):
        self.entries = dict(entries or {})
        self.protected = tuple(protected)
        self._entries = _pattern(list(self.entries))
        self._protected = _pattern(self.protected)
        self._lookup = {k.casefold(): v for k, v in self.entries.items()}

    def __bool__(self) -> bool:
        return bool(self.entries or self.protected)

    def terms(self, segment: str) -> Terms:
        """The glossary entries that occur in `segment`, in order of first occurrence."""
        if self._entries is None:
            return ()
        found: dict[str, str] = {}
        for match in self._entries.finditer(segment):
            found.setdefault(match[0], self._lookup[match[0].casefold()])
        return tuple(found.items())

    def protect(self, document: Document) -> Document:
        """`document` with every do-not-translate term in its text as a placeholder."""
        if self._protected is None:
            return document
        units = tuple(_protected_unit(u, self._protected) for u in document.units)
        return dataclasses.replace(document, units=units)


def _protected_unit(unit: Unit, pattern: re.Pattern[str]) -> Unit:
    if not any(isinstance(p, Text) and pattern.search(p.text) for p in unit.pieces):
        return unit
    ids = max((p.id for p in unit.pieces if isinstance(p, Tag)), default=0)
    pieces: list[Piece] = []
    for piece in unit.pieces:
        if not isinstance(piece, Text) or not pattern.search(piece.text):
            pieces.append(piece)
            continue
        at = 0
        for match in pattern.finditer(piece.text):
            before = piece.text[at : match.start()]
            if before:
                pieces.append(Text(before, unit.escape(before)))
            ids += 1
            pieces.append(Tag(unit.escape(match[0]), "atom", ids))
            at = match.end()
        if piece.text[at:]:
            pieces.append(Text(piece.text[at:], unit.escape(piece.text[at:])))
    return Unit(tuple(pieces), unit.escape, unit.check)
