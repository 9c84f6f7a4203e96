"""Subtitles (SubRip .srt, WebVTT .vtt): each cue's text is a unit, everything else (cue
numbers and identifiers, timings and cue settings, the WEBVTT header, NOTE, STYLE and
REGION blocks, blank lines, line endings) is kept byte for byte.

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
"""

from __future__ import annotations

import html
import re

from tolk.translation.document import Document, Escape, Text, Unit, concat
from tolk.translation.html_format import parse_html

_WHITESPACE = re.compile(r"\s+")
_TAG = re.compile(r"<[^>]*>")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def _one_line(text: str) -> str:
    # Keep the outer spaces (they sit between tags), but no line break inside.
    return _WHITESPACE.sub(" ", text).replace("-->", "→")


def escape_srt(text: str) -> str:
    return _TAG_START.sub("\u2039", _one_line(text))


def escape_vtt(text: str) -> str:
    return html.escape(_one_line(text), quote=False)


def parse_subtitles(text: str, escape: Escape) -> Document:
    lines = text.splitlines(keepends=True)
    pieces: list[Document | str] = []
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
            pieces += ["".join(verbatim), _cue(body, escape)]
            verbatim = [cue[len(body) :]]
        at = end
    pieces.append("".join(verbatim))
    return concat(pieces)


def has_text(cue_text: str) -> bool:
    """A cue's check: it still shows some text. A blank line would end the cue (and leave a
    timing with nothing under it), so a blank translation is refused like lost markup: the
    unit is translated run by run, and kept as it was if that is blank too."""
    return bool(_TAG.sub("", cue_text).strip())


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


def parse_srt(text: str) -> Document:
    return parse_subtitles(text, escape_srt)


def parse_vtt(text: str) -> Document:
    return parse_subtitles(text, escape_vtt)
