"""Word documents (.docx, through python-docx): every paragraph's text translated, its runs'
formatting kept.

A paragraph is one unit, so its sentence keeps its context; each formatted run (a stretch of
bold, a font, a hyperlink's text) is a paired placeholder around its text, so the
translation can move bold words where the target language puts them; unformatted runs are
the text between them. Adjacent runs with
the same formatting (Word splits runs for spell checking and revisions) are merged first. If
the placeholders do not come back intact, each run is translated on its own. Paragraphs are
found in the body, in tables (nested ones too), and in every section's headers and footers.
Text after a placeholder goes to the unformatted run that followed that run in the source
(else into the run itself).

The same run machinery (`TextRun`, `RunGroup`, `merge_runs`, `runs_document`, `apply_runs`)
serves PowerPoint's runs (tolk.translation.slides) and a spreadsheet cell's rich text
(tolk.translation.sheets): each format says which runs are formatted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from docx.document import Document as DocxDocument
from docx.table import Table
from docx.text.hyperlink import Hyperlink
from docx.text.paragraph import Paragraph
from docx.text.run import Run

from tolk.translation.document import Document, Piece, Tag, Text, Unit, has_words

# Placeholders' sources are private-use characters, found again in the rendered text.
_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"
_RUN = re.compile(f"{_OPEN}(\\d+){_MID}(.*?){_CLOSE}", re.DOTALL)
# What XML 1.0 cannot hold (python-docx refuses it), and the placeholders' own characters.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ue000-\ue002]")


def escape_docx(text: str) -> str:
    return _UNSAFE.sub("", text)


def paragraphs(document: DocxDocument) -> Iterator[Paragraph]:
    yield from _blocks(document.paragraphs, document.tables)
    for section in document.sections:
        for part in (
            section.header,
            section.footer,
            section.first_page_header,
            section.first_page_footer,
            section.even_page_header,
            section.even_page_footer,
        ):
            if not part.is_linked_to_previous:
                yield from _blocks(part.paragraphs, part.tables)


def _blocks(paras: list[Paragraph], tables: list[Table]) -> Iterator[Paragraph]:
    yield from paras
    for table in tables:
        seen: set[int] = set()
        for row in table.rows:
            for cell in row.cells:
                if id(cell._tc) in seen:  # a merged cell appears once per grid column
                    continue
                seen.add(id(cell._tc))
                yield from _blocks(cell.paragraphs, cell.tables)


class TextRun(Protocol):
    """A run of text that is read and written: python-docx's and python-pptx's runs, a
    spreadsheet cell's text."""

    @property
    def text(self) -> str: ...

    @text.setter
    def text(self, value: str) -> None: ...


R = TypeVar("R", bound=TextRun)


@dataclass(frozen=True)
class RunGroup:
    """A paragraph's runs (one unit to translate), and which of them are formatted (each a
    paired placeholder around its text)."""

    runs: Sequence[TextRun]
    formatted: Sequence[bool]


def text_runs(paragraph: Paragraph) -> list[Run]:
    """The paragraph's runs (hyperlinks' included) with text, same-formatted neighbours merged."""
    runs: list[Run] = []
    for item in paragraph.iter_inner_content():
        runs += item.runs if isinstance(item, Hyperlink) else [item]
    return merge_runs(runs, _format)


def merge_runs(runs: Sequence[R], key: Callable[[R], str]) -> list[R]:
    """The runs with text, each merged into the one before when they are adjacent elements
    (`_r`, nothing between them) and their formatting `key`s are equal; a merged run is left
    empty."""
    merged: list[R] = []
    tail: Any = None  # the last run seen, emptied or not
    for run in runs:
        if not run.text:
            continue
        last = merged[-1] if merged else None
        joins = tail is not None and tail._r.getnext() is _element(run)
        if last is not None and joins and key(last) == key(run):
            last.text += run.text
            run.text = ""
            tail = run
            continue
        merged.append(run)
        tail = run
    return merged


def _element(run: TextRun) -> Any:
    return getattr(run, "_r", None)


def _format(run: Any) -> str:
    rpr: Any = run._r.rPr
    return "" if rpr is None else str(rpr.xml)


def paragraph_document(runs: list[Run]) -> Document:
    """A .docx paragraph as a document of one unit (none when it has no words)."""
    return runs_document(docx_group(runs))


def apply(runs: list[Run], rendered: str) -> None:
    """Put a .docx paragraph's rendered translation into its runs."""
    apply_runs(docx_group(runs), rendered)


def docx_group(runs: list[Run]) -> RunGroup:
    """A .docx paragraph's runs as a group: a run with properties is formatted."""
    return RunGroup(runs, [bool(_format(r)) for r in runs])


def runs_document(group: RunGroup) -> Document:
    """A paragraph's runs as a document of one unit (none when it has no words)."""
    if not any(has_words(r.text) for r in group.runs):
        return Document((), ())
    pieces: list[Piece] = []
    for n, (run, formatted) in enumerate(zip(group.runs, group.formatted, strict=True), 1):
        if formatted:
            pieces += [
                Tag(f"{_OPEN}{n}{_MID}", "open", n),
                Text(run.text, run.text),
                Tag(_CLOSE, "close", n),
            ]
        else:  # unformatted text is the unit's own text, between the placeholders
            pieces.append(Text(run.text, run.text))
    return Document((0,), (Unit(tuple(pieces), escape_docx),))


def apply_runs(group: RunGroup, rendered: str) -> None:
    """Put a paragraph's rendered translation into its runs."""
    runs = group.runs
    if not any(has_words(r.text) for r in runs):
        return  # nothing was translated (runs_document made no unit)
    texts = [""] * len(runs)
    target = 0  # text before any placeholder: the first run
    at = 0
    for match in _RUN.finditer(rendered):
        texts[target] += rendered[at : match.start()]
        n = int(match[1]) - 1
        texts[n] += match[2]
        # Text after a formatted run: the unformatted run that followed it, if one did.
        following = n + 1 < len(runs) and not group.formatted[n + 1]
        target = n + 1 if following else n
        at = match.end()
    texts[target] += rendered[at:]
    for run, text in zip(runs, texts, strict=True):
        run.text = text
