"""OpenDocument files (.odt, .odp, .ods): every paragraph's text translated in the package's
own XML, its spans and links kept, as a .docx's (tolk.translation.office).

What is translated: each `text:p` and `text:h` of content.xml (body text, headings, lists,
tables, frames and text boxes, drawing shapes, footnotes' and endnotes' bodies, a
presentation's slides and speaker notes `presentation:notes`) and of the master pages'
headers and footers in styles.xml. A paragraph is one unit; each `text:span` and `text:a` in
it (nested ones flattened: every stretch of text inside one) is a paired placeholder around
its text, so the translation can move them, and the paragraph's own text between them is the
unit's text (office.runs_document, apply_runs). What sits in a paragraph stays where it is:
a tab, a line break, extra spaces (`text:s`: an indent, a gap that aligns), a field (a
page number, a date: its text is the field's value), a footnote (its body is a unit of its
own, never mixed into its paragraph's), an inline frame or anything else not listed here cut
the paragraph into units at that point; soft page breaks, bookmarks, reference and index
marks, tracked-change marks and comments' anchors have no text of their own and do not cut
it (the text around them may move past them, as it does past a .docx's empty runs).

In a table cell (a spreadsheet's or a text's table) only text is translated: a cell with a
value type other than `string` (numbers, dates, times, booleans, currency, percentages) or
with a `table:formula` is left as it is; `office:string-value`, where a string cell has one,
is dropped from a cell whose text was translated, so that its text is its value.

Left alone: comments (`office:annotation`), deleted text of tracked changes, sheet and
slide names, styles (fonts, languages), alternative texts of images, a presentation's master
pages, charts and other embedded objects (their own members), meta.xml (its `dc:language` is
the language the author worked in: left as written), and every member of the package other
than content.xml and styles.xml, byte for byte. The package is written again member by member
in the same order, `mimetype` first and stored uncompressed as ODF requires; styles.xml is
written again only if one of its headers or footers was translated. lxml parses the XML and
writes it back with its declaration, the untouched elements as they were; odfpy (whose last
release was in 2020) was not used: it loads the whole package into its own object model and
writes every member again, where editing the XML keeps every byte it does not translate.

Limits: the archive passes files.check_archive (a zip bomb) before any member is read;
XML is parsed without entity expansion, network or DTD loading, and a document that declares
a DTD (which no OpenDocument file has: an entity expansion attack) is refused; libxml2's own
limits (depth, text size) hold. A spreadsheet's cells are counted first, streaming through
content.xml: a cell that holds something counts as many times as it is repeated
(`table:number-columns-repeated` times the repeats of its rows), an empty one once, since
LibreOffice writes a sheet's formatted but empty tail as one row repeated a million times,
and more than sheets.MAX_CELLS are refused. Repeated cells are never expanded: a repeated
cell's text is one unit, as in the file. Every pass is linear in the XML's size.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from tolk import detect
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.document import has_words
from tolk.translation.files import Opened, check_archive
from tolk.translation.office import RunGroup, apply_runs, escape_docx, runs_document
from tolk.translation.results import Translation
from tolk.translation.sheets import MAX_CELLS

_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_MEDIA = "application/vnd.oasis.opendocument."

_PARAGRAPHS = (f"{_TEXT}p", f"{_TEXT}h")
_CELLS = (f"{_TABLE}table-cell", f"{_TABLE}covered-table-cell")
_ROW = f"{_TABLE}table-row"
# Inline elements whose text is formatted text: a placeholder pair around each stretch.
_INLINE = frozenset({f"{_TEXT}span", f"{_TEXT}a", f"{_TEXT}meta"})
# Inline elements without text of their own that do not cut a paragraph into units.
_TRANSPARENT = frozenset(
    [f"{_TEXT}{name}" for name in ("soft-page-break", "bookmark", "bookmark-start")]
    + [f"{_TEXT}{name}" for name in ("bookmark-end", "reference-mark", "reference-mark-start")]
    + [f"{_TEXT}{name}" for name in ("reference-mark-end", "change", "change-start")]
    + [f"{_TEXT}{name}" for name in ("change-end", "toc-mark", "toc-mark-start", "toc-mark-end")]
    + [f"{_TEXT}{name}" for name in ("user-index-mark", "user-index-mark-start")]
    + [f"{_TEXT}{name}" for name in ("user-index-mark-end", "alphabetical-index-mark")]
    + [f"{_TEXT}alphabetical-index-mark-start", f"{_TEXT}alphabetical-index-mark-end"]
    + [f"{_OFFICE}annotation", f"{_OFFICE}annotation-end"]
)
# What holds paragraphs that are not translated: comments, tracked changes' deleted text.
_SKIPPED = frozenset({f"{_OFFICE}annotation", f"{_TEXT}tracked-changes"})
_HEADERS = frozenset(
    f"{_STYLE}{name}"
    for name in ("header", "footer", "header-left", "footer-left", "header-first", "footer-first")
)
_STRING_VALUE = f"{_OFFICE}string-value"


@dataclass(frozen=True)
class _Kind:
    name: str  # text, presentation, spreadsheet: the body's element and the media type's tail
    suffix: str

    @property
    def title(self) -> str:
        return f"OpenDocument {self.name}"

    @property
    def media_type(self) -> str:
        return _MEDIA + self.name


_KINDS = {
    ".odt": _Kind("text", ".odt"),
    ".odp": _Kind("presentation", ".odp"),
    ".ods": _Kind("spreadsheet", ".ods"),
}


@dataclass
class _Slot:
    """A stretch of a paragraph's text as a run: an element's text, or its tail (the text
    after it, up to its next sibling)."""

    element: Any
    tail: bool

    @property
    def text(self) -> str:
        value = self.element.tail if self.tail else self.element.text
        return value or ""

    @text.setter
    def text(self, value: str) -> None:
        cleaned = escape_docx(value) or None  # what XML 1.0 cannot hold is dropped
        if self.tail:
            self.element.tail = cleaned
        else:
            self.element.text = cleaned


def open_file(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """An .odt, .odp or .ods opened: each paragraph (or a stretch of one between tabs, line
    breaks and fields) one document; saved as a new package with the translations in it."""
    kind = _KINDS.get(PurePath(filename).suffix.lower())
    if kind is None:
        raise InvalidRequest(
            f"'{filename}' is not named as an OpenDocument file (.odt, .odp or .ods)", field="file"
        )
    members = _members(filename, data, max_unzipped, kind)
    _check_mimetype(filename, members, kind)
    if kind.name == "spreadsheet":
        count_cells(filename, _member(filename, members, "content.xml", kind))
    content = _parse(filename, members, "content.xml", kind)
    body = content.find(f"{_OFFICE}body/{_OFFICE}{kind.name}")
    if content.tag != f"{_OFFICE}document-content" or body is None:
        raise InvalidRequest(
            f"'{filename}' could not be read as an {kind.title} (content.xml holds no "
            f"office:{kind.name}); check that it is a {kind.suffix} file and not damaged",
            field="file",
        )
    roots = {"content.xml": content}
    if any(info.filename == "styles.xml" for info, _ in members):
        roots["styles.xml"] = _parse(filename, members, "styles.xml", kind)

    groups: list[RunGroup] = []
    changed: set[str] = set()
    cells: list[Any] = []  # cells whose office:string-value would hide their translated text
    for name, root in roots.items():
        for paragraph, cell in _paragraphs(root, headers_only=name == "styles.xml"):
            found = paragraph_groups(paragraph)
            if found:
                groups += found
                changed.add(name)
                if cell is not None and cell.get(_STRING_VALUE) is not None:
                    cells.append(cell)
    docs = [runs_document(g) for g in groups]

    def save(translation: Translation) -> bytes:
        for group, rendered in zip(groups, translation.texts, strict=True):
            apply_runs(group, rendered)
        for cell in cells:
            cell.attrib.pop(_STRING_VALUE, None)
        return _package(members, {name: _serialized(roots[name]) for name in changed})

    texts = [r.text for g in groups for r in g.runs]
    sample = " ".join(texts)[: detect.MAX_CHARS]
    return Opened(lambda cut: docs, sum(len(t) for t in texts), save, sample)


def paragraph_groups(paragraph: Any) -> list[RunGroup]:
    """A `text:p`'s or `text:h`'s text as its units: its runs, cut where something stays in
    place (a tab, a line break, extra spaces, a field, a footnote), and only those with
    words. Its own
    text and its children's tails are unformatted runs; every text inside a span or link
    (nested ones too) is a formatted one. Walked with a stack, once over its inline
    elements: what a footnote or a frame in it holds is found as paragraphs of their own."""
    groups: list[RunGroup] = []
    runs: list[_Slot] = []
    formatted: list[bool] = []

    def add(element: Any, tail: bool, is_formatted: bool) -> None:
        slot = _Slot(element, tail)
        if slot.text:
            runs.append(slot)
            formatted.append(is_formatted)

    def cut() -> None:
        if any(has_words(r.text) for r in runs):
            groups.append(RunGroup(list(runs), list(formatted)))
        runs.clear()
        formatted.clear()

    add(paragraph, False, False)
    stack: list[tuple[Any, bool, Iterator[Any]]] = [(paragraph, False, iter(paragraph))]
    while stack:
        _, inside, children = stack[-1]
        child = next(children, None)
        if child is None:
            element = stack.pop()[0]
            if stack:  # a span's tail is its parent's text
                add(element, True, stack[-1][1])
            continue
        tag = child.tag
        if isinstance(tag, str) and tag in _INLINE:
            add(child, False, True)
            stack.append((child, True, iter(child)))
            continue
        # Comments and processing instructions (tag not a str) are transparent too.
        if isinstance(tag, str) and tag not in _TRANSPARENT:
            cut()
        add(child, True, inside)
    cut()
    return groups


def _paragraphs(root: Any, headers_only: bool) -> Iterator[tuple[Any, Any]]:
    """The paragraphs to translate, each with the table cell it is in (None if none): not
    those in comments, deleted text, or a cell that holds a value other than text (or a
    formula); in styles.xml only the master pages' headers and footers."""
    for paragraph in root.iter(*_PARAGRAPHS):
        cell = None
        kept = not headers_only
        for ancestor in paragraph.iterancestors():
            tag = ancestor.tag
            if tag in _SKIPPED:
                break
            if tag in _CELLS:
                if not _text_cell(ancestor):
                    break
                cell = ancestor if cell is None else cell
            if tag in _HEADERS:
                kept = True
        else:
            if kept:
                yield paragraph, cell


def _text_cell(cell: Any) -> bool:
    """Whether a table cell holds text: a string, or no value type at all, and no formula."""
    kind = cell.get(f"{_OFFICE}value-type")
    return kind in (None, "string") and cell.get(f"{_TABLE}formula") is None


def count_cells(filename: str, xml: bytes, limit: int = MAX_CELLS) -> int:
    """The cells a spreadsheet's content.xml declares, streaming through it: a cell that
    holds something as often as it is repeated (its columns' repeats times its rows'), an
    empty one once; refused past `limit`. Nothing is expanded; each element is cleared once
    seen, so memory stays that of the bare elements."""
    cells = 0
    repeats: list[int] = [1]  # the rows open, innermost last: the product of their repeats
    parsed = etree.iterparse(
        io.BytesIO(xml),
        events=("start", "end"),
        tag=(_ROW, *_CELLS),
        resolve_entities=False,
        no_network=True,
        huge_tree=False,
        load_dtd=False,
    )
    try:
        for event, element in parsed:
            if element.tag == _ROW:
                if event == "start":
                    repeats.append(repeats[-1] * _repeat(element, "number-rows-repeated"))
                else:
                    repeats.pop()
                    element.clear(keep_tail=True)
                continue
            if event == "start":
                continue
            full = len(element) or element.get(f"{_OFFICE}value-type") or element.text
            cells += _repeat(element, "number-columns-repeated") * repeats[-1] if full else 1
            element.clear(keep_tail=True)
            if cells > limit:
                raise PayloadTooLarge(
                    f"'{filename}' has more than {limit:,} cells; at most {limit:,} are "
                    "accepted: split the spreadsheet",
                    field="file",
                    limit=limit,
                )
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise InvalidRequest(
            f"'{filename}' could not be read as an OpenDocument spreadsheet (content.xml: "
            f"{exc}); check that it is one and not damaged",
            field="file",
        ) from exc
    return cells


def _repeat(element: Any, attribute: str) -> int:
    value = element.get(f"{_TABLE}{attribute}", "1")
    if not (value.isascii() and value.isdigit() and len(value) <= 12):
        raise ValueError(f"table:{attribute}='{value[:20]}' is not a count")
    return max(1, int(value))


def _members(
    filename: str, data: bytes, max_unzipped: int, kind: _Kind
) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """The package's members in order, each read (and its checksum checked) once the
    archive passed check_archive."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)):
            pass
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _unreadable(filename, kind, f"not a zip archive: {exc}") from exc
    check_archive(filename, data, max_unzipped, f"{kind.title} ({kind.suffix}, a zip archive)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            names = [info.filename for info in infos]
            if len(set(names)) != len(names):
                raise _unreadable(filename, kind, "a member is in the archive twice")
            return [(info, archive.read(info)) for info in infos]
    except InvalidRequest:
        raise
    except (
        zipfile.BadZipFile,
        NotImplementedError,  # a compression method zipfile lacks
        RuntimeError,  # a member encrypted in the zip itself
        EOFError,
        OSError,
        ValueError,
        zlib.error,
    ) as exc:
        raise _unreadable(filename, kind, f"{type(exc).__name__}: {exc}") from exc


def _unreadable(filename: str, kind: _Kind, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"'{filename}' could not be read as an {kind.title} ({why}); check that it is one "
        "and not damaged",
        field="file",
    )


def _member(
    filename: str, members: list[tuple[zipfile.ZipInfo, bytes]], name: str, kind: _Kind
) -> bytes:
    for info, content in members:
        if info.filename == name:
            return content
    raise _unreadable(filename, kind, f"it has no {name}")


def _check_mimetype(
    filename: str, members: list[tuple[zipfile.ZipInfo, bytes]], kind: _Kind
) -> None:
    """The package's `mimetype` member, where it has one, names this kind (or its template);
    a password-protected package is refused as such."""
    named_members = {info.filename: content for info, content in members}
    declared = named_members.get("mimetype")
    if declared is not None:
        mimetype = declared[:200].decode("ascii", "replace").strip()
        if mimetype != kind.media_type and not mimetype.startswith(kind.media_type + "-"):
            other = [k for k in _KINDS.values() if mimetype.startswith(k.media_type)]
            named = f"an {other[0].title}, a {other[0].suffix} file" if other else "no such file"
            raise InvalidRequest(
                f"'{filename}' is not an {kind.title}: its mimetype is '{mimetype}' ({named}); "
                "name it by what it is, or check that it is the file you meant",
                field="file",
            )
    if b"encryption-data" in named_members.get("META-INF/manifest.xml", b""):
        raise InvalidRequest(
            f"'{filename}' is password-protected (encrypted): save it without a password and retry",
            field="file",
        )


def _parse(
    filename: str, members: list[tuple[zipfile.ZipInfo, bytes]], name: str, kind: _Kind
) -> Any:
    """A member's XML root, parsed without entities, network or DTDs; a document that
    declares a DTD is refused (no OpenDocument file has one)."""
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False
    )
    try:
        root = etree.fromstring(_member(filename, members, name, kind), parser)
    except etree.XMLSyntaxError as exc:
        raise _unreadable(filename, kind, f"{name} is not well-formed XML: {exc}") from exc
    if root.getroottree().docinfo.doctype:
        raise _unreadable(
            filename, kind, f"{name} declares a DTD, which OpenDocument files never do"
        )
    return root


def _serialized(root: Any) -> bytes:
    tree = root.getroottree()
    standalone = tree.docinfo.standalone
    out: bytes = etree.tostring(tree, xml_declaration=True, encoding="UTF-8", standalone=standalone)
    return out


def _package(members: list[tuple[zipfile.ZipInfo, bytes]], replaced: dict[str, bytes]) -> bytes:
    """The package again: `mimetype` first and stored, the other members in their order
    with their dates, attributes and compression (stored or deflated), `replaced`'s content
    in place of theirs."""
    first = [m for m in members if m[0].filename == "mimetype"]
    rest = [m for m in members if m[0].filename != "mimetype"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info, content in first + rest:
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.external_attr = info.external_attr
            copy.comment = info.comment
            if info.filename == "mimetype" or info.compress_type == zipfile.ZIP_STORED:
                copy.compress_type = zipfile.ZIP_STORED
            else:
                copy.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(copy, replaced.get(info.filename, content))
    return out.getvalue()
