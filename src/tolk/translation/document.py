"""A document as the engine sees it: verbatim markup around units of prose to translate.

Every format (text, markdown, html) parses its input into a `Document`: a sequence of parts
that are either verbatim source (kept byte for byte), a `Tag` (markup, verbatim but for the
attribute values it translates), or a reference to a `Unit`. A unit is one piece of prose
with its inline markup: `Text` runs and `Tag`s (emphasis, links, inline code, inline HTML).

A unit goes to the model as one segment with its inline markup replaced by placeholders,
XLIFF-style: `<g1>` ... `</g1>` around a paired element's content, `<x2/>` for a standalone
one (inline code, a line break, an image). The model is shown them in markdown's own syntax
(`for_model`: `[words](1)`, `` `2` ``), which the 0.5B Qwen kept somewhat more often, and
its output is read back (`from_model`). So a sentence keeps its context and the model can
move emphasis where the target language's word order needs it. `restore` checks that every
placeholder came back exactly once and properly nested, and only then puts the original
markup back. If a model dropped, doubled or garbled one (after the service's retry), the
unit is translated again whole without its emphasis (`plain`: the sentence's words matter
more than its bold; links, images and code keep their placeholders), and only if that fails
too it falls back to its text runs translated one by one (`runs`, `with_runs`), the markup
staying exactly where it was and the punctuation around each run kept. Model
output always goes through the unit's `escape`, so whatever the model writes (`<`, `&`, `*`,
`` ` ``, `[`...) is text in the output format, never markup.

Placeholders are parsed by hand (regular expressions): no library knows this protocol,
and the check must accept exactly the tags tolk wrote, nothing a model invents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tolk.config import PlaceholderSyntax
from tolk.translation.segment import Segmented

Escape = Callable[[str], str]
TagKind = Literal["open", "close", "atom", "break"]

PLACEHOLDER = re.compile(r"<(/?)g(\d+)>|<x(\d+)\s*/>")

# What the model is shown instead: the same placeholders in markdown's own syntax, a link
# `[words](1)` for a pair and a code span `` `2` `` for a standalone one, with no
# instruction (one it can copy into its answer). Measured with Qwen2.5-Coder-0.5B
# (docs/benchmarks.md, "Quality"): kept in 35% of markup units against 29% for XML tags with
# their instruction in a system message (a small sample). A segment whose own text has
# brackets or backticks keeps the XML syntax (a `[1]` of its own would be read back as a
# placeholder). Converted by hand both ways: the forms are tolk's, no library knows them.
_LINK = re.compile(r"\[([^\[\]]*)\]\((\d+)\)")
_CODE = re.compile(r"`(\d+)`")
_BROKEN_LINK = re.compile(r"\]\(\d+\)")


def shows_links(masked: str, syntax: PlaceholderSyntax = "links") -> bool:
    """Whether the model is shown this segment's placeholders as links and code spans."""
    return (
        syntax == "links"
        and not any(c in masked for c in "[]`")
        and PLACEHOLDER.search(masked) is not None
    )


def for_model(masked: str, syntax: PlaceholderSyntax = "links") -> str:
    """A masked segment as the model is shown it: its placeholders as links and code spans
    where its text allows (`Say <g1>hello</g1><x2/>` -> ``Say [hello](1)`2` ``), unless the
    model's `syntax` is tags."""
    if not shows_links(masked, syntax):
        return masked

    def link(match: re.Match[str]) -> str:
        closing, pair, atom = match.groups()
        if atom is not None:
            return f"`{atom}`"
        return f"]({pair})" if closing else "["

    return PLACEHOLDER.sub(link, masked)


def from_model(masked: str, output: str, syntax: PlaceholderSyntax = "links") -> str:
    """The model's output for `masked` with its placeholders back in tolk's form (the
    inverse of `for_model`; anything else is left as the model wrote it)."""
    if not shows_links(masked, syntax):
        return output
    while True:  # innermost links first: `[a [b](2) c](1)`
        paired = _LINK.sub(lambda m: f"<g{m[2]}>{m[1]}</g{m[2]}>", output)
        if paired == output:
            break
        output = paired
    # What is left of a link the model broke (`word](4)`, its `[` lost) is not text of the
    # source, which has no brackets where its placeholders are shown as links: dropped, so
    # that it never reaches the client; its placeholder, if the source has it, is lost.
    output = _BROKEN_LINK.sub("", output)
    return _CODE.sub(lambda m: f"<x{m[1]}/>", output)


def identity(text: str) -> str:
    return text


# Paired markup that only emphasises (markdown's `*`, `_`, `~~`; HTML's inline formatting
# elements): what a unit may lose to keep its sentence whole. Links, images and anything
# else carry content and are never dropped.
_EMPHASIS = re.compile(
    r"^(?:[*_~]+|</?(?:b|i|em|strong|u|s|del|ins|mark|small|strike|span)\b[^>]*>)$", re.I
)


def emphasis(piece: object) -> bool:
    return (
        isinstance(piece, Tag)
        and piece.kind in ("open", "close")
        and bool(_EMPHASIS.match(piece.source.strip()))
    )


def has_words(text: str) -> bool:
    return any(c.isalpha() for c in text)


_ALNUM = re.compile(r"[^\W_]")


def edges(run: str) -> tuple[str, str, str]:
    """A text run as (lead, core, trail): the core from its first to its last letter or
    digit, the punctuation and spaces around it kept as they are when the run is
    translated on its own (". Then call " must not come back as "Dann rufen Sie", glued to
    the link before it)."""
    # Two searches, not one pattern with a lazy core: `^([\W_]*)(.*?)([\W_]*)$` backtracked
    # quadratically over a long run of punctuation (an srt cue of 20,000 dots: 11 s).
    first = _ALNUM.search(run)
    if first is None:
        return run, "", ""
    last = _ALNUM.search(run[::-1])
    assert last is not None
    end = len(run) - last.start()
    return run[: first.start()], run[first.start() : end], run[end:]


@dataclass(frozen=True)
class Text:
    text: str  # what the model sees (entities and escapes decoded)
    source: str  # the bytes it came from, kept when it is not translated


@dataclass(frozen=True)
class Slot:
    """An attribute value inside a tag's source, replaced by the translation of a unit."""

    start: int
    end: int
    unit: int


@dataclass(frozen=True)
class Tag:
    source: str
    kind: TagKind = "atom"  # "break": a soft line break, shown to the model as a space
    id: int = 0
    slots: tuple[Slot, ...] = ()

    def render(self, values: Mapping[int, str]) -> str:
        if not self.slots:
            return self.source
        out, at = [], 0
        for slot in self.slots:
            out += [self.source[at : slot.start], '"', values[slot.unit], '"']
            at = slot.end
        out.append(self.source[at:])
        return "".join(out)


Piece = Text | Tag
Rendered = list[str | Tag]  # escaped output text and the tags to render around it


@dataclass(frozen=True)
class Unit:
    pieces: tuple[Piece, ...]
    escape: Escape = identity
    # The unit's structure as its format parses it (markdown); a translation whose
    # structure differs is refused (see `valid`). None: escaping alone keeps it (html, text).
    check: Callable[[str], Hashable] | None = None
    # Derived once, when the unit is made (a document has thousands; functools'
    # cached_property costs more per access than these cost to compute).
    tagged: bool = field(init=False, compare=False)
    runs: tuple[str, ...] = field(init=False, compare=False)  # text runs with words
    masked: str | None = field(init=False, compare=False)  # the segment for the model
    # The segment with its emphasis left out, every other placeholder kept: the fallback
    # when the model cannot keep the pairs (the words matter more than emphasis).
    plain: str | None = field(init=False, compare=False)
    emphasised: frozenset[int] = field(init=False, compare=False)  # ids of emphasis pairs
    structure: Hashable = field(init=False, compare=False)  # `check` of the unit as it is
    plain_structure: Hashable = field(init=False, compare=False)  # ...without emphasis

    def __post_init__(self) -> None:
        tagged = any(isinstance(p, Tag) and p.kind != "break" for p in self.pieces)
        emphasised = {p.id for p in self.pieces if isinstance(p, Tag) and emphasis(p)}
        object.__setattr__(self, "emphasised", frozenset(emphasised))
        runs = tuple(
            edges(p.text)[1] for p in self.pieces if isinstance(p, Text) and has_words(p.text)
        )
        object.__setattr__(self, "tagged", tagged)
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "masked", self._mask(paired=True))
        object.__setattr__(self, "plain", self._mask(paired=False) if emphasised else None)
        structure = None if self.check is None else self.check(_flat(self.original()))
        object.__setattr__(self, "structure", structure)
        plain_structure = (
            None
            if self.check is None
            else self.check(_flat([p for p in self.original() if not self._dropped(p)]))
        )
        object.__setattr__(self, "plain_structure", plain_structure)

    def _dropped(self, piece: object) -> bool:
        """Whether `piece` is emphasis, left out of `plain`."""
        return (
            isinstance(piece, Tag)
            and piece.kind in ("open", "close")
            and piece.id in self.emphasised
        )

    def _mask(self, paired: bool) -> str | None:
        """Inline markup as placeholders (emphasis left out unless `paired`); None where
        the text itself looks like a placeholder (then only the runs can be translated
        safely)."""
        if not self.tagged:
            return "".join(p.text if isinstance(p, Text) else " " for p in self.pieces)
        out = []
        for piece in self.pieces:
            if isinstance(piece, Text):
                if PLACEHOLDER.search(piece.text):
                    return None
                out.append(piece.text)
            elif piece.kind == "break":
                out.append(" ")
            elif piece.kind == "atom":
                out.append(f"<x{piece.id}/>")
            elif paired or not self._dropped(piece):
                out.append(f"<{'/' if piece.kind == 'close' else ''}g{piece.id}>")
        return "".join(out)

    def placeholders(self, paired: bool = True) -> list[str]:
        """The placeholders the model must give back, in source order."""
        return [
            f"<x{p.id}/>" if p.kind == "atom" else f"<{'/' if p.kind == 'close' else ''}g{p.id}>"
            for p in self.pieces
            if isinstance(p, Tag) and p.kind != "break" and (paired or not self._dropped(p))
        ]

    def valid(self, rendered: Rendered, paired: bool = True) -> bool:
        """Whether a rendered translation parses to the same structure as the source (without
        its emphasis, when not `paired`): an underscore delimiter glued to a word, or
        emphasis around nothing, is not emphasis."""
        if self.check is None:
            return True
        return self.check(_flat(rendered)) == (self.structure if paired else self.plain_structure)

    def original(self) -> Rendered:
        """The unit as it was (kept untranslated when no translation keeps its markup)."""
        return [p if isinstance(p, Tag) else p.source for p in self.pieces]

    def restore(self, translation: str, paired: bool = True) -> Rendered | None:
        """The translation with the original markup in place of its placeholders, or None
        if any placeholder is missing, repeated, unknown or badly nested. Not `paired`: the
        translation of `plain`, whose emphasis is left out."""
        if not self.tagged:
            return [self.escape(translation)]
        tags = {
            (p.kind, p.id): p
            for p in self.pieces
            if isinstance(p, Tag) and p.kind != "break" and (paired or not self._dropped(p))
        }
        out: Rendered = []
        seen: set[tuple[str, int]] = set()
        stack: list[int] = []
        at = 0
        for match in PLACEHOLDER.finditer(translation):
            closing, pair, atom = match.groups()
            if atom is not None:
                key: tuple[str, int] = ("atom", int(atom))
            else:
                key = ("close" if closing else "open", int(pair))
            if key not in tags or key in seen:
                return None
            if key[0] == "open":
                stack.append(key[1])
            elif key[0] == "close" and (not stack or stack.pop() != key[1]):
                return None
            seen.add(key)
            chunk = translation[at : match.start()]
            if key[0] == "close" and not chunk.strip() and out[-1] is tags[("open", key[1])]:
                return None  # an element around nothing
            out += [chunk, tags[key]]
            at = match.end()
        if seen != set(tags) or stack:
            return None
        out.append(translation[at:])
        return [self.escape(p) if isinstance(p, str) else p for p in _tight(out)]

    def with_runs(self, translated: Callable[[str], str]) -> Rendered:
        """The unit with each text run replaced by its own translation, all markup (soft
        line breaks included) where it was."""
        out: Rendered = []
        for piece in self.pieces:
            if isinstance(piece, Tag):
                out.append(piece)
                continue
            lead, core, trail = edges(piece.text)
            if has_words(piece.text) and (translation := translated(core).strip()):
                out.append(self.escape(lead + translation + trail))
            else:
                out.append(piece.source)
        return out


def _flat(rendered: Rendered) -> str:
    return "".join(p if isinstance(p, str) else p.source for p in rendered)


def _tight(out: Rendered) -> Rendered:
    """Whitespace just inside a paired element moved outside it (`<b> x </b>` becomes
    ` <b>x</b> `): markdown's emphasis does not open before a space or close after one."""
    out = list(out)
    for i, piece in enumerate(out):
        if not isinstance(piece, Tag) or not 0 < i < len(out) - 1:
            continue
        before, after = out[i - 1], out[i + 1]
        if not isinstance(before, str) or not isinstance(after, str):
            continue
        # Whitespace alone between this tag and an atom stays: `<b><i>x</b> </i>` is
        # misnested HTML whose parse rebuilds the <i> only around that text.
        if piece.kind == "close":
            alone, beyond = not before.strip(), out[i - 2] if i >= 2 else None
        else:
            alone, beyond = not after.strip(), out[i + 2] if i + 2 < len(out) else None
        if alone and isinstance(beyond, Tag) and beyond.kind == "atom":
            continue
        # At the unit's edges the space is dropped: the unit's outer whitespace is the
        # source's (a list item's first line sets its content's indentation).
        if piece.kind == "open":
            space = after[: len(after) - len(after.lstrip())]
            out[i - 1] = before + space if i - 1 > 0 or before.strip() else before
            out[i + 1] = after[len(space) :]
        elif piece.kind == "close":
            space = before[len(before.rstrip()) :]
            out[i - 1] = before[: len(before) - len(space)]
            out[i + 1] = space + after if i + 1 < len(out) - 1 or after.strip() else after
    return out


@dataclass(frozen=True)
class Document:
    """`parts` in order: verbatim strings, tags, and indices into `units`."""

    parts: tuple[str | Tag | int, ...]
    units: tuple[Unit, ...]
    # Units that are attribute values (rendered inside tags, not in `parts`).
    attributes: frozenset[int] = field(default_factory=frozenset)
    # The units were cut to fit `max_segment_tokens` already (plain text's segmenter did);
    # otherwise a unit over it is translated run by run (tolk.translation.service).
    cut_to_fit: bool = False

    def render(self, outputs: Mapping[int, Rendered]) -> str:
        """The document with every unit's output (restored or run by run) in its place."""
        # Attribute units hold text only; their values are needed before tags are rendered.
        values = {i: "".join(p for p in outputs[i] if isinstance(p, str)) for i in self.attributes}

        def tag_text(piece: str | Tag) -> str:
            return piece if isinstance(piece, str) else piece.render(values)

        out: list[str] = []
        for part in self.parts:
            if isinstance(part, int):
                out += [tag_text(p) for p in outputs[part]]
            else:
                out.append(tag_text(part))
        return "".join(out)


def from_segmented(segmented: Segmented) -> Document:
    """Plain text: each segment a unit of one text run, gaps verbatim, nothing escaped."""
    parts: list[str | Tag | int] = [segmented.gaps[0]]
    for index, gap in enumerate(segmented.gaps[1:]):
        parts += [index, gap]
    units = tuple(Unit((Text(s, s),)) for s in segmented.segments)
    return Document(tuple(parts), units, cut_to_fit=True)


def concat(pieces: Sequence[Document | str]) -> Document:
    """Documents and verbatim strings one after another, as one document (subtitle cues,
    each parsed on its own, inside the file's verbatim numbers and timings)."""
    parts: list[str | Tag | int] = []
    units: list[Unit] = []
    attributes: set[int] = set()
    for piece in pieces:
        if isinstance(piece, str):
            parts.append(piece)
            continue
        offset = len(units)
        units += [_shifted_unit(u, offset) for u in piece.units]
        attributes |= {i + offset for i in piece.attributes}
        parts += [
            p + offset if isinstance(p, int) else _shifted(p, offset) if isinstance(p, Tag) else p
            for p in piece.parts
        ]
    return Document(tuple(parts), tuple(units), frozenset(attributes))


def _shifted(tag: Tag, offset: int) -> Tag:
    if not tag.slots:
        return tag
    slots = tuple(Slot(s.start, s.end, s.unit + offset) for s in tag.slots)
    return Tag(tag.source, tag.kind, tag.id, slots)


def _shifted_unit(unit: Unit, offset: int) -> Unit:
    pieces = tuple(_shifted(p, offset) if isinstance(p, Tag) else p for p in unit.pieces)
    return Unit(pieces, unit.escape, unit.check)
