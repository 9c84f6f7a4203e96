"""Markdown documents: prose translated in place, everything else byte for byte.

Parsed with pulldown-cmark (through pyromark: a maintained binding, CommonMark-compliant,
GFM tables, footnotes, strikethrough, task lists and YAML front matter as extensions). It was
chosen over markdown-it-py and mistletoe because it reports the exact source range of every
event, inline ones included: tolk copies the source between prose runs verbatim instead of
re-rendering the document, so code blocks, inline code, link and image targets, autolinks,
HTML, front matter, reference definitions and table syntax come back untouched.

Units (one segment each) are the inline contents of paragraphs, headings, table cells and
tight list items. Inside a unit, emphasis, strong, strikethrough, links and images are paired
placeholders (their text is translated, their markup and targets kept); inline code,
inline HTML, autolinks, shortcut reference links (`[FAQ]`, whose text is the label), hard
breaks and footnote references are standalone ones (a task marker stays outside); a soft
line break is shown to the model as a space (the paragraph comes back as one line when
placeholders are restored, and with its lines as they were when it falls back to run by run).
"""

from __future__ import annotations

import re
from typing import Any

import pyromark

from tolk.translation.document import Document, Piece, Tag, TagKind, Text, Unit, has_words

OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_FOOTNOTES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
    | pyromark.Options.ENABLE_YAML_STYLE_METADATA_BLOCKS
)

_INLINE_CONTAINERS = {"Emphasis", "Strong", "Strikethrough", "Superscript", "Subscript", "Link"}
_INLINE_CONTAINERS |= {"Image"}
_LEAVES = {"Paragraph", "Heading", "TableCell", "Item"}  # blocks whose inline content is a unit
_VERBATIM = {"CodeBlock", "HtmlBlock", "MetadataBlock"}  # their text is not prose

# Characters that could start markup anywhere in a line, and block markers at a line's start.
_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~!])")
_LEADING = re.compile(r"^([-+=#])|^(\d+)([.)])")


def escape_markdown(text: str) -> str:
    """Model output as literal markdown text: CommonMark lets a backslash escape any ASCII
    punctuation, so escaping is always safe; only characters that could start markup are."""
    escaped = _SPECIAL.sub(r"\\\1", text)
    return _LEADING.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", escaped)


def structure(markdown: str) -> tuple[str, ...]:
    """What a piece of markdown parses to, text and soft line breaks aside: two units with
    the same structure have the same markup (tolk.translation.document.Unit.check)."""
    out: list[str] = []
    verbatim = 0  # inside code and HTML blocks and front matter, text is structure too
    for event in pyromark.events(markdown, options=OPTIONS):
        role, name = _name(event)
        if role == "start" and name in _VERBATIM:
            verbatim += 1
        elif role == "end" and name in _VERBATIM:
            verbatim -= 1
        if name == "SoftBreak" or (name == "Text" and not verbatim):
            continue
        out.append(repr(event))
    return tuple(out)


def _name(event: Any) -> tuple[str, str]:
    """(role, name): role is start, end or inline."""
    if isinstance(event, str):
        return ("inline" if event in ("SoftBreak", "HardBreak") else "block"), event
    key = next(iter(event))
    if key in ("Start", "End"):
        tag = event[key]
        name = tag if isinstance(tag, str) else next(iter(tag))
        if name in _INLINE_CONTAINERS:
            return "inline", name
        return key.lower(), name
    return "inline", key


def _kept_link(event: Any) -> bool:
    """Links whose text must not change: autolinks (the text is the URL) and shortcut or
    collapsed references (`[FAQ]`, `[FAQ][]`: the text is the label the definition is
    found by)."""
    link = event.get("Start", {}) if isinstance(event, dict) else {}
    if not isinstance(link, dict) or "Link" not in link:
        return False
    return link["Link"].get("link_type") in ("Autolink", "Email", "Shortcut", "Collapsed")


def parse_markdown(text: str) -> Document:
    data = text.encode()
    events = [
        (event, span["start"], span["end"])
        for event, span in pyromark.events_with_range(text, options=OPTIONS)
    ]
    parts: list[str | Tag | int] = []
    units: list[Unit] = []
    cursor = 0
    stack: list[str] = []
    leaf: list[tuple[Any, int, int]] = []

    def flush() -> None:
        nonlocal cursor
        if leaf:
            made = _unit(data, leaf)
            leaf.clear()
            if made is not None:
                unit, start, end = made
                parts.append(data[cursor:start].decode())
                parts.append(len(units))
                units.append(unit)
                cursor = end

    for event, start, end in events:
        role, name = _name(event)
        if role == "inline":
            if stack and stack[-1] in _LEAVES:
                leaf.append((event, start, end))
            continue
        flush()
        if role == "start":
            stack.append(name)
        elif role == "end" and stack:
            stack.pop()
    flush()
    parts.append(data[cursor:].decode())
    return Document(tuple(parts), tuple(units))


def _unit(data: bytes, events: list[tuple[Any, int, int]]) -> tuple[Unit, int, int] | None:
    """One leaf's inline events as a unit (or None when it has no words to translate)."""
    # A task marker (`[x]`) only means one at the item's start: it stays out of the unit.
    while events and _name(events[0][0])[1] == "TaskListMarker":
        events = events[1:]
    if not events:
        return None
    pieces: list[Piece] = []
    ids = 0
    open_ids: list[int] = []
    cursor = start = events[0][1]
    skip = 0  # inside a link kept whole (_kept_link)
    swallow = False  # the End of an element without content, already one placeholder

    def add_gap(upto: int) -> None:
        # Bytes between events (a backslash escape, a quote marker after a line break)
        # belong to the piece before them.
        nonlocal cursor
        if upto > cursor and pieces:
            gap = data[cursor:upto].decode()
            last = pieces[-1]
            if isinstance(last, Text):
                pieces[-1] = Text(last.text, last.source + gap)
            else:
                pieces[-1] = Tag(last.source + gap, last.kind, last.id)
        cursor = max(cursor, upto)

    def add_tag(source_end: int, kind: TagKind, tag_id: int) -> None:
        nonlocal cursor
        pieces.append(Tag(data[cursor:source_end].decode(), kind, tag_id))
        cursor = source_end

    for index, (event, ev_start, ev_end) in enumerate(events):
        name = _name(event)[1]
        if skip:
            if name == "Link":
                skip += 1 if "Start" in event else -1
            if not skip:
                add_gap(ev_start)
                ids += 1
                add_tag(ev_end, "atom", ids)
            continue
        add_gap(ev_start)
        if name in _INLINE_CONTAINERS and "Start" in event:
            if _kept_link(event):
                skip = 1
                continue
            following = events[index + 1] if index + 1 < len(events) else None
            ids += 1
            if following is None or (_name(following[0])[1] == name and "End" in following[0]):
                # No content: the whole element is one standalone placeholder.
                add_tag(ev_end, "atom", ids)
                swallow = following is not None
                continue
            open_ids.append(ids)
            add_tag(following[1], "open", ids)
        elif name in _INLINE_CONTAINERS:
            if swallow:
                swallow = False
                continue
            add_tag(ev_end, "close", open_ids.pop())
        elif name == "Text":
            piece = data[cursor:ev_end].decode()
            if pieces and isinstance(pieces[-1], Text):
                last = pieces[-1]
                pieces[-1] = Text(last.text + event["Text"], last.source + piece)
            else:
                pieces.append(Text(event["Text"], piece))
            cursor = ev_end
        elif name == "SoftBreak":
            add_tag(ev_end, "break", 0)
        else:  # code, inline HTML, hard breaks, footnote references, task markers
            ids += 1
            add_tag(ev_end, "atom", ids)
    if not any(isinstance(p, Text) and has_words(p.text) for p in pieces):
        return None
    return Unit(tuple(pieces), escape_markdown, structure), start, cursor
