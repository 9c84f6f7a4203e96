"""OpenDocument files (.odt, .odp, .ods) made with odfpy, as the apps make them."""

from __future__ import annotations

import io
from typing import Any

from odf import dc, office, style, table, text  # type: ignore[import-untyped]
from odf.opendocument import (  # type: ignore[import-untyped]
    OpenDocumentSpreadsheet,
    OpenDocumentText,
)

ODT = "application/vnd.oasis.opendocument.text"


ODP = "application/vnd.oasis.opendocument.presentation"


ODS = "application/vnd.oasis.opendocument.spreadsheet"


def bold_and_italic_styles(doc: Any) -> tuple[Any, Any]:
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    italic = style.Style(name="Italic", family="text")
    italic.addElement(style.TextProperties(fontstyle="italic"))
    doc.automaticstyles.addElement(bold)
    doc.automaticstyles.addElement(italic)
    return bold, italic


def rich_paragraph(bold: Any, italic: Any, lead: str) -> Any:
    """A paragraph: plain text, a bold span with an italic one nested in it, a link."""
    paragraph = text.P(text=lead)
    outer = text.Span(stylename=bold, text="bold words ")
    outer.addElement(text.Span(stylename=italic, text="nested in italics"))
    paragraph.addElement(outer)
    paragraph.addText(" and then ")
    paragraph.addElement(
        text.A(href="https://example.org/guide", type="simple", text="the guide online")
    )
    paragraph.addText(".")
    return paragraph


def text_table(rows: int, cols: int, prefix: str) -> Any:
    grid = table.Table(name=f"{prefix}Table")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=cols))
    for r in range(rows):
        row = table.TableRow()
        for c in range(cols):
            cell = table.TableCell(valuetype="string")
            cell.addElement(text.P(text=f"{prefix} cell {r}{c} words"))
            row.addElement(cell)
        grid.addElement(row)
    return grid


def saved(doc: Any) -> bytes:
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def make_odt() -> bytes:
    doc = OpenDocumentText()
    bold, italic = bold_and_italic_styles(doc)
    layout = style.PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Standard", pagelayoutname=layout)
    header = style.Header()
    header.addElement(text.P(text="Running header text"))
    footer = style.Footer()
    page = text.P(text="Page ")
    page.addElement(text.PageNumber(selectpage="current", text="1"))
    page.addText(" of the report")
    footer.addElement(page)
    master.addElement(header)
    master.addElement(footer)
    doc.masterstyles.addElement(master)

    body = doc.text
    body.addElement(text.H(outlinelevel=1, text="A report on batching"))
    body.addElement(text.H(outlinelevel=2, text="Why it helps"))
    body.addElement(rich_paragraph(bold, italic, "Plain words come first, "))
    dated = text.P(text="Written on ")
    dated.addElement(text.Date(datevalue="2024-05-01", text="Wednesday"))
    dated.addText(" by the team")
    body.addElement(dated)
    verse = text.P()
    comment = office.Annotation()
    comment.addElement(dc.Creator(text="A reviewer"))
    comment.addElement(text.P(text="A comment from the reviewer stays as written"))
    verse.addElement(comment)
    verse.addText("First line of the verse")
    verse.addElement(text.LineBreak())
    verse.addText("second line after a break")
    body.addElement(verse)
    tabbed = text.P(text="Text before a tab")
    tabbed.addElement(text.Tab())
    tabbed.addText("text after the tab")
    body.addElement(tabbed)
    spaced = text.P(text="Spaced ")
    spaced.addElement(text.S(c=3))
    spaced.addText("words ")
    spaced.addElement(text.SoftPageBreak())
    spaced.addText("around them")
    body.addElement(spaced)
    claim = text.P(text="A claim that needs a source")
    note = text.Note(id="ftn1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    note_body = text.NoteBody()
    note_body.addElement(text.P(text="The footnote explains the source"))
    note.addElement(note_body)
    claim.addElement(note)
    claim.addText(" and more words after it.")
    body.addElement(claim)
    items = text.List()
    for words in ("Item one of the list", "Item two of the list"):
        item = text.ListItem()
        item.addElement(text.P(text=words))
        items.addElement(item)
    body.addElement(items)
    body.addElement(text_table(2, 2, "Body"))
    return saved(doc)


def add_cell(row: Any, words: str | None = None, **attributes: Any) -> Any:
    cell = table.TableCell(**attributes)
    if words is not None:
        cell.addElement(text.P(text=words))
    row.addElement(cell)
    return cell


def make_ods() -> bytes:
    doc = OpenDocumentSpreadsheet()
    bold, _ = bold_and_italic_styles(doc)
    summary = table.Table(name="Summary")
    summary.addElement(table.TableColumn(numbercolumnsrepeated=3))
    row = table.TableRow()
    add_cell(row, "Quarterly report", valuetype="string")
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "Revenue", valuetype="string")
    add_cell(row, "1234.5", valuetype="float", value="1234.5")
    add_cell(row, "12.50 EUR", valuetype="currency", currency="EUR", value="12.5")
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "Closing date", valuetype="string")
    add_cell(row, "Wednesday, May 1, 2024", valuetype="date", datevalue="2024-05-01")
    add_cell(row, "TRUE", valuetype="boolean", booleanvalue="true")
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "Total")
    add_cell(row, "2469", formula="of:=[.B2]*2", valuetype="float", value="2469")
    add_cell(row, "Total so far", formula='of:="Total so far"', valuetype="string")
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "A cell without a value type")
    add_cell(row, "half of it", valuetype="percentage", value="0.5")
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "Same words three times", valuetype="string", numbercolumnsrepeated=3)
    add_cell(row, numbercolumnsrepeated=1000)
    summary.addElement(row)
    row = table.TableRow()
    add_cell(row, "Shown words here", valuetype="string", stringvalue="Shown words here")
    summary.addElement(row)
    row = table.TableRow()
    rich = add_cell(row, valuetype="string")
    paragraph = text.P(text="Plain words and ")
    paragraph.addElement(text.Span(stylename=bold, text="bold ones"))
    rich.addElement(paragraph)
    summary.addElement(row)
    # LibreOffice's way of writing a formatted, empty tail: a billion cells declared, none
    # holding anything, which the cell count must not refuse.
    tail = table.TableRow(numberrowsrepeated=1_048_000)
    add_cell(tail, numbercolumnsrepeated=1024)
    summary.addElement(tail)
    doc.spreadsheet.addElement(summary)
    notes = table.Table(name="Notes")
    row = table.TableRow()
    add_cell(row, "The queue stays short.", valuetype="string")
    notes.addElement(row)
    doc.spreadsheet.addElement(notes)
    return saved(doc)
