"""Spreadsheets (.xlsx, through openpyxl): every string cell of every sheet translated.

A cell's text is one unit; a cell of rich text (runs of different fonts) is one unit whose
formatted runs are paired placeholders, as a .docx paragraph's (tolk.translation.office).
Formulas (even one whose cached value is text), numbers, dates, booleans and errors are left
as they are, and so are sheet names, defined names, styles, merged cells and column widths.
Comments, headers and footers, and charts' text are not translated. openpyxl writes back
what it reads: a drawing's shapes (not its images or charts) do not survive it.

openpyxl holds every cell in memory, and one merged range `A1:XFD1048576` becomes 17 billion
cells, so the cells a file declares (its `<c>` elements and the area of its merged ranges)
are counted first, streaming through its XML, and more than `MAX_CELLS` are refused before
openpyxl reads it.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import Any

from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.office import RunGroup, TextRun

MAX_CELLS = 1_000_000  # cells and merged cells: about 1 GB of openpyxl's objects at most
MAX_CELL_CHARS = 32_767  # what Excel holds in one cell
_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def count_cells(filename: str, archive: zipfile.ZipFile, limit: int = MAX_CELLS) -> int:
    """The cells the workbook's XML declares, merged ranges' cells included; refused past
    `limit`. Linear in the archive's inflated size (which check_archive bounds)."""
    from lxml import etree  # type: ignore[import-untyped]
    from openpyxl.utils.cell import range_boundaries  # type: ignore[import-untyped]

    cells = 0
    for member in archive.infolist():
        if not member.filename.endswith(".xml"):
            continue
        with archive.open(member) as stream:
            parsed = etree.iterparse(
                stream,
                events=("end",),
                tag=(f"{_MAIN}c", f"{_MAIN}mergeCell"),
                resolve_entities=False,
                no_network=True,
            )
            try:
                for _, element in parsed:
                    if element.tag == f"{_MAIN}c":
                        cells += 1
                    else:
                        lo_col, lo_row, hi_col, hi_row = range_boundaries(element.get("ref", ""))
                        cells += (hi_col - lo_col + 1) * (hi_row - lo_row + 1)
                    element.clear()
                    if cells > limit:
                        raise PayloadTooLarge(
                            f"'{filename}' has more than {limit:,} cells; at most {limit:,} "
                            "are accepted: split the workbook",
                            field="file",
                            limit=limit,
                        )
            except (etree.XMLSyntaxError, ValueError, TypeError) as exc:
                raise InvalidRequest(
                    f"'{filename}' could not be read as an Excel workbook ({member.filename}: "
                    f"{type(exc).__name__}); check that it is one and not damaged",
                    field="file",
                ) from exc
    return cells


@dataclass
class _CellText:
    """A cell's plain text as a run."""

    cell: Any

    @property
    def text(self) -> str:
        return str(self.cell.value)

    @text.setter
    def text(self, value: str) -> None:
        self.cell.value = value[:MAX_CELL_CHARS]
        self.cell.data_type = "s"  # a translation that starts with '=' is text, not a formula


@dataclass
class _RichPart:
    """One run of a cell's rich text (openpyxl's CellRichText: a list of str and TextBlock)."""

    rich: Any
    index: int

    @property
    def text(self) -> str:
        item = self.rich[self.index]
        return item if isinstance(item, str) else str(item.text)

    @text.setter
    def text(self, value: str) -> None:
        item = self.rich[self.index]
        if isinstance(item, str):
            self.rich[self.index] = value
        else:
            item.text = value


def run_groups(workbook: Any) -> list[RunGroup]:
    """Each string cell of each sheet as its runs, row by row."""
    from openpyxl.cell.rich_text import CellRichText  # type: ignore[import-untyped]

    groups: list[RunGroup] = []
    for sheet in workbook.worksheets:  # chartsheets hold no cells
        for row in sheet.iter_rows():
            for cell in row:
                value = cell.value
                if cell.data_type == "f":
                    continue
                if isinstance(value, CellRichText):
                    parts: list[TextRun] = [_RichPart(value, i) for i in range(len(value))]
                    formatted = [not isinstance(item, str) for item in value]
                    groups.append(RunGroup(parts, formatted))
                elif isinstance(value, str) and value and not value.startswith("="):
                    groups.append(RunGroup([_CellText(cell)], [False]))
    return groups
