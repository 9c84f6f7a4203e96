"""PowerPoint (.pptx) and Excel (.xlsx) files translated through the in-process server over
stand-in engines (edge): read back with python-pptx and openpyxl, every string translated and
everything else as it was; zip bombs, huge merged ranges and damaged files refused with a
4xx."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path
from typing import Any

import deepl
import httpx
import openpyxl  # type: ignore[import-untyped]
import pptx
from openpyxl.cell.rich_text import CellRichText, TextBlock  # type: ignore[import-untyped]
from openpyxl.cell.text import InlineFont  # type: ignore[import-untyped]
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.util import Inches, Pt

from tests.support.errors import assert_error
from tests.support.files import post_file, zip_bomb
from tests.support.main_server import MainKeys
from tests.support.samples.office import PPTX, XLSX
from tests.support.servers import InProcessServer
from tolk.translation.sheets import MAX_CELLS


def make_pptx() -> bytes:
    deck: Any = pptx.Presentation()
    title = deck.slides.add_slide(deck.slide_layouts[0])
    title.shapes.title.text = "A report on batching"
    title.placeholders[1].text = "Measured on one GPU"
    body = deck.slides.add_slide(deck.slide_layouts[1])
    body.shapes.title.text = "Why batching helps"
    paragraph = body.placeholders[1].text_frame.paragraphs[0]
    plain = paragraph.add_run()
    plain.text = "Continuous batching keeps the GPU "
    bold = paragraph.add_run()
    bold.text = "busy all day"
    bold.font.bold = True
    bold.font.size = Pt(28)
    table = body.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(6), Inches(1)).table
    for r in range(2):
        for c in range(2):
            table.cell(r, c).text = f"Cell {r}{c} text"
    group = body.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(6), Inches(3), Inches(1))
    box.text_frame.text = "Grouped words here"
    body.notes_slide.notes_text_frame.text = "Say this slowly to the audience"
    data: Any = CategoryChartData()  # type: ignore[no-untyped-call]
    data.categories = ["one", "two"]
    data.add_series("Requests", (1.0, 2.0))
    chart = body.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(5), Inches(1), Inches(3), Inches(2), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Requests per second"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx() -> bytes:
    book = openpyxl.Workbook()
    summary = book.active
    summary.title = "Summary"
    summary["A1"] = "Quarterly report"
    summary.merge_cells("A1:C1")
    summary["A2"] = "Revenue"
    summary["B2"] = 1234.5
    summary["A3"] = "Closing date"
    summary["B3"] = dt.datetime(2024, 5, 1)
    summary["A4"] = "Total"
    summary["B4"] = "=SUM(B2:B2)*2"
    summary["A5"] = True
    summary["A6"] = CellRichText(["Plain words and ", TextBlock(InlineFont(b=True), "bold ones")])
    summary["A1"].font = openpyxl.styles.Font(bold=True, size=14)
    notes = book.create_sheet("Notes")
    notes["A1"] = "The queue stays short."
    notes["B7"] = "Another cell far away"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _runs(deck: Any) -> list[list[tuple[str, Any, Any]]]:
    """Each paragraph of each text frame (shapes, groups, tables, notes, chart titles) as
    its runs: (text, bold, size)."""
    out: list[list[tuple[str, Any, Any]]] = []

    def frame(tf: Any) -> None:
        for p in tf.paragraphs:
            out.append([(r.text, r.font.bold, r.font.size) for r in p.runs])

    def shapes(items: Any) -> None:
        for shape in items:
            if shape.shape_type == 6:  # a group
                shapes(shape.shapes)
                continue
            if shape.has_text_frame:
                frame(shape.text_frame)
            if getattr(shape, "has_table", False):
                for cell in shape.table.iter_cells():
                    frame(cell.text_frame)
            if getattr(shape, "has_chart", False) and shape.chart.has_title:
                frame(shape.chart.chart_title.text_frame)

    for slide in deck.slides:
        shapes(slide.shapes)
        if slide.has_notes_slide:
            frame(slide.notes_slide.notes_text_frame)
    return out


def _same_but_text(before: list[list[tuple[str, Any, Any]]], after: Any) -> None:
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        assert [(b, s) for _, b, s in new] == [(b, s) for _, b, s in old]  # runs, formatting
        for (old_text, _, _), (new_text, _, _) in zip(old, new, strict=True):
            if any(c.isalpha() for c in old_text):
                assert new_text != old_text


async def test_a_presentation_comes_back_translated_with_its_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_pptx()
    response = await post_file(edge_client, "deck.pptx", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == PPTX
    assert "deck.pptx" in response.headers["content-disposition"]
    before, after = (
        pptx.Presentation(io.BytesIO(source)),
        pptx.Presentation(io.BytesIO(response.content)),
    )
    assert len(after.slides) == len(before.slides) == 2
    assert [s.has_notes_slide for s in after.slides] == [False, True]
    old, new = _runs(before), _runs(after)
    texts = {t for p in old for t, _, _ in p}
    assert {"busy all day", "Grouped words here", "Requests per second", "Cell 11 text"} <= texts
    assert "Say this slowly to the audience" in texts
    _same_but_text(old, new)
    shapes = [(s.shape_type, s.left, s.top, s.width, s.height) for s in after.slides[1].shapes]
    assert shapes == [
        (s.shape_type, s.left, s.top, s.width, s.height) for s in before.slides[1].shapes
    ]


def _cells(book: Any) -> dict[tuple[str, str], tuple[Any, str]]:
    return {
        (sheet.title, cell.coordinate): (cell.value, cell.data_type)
        for sheet in book.worksheets
        for row in sheet.iter_rows()
        for cell in row
        if cell.value is not None
    }


async def test_a_workbook_comes_back_translated_with_its_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_xlsx()
    response = await post_file(edge_client, "book.xlsx", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == XLSX
    before = openpyxl.load_workbook(io.BytesIO(source), rich_text=True)
    after = openpyxl.load_workbook(io.BytesIO(response.content), rich_text=True)
    assert after.sheetnames == before.sheetnames == ["Summary", "Notes"]
    old, new = _cells(before), _cells(after)
    assert old.keys() == new.keys()
    for at, (value, kind) in old.items():
        changed, changed_kind = new[at]
        assert changed_kind == kind, at
        if isinstance(value, CellRichText):
            assert [type(p) for p in changed] == [type(p) for p in value]
            assert [p.font.b for p in changed if isinstance(p, TextBlock)] == [True]
            assert str(changed) != str(value)
        elif isinstance(value, str) and not value.startswith("="):
            assert isinstance(changed, str)
            assert changed != value, at
        else:  # numbers, dates, booleans, formulas
            assert changed == value, at
    assert new[("Summary", "B4")] == ("=SUM(B2:B2)*2", "f")
    assert new[("Summary", "B3")][0] == dt.datetime(2024, 5, 1)
    assert [str(r) for r in after["Summary"].merged_cells.ranges] == ["A1:C1"]
    assert after["Summary"]["A1"].font.b is True
    assert after["Summary"]["A1"].font.sz == 14


def test_documents_through_deepls_api(
    edge_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    """DeepL's /v2/document (upload, poll, download) through the official client."""
    deepl.http_client.max_network_retries = 0
    client = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    for name, content in (("deck.pptx", make_pptx()), ("book.xlsx", make_xlsx())):
        source, out = tmp_path / name, tmp_path / f"out-{name}"
        source.write_bytes(content)
        status = client.translate_document_from_filepath(
            source, out, source_lang="EN", target_lang="DE"
        )
        assert status.done, status
        assert zipfile.ZipFile(out).testzip() is None
    after = openpyxl.load_workbook(tmp_path / "out-book.xlsx")
    assert after["Summary"]["B4"].value == "=SUM(B2:B2)*2"
    assert after["Notes"]["A1"].value != "The queue stays short."
    deck: Any = pptx.Presentation(str(tmp_path / "out-deck.pptx"))
    assert deck.slides[0].shapes.title.text != "A report on batching"


def _bomb(member: str, inflated: int) -> bytes:
    return zip_bomb(member, inflated)


async def test_zip_bombs_and_damaged_files_are_refused(edge_client: httpx.AsyncClient) -> None:
    for name, member in (("bomb.pptx", "ppt/slides/slide1.xml"), ("bomb.xlsx", "xl/sst.xml")):
        bomb = _bomb(member, 80 << 20)  # past the 64 MiB of server.max_unzipped_bytes
        assert len(bomb) < 200_000
        error = assert_error(await post_file(edge_client, name, bomb), 413, "payload_too_large")
        assert "max_unzipped_bytes" in error["message"]
    not_zip = assert_error(
        await post_file(edge_client, "broken.pptx", b"not a zip"), 422, "invalid_request"
    )
    assert "PowerPoint" in not_zip["message"]
    not_zip = assert_error(
        await post_file(edge_client, "broken.xlsx", b"PK\x03\x04"), 422, "invalid_request"
    )
    assert "Excel" in not_zip["message"]
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("hello.txt", "a zip, but no office file")
    for name in ("other.pptx", "other.xlsx"):
        assert_error(await post_file(edge_client, name, other.getvalue()), 422, "invalid_request")
    # Each one's type swapped: a presentation named .xlsx and a workbook named .pptx.
    assert_error(await post_file(edge_client, "swapped.xlsx", make_pptx()), 422, "invalid_request")
    assert_error(await post_file(edge_client, "swapped.pptx", make_xlsx()), 422, "invalid_request")


def _rewritten(data: bytes, member: str, old: bytes, new: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            content = source.read(item)
            target.writestr(item, content.replace(old, new) if item.filename == member else content)
    return out.getvalue()


async def test_a_workbook_of_too_many_cells_is_refused_before_it_is_read(
    edge_client: httpx.AsyncClient,
) -> None:
    """One merged range over a whole sheet (17 billion cells to openpyxl) in a small file:
    refused at once, as one whose XML holds more than MAX_CELLS cells."""
    huge = _rewritten(make_xlsx(), "xl/worksheets/sheet1.xml", b'"A1:C1"', b'"A1:XFD1048576"')
    assert b"XFD1048576" in zipfile.ZipFile(io.BytesIO(huge)).read("xl/worksheets/sheet1.xml")
    error = assert_error(await post_file(edge_client, "huge.xlsx", huge), 413, "payload_too_large")
    assert f"{MAX_CELLS:,}" in error["message"]
    broken = _rewritten(make_xlsx(), "xl/worksheets/sheet1.xml", b'"A1:C1"', b'"A1:??"')
    assert_error(await post_file(edge_client, "broken.xlsx", broken), 422, "invalid_request")
