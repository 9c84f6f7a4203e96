"""Subtitles (SubRip .srt, WebVTT .vtt): cue text translated, a sentence that runs across cues
as one unit; everything else (cue numbers and identifiers, timings and cue settings, the
WEBVTT header, NOTE, STYLE and REGION blocks, blank lines, line endings) kept byte for byte.

Parsed by hand, line by line: a cue is a timing line (it holds `-->`) and the text lines up
to the next blank line. The subtitle libraries (srt, pysrt, webvtt-py) parse into objects and
write the file anew, normalising timings and dropping what they do not model; tolk must
return the file as it came with only the text changed. Cue text goes through the HTML
tokenizer, so `<i>`, `<b>`, `<v Speaker>`, `<c.class>` and `<00:01.000>` are placeholders.

A cue's lines are one sentence broken for display: the model sees them as one line and the
translation comes back as one line (players wrap long lines). Model output never ends a cue
early or starts a new one: line breaks become spaces and `-->` an arrow; in WebVTT `&` and
`<` are escaped as its spec requires; SubRip has no escaping, so a `<` that could open a tag
becomes U+2039 (a single angle quotation mark).

In context (`in_context`, the default): subtitlers break a sentence over cues, and a cue
translated alone loses its sense (bazarr #303; Subtitle Edit joins lines before machine
translation). A cue whose text does not end a sentence (`.?!…`, the ideographic full stop,
their full-width forms, a closing quote or bracket after one; `...` followed by a cue that
starts with `...` continues) is joined with the cue after it into one unit (a `CueGroup`)
when that cue comes right after it (nothing but blank lines, an identifier and its timing
between them: never across a NOTE block or a cue with no text), speaks with the same voice
(`<v A>` then `<v B>` is a new speaker; a cue without a voice tag continues), does not open
with a dialogue dash, and the group stays within `MAX_GROUP_CUES` cues and
`MAX_GROUP_CHARS` characters of text. One pass over the cues, a group bounded by its caps:
linear in the file. A cue the HTML parser cuts into several units (a tag it keeps whole)
stays alone.

The group's unit holds its cues' text with the verbatim between them (line ending, blank
line, number, timing) as a standalone placeholder with spaces around it, so the model keeps
the boundary where the target language puts it. `CueGroup.restore` takes the translation
back: the placeholders in place, each cue with exactly its own markup and some text, as
`Unit.restore` checks it; else the boundary placeholders alone if they came back in order
(every cue's own markup put back around its text); else the translation without its
placeholders cut by the source cues' shares of the text (`split_by_shares`): at the nearest
space, or for text written without spaces (Chinese, Japanese, Thai: most of its letters)
between any two characters, preferring a cut after punctuation near the target, every cue
given some text. A cue with markup inside its text (not only around it) cannot be cut
blind: then the unit goes on as every unit does (without its emphasis, then cue by cue: its
text runs one by one). `in_context=False`: every cue its own unit, as before.
"""

from __future__ import annotations

import html
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from tolk.translation.document import (
    PLACEHOLDER,
    Document,
    Escape,
    Piece,
    Rendered,
    Tag,
    Text,
    Unit,
    concat,
    has_words,
)
from tolk.translation.html_format import parse_html

MAX_GROUP_CUES = 5
MAX_GROUP_CHARS = 400  # characters of text (markup out), the cues' together

_WHITESPACE = re.compile(r"\s+")
_TAG = re.compile(r"<[^>]*>")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
# A sentence's end: its punctuation, and any closing quotes or brackets after it.
_FINAL = re.compile(r"[.?!…\u3002\uff1f\uff01][\"'\u201d\u2019\u00bb\u203a\u300d\u300f\uff09)\]]*$")
_ELLIPSIS_END = re.compile(r"(?:\.\.\.|…)$")
_ELLIPSIS_START = re.compile(r"^(?:\.\.\.|…)")
_DIALOGUE = re.compile(r"^[-\u2010\u2013\u2014]")
_VOICE = re.compile(r"<v(?:\.[^\s>]*)?\s+([^>]*)>")
_BLOCKS = ("NOTE", "STYLE", "REGION")
# Scripts written without spaces between words: Han, kana, Thai, Lao, Khmer, Myanmar.
_UNSPACED = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"
)
# A cut is preferred after these; one is never made before a closing mark or after an opening
# one (text without spaces).
_PAUSE = frozenset(",;:.!?…\uff0c\u3001\u3002\uff01\uff1f\uff1b\uff1a")
_CLOSING = frozenset(
    ",;:.!?…\uff0c\u3001\u3002\uff01\uff1f\uff1b\uff1a\u300d\u300f\uff09)]\u300b\u3009\u201d\u2019\"'"
)
_OPENING = frozenset("\u300c\u300e\uff08([\u300a\u3008\u201c\u2018")


def _one_line(text: str) -> str:
    # Keep the outer spaces (they sit between tags), but no line break inside.
    return _WHITESPACE.sub(" ", text).replace("-->", "→")


def escape_srt(text: str) -> str:
    return _TAG_START.sub("\u2039", _one_line(text))


def escape_vtt(text: str) -> str:
    return html.escape(_one_line(text), quote=False)


def has_text(cue_text: str) -> bool:
    """A cue's check: it still shows some text. A blank line would end the cue (and leave a
    timing with nothing under it), so a blank translation is refused like lost markup: the
    unit is translated run by run, and kept as it was if that is blank too."""
    return bool(_TAG.sub("", cue_text).strip())


@dataclass(frozen=True)
class _Cue:
    """A cue's text parsed, what it shows (markup out, one line) and its voice (`<v Name>`)."""

    doc: Document
    text: str
    voice: str | None

    @property
    def joinable(self) -> bool:
        """One unit of words, nothing the parser kept whole around it."""
        return (
            self.doc.parts == (0,)
            and len(self.doc.units) == 1
            and not self.doc.attributes
            and has_words(self.text)
        )


def parse_subtitles(text: str, escape: Escape, in_context: bool = True) -> Document:
    """The file as a document: cues' text as units (sentences across cues joined when
    `in_context`), everything else verbatim."""
    lines = text.splitlines(keepends=True)
    gaps: list[str] = []  # the verbatim before each cue, then after the last one
    cues: list[_Cue] = []
    verbatim: list[str] = []
    at = 0
    while at < len(lines):
        line = lines[at]
        at += 1
        verbatim.append(line)
        if "-->" not in line:
            continue
        end = at
        while end < len(lines) and lines[end].strip():
            end += 1
        if end > at:
            cue = "".join(lines[at:end])
            body = cue.rstrip("\r\n")
            gaps.append("".join(verbatim))
            cues.append(_parsed_cue(body, escape))
            verbatim = [cue[len(body) :]]
        at = end
    gaps.append("".join(verbatim))
    groups = _groups(cues, gaps) if in_context else [[i] for i in range(len(cues))]
    pieces: list[Document | str] = []
    joined: dict[int, CueGroup] = {}  # unit index -> its group
    units = 0
    for group in groups:
        pieces.append(gaps[group[0]])
        if len(group) == 1:
            doc = cues[group[0]].doc
        else:
            unit = cue_group(
                [cues[i].doc.units[0] for i in group], gaps[group[0] + 1 : group[-1] + 1]
            )
            joined[units] = unit
            doc = Document((0,), (unit,))
        pieces.append(doc)
        units += len(doc.units)
    pieces.append(gaps[-1])
    document = concat(pieces)
    if not joined:
        return document
    # concat copies units as plain Units: the groups go back in (they have no attribute
    # slots to shift).
    merged = tuple(joined.get(i, u) for i, u in enumerate(document.units))
    return Document(document.parts, merged, document.attributes)


def _parsed_cue(body: str, escape: Escape) -> _Cue:
    doc = _cue(body, escape)
    texts = [p.text for u in doc.units for p in u.pieces if isinstance(p, Text)]
    voices = [
        m[1].strip()
        for u in doc.units
        for p in u.pieces
        if isinstance(p, Tag) and (m := _VOICE.match(p.source))
    ]
    shown = _WHITESPACE.sub(" ", "".join(texts)).strip()
    return _Cue(doc, shown, voices[0] if voices else None)


def _groups(cues: Sequence[_Cue], gaps: Sequence[str]) -> list[list[int]]:
    """The cues' indices in groups, in order: one pass, each group within its caps."""
    groups: list[list[int]] = []
    chars = 0
    voice: str | None = None
    for i, cue in enumerate(cues):
        if groups and _continues(cues[groups[-1][-1]], cue, gaps[i], voice):
            group = groups[-1]
            if len(group) < MAX_GROUP_CUES and chars + len(cue.text) <= MAX_GROUP_CHARS:
                group.append(i)
                chars += len(cue.text)
                voice = voice or cue.voice
                continue
        groups.append([i])
        chars, voice = len(cue.text), cue.voice
    return groups


def _continues(last: _Cue, cue: _Cue, gap: str, voice: str | None) -> bool:
    """Whether `cue` goes on with the sentence `last` left open (`voice`: the group's)."""
    if not (last.joinable and cue.joinable):
        return False
    ended = _FINAL.search(last.text) is not None
    trailing = _ELLIPSIS_END.search(last.text) is not None and _ELLIPSIS_START.match(cue.text)
    if ended and not trailing:
        return False
    if _DIALOGUE.match(cue.text) or (cue.voice is not None and cue.voice != voice):
        return False
    return _just_a_cue_header(gap)


def _just_a_cue_header(gap: str) -> bool:
    """Whether the verbatim between two cues is the first's line ending, blank lines, and the
    second's identifier (if any) and timing: no NOTE block, no cue without text."""
    lines = gap.splitlines()
    shown = [n for n, line in enumerate(lines) if line.strip()]
    if not shown or shown[0] < 2 or lines[0] or "-->" not in lines[-1]:
        return False
    if shown == [len(lines) - 1]:
        return True
    head = lines[-2]
    return (
        shown == [len(lines) - 2, len(lines) - 1]
        and "-->" not in head
        and not head.lstrip().startswith(_BLOCKS)
    )


def _cue(body: str, escape: Escape) -> Document:
    """A cue's text lines as one unit (or a few, around tags the parser keeps whole)."""
    doc = parse_html(body, escape)
    units = tuple(
        Unit(
            tuple(
                Text(p.text.replace("\r", "").replace("\n", " "), p.source)
                if isinstance(p, Text)
                else p
                for p in unit.pieces
            ),
            unit.escape,
            has_text,
        )
        for unit in doc.units
    )
    return Document(doc.parts, units, doc.attributes)


@dataclass(frozen=True)
class EachCueShown:
    """A group's check: for each of its cues, whether it still shows text, and its tags (the
    flat rendering cut at the verbatim between the cues, which model output cannot hold: it
    has no line break). So markup that moved into another cue is refused wherever the group
    is restored: by `CueGroup.restore`, or as a plain `Unit` (a glossary's protected terms
    rebuild the unit)."""

    gaps: tuple[str, ...]

    def __call__(self, flat: str) -> Hashable:
        parts: list[str] = []
        at = 0
        for gap in self.gaps:
            found = flat.find(gap, at)
            if found < 0:
                return None
            parts.append(flat[at:found])
            at = found + len(gap)
        parts.append(flat[at:])
        return tuple((has_text(p), tuple(sorted(_TAG.findall(p)))) for p in parts)


def cue_group(units: Sequence[Unit], gaps: Sequence[str]) -> CueGroup:
    """Cues' units (one each) as one unit, `gaps[k]` (verbatim) between cue k and k + 1 as a
    standalone placeholder; each cue's tags renumbered after the ones before."""
    pieces: list[Piece] = []
    boundaries: list[int] = []
    cues: list[tuple[Piece, ...]] = []
    last = 0
    for k, unit in enumerate(units):
        if k:
            last += 1
            boundaries.append(last)
            pieces += [Text(" ", ""), Tag(gaps[k - 1], "atom", last), Text(" ", "")]
        shift = last
        own = tuple(replace(p, id=p.id + shift) if isinstance(p, Tag) else p for p in unit.pieces)
        last = max([last, *(p.id for p in own if isinstance(p, Tag))])
        cues.append(own)
        pieces += own
    return CueGroup(
        tuple(pieces),
        units[0].escape,
        EachCueShown(tuple(gaps)),
        boundaries=tuple(boundaries),
        cues=tuple(cues),
    )


@dataclass(frozen=True)
class CueGroup(Unit):
    """Cues that one sentence runs across, translated as one unit and cut back into them."""

    boundaries: tuple[int, ...] = ()  # the ids of the atoms between the cues, in order
    cues: tuple[tuple[Piece, ...], ...] = ()  # each cue's own pieces (renumbered)

    def restore(self, translation: str, paired: bool = True) -> Rendered | None:
        restored = super().restore(translation, paired)
        if restored is not None and (kept := self._cue_by_cue(restored, paired)) is not None:
            return kept
        return self.split(translation, paired)

    def _tags(self, cue: int, paired: bool) -> list[Tag]:
        return [
            p
            for p in self.cues[cue]
            if isinstance(p, Tag)
            and p.kind != "break"
            and (paired or not (p.kind in ("open", "close") and p.id in self.emphasised))
        ]

    def _cue_by_cue(self, restored: Rendered, paired: bool) -> Rendered | None:
        """`restored` if each cue holds exactly its own markup and some text, the spaces
        around the boundaries dropped; else None."""
        runs: list[Rendered] = [[]]
        for piece in restored:
            if isinstance(piece, Tag) and piece.kind == "atom" and piece.id in self.boundaries:
                runs.append([])
            else:
                runs[-1].append(piece)
        out: Rendered = []
        for k, run in enumerate(runs):
            tags = [p for p in run if isinstance(p, Tag)]
            expected = self._tags(k, paired)
            if sorted((t.kind, t.id) for t in tags) != sorted((t.kind, t.id) for t in expected):
                return None
            if not _shows_text(run):
                return None
            if k:
                out.append(self._boundary(k - 1))
            out += _trimmed(run, first=k == 0, last=k == len(runs) - 1)
        return out

    def _boundary(self, k: int) -> Tag:
        found = next(
            p
            for p in self.pieces
            if isinstance(p, Tag) and p.kind == "atom" and p.id == self.boundaries[k]
        )
        return found

    def split(self, translation: str, paired: bool = True) -> Rendered | None:
        """The translation cut into the cues where its placeholders did not come back (see
        the module's docstring), each cue's markup around its text; None where a cue has
        markup inside its text, or the translation has too little text for every cue."""
        layouts = [_layout(self._tags(k, paired), self.cues[k]) for k in range(len(self.cues))]
        if any(layout is None for layout in layouts):
            return None
        chunks = _at_boundaries(translation, self.boundaries)
        if chunks is None:
            weights = [len(_shown(cue)) for cue in self.cues]
            chunks = split_by_shares(_without_placeholders(translation), weights)
        if chunks is None:
            return None
        out: Rendered = []
        for k, (chunk, layout) in enumerate(zip(chunks, layouts, strict=True)):
            assert layout is not None
            head, tail = layout
            cue: Rendered = [*head, self.escape(chunk), *tail]
            if not _shows_text(cue):  # `<>` is text to tolk, not to a player
                return None
            if k:
                out.append(self._boundary(k - 1))
            out += cue
        return out


def _shows_text(cue: Rendered) -> bool:
    """The group's check for one cue, on its rendering."""
    return has_text("".join(p if isinstance(p, str) else p.source for p in cue))


def _trimmed(run: Rendered, first: bool, last: bool) -> Rendered:
    """A cue's part of a rendered group without the spaces at its inner edges."""
    out = list(run)
    if not first:
        at = next((i for i, p in enumerate(out) if isinstance(p, str) and p.strip()), len(out))
        out = [p.lstrip() if isinstance(p, str) and i <= at else p for i, p in enumerate(out)]
    if not last:
        at = max((i for i, p in enumerate(out) if isinstance(p, str) and p.strip()), default=-1)
        out = [p.rstrip() if isinstance(p, str) and i >= at else p for i, p in enumerate(out)]
    return [p for p in out if not isinstance(p, str) or p]


def _layout(tags: list[Tag], pieces: tuple[Piece, ...]) -> tuple[list[Tag], list[Tag]] | None:
    """A cue's markup as (before its text, after it); None if some sits inside its text."""
    wanted = {(t.kind, t.id) for t in tags}
    head: list[Tag] = []
    tail: list[Tag] = []
    seen_text = False
    for piece in pieces:
        if isinstance(piece, Text):
            if piece.text.strip():
                if tail:
                    return None  # markup between two stretches of text
                seen_text = True
        elif (piece.kind, piece.id) in wanted:
            (tail if seen_text else head).append(piece)
    return head, tail


def _shown(pieces: tuple[Piece, ...]) -> str:
    text = "".join(p.text for p in pieces if isinstance(p, Text))
    return _WHITESPACE.sub(" ", text).strip()


def _without_placeholders(translation: str) -> str:
    return _WHITESPACE.sub(" ", PLACEHOLDER.sub(" ", translation)).strip()


def _at_boundaries(translation: str, boundaries: tuple[int, ...]) -> list[str] | None:
    """The translation cut at its boundary placeholders, if each came back once, in order,
    with text between them (any other placeholder dropped); else None."""
    cut = re.compile("|".join(rf"<x{b}\s*/>" for b in boundaries))
    found = [int(m) for m in re.findall(r"<x(\d+)\s*/>", translation) if int(m) in boundaries]
    if found != list(boundaries):
        return None
    chunks = [_without_placeholders(c) for c in cut.split(translation)]
    return chunks if all(chunks) else None


def unspaced(text: str) -> bool:
    """Whether most of the text's letters are of a script written without spaces."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and 2 * sum(1 for c in letters if _UNSPACED.match(c)) > len(letters)


def split_by_shares(text: str, weights: Sequence[int]) -> list[str] | None:
    """`text` in len(weights) non-empty pieces, cut near each weight's share of its length:
    at a space, or (text written without spaces) between characters; a cut after punctuation
    is preferred within a few characters. None if there are too few places to cut."""
    text = _WHITESPACE.sub(" ", text).strip()
    n = len(weights)
    if n == 1:
        return [text] if text else None
    cuts = _cut_points(text, unspaced(text))
    if len(cuts) < n - 1:
        return None
    total = sum(weights) or n
    size = len(text)
    bonus = max(1.0, min(12.0, size / n / 4))
    chosen: list[tuple[int, int]] = []
    low = 0
    share = 0
    for k in range(1, n):
        share += weights[k - 1] or 1
        target = size * share / total
        high = len(cuts) - (n - 1 - k)  # leave a cut for each cue after this one
        best = min(
            range(low, high),
            key=lambda j: (
                abs(cuts[j][0] - target) - (bonus if text[cuts[j][0] - 1] in _PAUSE else 0)
            ),
        )
        chosen.append(cuts[best])
        low = best + 1
    chunks: list[str] = []
    at = 0
    for end, start in chosen:
        chunks.append(text[at:end].strip())
        at = start
    chunks.append(text[at:].strip())
    return chunks if all(chunks) else None


def _cut_points(text: str, by_character: bool) -> list[tuple[int, int]]:
    """Where `text` may be cut: (end of one piece, start of the next)."""
    if not by_character:
        return [(i, i + 1) for i, c in enumerate(text) if c == " "]
    points: list[tuple[int, int]] = []
    for i in range(1, len(text)):
        if text[i] == " ":
            points.append((i, i + 1))
        elif text[i - 1] != " " and text[i] not in _CLOSING and text[i - 1] not in _OPENING:
            points.append((i, i))
    return points


def parse_srt(text: str, in_context: bool = True) -> Document:
    return parse_subtitles(text, escape_srt, in_context)


def parse_vtt(text: str, in_context: bool = True) -> Document:
    return parse_subtitles(text, escape_vtt, in_context)
