"""PDF files (.pdf, read with pdfminer.six): the text layer translated and returned as a Word
document (.docx), as DeepL does with `output_format=docx`.

What is translated: the text a PDF draws as text (its "selectable" text), page by page.
pdfminer's layout analysis (LAParams: characters into lines, lines into text boxes, the boxes
in reading order, columns included) gives the boxes; each box's lines are joined into
paragraphs: a word broken at a line's end (`exam-` / `ple`) is joined again when the next
line starts in lower case, a line starting with a list marker (•, -, *, 1., a)) starts a list
item (a bulleted one becomes a "List Bullet" paragraph, its marker Word's; a numbered one a
"List Paragraph" that keeps its number), and a change of font size starts a paragraph. Font
sizes above the document's body size (the size most of its characters have) make headings:
the largest "Heading 1", the next "Heading 2", smaller ones "Heading 3". Bold and italic
come from the fonts' names (Bold, Black, Heavy, Semibold; Italic, Oblique) and become bold
and italic runs, which are translated as a .docx's are (tolk.translation.office: a paragraph
is one unit, each formatted run a paired placeholder). Each page after the first starts
with a page break. Text inside form XObjects (figures) is read too, after the page's own.

What is left: images and drawings (not carried over), the exact layout (positions, columns,
fonts, colours, sizes: the .docx takes Word's default styles), links, annotations, form
fields and the outline. Tables are not recognised as tables: their cells' text comes out as
paragraphs in reading order. Headers and footers repeated on most pages (the top or bottom
tenth of the page, the same text on at least two pages and half of them, numbers aside) are
taken out of the body: one without digits becomes the .docx's own header or footer
(translated), one with digits (a page number, "Page 3 of 9") is dropped, as Word numbers its
own pages. Characters a font maps to no Unicode (pdfminer's "(cid:N)") are dropped. A PDF's
permission flags (no copying) are not enforced: the owner translating their document is
what the server is for. A PDF needing a password, or one with no text layer (a scan: fewer
than MIN_TEXT_CHARS characters of text on all its pages), is refused with a 422 saying what
to do; pages that are scans in a PDF that has text elsewhere come out empty.

Why a .docx: writing the PDF again with the translated text in its original layout (text
that grows or shrinks reflowed into the same boxes, fonts subset for the new characters)
is not something a licence-compatible library does well; PyMuPDF, which comes closest, is
AGPL-3.0 and tolk is Apache-2.0. A Word document keeps what the translation can keep
(paragraphs, headings, lists, bold and italic, pages) and is editable.

Bounds: pdfminer decodes streams without a limit (`zlib.decompress`, LZW and run-length
decoding, and a byte-at-a-time, quadratic salvage of streams with a bad checksum), so every
stream is decoded here instead, by `_Stream`: each filter's output bounded, all decoded
streams together at most `max_unzipped` bytes (server.max_unzipped_bytes: a FlateDecode bomb
is a 413 after inflating that much, not 1 GiB). Content interpreted (pages' and form
XObjects' streams, each time a form is drawn) is at most MAX_CONTENT_BYTES, characters drawn
at most MAX_PAGE_GLYPHS a page and MAX_GLYPHS a file, pages at most MAX_PAGES; a page with
more than MAX_GROUPED_BOXES text boxes is ordered top to bottom instead of by pdfminer's
grouping (quadratic in the boxes). Object look-ups are counted (a reference cycle makes
pdfminer's resolve loop for ever), and the whole reading stops after MAX_SECONDS. Each is a
413. The file's size is already bounded by server.max_file_bytes.
"""

from __future__ import annotations

import io
import re
import time
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from pdfminer.ascii85 import ascii85decode, asciihexdecode
from pdfminer.ccitt import ccittfaxdecode
from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import (
    LAParams,
    LTAnno,
    LTChar,
    LTFigure,
    LTPage,
    LTTextBox,
    LTTextGroup,
    LTTextGroupLRTB,
    LTTextLine,
)
from pdfminer.lzw import LZWDecoder
from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser
from pdfminer.pdftypes import (
    LITERAL_CRYPT,
    LITERALS_ASCII85_DECODE,
    LITERALS_ASCIIHEX_DECODE,
    LITERALS_CCITTFAX_DECODE,
    LITERALS_DCT_DECODE,
    LITERALS_FLATE_DECODE,
    LITERALS_JBIG2_DECODE,
    LITERALS_JPX_DECODE,
    LITERALS_LZW_DECODE,
    LITERALS_RUNLENGTH_DECODE,
    PDFStream,
    stream_value,
)
from pdfminer.runlength import rldecode
from pdfminer.utils import (
    MATRIX_IDENTITY,
    Matrix,
    Rect,
    apply_png_predictor,
    apply_tiff_predictor,
    mult_matrix,
)

from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.files import Opened, runs_opened

MAX_PAGES = 500
MIN_TEXT_CHARS = 10  # fewer (not counting spaces) on all pages: no text layer, a scan
MAX_GLYPHS = 2_000_000  # characters drawn in a file (max_file_chars is 1,000,000)
MAX_PAGE_GLYPHS = 100_000  # characters drawn on one page (a dense page has 5,000)
MAX_CONTENT_BYTES = 64 << 20  # content streams interpreted, forms each time they are drawn
MAX_GROUPED_BOXES = 1_000  # text boxes on a page that pdfminer groups (quadratic) in order
MAX_LOOKUPS = 2_000_000  # indirect objects looked up
MAX_SECONDS = 120.0  # the whole reading, the last resort
HEADER_BAND = 0.1  # the top and bottom tenth of a page: where headers and footers are

_CID = re.compile(r"\(cid:\d+\)")
_BULLET = re.compile(r"^([•◦▪▫‣●○■□➢►▶✓\uf0b7\uf0a7])\s*")
_MARKER = re.compile(r"^([-\u2013\u2014*\u00b7]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+")
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_ITALIC = re.compile(r"italic|oblique|\bit\b|-it$", re.IGNORECASE)
_HYPHENS = ("-", "\u2010", "\u00ad")
_DIGITS = re.compile(r"\d+")

Style = tuple[bool, bool]  # bold, italic
PLAIN: Style = (False, False)


class _Budget:
    """What reading one PDF may still spend: each limit a 413 when passed."""

    def __init__(self, filename: str, max_decoded: int) -> None:
        self.filename = filename
        self.max_decoded = max_decoded
        self.decoded = 0
        self.content = 0
        self.glyphs = 0
        self.page_glyphs = 0
        self.lookups = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def room(self) -> int:
        """Bytes that decoded streams may still take."""
        return self.max_decoded - self.decoded

    def spend_decoded(self, size: int) -> None:
        if size > self.room():
            raise PayloadTooLarge(
                f"'{self.filename}' has streams that decompress to more than "
                f"{self.max_decoded:,} bytes (server.max_unzipped_bytes); split the document",
                field="file",
                limit=self.max_decoded,
            )
        self.decoded += size

    def spend_content(self, size: int) -> None:
        self.content += size
        if self.content > MAX_CONTENT_BYTES:
            self._over(f"more than {MAX_CONTENT_BYTES:,} bytes of page content", MAX_CONTENT_BYTES)
        self.tick()

    def glyph(self) -> None:
        self.glyphs += 1
        self.page_glyphs += 1
        if self.page_glyphs > MAX_PAGE_GLYPHS:
            self._over(f"a page drawing more than {MAX_PAGE_GLYPHS:,} characters", MAX_PAGE_GLYPHS)
        if self.glyphs > MAX_GLYPHS:
            self._over(f"more than {MAX_GLYPHS:,} characters drawn", MAX_GLYPHS)
        if self.glyphs % 4096 == 0:
            self.tick()

    def lookup(self) -> None:
        self.lookups += 1
        if self.lookups > MAX_LOOKUPS:
            self._over(f"more than {MAX_LOOKUPS:,} object look-ups", MAX_LOOKUPS)
        if self.lookups % 4096 == 0:
            self.tick()

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            self._over(f"more than {MAX_SECONDS:.0f} seconds of reading", MAX_SECONDS)

    def _over(self, what: str, limit: float) -> None:
        raise PayloadTooLarge(
            f"'{self.filename}' takes {what}; at most that is accepted per PDF, split the document",
            field="file",
            limit=limit,
        )


class _Stream(PDFStream):
    """A stream decoded within the budget: pdfminer's own decoding has no size limit."""

    def __init__(self, stream: PDFStream, budget: _Budget) -> None:
        super().__init__(stream.attrs, stream.rawdata or b"", stream.decipher)
        self.budget = budget

    def decode(self) -> None:
        budget = self.budget
        budget.tick()
        data = self.rawdata or b""
        if self.decipher:
            assert self.objid is not None
            assert self.genno is not None
            data = self.decipher(self.objid, self.genno, data, self.attrs)
        room = budget.room()
        for kind, params in self.get_filters():
            data = _decoded(kind, params, data, room)
            if len(data) > room:
                break
            budget.tick()
        budget.spend_decoded(len(data))
        self.data = data
        self.rawdata = None


def _decoded(kind: object, params: Any, data: bytes, room: int) -> bytes:
    """`data` through one filter (and its predictor), at most `room` + 1 bytes of it."""
    if kind in LITERALS_FLATE_DECODE:
        data = _inflated(data, room)
    elif kind in LITERALS_LZW_DECODE:
        data = _unlzw(data, room)
    elif kind in LITERALS_ASCII85_DECODE:
        data = ascii85decode(data)
    elif kind in LITERALS_ASCIIHEX_DECODE:
        data = asciihexdecode(data)
    elif kind in LITERALS_RUNLENGTH_DECODE:
        if _runlength_size(data) > room:
            return b"\0" * (room + 1)
        data = rldecode(data)
    elif kind in LITERALS_CCITTFAX_DECODE:
        columns = int(params.get("Columns", 1728)) if isinstance(params, dict) else 1728
        if (max(columns, 1) + 7) // 8 * len(data) * 8 > room:  # a row per bit at most
            return b"\0" * (room + 1)
        data = ccittfaxdecode(data, params)
    elif kind in LITERALS_DCT_DECODE or kind in LITERALS_JBIG2_DECODE:
        return data  # images, left encoded as pdfminer leaves them
    elif kind in LITERALS_JPX_DECODE:
        return data
    elif kind == LITERAL_CRYPT:
        raise InvalidRequest("the PDF uses the /Crypt stream filter, which is not supported")
    else:
        raise InvalidRequest(f"the PDF uses an unknown stream filter ({kind!r})")
    if isinstance(params, dict) and "Predictor" in params:
        predictor = int(params["Predictor"])
        colors = int(params.get("Colors", 1))
        columns = int(params.get("Columns", 1))
        bits = int(params.get("BitsPerComponent", 8))
        if predictor == 2:
            data = apply_tiff_predictor(colors, columns, bits, data)
        elif predictor >= 10:
            data = apply_png_predictor(predictor, colors, columns, bits, data)
    return data


def _inflated(data: bytes, room: int) -> bytes:
    """FlateDecode, at most `room` + 1 bytes; a stream with a bad checksum or cut short gives
    what it holds (pdfminer salvages those a byte at a time, in quadratic time)."""
    try:
        return zlib.decompressobj().decompress(data, room + 1)
    except zlib.error:
        try:  # raw deflate after the two-byte header: no checksum to fail
            return zlib.decompressobj(-zlib.MAX_WBITS).decompress(data[2:], room + 1)
        except zlib.error:
            return b""  # as pdfminer: a stream it cannot inflate is empty


def _unlzw(data: bytes, room: int) -> bytes:
    out = bytearray()
    for chunk in LZWDecoder(io.BytesIO(data)).run():
        out += chunk
        if len(out) > room:
            break
    return bytes(out)


def _runlength_size(data: bytes) -> int:
    size = at = 0
    while at < len(data):
        length = data[at]
        if length == 128:
            break
        if length < 128:
            size += length + 1
            at += length + 2
        else:
            size += 257 - length
            at += 2
    return size


class _Parser(PDFParser):
    """pdfminer's parser, its streams decoded within the budget. Streams are never stored in
    object streams, so every stream of the file comes through here."""

    def __init__(self, data: bytes, budget: _Budget) -> None:
        super().__init__(io.BytesIO(data))
        self.budget = budget

    def do_keyword(self, pos: int, token: Any) -> None:
        super().do_keyword(pos, token)
        if token is self.KEYWORD_STREAM and self.curstack:
            at, obj = self.curstack[-1]
            if type(obj) is PDFStream:
                self.curstack[-1] = (at, _Stream(obj, self.budget))


class _Document(PDFDocument):
    def __init__(self, parser: _Parser, budget: _Budget) -> None:
        self.budget = budget
        super().__init__(parser)

    def getobj(self, objid: int) -> object:
        self.budget.lookup()
        return super().getobj(objid)


class _Page(LTPage):
    def group_textboxes(self, laparams: LAParams, boxes: Sequence[LTTextBox]) -> list[LTTextGroup]:
        return _grouped(super().group_textboxes, laparams, boxes)


class _Figure(LTFigure):
    def group_textboxes(self, laparams: LAParams, boxes: Sequence[LTTextBox]) -> list[LTTextGroup]:
        return _grouped(super().group_textboxes, laparams, boxes)


def _grouped(group: Any, laparams: LAParams, boxes: Sequence[LTTextBox]) -> list[LTTextGroup]:
    """pdfminer's grouping (its reading order) for a page of few boxes; top-left to bottom-
    right for many, as its grouping takes time and memory quadratic in them."""
    if len(boxes) > MAX_GROUPED_BOXES:
        return [LTTextGroupLRTB(list(boxes))]
    result: list[LTTextGroup] = group(laparams, boxes)
    return result


class _Device(PDFPageAggregator):
    def __init__(self, resources: PDFResourceManager, budget: _Budget) -> None:
        super().__init__(resources, laparams=LAParams(all_texts=True))
        self.budget = budget

    def begin_page(self, page: PDFPage, ctm: Matrix) -> None:
        super().begin_page(page, ctm)
        self.cur_item = _Page(self.pageno, self.cur_item.bbox)
        self.budget.page_glyphs = 0
        self.budget.tick()

    def begin_figure(self, name: str, bbox: Rect, matrix: Matrix) -> None:
        self._stack.append(self.cur_item)
        self.cur_item = _Figure(name, bbox, mult_matrix(matrix, self.ctm))

    def render_char(self, *args: Any, **kwargs: Any) -> float:
        self.budget.glyph()
        width: float = super().render_char(*args, **kwargs)
        return width


class _Interpreter(PDFPageInterpreter):
    def __init__(self, resources: PDFResourceManager, device: _Device) -> None:
        super().__init__(resources, device)
        self.budget = device.budget
        self.bounded = device

    def dup(self) -> _Interpreter:
        return _Interpreter(self.rsrcmgr, self.bounded)

    def render_contents(
        self,
        resources: dict[object, object],
        streams: Sequence[object],
        ctm: Matrix = MATRIX_IDENTITY,
    ) -> None:
        """A page's or a form's content, charged each time it is drawn (a form drawn by
        forms drawn by forms multiplies)."""
        size = 0
        for stream in streams:
            value = stream_value(stream)
            size += len(value.get_data()) if isinstance(value, PDFStream) else 0
        self.budget.spend_content(size)
        super().render_contents(resources, streams, ctm)


@dataclass
class _Para:
    """A paragraph read from the PDF: its characters with their styles (None: a space that
    takes its neighbours' style), its font size, what kind of paragraph it is."""

    chars: list[tuple[str, Style | None]] = field(default_factory=list)
    sizes: Counter[float] = field(default_factory=Counter)
    kind: str = "body"  # body, bullet, number; headings are found from the sizes later
    marker_x: float = 0.0
    page: int = 0
    band: str = ""  # "top", "bottom" or "" (where a header or footer would be)

    @property
    def text(self) -> str:
        return "".join(c for c, _ in self.chars).strip()

    @property
    def size(self) -> float:
        return self.sizes.most_common(1)[0][0] if self.sizes else 0.0


@dataclass(frozen=True)
class _Line:
    chars: list[tuple[str, Style | None]]
    sizes: Counter[float]
    x0: float

    @property
    def text(self) -> str:
        return "".join(c for c, _ in self.chars)


def open_file(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """The PDF's text as a new .docx's paragraphs, translated as a .docx is."""
    import docx

    from tolk.translation import office

    paras, pages = _read(filename, data, max_unzipped)
    if sum(len(p.text.replace(" ", "")) for p in paras) < MIN_TEXT_CHARS:
        raise InvalidRequest(
            f"'{filename}' has no text layer (a scanned document?); tolk translates PDFs "
            "with selectable text — run OCR first",
            field="file",
        )
    document = docx.Document()
    body, margins = _without_repeated(paras, pages)
    _write(document, body, margins)
    runs = [office.text_runs(p) for p in office.paragraphs(document)]
    # FILE_TYPES[".pdf"].output makes files.py answer with the .docx's name and media type.
    return runs_opened([office.docx_group(r) for r in runs], document.save)


def _read(filename: str, data: bytes, max_unzipped: int) -> tuple[list[_Para], int]:
    """The PDF's paragraphs in reading order, and its number of pages."""
    if b"%PDF-" not in data[:1024]:
        raise InvalidRequest(
            f"'{filename}' is not a PDF (it does not start with %PDF-); check that it is one "
            "and not damaged",
            field="file",
        )
    budget = _Budget(filename, max_unzipped)
    try:
        document = _Document(_Parser(data, budget), budget)
        pages = list(islice(PDFPage.create_pages(document), MAX_PAGES + 1))
        if len(pages) > MAX_PAGES:
            raise PayloadTooLarge(
                f"'{filename}' has more than {MAX_PAGES} pages; at most {MAX_PAGES} are "
                "accepted, split the document",
                field="file",
                limit=MAX_PAGES,
            )
        if not pages:
            raise InvalidRequest(
                f"'{filename}' has no pages; check that it is not damaged", field="file"
            )
        device = _Device(PDFResourceManager(caching=True), budget)
        interpreter = _Interpreter(device.rsrcmgr, device)
        paras: list[_Para] = []
        for number, page in enumerate(pages):
            interpreter.process_page(page)
            paras += _page_paragraphs(device.get_result(), number)
        return paras, len(pages)
    except (InvalidRequest, PayloadTooLarge):
        raise
    except PDFPasswordIncorrect as exc:
        raise InvalidRequest(
            f"'{filename}' is encrypted with a password; save a copy without the password "
            "and retry",
            field="file",
        ) from exc
    except PDFEncryptionError as exc:
        raise InvalidRequest(
            f"'{filename}' is encrypted in a way tolk cannot read ({exc}); save a copy "
            "without encryption and retry",
            field="file",
        ) from exc
    except MemoryError:
        raise
    except Exception as exc:  # pdfminer raises its own, struct, zlib, KeyError, RecursionError
        raise InvalidRequest(
            f"'{filename}' could not be read as a PDF ({type(exc).__name__}); check that it "
            "is one and not damaged",
            field="file",
        ) from exc


def _boxes(container: Iterable[Any]) -> Iterator[LTTextBox]:
    for item in container:
        if isinstance(item, LTTextBox):
            yield item
        elif isinstance(item, LTFigure):
            yield from _boxes(item)


def _page_paragraphs(page: LTPage, number: int) -> list[_Para]:
    paras: list[_Para] = []
    height = page.height or 1.0
    for box in _boxes(page):
        band = ""
        if box.y0 >= page.y1 - HEADER_BAND * height:
            band = "top"
        elif box.y1 <= page.y0 + HEADER_BAND * height:
            band = "bottom"
        current: _Para | None = None
        for n, item in enumerate(x for x in box if isinstance(x, LTTextLine)):
            line = _line(item)
            if not line.text.strip():
                continue
            kind, marker_x = _list_marker(line, n == 0, current)
            level = max(line.sizes, key=lambda s: line.sizes[s]) if line.sizes else 0.0
            starts = (
                current is None
                or kind != "body"
                or (current.kind != "body" and line.x0 <= current.marker_x + 1)
                or abs(level - current.size) > 0.5
            )
            if starts or current is None:
                current = _Para(kind=kind, marker_x=marker_x, page=number, band=band)
                paras.append(current)
                chars = line.chars
                if kind == "bullet":
                    chars = _drop_marker(chars)
            else:
                _join(current.chars, line.chars)
                chars = line.chars
            current.chars += chars
            current.sizes.update(line.sizes)
    return [p for p in paras if p.text]


def _line(line: LTTextLine) -> _Line:
    chars: list[tuple[str, Style | None]] = []
    sizes: Counter[float] = Counter()
    for item in line:
        if isinstance(item, LTChar):
            text = item.get_text()
            if not chars and _CID.fullmatch(text):
                text = "\u2022"  # an unmapped glyph starting a line: a bullet (a symbol font's)
            text = _CID.sub("", text)
            text = "".join(
                unicodedata.normalize("NFKC", c) if "\ufb00" <= c <= "\ufb06" else c for c in text
            )
            if not text:
                continue
            name = item.fontname.split("+", 1)[-1]
            style = (bool(_BOLD.search(name)), bool(_ITALIC.search(name)))
            for c in text:
                chars.append((" ", None) if c.isspace() else (c, style))
                if not c.isspace():
                    sizes[round(item.size * 2) / 2] += 1
        elif isinstance(item, LTAnno) and item.get_text() != "\n":
            chars.append((" ", None))
    while chars and chars[-1][0] == " ":
        chars.pop()
    return _Line(chars, sizes, line.x0)


def _list_marker(line: _Line, first: bool, current: _Para | None) -> tuple[str, float]:
    """Whether the line starts a list item: "bullet", "number" or "body"; and where."""
    text = line.text.lstrip()
    if _BULLET.match(text):
        return "bullet", line.x0
    match = _MARKER.match(text)
    aligned = current is not None and current.kind != "body" and abs(line.x0 - current.marker_x) < 2
    if match and (first or aligned):
        return ("bullet" if match[1] in "-\u2013\u2014*\u00b7" else "number"), line.x0
    return "body", 0.0


def _drop_marker(chars: list[tuple[str, Style | None]]) -> list[tuple[str, Style | None]]:
    text = "".join(c for c, _ in chars)
    stripped = len(text) - len(text.lstrip())
    match = _BULLET.match(text[stripped:]) or _MARKER.match(text[stripped:])
    return chars[stripped + (match.end() if match else 0) :]


def _join(chars: list[tuple[str, Style | None]], following: list[tuple[str, Style | None]]) -> None:
    """End `chars` (a paragraph so far) so that the next line's `following` can be added:
    a word hyphenated at the line's end joined, else a space between (none in scripts
    written without spaces)."""
    if not chars or not following:
        return
    last, first = chars[-1][0], following[0][0]
    before = chars[-2][0] if len(chars) > 1 else ""
    if last in _HYPHENS and before.isalpha() and first.islower():
        chars.pop()
        return
    if last == "\u00ad":
        chars.pop()
        return
    if last in _HYPHENS or (_wide(last) and _wide(first)):
        return
    chars.append((" ", None))


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _without_repeated(paras: list[_Para], pages: int) -> tuple[list[_Para], dict[str, str]]:
    """The paragraphs less the headers and footers repeated on most pages; and those of the
    repeated ones without digits, by band (to be the .docx's header and footer)."""
    if pages < 2:
        return paras, {}
    seen: dict[tuple[str, str], set[int]] = {}
    for p in paras:
        if p.band:
            seen.setdefault((p.band, _DIGITS.sub("#", p.text)), set()).add(p.page)
    repeated = {key for key, on in seen.items() if len(on) >= max(2, (pages + 1) // 2)}
    margins: dict[str, list[str]] = {}
    body: list[_Para] = []
    for p in paras:
        key = (p.band, _DIGITS.sub("#", p.text))
        if key not in repeated:
            body.append(p)
        elif not _DIGITS.search(p.text) and p.text not in margins.setdefault(p.band, []):
            margins[p.band].append(p.text)
    return body, {band: "\n".join(texts) for band, texts in margins.items() if texts}


def _write(document: Any, paras: list[_Para], margins: dict[str, str]) -> None:
    """The paragraphs into the .docx: headings, list items, bold and italic runs, a page
    break before each page's first paragraph (the first page's aside)."""
    from tolk.translation.office import escape_docx

    sizes: Counter[float] = Counter()
    for p in paras:
        sizes.update(p.sizes)
    body = sizes.most_common(1)[0][0] if sizes else 0.0
    heading_sizes = sorted(
        {p.size for p in paras if p.kind == "body" and p.size >= body * 1.15 and body},
        reverse=True,
    )
    page = 0
    for p in paras:
        style = {"bullet": "List Bullet", "number": "List Paragraph"}.get(p.kind)
        heading = p.size in heading_sizes and len(p.text) <= 200
        if heading:
            style = f"Heading {min(heading_sizes.index(p.size) + 1, 3)}"
        paragraph = document.add_paragraph(style=style)
        if p.page != page:
            paragraph.paragraph_format.page_break_before = True
            page = p.page
        spans = _spans(p.chars)
        if heading and len({s for _, s in spans}) == 1:
            spans = [(text, PLAIN) for text, _ in spans]  # the heading style is its look
        for text, (bold, italic) in spans:
            run = paragraph.add_run(escape_docx(text))
            if bold:
                run.bold = True
            if italic:
                run.italic = True
    for band, text in margins.items():
        section = document.sections[0]
        part = section.header if band == "top" else section.footer
        part.paragraphs[0].text = escape_docx(text)


def _spans(chars: list[tuple[str, Style | None]]) -> list[tuple[str, Style]]:
    """The paragraph's text as runs of one style; a space between two styles is plain, so
    that no formatted run ends in one."""
    text = "".join(c for c, _ in chars)
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    chars = chars[start:end]
    following: list[Style] = []  # the style of the next styled character, from each on
    upcoming = PLAIN
    for _, style in reversed(chars):
        following.append(upcoming)
        upcoming = style if style is not None else upcoming
    following.reverse()
    styles: list[Style] = []
    for (_, style), after in zip(chars, following, strict=True):
        if style is None:
            before = styles[-1] if styles else PLAIN
            style = before if before == after else PLAIN
        styles.append(style)
    spans: list[tuple[list[str], Style]] = []
    for (c, _), style in zip(chars, styles, strict=True):
        if spans and spans[-1][1] == style:
            spans[-1][0].append(c)
        else:
            spans.append(([c], style))
    return [("".join(text), style) for text, style in spans]
