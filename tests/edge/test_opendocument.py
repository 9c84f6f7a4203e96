"""OpenDocument files (.odt, .odp, .ods) made with odfpy, translated through the in-process
server over stand-in engines (edge), and read back with lxml: every text to translate
changed, every other text and every element and attribute as it was, the other members of
the package byte for byte, `mimetype` first and stored; zip bombs, entity expansion,
damaged XML, huge repeated ranges and a package of another kind refused with a 4xx."""

from __future__ import annotations

import io
import re
import time
import zipfile
from typing import Any

import httpx
from lxml import etree  # type: ignore[import-untyped]
from odf import draw, presentation, style, table, text  # type: ignore[import-untyped]
from odf.namespaces import PRESENTATIONNS  # type: ignore[import-untyped]
from odf.opendocument import (  # type: ignore[import-untyped]
    OpenDocumentPresentation,
    OpenDocumentSpreadsheet,
)

from tests.support.errors import assert_error
from tests.support.files import post_file, zip_bomb
from tests.support.samples.opendocument import (
    ODP,
    ODS,
    ODT,
    add_cell,
    bold_and_italic_styles,
    make_ods,
    make_odt,
    rich_paragraph,
    saved,
    text_table,
)
from tolk.translation.sheets import MAX_CELLS

# The texts each file has to translate; every other text in it (with letters) must stay.
ODT_TEXTS = {
    "Running header text",
    "Page ",
    " of the report",
    "A report on batching",
    "Why it helps",
    "Plain words come first, ",
    "bold words ",
    "nested in italics",
    " and then ",
    "the guide online",
    "Written on ",
    " by the team",
    "First line of the verse",
    "second line after a break",
    "Text before a tab",
    "text after the tab",
    "A claim that needs a source",
    " and more words after it.",
    "The footnote explains the source",
    "Item one of the list",
    "Item two of the list",
    "Body cell 00 words",
    "Body cell 01 words",
    "Body cell 10 words",
    "Body cell 11 words",
    "Spaced ",
    "words ",
    "around them",
}


ODP_TEXTS = {
    "A report on batching",
    "Plain words come first, ",
    "bold words ",
    "nested in italics",
    " and then ",
    "the guide online",
    "A shape with words",
    "Slide cell 00 words",
    "Slide cell 01 words",
    "Say this slowly to the audience",
}


def make_odp() -> bytes:
    doc = OpenDocumentPresentation()
    bold, italic = bold_and_italic_styles(doc)
    layout = style.PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    size = {"width": "20cm", "height": "3cm", "x": "1cm"}
    slide = draw.Page(name="Slide1", masterpagename=master)
    title = draw.Frame(y="1cm", **size)
    title_box = draw.TextBox()
    title_box.addElement(text.P(text="A report on batching"))
    title.addElement(title_box)
    slide.addElement(title)
    body = draw.Frame(y="5cm", **size)
    body_box = draw.TextBox()
    body_box.addElement(rich_paragraph(bold, italic, "Plain words come first, "))
    body.addElement(body_box)
    slide.addElement(body)
    shape = draw.CustomShape(width="5cm", height="3cm", x="1cm", y="9cm")
    shape.addElement(text.P(text="A shape with words"))
    shape.addElement(draw.EnhancedGeometry(type="rectangle"))
    slide.addElement(shape)
    grid = draw.Frame(y="13cm", **size)
    grid.addElement(text_table(1, 2, "Slide"))
    slide.addElement(grid)
    notes = presentation.Notes()
    notes_frame = draw.Frame(y="1cm", **size)
    notes_frame.setAttrNS(PRESENTATIONNS, "class", "notes")
    notes_box = draw.TextBox()
    notes_box.addElement(text.P(text="Say this slowly to the audience"))
    notes_frame.addElement(notes_box)
    notes.addElement(notes_frame)
    slide.addElement(notes)
    doc.presentation.addElement(slide)
    return saved(doc)


ODS_TEXTS = {
    "Quarterly report",
    "Revenue",
    "Closing date",
    "Total",
    "A cell without a value type",
    "Same words three times",
    "Shown words here",
    "Plain words and ",
    "bold ones",
    "The queue stays short.",
}


def _tree(package: bytes, member: str) -> Any:
    return etree.fromstring(zipfile.ZipFile(io.BytesIO(package)).read(member))


_STRING_VALUE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}string-value"


def _attributes(element: Any) -> dict[str, str]:
    """An element's attributes, but a string cell's string-value (dropped where the cell's
    text was translated, so that the text is its value)."""
    return {k: v for k, v in element.attrib.items() if k != _STRING_VALUE}


def _same_but_texts(before: Any, after: Any, translated: set[str], seen: set[str]) -> None:
    """The same elements with the same attributes in the same order; each text (an
    element's or its tail) in `translated` changed, and every other text with letters as
    it was. The translated ones found go into `seen`."""
    old_elements, new_elements = list(before.iter()), list(after.iter())
    assert [(e.tag, _attributes(e)) for e in new_elements] == [
        (e.tag, _attributes(e)) for e in old_elements
    ]
    for old, new in zip(old_elements, new_elements, strict=True):
        for old_text, new_text in ((old.text, new.text), (old.tail, new.tail)):
            if old_text in translated:
                seen.add(old_text)
                assert new_text != old_text, old_text
            elif old_text is not None and any(c.isalpha() for c in old_text):
                assert new_text == old_text, old_text


def _check_package(source: bytes, result: bytes, texts: set[str], untouched: set[str]) -> None:
    with zipfile.ZipFile(io.BytesIO(source)) as old, zipfile.ZipFile(io.BytesIO(result)) as new:
        assert new.testzip() is None
        assert [i.filename for i in new.infolist()] == [i.filename for i in old.infolist()]
        first = new.infolist()[0]
        assert first.filename == "mimetype"
        assert first.compress_type == zipfile.ZIP_STORED
        assert new.read("mimetype") == old.read("mimetype")
        for info in old.infolist():
            if info.filename not in ("content.xml", "styles.xml"):
                assert new.read(info.filename) == old.read(info.filename), info.filename
        for member in untouched:
            assert new.read(member) == old.read(member), member
        assert new.read("content.xml").startswith(b"<?xml version=")
    seen: set[str] = set()
    for member in ("content.xml", "styles.xml"):
        _same_but_texts(_tree(source, member), _tree(result, member), texts, seen)
    assert seen == texts  # each text to translate was found where the test put it


async def test_a_text_document_comes_back_translated_with_its_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_odt()
    response = await post_file(edge_client, "report.odt", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ODT
    assert "report.odt" in response.headers["content-disposition"]
    _check_package(source, response.content, ODT_TEXTS, set())
    # The footnote's body stays its own: none of its text went into the paragraph around it.
    after = _tree(response.content, "content.xml")
    ns = {"text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0"}
    (note,) = after.iterfind(".//text:note", ns)
    claim = note.getparent()
    note_text = "".join(note.find("text:note-body", ns).itertext())
    assert note_text
    assert note_text not in (claim.text or "") + (note.tail or "")
    assert note.find("text:note-citation", ns).text == "1"
    spaced = after.find(".//text:s", ns)
    assert spaced.get("{urn:oasis:names:tc:opendocument:xmlns:text:1.0}c") == "3"


async def test_a_presentation_comes_back_translated_with_its_structure(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_odp()
    response = await post_file(edge_client, "deck.odp", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ODP
    # A presentation's master pages (styles.xml) are not translated: byte for byte.
    _check_package(source, response.content, ODP_TEXTS, {"styles.xml"})
    # A package whose mimetype came last, compressed, comes back as ODF wants it.
    misplaced = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(source)) as old, zipfile.ZipFile(misplaced, "w") as new:
        names = [i.filename for i in old.infolist() if i.filename != "mimetype"]
        for name in [*names, "mimetype"]:
            new.writestr(name, old.read(name), compress_type=zipfile.ZIP_DEFLATED)
    response = await post_file(edge_client, "deck.odp", misplaced.getvalue())
    assert response.status_code == 200, response.text
    with zipfile.ZipFile(io.BytesIO(response.content)) as result:
        assert [i.filename for i in result.infolist()] == ["mimetype", *names]
        assert result.infolist()[0].compress_type == zipfile.ZIP_STORED
        assert result.read("mimetype") == ODP.encode()


async def test_a_spreadsheet_comes_back_translated_with_its_values(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_ods()
    response = await post_file(edge_client, "book.ods", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ODS
    _check_package(source, response.content, ODS_TEXTS, {"styles.xml"})
    content = zipfile.ZipFile(io.BytesIO(response.content)).read("content.xml")
    original = zipfile.ZipFile(io.BytesIO(source)).read("content.xml")
    # Numbers, dates, booleans, currency, percentages and formulas byte for byte.
    for kept in (
        b'office:value-type="float" office:value="1234.5"><text:p>1234.5</text:p>',
        b'office:date-value="2024-05-01"><text:p>Wednesday, May 1, 2024</text:p>',
        b'office:boolean-value="true"><text:p>TRUE</text:p>',
        b'table:formula="of:=[.B2]*2"',
        b'table:formula="of:=&quot;Total so far&quot;" office:value-type="string"><text:p>'
        b"Total so far</text:p>",
        b'office:value="0.5"><text:p>half of it</text:p>',
    ):
        assert kept in content, kept
    # A string value that would hide the translated text is gone (it was there before).
    assert b"Shown words here" in original
    assert b"office:string-value" in original
    assert b"office:string-value" not in content
    # The repeated cells stay one element, repeated as they were.
    for repeat in (b'number-columns-repeated="3"', b'number-columns-repeated="1000"'):
        assert content.count(repeat) == original.count(repeat) > 0
    assert b'table:number-rows-repeated="1048000"' in content


async def test_a_file_without_words_comes_back_as_it_was(edge_client: httpx.AsyncClient) -> None:
    doc = OpenDocumentSpreadsheet()
    sheet = table.Table(name="Numbers")
    row = table.TableRow()
    add_cell(row, "42", valuetype="float", value="42")
    add_cell(row, "2024-05-01", valuetype="date", datevalue="2024-05-01")
    sheet.addElement(row)
    doc.spreadsheet.addElement(sheet)
    source = saved(doc)
    response = await post_file(edge_client, "numbers.ods", source)
    assert response.status_code == 200, response.text
    with (
        zipfile.ZipFile(io.BytesIO(source)) as old,
        zipfile.ZipFile(io.BytesIO(response.content)) as new,
    ):
        assert [i.filename for i in new.infolist()] == [i.filename for i in old.infolist()]
        for info in old.infolist():  # content.xml too: nothing in it was translated
            assert new.read(info.filename) == old.read(info.filename), info.filename


def _rewritten(data: bytes, member: str, change: Any) -> bytes:
    """The package with `member` replaced by `change(member's bytes)`."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            content = source.read(item)
            target.writestr(item, change(content) if item.filename == member else content)
    return out.getvalue()


def _with_dtd(content: bytes, entities: str, reference: str) -> bytes:
    declaration, rest = content.split(b"?>", 1)
    rest = rest.replace(b"Why it helps", reference.encode(), 1)
    return declaration + b"?>" + f"<!DOCTYPE office:document-content [{entities}]>".encode() + rest


async def test_entity_expansion_is_refused_without_expanding(
    edge_client: httpx.AsyncClient,
) -> None:
    laughs = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i + 1} "{("&lol" + (str(i) if i else "") + ";") * 10}">' for i in range(9)
    )
    bomb = _rewritten(make_odt(), "content.xml", lambda c: _with_dtd(c, laughs, "&lol9;"))
    assert len(bomb) < 20_000
    started = time.monotonic()
    error = assert_error(await post_file(edge_client, "laughs.odt", bomb), 422, "invalid_request")
    assert time.monotonic() - started < 5
    assert "content.xml" in error["message"]
    # A small, harmless-looking entity (or an external one) is refused all the same: no
    # OpenDocument file declares a DTD.
    for entities in ('<!ENTITY who "the team">', '<!ENTITY who SYSTEM "file:///etc/hostname">'):
        small = _rewritten(
            make_odt(), "content.xml", lambda c, e=entities: _with_dtd(c, e, "&who;")
        )
        error = assert_error(
            await post_file(edge_client, "entity.odt", small), 422, "invalid_request"
        )
        assert "DTD" in error["message"]


def _bomb(member: str, inflated: int) -> bytes:
    return zip_bomb(member, inflated, {"mimetype": ODT.encode()})


async def test_zip_bombs_and_damaged_files_are_refused(edge_client: httpx.AsyncClient) -> None:
    bomb = _bomb("content.xml", 80 << 20)  # past the 64 MiB of server.max_unzipped_bytes
    assert len(bomb) < 200_000
    error = assert_error(await post_file(edge_client, "bomb.odt", bomb), 413, "payload_too_large")
    assert "max_unzipped_bytes" in error["message"]
    error = assert_error(
        await post_file(edge_client, "broken.odt", b"not a zip"), 422, "invalid_request"
    )
    assert "could not be read as an OpenDocument text" in error["message"]
    assert error["field"] == "file"
    malformed = _rewritten(make_odt(), "content.xml", lambda c: c[: len(c) // 2])
    error = assert_error(
        await post_file(edge_client, "malformed.odt", malformed), 422, "invalid_request"
    )
    assert "content.xml" in error["message"]
    no_content = io.BytesIO()
    with zipfile.ZipFile(no_content, "w") as archive:
        archive.writestr("mimetype", ODP)
        archive.writestr("hello.txt", "a zip, but no document in it")
    error = assert_error(
        await post_file(edge_client, "empty.odp", no_content.getvalue()), 422, "invalid_request"
    )
    assert "content.xml" in error["message"]


async def test_a_package_of_another_kind_is_refused(edge_client: httpx.AsyncClient) -> None:
    error = assert_error(
        await post_file(edge_client, "sheet.odt", make_ods()), 422, "invalid_request"
    )
    assert ".ods" in error["message"]
    assert_error(await post_file(edge_client, "deck.ods", make_odp()), 422, "invalid_request")
    # Without its mimetype member, the body's kind tells.
    no_mimetype = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(make_ods())) as source,
        zipfile.ZipFile(no_mimetype, "w") as target,
    ):
        for item in source.infolist():
            if item.filename != "mimetype":
                target.writestr(item, source.read(item))
    error = assert_error(
        await post_file(edge_client, "sheet.odt", no_mimetype.getvalue()), 422, "invalid_request"
    )
    assert "office:text" in error["message"]


async def test_a_spreadsheet_of_too_many_cells_is_refused_quickly(
    edge_client: httpx.AsyncClient,
) -> None:
    """Ten million cells declared by one repeated cell with text in a repeated row, in a
    file of a few kilobytes: refused from the count, nothing expanded."""

    def repeated(content: bytes) -> bytes:
        row = (
            b'<table:table-row table:number-rows-repeated="10000"><table:table-cell '
            b'table:number-columns-repeated="1000" office:value-type="string"><text:p>'
            b"Repeated words</text:p></table:table-cell></table:table-row>"
        )
        return re.sub(b'(<table:table table:name="Notes">)', lambda m: m[1] + row, content)

    huge = _rewritten(make_ods(), "content.xml", repeated)
    assert b'number-rows-repeated="10000"' in zipfile.ZipFile(io.BytesIO(huge)).read("content.xml")
    assert len(huge) < 20_000
    started = time.monotonic()
    error = assert_error(await post_file(edge_client, "huge.ods", huge), 413, "payload_too_large")
    assert time.monotonic() - started < 5
    assert f"{MAX_CELLS:,}" in error["message"]
    broken = _rewritten(
        make_ods(), "content.xml", lambda c: c.replace(b'repeated="1048000"', b'repeated="-x"')
    )
    assert_error(await post_file(edge_client, "broken.ods", broken), 422, "invalid_request")
