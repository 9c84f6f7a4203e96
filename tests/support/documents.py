"""The sample documents (tests/data/documents) and what of their structure a translation
must keep: the element tree and untouched text of HTML, markdown's events but emphasis,
subtitles' blocks and cue heads; a Word document made with python-docx."""

from __future__ import annotations

import re

import html5lib

from tests.support.paths import TEST_DATA

DOCUMENTS = TEST_DATA / "documents"
README = (DOCUMENTS / "readme.md").read_text(encoding="utf-8")
PAGE = (DOCUMENTS / "page.html").read_text(encoding="utf-8")


def element_tree(markup: str) -> list[tuple[str, dict[str, str]]]:
    """Every element in document order, with its attributes other than translated ones, as
    html5lib (a spec-compliant parser, not the one tolk uses) builds the tree."""
    tree = html5lib.parse(markup, namespaceHTMLElements=False)
    translated = {"alt", "title", "placeholder", "aria-label"}
    return [
        (el.tag, {k: v for k, v in el.attrib.items() if k not in translated})
        for el in tree.iter()
        if isinstance(el.tag, str)
    ]


EMPHASIS_ELEMENTS = {"b", "i", "em", "strong", "u", "s", "del", "ins", "mark", "small", "span"}


def without_emphasis_elements(
    tree: list[tuple[str, dict[str, str]]],
) -> list[tuple[str, dict[str, str]]]:
    return [(tag, attrs) for tag, attrs in tree if tag not in EMPHASIS_ELEMENTS]


def kept_text(markup: str) -> list[str]:
    """The text of elements tolk must not touch, per html5lib."""
    tree = html5lib.parse(markup, namespaceHTMLElements=False)
    out = []
    for el in tree.iter():
        kept = el.get("translate") == "no" or "notranslate" in (el.get("class") or "").split()
        if el.tag in ("script", "style", "code", "pre") or kept:
            out.append("".join(el.itertext()))
    return out


def without_emphasis(events: tuple[str, ...]) -> tuple[str, ...]:
    """Markdown's structure events (markdown_format.structure) but emphasis."""
    return tuple(e for e in events if not re.search(r"'(Emphasis|Strong|Strikethrough)'", e))


def subtitle_blocks(subtitles: str) -> list[list[str]]:
    """SRT or WebVTT cut into its blank-line separated blocks, each as its lines."""
    return [b.splitlines() for b in subtitles.strip().split("\n\n")]


def cue_heads(subtitles: str) -> list[list[str]]:
    """Each cue's identifier (if any) and timing line."""
    heads = []
    for block in subtitle_blocks(subtitles):
        timing = [i for i, line in enumerate(block) if "-->" in line]
        if timing:
            heads.append(block[: timing[0] + 1])
    return heads


def make_docx() -> bytes:
    import io

    import docx

    document = docx.Document()
    document.add_heading("A report on batching", level=1)
    para = document.add_paragraph("Continuous batching keeps the GPU ")
    para.add_run("busy").bold = True
    para.add_run(" and the ")
    para.add_run("queue").italic = True
    para.add_run(" short.")
    split = document.add_paragraph("Word splits ")
    split.add_run("runs for ")  # same formatting as the run before: merged
    split.add_run("spell checking.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"Cell {r}{c} text"
    document.add_paragraph("12.5 %")  # nothing to translate
    document.sections[0].header.paragraphs[0].text = "Confidential draft"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
