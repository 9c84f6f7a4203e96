"""PDF files (tolk.translation.pdf) without a server: registered with a .docx output, read in
reading order, and the paragraph details (hyphens, numbered items, wide scripts)."""

from __future__ import annotations

from tests.support.samples.pdf import make_pdf
from tolk.translation import pdf
from tolk.translation.files import FILE_TYPES


def test_pdf_is_registered_as_a_docx_output() -> None:
    assert FILE_TYPES[".pdf"].kind == "pdf"
    assert FILE_TYPES[".pdf"].output == ".docx"
    assert not FILE_TYPES[".pdf"].text


def test_the_pdf_is_read_in_reading_order() -> None:
    """The document as opened, before translation: what the .docx will hold."""
    source = make_pdf()
    paras, pages = pdf._read("report.pdf", source, 64 << 20)
    assert pages == 2
    texts = [p.text for p in paras]
    assert texts == [
        "A Report on Batching",
        "Why batching helps",
        "Continuous batching keeps the GPU busy all day, for example when many requests "
        "arrive at once and the queue stays short while the server answers every client "
        "in turn.",
        "The first item of the list",
        "The second item of the list",
        "Tolk demo report",
        "Page 1",
        "Results",
        "The measured throughput doubled on one GPU when the requests were batched together.",
        "Tolk demo report",
        "Page 2",
    ]
    body, margins = pdf._without_repeated(paras, pages)
    assert "Page 1" not in [p.text for p in body]
    assert "Tolk demo report" not in [p.text for p in body]
    assert margins == {"bottom": "Tolk demo report"}


def test_pdf_paragraph_details() -> None:
    """Hyphens kept where the next line is capitalised, numbered items, wide scripts."""
    chars = [(c, (False, False)) for c in "Jean-"]
    pdf._join(chars, [("P", (False, False))])  # type: ignore[arg-type]
    assert "".join(c for c, _ in chars) == "Jean-"
    chars = [(c, (False, False)) for c in "exam-"]
    pdf._join(chars, [("p", (False, False))])  # type: ignore[arg-type]
    assert "".join(c for c, _ in chars) == "exam"
    chars = [(c, (False, False)) for c in "日本"]
    pdf._join(chars, [("語", (False, False))])  # type: ignore[arg-type]
    assert "".join(c for c, _ in chars) == "日本"
    chars = [(c, (False, False)) for c in "word"]
    pdf._join(chars, [("next", (False, False))])  # type: ignore[arg-type]
    assert "".join(c for c, _ in chars) == "word "
    bold, plain = (True, False), (False, False)
    spans = pdf._spans([("a", bold), (" ", None), ("b", plain), (" ", None), ("c", plain)])
    assert spans == [("a", bold), (" b c", plain)]
