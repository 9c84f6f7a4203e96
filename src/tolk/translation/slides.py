"""PowerPoint presentations (.pptx, through python-pptx): every paragraph's text translated,
its runs' formatting kept, as a .docx's (tolk.translation.office).

Paragraphs are found in every slide's shapes (text boxes, placeholders, auto shapes), in
tables' cells (a merged cell once), in grouped shapes (nested groups too), in charts' titles
and axis titles, and in each slide's notes. A paragraph's runs (`a:r`) are the unit; line
breaks and fields (a slide number) stay where they are. Slide layouts and masters (the
template's own text), SmartArt and embedded objects are not translated; images, layout and
every other part of the file are written back as they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pptx.chart.chart import Chart
from pptx.presentation import Presentation
from pptx.shapes.base import BaseShape
from pptx.shapes.group import GroupShape
from pptx.text.text import TextFrame, _Paragraph, _Run

from tolk.translation.office import RunGroup, merge_runs

# Attributes of a run's properties that are no formatting of its text: the language it is
# spell-checked in and the editor's bookkeeping (PowerPoint writes them on nearly every run).
_BOOKKEEPING = ("lang", "altLang", "dirty", "err", "noProof", "smtClean", "smtId", "bmk")


def run_groups(presentation: Presentation) -> list[RunGroup]:
    """Every paragraph's runs with text (same-formatted neighbours merged), in order."""
    groups: list[RunGroup] = []
    for paragraph in paragraphs(presentation):
        runs = merge_runs(list(paragraph.runs), _format)
        if runs:
            groups.append(RunGroup(runs, [bool(_format(r)) for r in runs]))
    return groups


def paragraphs(presentation: Presentation) -> Iterator[_Paragraph]:
    for slide in presentation.slides:
        yield from _shapes(slide.shapes)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None:
                yield from notes.paragraphs


def _shapes(shapes: Iterable[BaseShape]) -> Iterator[_Paragraph]:
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
            continue
        if shape.has_text_frame:
            yield from _frame(getattr(shape, "text_frame", None))
        if getattr(shape, "has_table", False):
            for cell in shape.table.iter_cells():  # type: ignore[attr-defined]
                if not cell.is_spanned:  # a merged cell's text is its origin cell's
                    yield from _frame(cell.text_frame)
        if getattr(shape, "has_chart", False):
            yield from _chart(shape.chart)  # type: ignore[attr-defined]


def _frame(frame: TextFrame | None) -> Iterator[_Paragraph]:
    if frame is not None:
        yield from frame.paragraphs


def _chart(chart: Chart) -> Iterator[_Paragraph]:
    """The chart's title and its axes' titles, where it has them (asking for one that is
    not there would add it)."""
    if chart.has_title and chart.chart_title.has_text_frame:
        yield from chart.chart_title.text_frame.paragraphs
    axes: list[Any] = []
    for axis in ("category_axis", "value_axis"):
        try:
            axes.append(getattr(chart, axis))
        except (ValueError, KeyError, AttributeError):  # a pie chart has no axes
            continue
    for axis in axes:
        if axis.has_title and axis.axis_title.has_text_frame:
            yield from axis.axis_title.text_frame.paragraphs


def _format(run: _Run) -> str:
    """The run's formatting: its properties without the bookkeeping ('' when none)."""
    rpr: Any = run._r.rPr
    if rpr is None:
        return ""
    attributes = {k: v for k, v in rpr.attrib.items() if k not in _BOOKKEEPING}
    if not attributes and len(rpr) == 0:
        return ""
    from lxml import etree  # type: ignore[import-untyped]

    children = b"".join(etree.tostring(c) for c in rpr)  # python-pptx knows not all of them
    return repr(sorted(attributes.items())) + children.decode()
