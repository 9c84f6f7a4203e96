"""The request's `format`: how a text becomes a Document (see tolk.translation.document)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from tolk.translation.document import Document, from_segmented
from tolk.translation.html_format import DEFAULT_RULES, TagRules, parse_html
from tolk.translation.markdown_format import parse_markdown
from tolk.translation.segment import Segmented
from tolk.translation.subtitles import parse_srt, parse_vtt

Format = Literal["text", "markdown", "html", "srt", "vtt"]
FORMATS: tuple[Format, ...] = ("text", "markdown", "html", "srt", "vtt")
Splitter = Callable[[str], Segmented]  # a text cut into segments (the request's `split`)


def parse(
    fmt: Format,
    text: str,
    cut: Splitter,
    rules: TagRules = DEFAULT_RULES,
    subtitles_in_context: bool = False,
) -> Document:
    """`text` as a document of units: plain text cut by `cut`; markdown and HTML by their
    parsers, one unit per block of prose (a long one translated run by run, each run cut
    by `cut`); subtitles one unit per cue, or with `subtitles_in_context` a sentence that
    runs over several cues one unit (tolk.translation.subtitles)."""
    if fmt == "markdown":
        return parse_markdown(text)
    if fmt == "html":
        return parse_html(text, rules=rules)
    if fmt == "srt":
        return parse_srt(text, subtitles_in_context)
    if fmt == "vtt":
        return parse_vtt(text, subtitles_in_context)
    return from_segmented(cut(text))
