"""HTML (and XML-ish markup such as Weblate's `<x id="1"></x>`): text translated in place,
every tag, attribute, comment and declaration kept byte for byte.

Parsed with the Python standard library's `html.parser`: a lenient tokenizer that accepts
any input (malformed nesting, stray `<`, unclosed tags) without raising, and reports where
each token starts, so the output is the input with only its text replaced. A tree-building
parser (lxml, html5lib, selectolax) would re-serialise the whole page and normalise markup
tolk must leave alone; none reports source positions for text.

Units: an inline run (text with `<b>`, `<a>`, `<em>`, `<span>`... inside one block element)
is one unit, its tags as placeholders; block-level tags end a run. `<script>`, `<style>`,
`<code>`, `<pre>`, `<kbd>`, `<samp>`, `<textarea>`, `<template>` and any element with
`translate="no"` or class `notranslate` are kept whole (a standalone placeholder inside a
run). The values of `alt`, `title`, `placeholder` and `aria-label` are units of their own.
Model output is escaped (`&`, `<`, `>`; quotes too in attributes), so it is always text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Literal

from tolk.translation.document import (
    Document,
    Escape,
    Piece,
    Slot,
    Tag,
    TagKind,
    Text,
    Unit,
    has_words,
)


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Elements whose tags end an inline run (HTML's block-level and document-level elements).
BLOCKS = _names(
    """address article aside audio base blockquote body canvas caption center col colgroup dd
    details dialog dir div dl dt fieldset figcaption figure footer form frame frameset h1 h2 h3
    h4 h5 h6 head header hgroup hr html iframe legend li link main menu meta nav noscript
    object ol optgroup option p section select summary table tbody td tfoot th thead title tr
    ul video"""
)
KEEP = _names("script style code pre kbd samp textarea template")
VOID = _names("area base br col embed hr img input link meta param source track wbr")
ATTRIBUTES = ("alt", "title", "placeholder", "aria-label")

# The standard library parser's own patterns for a tag name and an attribute
# (html.parser.tagfind_tolerant, attrfind_tolerant): attribute values are found exactly
# where the parser found them.
_TAG_NAME = re.compile(r"([a-zA-Z][^\t\n\r\f />\x00]*)(?:\s|/(?!>))*")
_ATTRIBUTE = re.compile(
    r"((?<=['\"\s/])[^\s/>][^\s/=>]*)(\s*=+\s*('[^']*'|\"[^\"]*\"|(?!['\"])[^>\s]*))?(?:\s|/(?!>))*"
)

Kind = Literal["start", "startend", "end", "data", "other"]


def escape_text(text: str) -> str:
    return html.escape(text, quote=False)


def escape_attribute(text: str) -> str:
    return html.escape(text, quote=True)


class _Tokens(HTMLParser):
    """The parser's tokens with their start offsets; each ends where the next begins.

    The standard library's parser (before CPython 3.13.4/3.12.11, gh-135462) is quadratic
    on constructs that never close: at the end of input it retries each unclosed `<a `,
    `<!--`, `</x` or `<?` by scanning the rest of the text for its end, then moves on by one
    construct (8,000 unclosed `<a ` tags: 8.8 s; 20,000 `<!--`: 4 s). Each parse_* below
    first asks, in constant time, whether the terminator it needs occurs anywhere after the
    construct at all; where it does not, the construct is reported incomplete at once, which
    is what the full scan would have found."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self._line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
        self.tokens: list[tuple[Kind, str, list[tuple[str, str | None]], str, int]] = []
        self._scanned: str | None = None
        self._last_gt = self._last_comment_end = -1
        self.feed(text)
        self.close()

    def _never_closed(self, i: int, comment: bool = False) -> bool:
        """Whether no terminator (`>`, or `-->` for a comment) follows position i of the
        parser's buffer (which it re-slices between feed and close)."""
        if self._scanned is not self.rawdata:
            self._scanned = self.rawdata
            self._last_gt = self.rawdata.rfind(">")
            self._last_comment_end = self.rawdata.rfind("--", 0, self._last_gt + 1)
        return (self._last_comment_end if comment else self._last_gt) < i

    def parse_starttag(self, i: int) -> int:
        return -1 if self._never_closed(i) else super().parse_starttag(i)

    def parse_endtag(self, i: int) -> int:
        return -1 if self._never_closed(i) else super().parse_endtag(i)

    def parse_comment(self, i: int, report: bool = True) -> int:
        return -1 if self._never_closed(i, comment=True) else super().parse_comment(i, report)

    def parse_pi(self, i: int) -> int:
        return -1 if self._never_closed(i) else super().parse_pi(i)

    def parse_html_declaration(self, i: int) -> int:
        return -1 if self._never_closed(i) else super().parse_html_declaration(i)

    def _at(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tokens.append(("start", tag, attrs, "", self._at()))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tokens.append(("startend", tag, attrs, "", self._at()))

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(("end", tag, [], "", self._at()))

    def handle_data(self, data: str) -> None:
        self.tokens.append(("data", "", [], data, self._at()))

    def handle_comment(self, data: str) -> None:
        self.tokens.append(("other", "!--", [], "", self._at()))

    def handle_decl(self, decl: str) -> None:
        self.tokens.append(("other", "!", [], "", self._at()))

    def handle_pi(self, data: str) -> None:
        self.tokens.append(("other", "?", [], "", self._at()))

    def unknown_decl(self, data: str) -> None:
        self.tokens.append(("other", "![", [], "", self._at()))


@dataclass(frozen=True)
class TagRules:
    """A request's say over tags (DeepL's `ignore_tags`, `splitting_tags`,
    `non_splitting_tags`): elements kept whole, and which tags break prose into units."""

    ignore: frozenset[str] = frozenset()
    splitting: frozenset[str] = frozenset()
    non_splitting: frozenset[str] = frozenset()

    @property
    def keep(self) -> frozenset[str]:
        return KEEP | self.ignore

    @property
    def blocks(self) -> frozenset[str]:
        return (BLOCKS | self.splitting) - self.non_splitting


DEFAULT_RULES = TagRules()


def _kept(tag: str, attrs: list[tuple[str, str | None]], keep: frozenset[str]) -> bool:
    values = dict(attrs)
    classes = (values.get("class") or "").split()
    return (
        tag in keep or (values.get("translate") or "").lower() == "no" or "notranslate" in classes
    )


class _Builder:
    def __init__(self, escape: Escape) -> None:
        self.escape = escape
        self.parts: list[str | Tag | int] = []
        self.units: list[Unit] = []
        self.attributes: set[int] = set()
        self.run: list[tuple[str, Piece]] = []  # (tag name or "", piece)

    def tag(self, source: str, kind: Kind) -> Tag:
        """A tag's source with its translatable attribute values as slots."""
        slots = []
        if kind in ("start", "startend"):
            name = _TAG_NAME.match(source, 1)
            at = name.end() if name else len(source)
            while (match := _ATTRIBUTE.match(source, at)) and match.end() > at:
                at = match.end()
                if match[1].lower() in ATTRIBUTES and match[3] is not None:
                    raw = match[3]
                    value = html.unescape(raw[1:-1] if raw[:1] in "'\"" else raw)
                    if has_words(value):
                        slots.append(Slot(match.start(3), match.end(3), len(self.units)))
                        self.attributes.add(len(self.units))
                        self.units.append(Unit((Text(value, raw),), escape_attribute))
        return Tag(source, "atom", 0, tuple(slots))

    def flush(self) -> None:
        run, self.run = self.run, []
        # Whitespace at a run's edges stays outside the unit.
        while run and isinstance(run[0][1], Text) and not run[0][1].text.strip():
            self.parts.append(_source(run.pop(0)[1]))
        tail: list[str] = []
        while run and isinstance(run[-1][1], Text) and not run[-1][1].text.strip():
            tail.insert(0, _source(run.pop()[1]))
        if any(isinstance(p, Text) and has_words(p.text) for _, p in run):
            self.parts.append(len(self.units))
            self.units.append(Unit(_paired(run), self.escape))
        else:
            self.parts += [p if isinstance(p, Tag) else p.source for _, p in run]
        self.parts += tail


def _source(piece: Piece) -> str:
    return piece.source


def _paired(run: list[tuple[str, Piece]]) -> tuple[Piece, ...]:
    """Inline tags as placeholders: an opening tag and its closing tag a pair, anything
    unmatched (misnested, unclosed, stray) standalone."""
    kinds: dict[int, Literal["open", "close"]] = {}
    partner: dict[int, int] = {}  # a closing tag's index -> its opening tag's
    stack: list[tuple[str, int]] = []
    for index, (name, piece) in enumerate(run):
        if not isinstance(piece, Tag) or not name:
            continue
        if name.startswith("/"):
            if stack and stack[-1][0] == name[1:]:
                opened = stack.pop()[1]
                kinds[opened], kinds[index] = "open", "close"
                partner[index] = opened
        else:
            stack.append((name, index))
    pieces: list[Piece] = []
    ids: dict[int, int] = {}
    next_id = 0
    for index, (_, piece) in enumerate(run):
        if isinstance(piece, Text):
            pieces.append(piece)
            continue
        kind: TagKind = kinds.get(index, "atom")
        if kind == "open" and kinds.get(index + 1) == "close":
            # An empty element (Weblate's <x id="1"></x>): one standalone placeholder.
            closing = run[index + 1][1]
            next_id += 1
            pieces.append(Tag(piece.source + closing.source, "atom", next_id, piece.slots))
            continue
        if kind == "close" and kinds.get(index - 1) == "open":
            continue
        if kind == "close":
            tag_id = ids[partner[index]]
        else:
            next_id += 1
            tag_id = ids[index] = next_id
        pieces.append(Tag(piece.source, kind, tag_id, piece.slots))
    return tuple(pieces)


def parse_html(
    text: str, escape: Escape = escape_text, rules: TagRules = DEFAULT_RULES
) -> Document:
    """`text` as a document; `escape` makes model output text (subtitles bring their own)."""
    keep, blocks = rules.keep, rules.blocks
    tokens = _Tokens(text).tokens
    ends = [t[4] for t in tokens[1:]] + [len(text)] * bool(tokens)
    builder = _Builder(escape)
    if tokens and tokens[0][4] > 0:
        builder.parts.append(text[: tokens[0][4]])
    kept: tuple[str, int, int, bool] | None = None  # (tag, depth, start, inside a run)
    for (kind, tag, attrs, data, start), end in zip(tokens, ends, strict=True):
        source = text[start:end]
        if kept is not None:
            name, depth, kept_start, inline = kept
            if tag == name and kind == "start":
                depth += 1
            elif tag == name and kind == "end":
                depth -= 1
            if depth > 0:
                kept = (name, depth, kept_start, inline)
                continue
            kept = None
            whole = builder.tag(text[kept_start:end], "other")
            if inline:
                builder.run.append(("", whole))
            else:
                builder.parts.append(whole)
            continue
        if kind == "data":
            builder.run.append(("", Text(data, source)))
        elif kind == "other":
            if tag == "!--" and builder.run:
                builder.run.append(("", builder.tag(source, kind)))
            else:
                builder.flush()
                builder.parts.append(source)
        elif kind == "start" and _kept(tag, attrs, keep) and tag not in VOID:
            inline = tag not in blocks and tag not in ("pre", "script", "style", "template")
            if not inline:
                builder.flush()
            kept = (tag, 1, start, inline)
        elif kind in ("start", "startend") and _kept(tag, attrs, keep):  # void: nothing translated
            builder.run.append(("", builder.tag(source, "other")))
        elif tag in blocks:
            builder.flush()
            builder.parts.append(builder.tag(source, kind))
        elif kind == "start" and tag not in VOID:
            builder.run.append((tag, builder.tag(source, kind)))
        elif kind == "end" and tag not in VOID:
            builder.run.append(("/" + tag, builder.tag(source, kind)))
        else:  # <br>, <img>, <x/>: standalone
            builder.run.append(("", builder.tag(source, kind)))
    if kept is not None:  # an element kept whole that never closed: kept to the end
        builder.flush()
        builder.parts.append(text[kept[2] :])
    builder.flush()
    return Document(tuple(builder.parts), tuple(builder.units), frozenset(builder.attributes))
