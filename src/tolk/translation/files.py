"""Files in, the same files out, translated: `POST /translate/file` and `tolk translate`.

The file's type comes from its name's extension. Text formats are decoded as UTF-8 (a byte
order mark is kept), parsed into documents and translated through the same service as every
request; a .docx, .pptx or .xlsx is opened with python-docx, python-pptx or openpyxl, and its
paragraphs (a spreadsheet's string cells) become the documents (tolk.translation.office,
slides, sheets); a gettext .po or .pot with polib, each entry to translate a document
(tolk.translation.gettext); OpenDocument, EPUB, XLIFF, JSON/YAML locale files and PDFs by
their own modules (opendocument, epub, xliff, locales, pdf), each an opener that returns the
file as `Opened`. A PDF comes back as a .docx (`FileType.output`). The zipped files are
checked by `check_archive`, which refuses a zip bomb before any library reads it.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tolk import detect
from tolk.errors import InvalidRequest, PayloadTooLarge, TolkError
from tolk.translation.document import Document
from tolk.translation.formats import Format, Splitter, parse
from tolk.translation.request import TranslationRequest
from tolk.translation.results import Translation
from tolk.translation.service import Translator

if TYPE_CHECKING:  # python-docx is imported when a .docx comes
    from tolk.translation.office import RunGroup

T = TypeVar("T")
Kind = (
    Format
    | Literal[
        "docx", "pptx", "xlsx", "po", "odt", "odp", "ods", "epub", "xliff", "json", "yaml", "pdf"
    ]
)
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@dataclass(frozen=True)
class FileType:
    kind: Kind
    media_type: str
    # The suffix of the translated file where it is another kind (a PDF becomes a .docx:
    # tolk.translation.pdf); None: the file's own.
    output: str | None = None

    def translated_name(self, filename: str) -> str:
        """What a translated file of this kind is called: `filename`, its suffix changed if
        the translation is another kind of file."""
        return filename if self.output is None else str(PurePath(filename).with_suffix(self.output))

    @property
    def text(self) -> bool:
        """Whether the file is UTF-8 text (else binary: the zipped office, OpenDocument and
        EPUB files, a PDF)."""
        return self.kind not in ("docx", "pptx", "xlsx", "odt", "odp", "ods", "epub", "pdf")

    @property
    def parsed(self) -> bool:
        """Whether it is one of tolk's text formats (tolk.translation.formats), rather than
        a file a library opens (the office files, gettext's catalogues)."""
        return self.kind not in _OPENERS


FILE_TYPES: dict[str, FileType] = {
    ".txt": FileType("text", "text/plain; charset=utf-8"),
    ".md": FileType("markdown", "text/markdown; charset=utf-8"),
    ".markdown": FileType("markdown", "text/markdown; charset=utf-8"),
    ".html": FileType("html", "text/html; charset=utf-8"),
    ".htm": FileType("html", "text/html; charset=utf-8"),
    ".srt": FileType("srt", "application/x-subrip; charset=utf-8"),
    ".vtt": FileType("vtt", "text/vtt; charset=utf-8"),
    ".docx": FileType("docx", DOCX),
    ".pptx": FileType("pptx", PPTX),
    ".xlsx": FileType("xlsx", XLSX),
    ".po": FileType("po", "text/x-gettext-translation; charset=utf-8"),
    ".pot": FileType("po", "text/x-gettext-translation; charset=utf-8"),
    ".odt": FileType("odt", "application/vnd.oasis.opendocument.text"),
    ".odp": FileType("odp", "application/vnd.oasis.opendocument.presentation"),
    ".ods": FileType("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ".epub": FileType("epub", "application/epub+zip"),
    ".xlf": FileType("xliff", "application/xliff+xml; charset=utf-8"),
    ".xliff": FileType("xliff", "application/xliff+xml; charset=utf-8"),
    ".json": FileType("json", "application/json; charset=utf-8"),
    ".yaml": FileType("yaml", "application/yaml; charset=utf-8"),
    ".yml": FileType("yaml", "application/yaml; charset=utf-8"),
    ".pdf": FileType("pdf", "application/pdf", output=".docx"),
}
_BOM = "\ufeff"


class UnsupportedFileType(TolkError):
    code = "unsupported_file_type"
    status = 415


def file_type(filename: str) -> FileType:
    suffix = PurePath(filename).suffix.lower()
    if suffix not in FILE_TYPES:
        raise UnsupportedFileType(
            f"cannot translate '{filename}': tolk translates {', '.join(FILE_TYPES)} files",
            supported=list(FILE_TYPES),
        )
    return FILE_TYPES[suffix]


@dataclass(frozen=True)
class TranslatedFile:
    content: bytes
    kind: FileType  # the uploaded file's type
    translation: Translation

    @property
    def media_type(self) -> str:
        """The translated file's media type: its kind's, or that of the kind it becomes."""
        output = self.kind.output
        return self.kind.media_type if output is None else FILE_TYPES[output].media_type

    def name(self, filename: str) -> str:
        """What the translated file is called: `filename`, its suffix changed if the file's
        kind changed (a PDF comes back as a .docx)."""
        return self.kind.translated_name(filename)


@dataclass(frozen=True)
class Opened:
    """A file as the service takes it: its documents, its characters of text, and how the
    translated documents become the file again."""

    documents: Callable[[Splitter], Sequence[Document]]
    characters: int
    # The translation made into the file: its texts, and where the file keeps them, more
    # (a PO file marks what was flagged, and names the target language).
    save: Callable[[Translation], bytes]
    sample: str  # text to detect the source language from


async def translate_file(
    translator: Translator, filename: str, data: bytes, request: TranslationRequest
) -> TranslatedFile:
    """A file translated as `request` asks (its glossary and instructions too); the format
    is the file's own."""
    kind, opened = await _opened(translator, filename, data)
    translation = await translator.translate_documents(
        opened.documents,
        opened.characters,
        request,
        sample=opened.sample,
    )
    content = await translator.offload(opened.save, translation)
    return TranslatedFile(content, kind, translation)


async def file_characters(translator: Translator, filename: str, data: bytes) -> int:
    """The characters of text a file has, as translate_file counts (and charges) them,
    without translating it: opened as translate_file opens it, so refused as it would be
    (its type, UTF-8, an office file's archive and size limits, more than `max_file_chars`). For
    admission against a quota before the translation starts."""
    _, opened = await _opened(translator, filename, data)
    return opened.characters


async def _opened(translator: Translator, filename: str, data: bytes) -> tuple[FileType, Opened]:
    """The file's type and the file opened, within `max_file_chars`. Opening grows with the
    file: in the preparation pool, off the event loop."""
    kind = file_type(filename)
    if not kind.parsed:
        opener = _OPENERS[kind.kind]
        opened = await translator.offload(
            opener, filename, data, translator.limits.max_unzipped_bytes
        )
    else:
        in_context = translator.limits.subtitles_in_context
        opened = await translator.offload(_open_text, filename, data, kind.kind, in_context)
    limit = translator.limits.max_file_chars
    if opened.characters > limit:
        raise PayloadTooLarge(
            f"the file has {opened.characters} characters of text; at most {limit} are "
            "accepted per file, split it into smaller files",
            field="file",
            limit=limit,
        )
    return kind, opened


def decoded(filename: str, data: bytes) -> tuple[str, str]:
    """The file's text and its byte order mark ("" if none), or a 400 if it is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"'{filename}' is not UTF-8 text (byte {exc.start}); save it as UTF-8 and retry",
            field="file",
        ) from exc
    bom = _BOM if text.startswith(_BOM) else ""
    return text.removeprefix(bom), bom


def _open_text(filename: str, data: bytes, fmt: Format, subtitles_in_context: bool) -> Opened:
    text, bom = decoded(filename, data)
    return Opened(
        lambda cut: [parse(fmt, text, cut, subtitles_in_context=subtitles_in_context)],
        len(text),
        lambda translation: (bom + translation.texts[0]).encode("utf-8"),
        text[: detect.MAX_CHARS],
    )


def check_archive(
    filename: str, data: bytes, max_bytes: int, kind: str, max_members: int = 10_000
) -> None:
    """Refuse a zip container (docx and the formats to come) whose members would inflate
    past `max_bytes` together, or that holds more than `max_members`, before any parser reads
    it: a 1 MB .docx whose document.xml inflates to 1 GiB had cost 2 GB of memory. The sizes
    come from the archive's directory; Python's zipfile never inflates a member past its
    stated size (it fails the member's CRC instead), so the check holds for a lying one."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise InvalidRequest(
            f"'{filename}' could not be read as a {kind} ({exc}); check that it is one and "
            "not damaged",
            field="file",
        ) from exc
    if len(members) > max_members:
        raise PayloadTooLarge(
            f"'{filename}' holds {len(members)} archive members; at most {max_members} are "
            "accepted",
            field="file",
            limit=max_members,
        )
    inflated = sum(m.file_size for m in members)
    if inflated > max_bytes:
        raise PayloadTooLarge(
            f"'{filename}' inflates to {inflated:,} bytes; at most {max_bytes:,} are accepted "
            "(server.max_unzipped_bytes): split the document",
            field="file",
            limit=max_bytes,
        )


def loaded(
    filename: str, data: bytes, max_unzipped: int, what: tuple[str, str], load: Callable[[], T]
) -> T:
    """An office file's document, `load()`ed once its archive passed check_archive; what the
    library cannot read is a 422 naming `what` (the kind, the legacy suffix it is not)."""
    kind, suffix = what
    check_archive(filename, data, max_unzipped, f"{kind} ({suffix}x, a zip archive)")
    try:
        return load()
    except (InvalidRequest, PayloadTooLarge):
        raise
    except Exception as exc:  # the libraries raise zipfile, lxml, KeyError and their own alike
        raise InvalidRequest(
            f"'{filename}' could not be read as a {kind} ({type(exc).__name__}); check that "
            f"it is a {suffix}x (not {suffix}) and not damaged",
            field="file",
        ) from exc


def _open_docx(filename: str, data: bytes, max_unzipped: int) -> Opened:
    import docx

    from tolk.translation import office

    what = ("Word document", ".doc")
    document = loaded(filename, data, max_unzipped, what, lambda: docx.Document(io.BytesIO(data)))
    runs = [office.text_runs(p) for p in office.paragraphs(document)]
    return runs_opened([office.docx_group(r) for r in runs], document.save)


def _open_pptx(filename: str, data: bytes, max_unzipped: int) -> Opened:
    import pptx

    from tolk.translation import slides

    what = ("PowerPoint presentation", ".ppt")
    presentation = loaded(
        filename, data, max_unzipped, what, lambda: pptx.Presentation(io.BytesIO(data))
    )
    return runs_opened(slides.run_groups(presentation), presentation.save)


def _open_xlsx(filename: str, data: bytes, max_unzipped: int) -> Opened:
    import openpyxl  # type: ignore[import-untyped]

    from tolk.translation import sheets

    def load() -> Any:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            sheets.count_cells(filename, archive)
        # Formulas kept (not data_only), rich text kept as runs, external links kept.
        return openpyxl.load_workbook(io.BytesIO(data), rich_text=True, keep_links=True)

    workbook = loaded(filename, data, max_unzipped, ("Excel workbook", ".xls"), load)
    return runs_opened(sheets.run_groups(workbook), workbook.save)


def runs_opened(groups: list[RunGroup], save_to: Callable[[io.BytesIO], object]) -> Opened:
    """An office file opened: each group of runs (a paragraph, a cell) one document, written
    back into its runs and the file saved with `save_to`."""
    from tolk.translation import office

    docs = [office.runs_document(g) for g in groups]

    def save(translation: Translation) -> bytes:
        for group, rendered in zip(groups, translation.texts, strict=True):
            office.apply_runs(group, rendered)
        out = io.BytesIO()
        save_to(out)
        return out.getvalue()

    texts = [r.text for g in groups for r in g.runs]
    sample = " ".join(texts)[: detect.MAX_CHARS]
    return Opened(lambda cut: docs, sum(len(t) for t in texts), save, sample)


def _open_po(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """A gettext catalogue (tolk.translation.gettext): each entry to translate one
    document per form."""
    from tolk.translation import gettext

    text, bom = decoded(filename, data)
    catalogue = gettext.open_catalogue(filename, text)
    docs = [gettext.document(source) for source in catalogue.sources]

    def save(translation: Translation) -> bytes:
        flagged = {w.text for w in translation.warnings}
        out = gettext.save(catalogue, translation.texts, flagged, translation.target.tag)
        return bom.encode("utf-8") + out

    sample = " ".join(catalogue.sources)[: detect.MAX_CHARS]
    return Opened(lambda cut: docs, sum(len(t) for t in catalogue.sources), save, sample)


def _open_opendocument(filename: str, data: bytes, max_unzipped: int) -> Opened:
    from tolk.translation import opendocument

    return opendocument.open_file(filename, data, max_unzipped)


def _open_epub(filename: str, data: bytes, max_unzipped: int) -> Opened:
    from tolk.translation import epub

    return epub.open_file(filename, data, max_unzipped)


def _open_xliff(filename: str, data: bytes, max_unzipped: int) -> Opened:
    from tolk.translation import xliff

    return xliff.open_file(filename, data, max_unzipped)


def _open_locale(filename: str, data: bytes, max_unzipped: int) -> Opened:
    from tolk.translation import locales

    return locales.open_file(filename, data, max_unzipped)


def _open_pdf(filename: str, data: bytes, max_unzipped: int) -> Opened:
    from tolk.translation import pdf

    return pdf.open_file(filename, data, max_unzipped)


_OPENERS: dict[Kind, Callable[[str, bytes, int], Opened]] = {
    "docx": _open_docx,
    "pptx": _open_pptx,
    "xlsx": _open_xlsx,
    "po": _open_po,
    "odt": _open_opendocument,
    "odp": _open_opendocument,
    "ods": _open_opendocument,
    "epub": _open_epub,
    "xliff": _open_xliff,
    "json": _open_locale,
    "yaml": _open_locale,
    "pdf": _open_pdf,
}
