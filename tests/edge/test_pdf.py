"""PDF files translated through the in-process server over stand-in engines (edge): real
PDFs written with reportlab, the translation a .docx read back with python-docx (its
paragraphs in the PDF's reading order, headings, lists, bold and italic runs, a page break
between pages, every text translated); scans, encrypted PDFs, damaged files, too many pages,
a FlateDecode bomb and a reference cycle refused with a 4xx."""

from __future__ import annotations

import io
import time
import zlib
from typing import Any

import docx
import httpx
import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
from reportlab.lib.pdfencrypt import StandardEncryption  # type: ignore[import-untyped]
from reportlab.lib.utils import ImageReader  # type: ignore[import-untyped]
from reportlab.pdfgen import canvas  # type: ignore[import-untyped]

from tests.support.errors import assert_error
from tests.support.files import post_file
from tests.support.samples.pdf import BODY, draw_text_line, make_pdf
from tolk.translation import pdf
from tolk.translation.files import DOCX


def _styled(paragraph: Any) -> list[tuple[bool, bool]]:
    return [(bool(r.bold), bool(r.italic)) for r in paragraph.runs if r.text]


async def test_a_pdf_comes_back_as_a_translated_docx(edge_client: httpx.AsyncClient) -> None:
    response = await post_file(edge_client, "report.pdf", make_pdf())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == DOCX
    assert response.headers["content-disposition"].endswith("report.docx")
    assert "report.pdf" not in response.headers["content-disposition"]
    translated = docx.Document(io.BytesIO(response.content))
    paragraphs = translated.paragraphs
    assert [p.style.name if p.style else None for p in paragraphs] == [
        "Heading 1",
        "Heading 2",
        "Normal",
        "List Bullet",
        "List Bullet",
        "Heading 2",
        "Normal",
    ]
    breaks = [bool(p.paragraph_format.page_break_before) for p in paragraphs]
    assert breaks == [False] * 5 + [True, False]
    # The body paragraph keeps its runs: plain, bold, plain, italic, plain.
    assert _styled(paragraphs[2]) == [
        (False, False),
        (True, False),
        (False, False),
        (False, True),
        (False, False),
    ]
    assert _styled(paragraphs[0]) == [(False, False)]  # a heading's bold is its style's
    originals = [
        "A Report on Batching",
        "Why batching helps",
        "Continuous batching",
        "The first item of the list",
        "The second item of the list",
        "Results",
        "The measured throughput",
    ]
    for paragraph, original in zip(paragraphs, originals, strict=True):
        assert paragraph.text.strip()
        assert original not in paragraph.text
        assert "\u2022" not in paragraph.text  # the bullet is the list style's
    bold = [r.text for r in paragraphs[2].runs if r.bold]
    assert bold
    assert bold != ["busy"]
    footer = translated.sections[0].footer.paragraphs[0].text
    assert footer.strip()
    assert footer != "Tolk demo report"
    assert "Page" not in " ".join(p.text for p in paragraphs)


def _scan() -> bytes:
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4)
    picture = Image.new("RGB", (200, 100), "white")
    page.drawImage(ImageReader(picture), 72, 500, 400, 200)
    page.showPage()
    page.drawImage(ImageReader(picture), 72, 500, 400, 200)
    page.save()
    return out.getvalue()


def _encrypted() -> bytes:
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4, encrypt=StandardEncryption("secret", canPrint=0))
    draw_text_line(page, 72, 700, [("A secret text that only the password opens.", BODY)])
    page.save()
    return out.getvalue()


async def test_scans_encrypted_and_damaged_pdfs_are_refused(edge_client: httpx.AsyncClient) -> None:
    scan = assert_error(await post_file(edge_client, "scan.pdf", _scan()), 422, "invalid_request")
    assert "'scan.pdf' has no text layer" in scan["message"]
    assert "run OCR first" in scan["message"]
    locked = assert_error(
        await post_file(edge_client, "locked.pdf", _encrypted()), 422, "invalid_request"
    )
    assert "password" in locked["message"]
    garbage = assert_error(
        await post_file(edge_client, "x.pdf", b"\x00garbage" * 50), 422, "invalid_request"
    )
    assert "not a PDF" in garbage["message"]
    assert garbage["field"] == "file"
    damaged = make_pdf()[:300]  # the header, then cut off
    broken = assert_error(await post_file(edge_client, "cut.pdf", damaged), 422, "invalid_request")
    assert "'cut.pdf'" in broken["message"]


async def test_too_many_pages_are_refused(
    edge_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pdf, "MAX_PAGES", 3)
    assert (await post_file(edge_client, "three.pdf", make_pdf(3))).status_code == 200
    error = assert_error(
        await post_file(edge_client, "four.pdf", make_pdf(4)), 413, "payload_too_large"
    )
    assert "more than 3 pages" in error["message"]


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (numbered from 1; the first is the catalogue), its xref table
    right."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def _page_with(content: bytes, length: bytes, *more: bytes) -> bytes:
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            b"<< /Length "
            + length
            + b" /Filter /FlateDecode >>\nstream\n"
            + content
            + b"\nendstream",
            *more,
        ]
    )


def _bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(9)
    chunk = b" " * (1 << 24)
    deflated = b"".join(packer.compress(chunk) for _ in range(inflated >> 24)) + packer.flush()
    return _page_with(deflated, b"%d" % len(deflated))


async def test_a_flate_bomb_is_refused_fast(edge_client: httpx.AsyncClient) -> None:
    bomb = _bomb(1 << 30)  # 1 GiB of content stream
    assert len(bomb) < 2 << 20
    started = time.monotonic()
    error = assert_error(await post_file(edge_client, "bomb.pdf", bomb), 413, "payload_too_large")
    assert time.monotonic() - started < 10
    assert "max_unzipped_bytes" in error["message"]


async def test_a_reference_cycle_is_refused(
    edge_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/Length 5 0 R, 5 is 6 0 R, 6 is 5 0 R: pdfminer's resolve1 would loop for ever."""
    monkeypatch.setattr(pdf, "MAX_LOOKUPS", 50_000)
    content = zlib.compress(b"BT /F1 12 Tf 72 700 Td (Hello there) Tj ET")
    cyclic = _page_with(content, b"5 0 R", b"6 0 R", b"5 0 R")
    started = time.monotonic()
    response = await post_file(edge_client, "cycle.pdf", cyclic)
    assert time.monotonic() - started < 30
    error = assert_error(response, 413, "payload_too_large")
    assert "look-ups" in error["message"]
