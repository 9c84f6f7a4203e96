"""EPUB e-books (.epub): the chapters, the table of contents and the book's title and
description translated; every other member of the archive kept byte for byte.

The book is read as the zip archive it is: `META-INF/container.xml` names the package
document (the OPF), whose manifest and spine name the content documents. Each XHTML
document of the spine, and the EPUB 3 navigation document (`properties="nav"`), goes through
tolk's HTML format (tolk.translation.html_format) as one document: its text is translated in
place, every tag, attribute, comment, the XML declaration and the DOCTYPE kept byte for byte,
`alt` and `title` values translated, model output escaped. EPUB readers are XML parsers, so
the chapter must stay well-formed XML, which the HTML format alone does not promise:

- An inline element that spans a block (`<a href><div>...</div></a>`, allowed in HTML5) is
  cut into lone tags by the format, each a standalone placeholder the model may move, into
  another element or before its partner. A unit holding such a tag is cut there, the tag
  kept in place outside any unit, so every tag in a unit is either one of a pair whose
  nesting `Unit.restore` checks, or whole (`<br/>`, an image, an element kept whole).
- SVG and MathML islands (whatever their prefix) are kept whole, never translated.
- Characters XML 1.0 forbids (control characters), which a model can write, are removed
  from what the model wrote (a well-formed source has none).
- The root element's `lang` and `xml:lang` are set to the target language (`xml:lang` is
  added if it has neither), by rewriting that one start tag.

Each translated chapter is parsed again as XML; one that is not (which the rules above leave
no way to) is repaired by libxml2's recovering parser rather than shipped broken. A chapter
that was not well-formed XML to begin with (an undeclared `&nbsp;`, say) is translated all the
same and left as the HTML format writes it: no worse than it came.

The EPUB 2 `toc.ncx` has its `docTitle` and `navLabel` texts translated, one document each;
the OPF's `dc:title` and `dc:description` likewise (a description holding markup, as Calibre
writes it, as HTML), and its first `dc:language` becomes the target language (with the
`xml:lang` of the package and of the translated elements). These small files are rewritten
through lxml. The archive is written anew: `mimetype` first and stored, every other member
in its order, those not translated with their bytes unchanged.

XML is read with lxml's parser made safe (no entity expansion, no network, no DTD): a
document declaring entities is refused (a 422), and libxml2's own amplification limit stops
a billion-laughs document in milliseconds. The archive passes `check_archive` (zip bombs)
first; a book whose `META-INF/encryption.xml` lists members encrypted by anything but the
font obfuscation of the EPUB and Adobe specifications is DRM-protected and refused.

No EPUB library: ebooklib, the maintained one, is AGPL-3.0, and tolk is Apache-2.0 (an AGPL
dependency would put the server under the AGPL); it also re-generates the package when it
writes a book (the OPF, the navigation, the archive's members), where tolk must change only
the texts it translates. The format is a zip and four XML vocabularies: zipfile and lxml
(already a dependency of python-docx) read it exactly.
"""

from __future__ import annotations

import codecs
import html
import io
import posixpath
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

from lxml import etree  # type: ignore[import-untyped]

from tolk import detect
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.translation.document import Document, Piece, Tag, Text, Unit, has_words
from tolk.translation.files import Opened, check_archive
from tolk.translation.formats import Splitter, parse
from tolk.translation.html_format import TagRules, parse_html
from tolk.translation.results import Translation

MAX_SPINE = 10_000  # content documents in a book's spine
MIMETYPE = b"application/epub+zip"
CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
XHTML = "application/xhtml+xml"
NCX = "application/x-dtbncx+xml"
# Font obfuscation (EPUB's and Adobe's): fonts mangled with the book's identifier, which
# tolk leaves as it is; the book's text is not protected.
FONT_OBFUSCATION = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
XML_NS = "http://www.w3.org/XML/1998/namespace"
DC_NS = "http://purl.org/dc/elements/1.1/"
FOREIGN_NS = frozenset({"http://www.w3.org/2000/svg", "http://www.w3.org/1998/Math/MathML"})
_WHAT = "EPUB e-book (.epub, a zip archive)"

# What XML 1.0 allows in a document (its `Char` production).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# A start or end tag alone (not self-closed, not an element kept whole, not a comment).
_LONE_TAG = re.compile(r"</?([A-Za-z_][^\s/>]*)[^<]*(?<!/)>", re.S)
# The XML declaration, comments, processing instructions and the DOCTYPE before the root.
_PROLOG = re.compile(r"(?:\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE(?:[^\[>]|\[.*?\])*>)*", re.S)
_START_TAG = re.compile(
    r"<[A-Za-z_][\w.:-]*((?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*/?>", re.S
)
_ATTRIBUTE = re.compile(r"(\s+)([^\s=/>]+)(\s*=\s*)(\"[^\"]*\"|'[^']*')")
_ROOT = re.compile(r"<[^?!]")  # the first tag that is no declaration, comment or PI
_MARKUP = re.compile(r"<(?:[A-Za-z]|/[A-Za-z]|!--)")


def _parser(recover: bool = False) -> Any:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, recover=recover)


@dataclass(frozen=True)
class _Member:
    info: zipfile.ZipInfo
    data: bytes


@dataclass(frozen=True)
class _Chapter:
    """An XHTML content document (or the navigation document) as one HTML document."""

    path: str
    text: str
    encoding: str  # how it is written back: "utf-8", "utf-8-sig" (a BOM kept), "utf-16"
    document: Document
    xml: bool  # whether it was well-formed XML (then its translation is made to be)


@dataclass(frozen=True)
class _Label:
    """A short text of the OPF or the NCX: the text of an element without children."""

    text: str
    markup: bool  # a description written as HTML

    def document(self, cut: Splitter) -> Document:
        return parse("html" if self.markup else "text", self.text, cut)


def open_file(filename: str, data: bytes, max_unzipped: int) -> Opened:
    """An EPUB opened: its chapters and navigation document one HTML document each, then its
    NCX labels, then its title and description; `save` writes the book back translated."""
    check_archive(filename, data, max_unzipped, _WHAT)
    members, comment = _members(filename, data)
    files = {m.info.filename: m.data for m in members}
    _check_mimetype(filename, files)
    _check_encryption(filename, files)
    opf_path = _package_path(filename, files)
    opf = _xml(filename, files, opf_path)
    chapter_paths, ncx_path = _contents(filename, files, opf, opf_path)
    chapters = [_chapter(filename, path, files[path]) for path in chapter_paths]
    ncx = _xml(filename, files, ncx_path) if ncx_path is not None else None
    labels = [_label(e) for e in _ncx_labels(ncx)] if ncx is not None else []
    labels += [_label(e) for e in _opf_labels(opf)]
    chapter_docs = [c.document for c in chapters]

    def documents(cut: Splitter) -> Sequence[Document]:
        return [*chapter_docs, *(label.document(cut) for label in labels)]

    def save(translation: Translation) -> bytes:
        texts = iter(translation.texts)
        tag = translation.target.tag
        changed = {c.path: _finished(c, next(texts), tag) for c in chapters}
        if ncx_path is not None:
            ncx_labels = _ncx_labels(tree := _xml(filename, files, ncx_path))
            _set_texts(ncx_labels, texts)
            _set_xml_lang(tree, tag)
            changed[ncx_path] = _serialized(tree)
        opf_tree = _xml(filename, files, opf_path)
        translated = _opf_labels(opf_tree)
        _set_texts(translated, texts)
        for element in translated:
            _set_xml_lang(element, tag)
        _set_language(opf_tree, tag)
        changed[opf_path] = _serialized(opf_tree)
        return _archive(members, changed, comment)

    texts = [t for c in chapters for t in _texts(c.document)]
    characters = sum(len(t) for t in texts) + sum(len(label.text) for label in labels)
    sample = " ".join(texts[:200])[: detect.MAX_CHARS]
    return Opened(documents, characters, save, sample)


def _invalid(filename: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"'{filename}' {problem}", field="file")


def _members(filename: str, data: bytes) -> tuple[list[_Member], bytes]:
    """Every member of the archive with its bytes (CRC checked), in the archive's order."""
    members: list[_Member] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if info.flag_bits & 0x1:
                    raise _invalid(
                        filename,
                        f"has password-protected members ({info.filename}); tolk cannot "
                        "read them: translate an unprotected copy",
                    )
                with archive.open(info) as stream:
                    members.append(_Member(info, stream.read()))
            comment = archive.comment
    except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError, EOFError) as exc:
        raise _invalid(
            filename, f"could not be read as an {_WHAT} ({exc}); check that it is not damaged"
        ) from exc
    names = [m.info.filename for m in members]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise _invalid(filename, f"holds the member '{twice}' twice; it is a damaged EPUB")
    return members, comment


def _check_mimetype(filename: str, files: dict[str, bytes]) -> None:
    if "mimetype" in files and files["mimetype"].strip() != MIMETYPE:
        found = files["mimetype"][:60].decode("utf-8", "replace")
        raise _invalid(
            filename,
            f"is not an EPUB e-book: its mimetype member says '{found}', not '{MIMETYPE.decode()}'",
        )


def _check_encryption(filename: str, files: dict[str, bytes]) -> None:
    """A book with members encrypted by anything but font obfuscation is DRM-protected."""
    if ENCRYPTION not in files:
        return
    root = _xml(filename, files, ENCRYPTION).getroot()
    encrypted: list[str] = []
    for item in _descendants(root, "EncryptedData"):
        method = next(_descendants(item, "EncryptionMethod"), None)
        algorithm = method.get("Algorithm", "") if method is not None else ""
        if algorithm in FONT_OBFUSCATION:
            continue
        reference = next(_descendants(item, "CipherReference"), None)
        encrypted.append(reference.get("URI", "?") if reference is not None else "?")
    if encrypted:
        raise _invalid(
            filename,
            f"is encrypted (DRM): META-INF/encryption.xml lists {len(encrypted)} encrypted "
            f"members ({', '.join(encrypted[:3])}); tolk cannot read a protected book, "
            "translate a DRM-free copy",
        )


def _package_path(filename: str, files: dict[str, bytes]) -> str:
    """The OPF named by META-INF/container.xml."""
    if CONTAINER not in files:
        raise _invalid(
            filename,
            f"is not an EPUB e-book: it has no {CONTAINER} (every EPUB names its package "
            "document there); check that the file is an EPUB and not damaged",
        )
    root = _xml(filename, files, CONTAINER).getroot()
    rootfiles = list(_descendants(root, "rootfile"))
    package = next(
        (r for r in rootfiles if r.get("media-type") == "application/oebps-package+xml"),
        rootfiles[0] if rootfiles else None,
    )
    path = package.get("full-path") if package is not None else None
    if not path:
        raise _invalid(filename, f"names no package document in its {CONTAINER}")
    path = unquote(path).lstrip("/")
    if path not in files:
        raise _invalid(
            filename, f"names the package document '{path}' in {CONTAINER}, which it lacks"
        )
    return path


def _contents(
    filename: str, files: dict[str, bytes], opf: Any, opf_path: str
) -> tuple[list[str], str | None]:
    """The XHTML documents to translate (the spine's, in order, then the navigation document
    if it is not among them) and the NCX's path, if the book has one."""
    root = opf.getroot()
    base = posixpath.dirname(opf_path)
    items: dict[str, tuple[str, str, str]] = {}  # id -> (path, media type, properties)
    for item in _descendants(root, "item"):
        href = item.get("href")
        if item.get("id") is None or not href:
            continue
        path = posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0])))
        media = (item.get("media-type") or "").strip().lower()
        items[item.get("id")] = (path, media, item.get("properties") or "")
    spine = next(_descendants(root, "spine"), None)
    refs = list(_descendants(spine, "itemref")) if spine is not None else []
    if not refs:
        raise _invalid(filename, f"has no spine in its package document {opf_path}")
    if len(refs) > MAX_SPINE:
        raise PayloadTooLarge(
            f"'{filename}' has {len(refs)} documents in its spine; at most {MAX_SPINE} are "
            "accepted: split the book",
            field="file",
            limit=MAX_SPINE,
        )
    paths: list[str] = []
    for ref in refs:
        idref = ref.get("idref")
        if idref not in items:
            raise _invalid(
                filename, f"has a spine entry '{idref}' that its manifest ({opf_path}) lacks"
            )
        path, media, _ = items[idref]
        if media == XHTML and path not in paths:
            paths.append(path)
    nav = next((p for p, _, props in items.values() if "nav" in props.split()), None)
    if nav is not None and nav not in paths:
        paths.append(nav)
    toc = spine.get("toc") if spine is not None else None
    ncx = items[toc][0] if toc in items else None
    ncx = ncx or next((p for p, media, _ in items.values() if media == NCX), None)
    for path in (*paths, *([ncx] if ncx else [])):
        if path not in files:
            raise _invalid(filename, f"lacks '{path}', which its package document {opf_path} names")
    return paths, ncx


def _xml(filename: str, files: dict[str, bytes], path: str) -> Any:
    """A member parsed as XML, safely; one that is not XML, or declares entities, a 422."""
    if b"<!ENTITY" in files[path]:  # (refused before libxml2 sees an entity bomb at all)
        raise _entities(filename, path)
    try:
        tree = etree.parse(io.BytesIO(files[path]), _parser())
    except etree.XMLSyntaxError as exc:
        raise _invalid(
            filename, f"has a damaged {path}: it is not well-formed XML ({exc})"
        ) from exc
    _refuse_entities(filename, path, tree)
    return tree


def _refuse_entities(filename: str, path: str, tree: Any) -> None:
    dtd = tree.docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.iterentities()):
        raise _entities(filename, path)


def _entities(filename: str, path: str) -> InvalidRequest:
    return _invalid(
        filename,
        f"declares XML entities in {path}; tolk does not expand them (an EPUB needs none): "
        "remove the DOCTYPE's internal subset",
    )


def _descendants(element: Any, name: str) -> Iterator[Any]:
    """The elements under `element` named `name`, whatever their namespace."""
    for child in element.iter(etree.Element):
        if etree.QName(child).localname == name:
            yield child


def _decoded(filename: str, path: str, raw: bytes) -> tuple[str, str]:
    """A content document's text and its encoding (EPUB allows UTF-8 and UTF-16)."""
    try:
        if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return raw.decode("utf-16"), "utf-16"
        if raw.startswith(codecs.BOM_UTF8):
            return raw.decode("utf-8-sig"), "utf-8-sig"
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        raise _invalid(
            filename,
            f"has {path} in an encoding other than UTF-8 or UTF-16 (byte {exc.start}), "
            "which EPUB does not allow",
        ) from exc


def _chapter(filename: str, path: str, raw: bytes) -> _Chapter:
    text, encoding = _decoded(filename, path, raw)
    root = _ROOT.search(text)  # entities are declared before the root element, if anywhere
    if "<!ENTITY" in text[: root.start() if root else len(text)]:
        raise _entities(filename, path)
    foreign: set[str] = set()
    try:
        tree = etree.parse(io.BytesIO(raw), _parser())
    except etree.XMLSyntaxError:
        well_formed = False
    else:
        well_formed = True
        _refuse_entities(filename, path, tree)
        for element in tree.getroot().iter(etree.Element):
            parent = element.getparent()
            name = etree.QName(element)
            if name.namespace in FOREIGN_NS and (
                parent is None or etree.QName(parent).namespace != name.namespace
            ):
                prefix = element.prefix
                foreign.add(f"{prefix}:{name.localname}" if prefix else name.localname)
    return _Chapter(path, text, encoding, chapter_document(text, foreign), well_formed)


def chapter_document(text: str, foreign: set[str] | frozenset[str] = frozenset()) -> Document:
    """An XHTML document through the HTML format, `foreign` elements (SVG, MathML: their
    names as written, prefix and all) kept whole, and every unit that holds a tag without
    its partner (an inline element a block cuts in two) cut at those tags: they stay where
    they are, outside any unit, so the model cannot move them."""
    ignore = frozenset({"svg", "math"} | {n.lower() for n in foreign})
    document = parse_html(text, rules=TagRules(ignore=ignore))
    units = list(document.units)
    parts: list[str | Tag | int] = []
    for part in document.parts:
        if (
            isinstance(part, int)
            and part not in document.attributes
            and any(_lone(p) for p in units[part].pieces)
        ):
            parts += _cut(units, part)
        else:
            parts.append(part)
    return replace(document, parts=tuple(parts), units=tuple(units))


def _lone(piece: Piece) -> bool:
    """Whether `piece` is a start or an end tag alone (not self-closed, not an element kept
    whole, not a comment)."""
    return (
        isinstance(piece, Tag)
        and piece.kind == "atom"
        and _LONE_TAG.fullmatch(piece.source) is not None
    )


def _cut(units: list[Unit], index: int) -> list[str | Tag | int]:
    """The parts unit `index` becomes cut at its lone tags: those tags, whitespace at the
    pieces' edges and pieces without words verbatim, each piece with words a unit (the first
    in the unit's place, the others added at the end). In well-formed XML no pair of tags
    encloses a lone tag, so every pair stays in one piece."""
    unit = units[index]
    parts: list[str | Tag | int] = []
    reused = False

    def flush(run: list[Piece]) -> None:
        nonlocal reused
        tail: list[str] = []
        while run and isinstance(run[0], Text) and not run[0].text.strip():
            parts.append(run.pop(0).source)
        while run and isinstance(run[-1], Text) and not run[-1].text.strip():
            tail.insert(0, run.pop().source)
        if any(isinstance(p, Text) and has_words(p.text) for p in run):
            piece = Unit(tuple(run), unit.escape)
            if reused:
                parts.append(len(units))
                units.append(piece)
            else:
                parts.append(index)
                units[index] = piece
                reused = True
        else:
            parts.extend(p.source if isinstance(p, Text) else p for p in run)
        parts.extend(tail)

    run: list[Piece] = []
    for piece in unit.pieces:
        if isinstance(piece, Tag) and _lone(piece):
            flush(run)
            parts.append(piece)
            run = []
        else:
            run.append(piece)
    flush(run)
    return parts


def _texts(document: Document) -> list[str]:
    return [p.text for u in document.units for p in u.pieces if isinstance(p, Text)]


def _finished(chapter: _Chapter, rendered: str, tag: str) -> bytes:
    """A chapter translated, with the target language on its root: well-formed XML if its
    source was."""
    text = with_language(rendered, tag)
    if chapter.xml:
        text = well_formed(text)
    return text.encode(chapter.encoding)


def with_language(text: str, tag: str) -> str:
    """An XML document with the `lang` and `xml:lang` of its root element set to `tag`
    (`xml:lang` added where it has neither); the rest of the text as it was."""
    start = _PROLOG.match(text)
    root = _START_TAG.match(text, start.end() if start else 0)
    if root is None:
        return text
    found = False

    def swap(attribute: re.Match[str]) -> str:
        nonlocal found
        if attribute[2] not in ("lang", "xml:lang"):
            return attribute[0]
        found = True
        quote = attribute[4][0]
        return f"{attribute[1]}{attribute[2]}{attribute[3]}{quote}{html.escape(tag)}{quote}"

    attributes = _ATTRIBUTE.sub(swap, root[1])
    if not found:
        attributes += f' xml:lang="{html.escape(tag)}"'
    return text[: root.start(1)] + attributes + text[root.end(1) :]


def well_formed(text: str) -> str:
    """A translated XHTML document as well-formed XML: without the characters XML forbids
    (a model can write them; a well-formed source has none), and, should it still not parse,
    repaired by libxml2's recovering parser (re-serialised: the last resort)."""
    text = _NOT_XML.sub("", text)
    try:
        etree.parse(io.BytesIO(text.encode("utf-8")), _parser())
    except etree.XMLSyntaxError:
        tree = etree.parse(io.BytesIO(text.encode("utf-8")), _parser(recover=True))
        out: bytes = etree.tostring(tree, encoding="utf-8", xml_declaration=True)
        return out.decode("utf-8")
    return text


def _ncx_labels(tree: Any) -> list[Any]:
    """The NCX's texts to translate: its title and every navigation label."""
    return [
        e
        for e in _descendants(tree.getroot(), "text")
        if e.getparent() is not None
        and etree.QName(e.getparent()).localname in ("docTitle", "navLabel")
        and _translatable(e)
    ]


def _opf_labels(tree: Any) -> list[Any]:
    """The package's texts to translate: its titles and descriptions."""
    root = tree.getroot()
    return [
        e for e in root.iter(f"{{{DC_NS}}}title", f"{{{DC_NS}}}description") if _translatable(e)
    ]


def _translatable(element: Any) -> bool:
    return len(element) == 0 and any(c.isalpha() for c in element.text or "")


def _label(element: Any) -> _Label:
    text = element.text or ""
    markup = etree.QName(element).localname == "description" and bool(_MARKUP.search(text))
    return _Label(text, markup)


def _set_texts(elements: list[Any], texts: Iterator[str]) -> None:
    for element in elements:
        element.text = _NOT_XML.sub("", next(texts))


def _set_xml_lang(element: Any, tag: str) -> None:
    """`xml:lang` set to `tag` on `element` (a tree: its root) where it has one."""
    if hasattr(element, "getroot"):
        element = element.getroot()
    if element.get(f"{{{XML_NS}}}lang") is not None:
        element.set(f"{{{XML_NS}}}lang", tag)


def _set_language(tree: Any, tag: str) -> None:
    """The book's (first) `dc:language` set to `tag`, added if it has none, and the
    package's `xml:lang` where it has one."""
    root = tree.getroot()
    _set_xml_lang(root, tag)
    language = next(root.iter(f"{{{DC_NS}}}language"), None)
    if language is None:
        metadata = next(_descendants(root, "metadata"), None)
        if metadata is None:
            return
        language = etree.SubElement(metadata, f"{{{DC_NS}}}language")
    for child in list(language):
        language.remove(child)
    language.text = tag


def _serialized(tree: Any) -> bytes:
    out: bytes = etree.tostring(tree, encoding="UTF-8", xml_declaration=True)
    return out


_WRITABLE = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)


def _archive(members: list[_Member], changed: dict[str, bytes], comment: bytes) -> bytes:
    """The book written anew: `mimetype` first and stored (OCF), every other member in its
    order with its own compression, `changed` ones with their new bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        mimetype = next((m for m in members if m.info.filename == "mimetype"), None)
        first = zipfile.ZipInfo(
            "mimetype", mimetype.info.date_time if mimetype else (1980, 1, 1, 0, 0, 0)
        )
        first.compress_type = zipfile.ZIP_STORED
        archive.writestr(first, MIMETYPE)
        for member in members:
            if member is mimetype:
                continue
            archive.writestr(_info(member.info), changed.get(member.info.filename, member.data))
        archive.comment = comment
    return out.getvalue()


def _info(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh header for a member: its name, time, compression and attributes (not its
    extra fields, which describe the old archive's layout)."""
    fresh = zipfile.ZipInfo(info.filename, info.date_time)
    fresh.compress_type = (
        info.compress_type if info.compress_type in _WRITABLE else zipfile.ZIP_DEFLATED
    )
    fresh.external_attr = info.external_attr
    fresh.create_system = info.create_system
    fresh.comment = info.comment
    return fresh
