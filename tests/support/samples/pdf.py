"""PDF files made with reportlab: pages of body text, bold and italic runs, a footer."""

from __future__ import annotations

import io
from typing import Any

from reportlab.lib.pagesizes import A4  # type: ignore[import-untyped]
from reportlab.pdfgen import canvas  # type: ignore[import-untyped]

Piece = tuple[str, str]  # text, font


BODY = "Helvetica"


BOLD = "Helvetica-Bold"


ITALIC = "Helvetica-Oblique"


def draw_text_line(page: Any, x: float, y: float, pieces: list[Piece], size: float = 10) -> None:
    text = page.beginText(x, y)
    for words, font in pieces:
        text.setFont(font, size)
        text.textOut(words)
    page.drawText(text)


def _footer(page: Any, number: int) -> None:
    draw_text_line(page, 72, 30, [("Tolk demo report", BODY)], 8)
    draw_text_line(page, 500, 30, [(f"Page {number}", BODY)], 8)


def make_pdf(pages: int = 2) -> bytes:
    """A report: a title, headings, a paragraph wrapping over lines (bold and italic words,
    a word hyphenated at a line's end), a bulleted list, a footer on every page."""
    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=A4)
    top = A4[1] - 72
    draw_text_line(page, 72, top, [("A Report on Batching", BOLD)], 24)
    draw_text_line(page, 72, top - 40, [("Why batching helps", BOLD)], 14)
    body = [
        [
            ("Continuous batching keeps the GPU ", BODY),
            ("busy", BOLD),
            (" all day, for exam-", BODY),
        ],
        [("ple when many requests arrive ", BODY), ("at once", ITALIC), (" and the queue", BODY)],
        [("stays short while the server answers every client in turn.", BODY)],
    ]
    for n, pieces in enumerate(body):
        draw_text_line(page, 72, top - 64 - 14 * n, pieces)
    draw_text_line(page, 72, top - 130, [("\u2022 The first item of the list", BODY)])
    draw_text_line(page, 72, top - 144, [("\u2022 The second item of the list", BODY)])
    _footer(page, 1)
    for number in range(2, pages + 1):
        page.showPage()
        draw_text_line(page, 72, top, [("Results", BOLD)], 14)
        draw_text_line(
            page, 72, top - 24, [("The measured throughput doubled on one GPU when the", BODY)]
        )
        draw_text_line(page, 72, top - 38, [("requests were batched together.", BODY)])
        _footer(page, number)
    page.save()
    return out.getvalue()
