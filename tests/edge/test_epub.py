"""EPUB e-books (.epub) translated through the in-process server over stand-in engines
(edge), whose token salad holds `<`, `&` and `*`: EPUB 3 and EPUB 2 books built here come
back with every chapter well-formed XML, every text translated, the markup, the navigation's
targets, the images and the CSS as they were, `mimetype` first and stored; zip bombs,
entity bombs, damaged, foreign and DRM-protected files refused with a 4xx."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Sequence
from typing import Any

import httpx
from lxml import etree  # type: ignore[import-untyped]

from tests.support.errors import assert_error
from tests.support.files import post_file, zip_bomb
from tests.support.samples.epub import CHAPTER_1, COVER, XML_LANG, xml_tree
from tolk.translation.epub import MAX_SPINE

XHTML_NS = "http://www.w3.org/1999/xhtml"


DC = "{http://purl.org/dc/elements/1.1/}"


SVG_NS = "http://www.w3.org/2000/svg"


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


CSS = b"body { font-family: serif; }\np { text-indent: 1em; }\n"


CONTAINER = b"""<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""


OPF3 = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid"
  xml:lang="en">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="uid">urn:uuid:0b4a7a3e-6d1c-4d38-9a70-2f3e6f0c1a11</dc:identifier>
    <dc:title id="title">The Quiet Harbour</dc:title>
    <dc:creator>Ann Author</dc:creator>
    <dc:language>en</dc:language>
    <dc:description>A short story about ships that wait for the tide.</dc:description>
    <meta property="dcterms:modified">2024-05-01T12:00:00Z</meta>
    <meta refines="#title" property="title-type">main</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch1" href="text/chapter%201.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch2" href="text/ch2.xhtml" media-type="application/xhtml+xml"/>
    <item id="css" href="style/book.css" media-type="text/css"/>
    <item id="boat" href="images/boat.png" media-type="image/png"/>
  </manifest>
  <spine>
    <itemref idref="cover" linear="no"/>
    <itemref idref="ch1"/>
    <itemref idref="ch2"/>
  </spine>
</package>
"""


NAV = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"
  lang="en" xml:lang="en">
<head><title>Contents</title></head>
<body>
  <nav epub:type="toc" id="toc">
    <h1>Table of contents</h1>
    <ol>
      <li><a href="text/chapter%201.xhtml">The harbour at dawn</a></li>
      <li><a href="text/ch2.xhtml#storm">When the storm came</a></li>
    </ol>
  </nav>
  <nav epub:type="landmarks" hidden="">
    <ol><li><a epub:type="bodymatter" href="text/chapter%201.xhtml">Start reading</a></li></ol>
  </nav>
</body>
</html>
"""


CHAPTER_2 = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"
  lang="en" xml:lang="en">
<head><title>When the storm came</title>
<link rel="stylesheet" type="text/css" href="../style/book.css"/></head>
<body>
  <section epub:type="chapter" id="storm">
    <h2>When the storm came</h2>
    <p>The wind rose in the <strong>afternoon</strong> and the sky turned grey.</p>
    <blockquote><p>Stay inside, said the old captain.</p></blockquote>
    <ul><li>Ropes were tied</li><li>Sails were lowered</li></ul>
    <p>They waited<a epub:type="noteref" href="#n1">1</a> for hours.</p>
    <aside epub:type="footnote" id="n1"><p>Some waited until the next day.</p></aside>
    <p>Code like <code>tie(rope)</code> is kept.</p>
  </section>
</body>
</html>
"""


OPF2 = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="BookId">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"
    xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:title>Letters from the Coast</dc:title>
    <dc:language>en-GB</dc:language>
    <dc:identifier id="BookId" opf:scheme="ISBN">9780000000000</dc:identifier>
    <dc:description>&lt;p&gt;Old &lt;b&gt;letters&lt;/b&gt; in a box.&lt;/p&gt;</dc:description>
  </metadata>
  <manifest>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="letter1" href="letter1.html" media-type="application/xhtml+xml"/>
    <item id="css" href="style.css" media-type="text/css"/>
  </manifest>
  <spine toc="ncx"><itemref idref="letter1"/></spine>
</package>
"""


NCX = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1" xml:lang="en">
  <head><meta name="dtb:uid" content="9780000000000"/></head>
  <docTitle><text>Letters from the Coast</text></docTitle>
  <docAuthor><text>Bea Writer</text></docAuthor>
  <navMap>
    <navPoint id="np1" playOrder="1">
      <navLabel><text>The first letter</text></navLabel>
      <content src="letter1.html"/>
      <navPoint id="np2" playOrder="2">
        <navLabel><text>A postscript written later</text></navLabel>
        <content src="letter1.html#ps"/>
      </navPoint>
    </navPoint>
  </navMap>
</ncx>
"""


LETTER = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en">
<head><title>The first letter</title><link href="style.css" rel="stylesheet" type="text/css"/>
</head>
<body>
<h1>Dear sister</h1>
<p>The sea is calm&nbsp;today and the <i>gulls</i> are loud.</p>
<p id="ps">P.S. Send more paper, please.</p>
</body>
</html>
"""


def _zip(
    members: Sequence[tuple[str, bytes | str]], mimetype: bytes | None = b"application/epub+zip"
) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if mimetype is not None:
            archive.writestr(zipfile.ZipInfo("mimetype"), mimetype)  # stored
        for name, content in members:
            archive.writestr(name, content)
    return out.getvalue()


def make_epub3() -> bytes:
    return _zip(
        [
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", OPF3),
            ("OEBPS/nav.xhtml", NAV),
            ("OEBPS/cover.xhtml", COVER),
            ("OEBPS/text/chapter 1.xhtml", CHAPTER_1),
            ("OEBPS/text/ch2.xhtml", CHAPTER_2),
            ("OEBPS/style/book.css", CSS),
            ("OEBPS/images/boat.png", PNG),
        ]
    )


def make_epub2() -> bytes:
    return _zip(
        [
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", OPF2),
            ("OEBPS/toc.ncx", NCX),
            ("OEBPS/letter1.html", LETTER),
            ("OEBPS/style.css", CSS),
        ]
    )


def _members(content: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return {i.filename: archive.read(i) for i in archive.infolist()}


def _name(element: Any) -> str:
    return str(etree.QName(element).localname)


def _prose(root: Any) -> list[tuple[str, str]]:
    """Each element holding text directly (a paragraph, a heading, a link...) and its text,
    in document order; SVG and code left out."""
    out = []
    for element in root.iter(etree.Element):
        if any(etree.QName(a).namespace == SVG_NS for a in [element, *element.iterancestors()]):
            continue
        if _name(element) in ("code", "style", "script"):
            continue
        own = (element.text or "") + "".join(child.tail or "" for child in element)
        if any(c.isalpha() for c in own):
            out.append((_name(element), " ".join(own.split())))
    return out


EMPHASIS = {"em", "strong", "i", "b"}  # what the fallback may drop to keep a sentence whole


def _structure(root: Any) -> list[tuple[str, dict[str, str]]]:
    """Every element but emphasis with its attributes (`alt` and the root's languages left
    out: translated), in document order."""
    out = []
    for element in root.iter(etree.Element):
        if _name(element) in EMPHASIS:
            continue
        attributes = {k: v for k, v in element.attrib.items() if k not in ("alt", "lang", XML_LANG)}
        out.append((element.tag, attributes))
    return out


def _check_chapter(before: bytes, after: bytes) -> Any:
    """A translated chapter: well-formed XML, its structure kept, all its prose changed."""
    old, new = xml_tree(before), xml_tree(after)  # raises if not well-formed
    assert after.startswith(before[: before.index(b"<html")])  # declaration, DOCTYPE
    assert _structure(new) == _structure(old)
    assert new.get(XML_LANG) == "de"
    if old.get("lang") is not None:
        assert new.get("lang") == "de"
    old_prose, new_prose = _prose(old), _prose(new)
    assert old_prose, "the chapter has prose to translate"
    # Emphasis the fallback dropped merges its words into the paragraph: compare by element.
    old_by_tag = [(t, s) for t, s in old_prose if t not in EMPHASIS]
    new_by_tag = [(t, s) for t, s in new_prose if t not in EMPHASIS]
    assert [t for t, _ in new_by_tag] == [t for t, _ in old_by_tag]
    for (tag, text), (_, translated) in zip(old_by_tag, new_by_tag, strict=True):
        assert translated != text, (tag, text)
    return new


async def test_an_epub3_book_comes_back_translated_and_well_formed(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_epub3()
    response = await post_file(edge_client, "harbour.epub", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/epub+zip"
    before, after = _members(source), _members(response.content)
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.testzip() is None
        first = archive.infolist()[0]
        assert first.filename == "mimetype"
        assert first.compress_type == zipfile.ZIP_STORED
        assert first.extra == b""
    assert list(after) == list(before)  # the same members in the same order
    assert after["mimetype"] == b"application/epub+zip"
    for kept in ("OEBPS/style/book.css", "OEBPS/images/boat.png", "META-INF/container.xml"):
        assert after[kept] == before[kept], kept

    for path in ("OEBPS/text/chapter 1.xhtml", "OEBPS/text/ch2.xhtml", "OEBPS/nav.xhtml"):
        _check_chapter(before[path], after[path])
    chapter = xml_tree(after["OEBPS/text/chapter 1.xhtml"])
    ns = {"x": XHTML_NS, "s": SVG_NS}
    # The head as it was but for the title; the SVG whole; the image's alt translated.
    assert chapter.xpath("//x:link/@href", namespaces=ns) == ["../style/book.css"]
    assert chapter.xpath("//x:meta/@charset", namespaces=ns) == ["utf-8"]
    assert chapter.xpath("//x:title/text()", namespaces=ns) != ["The harbour at dawn"]
    assert "".join(chapter.xpath("//s:text/text()", namespaces=ns)).split() == [
        "Wave",
        "drawing",
    ]
    img = chapter.xpath("//x:img", namespaces=ns)[0]
    assert img.get("src") == "../images/boat.png"
    assert img.get("alt") not in ("A small red boat", None)
    pagebreak = chapter.xpath("//x:span[@id='p2']", namespaces=ns)[0]
    assert pagebreak.get("{http://www.idpf.org/2007/ops}type") == "pagebreak"
    # The link around a block keeps its block inside it.
    teaser = chapter.xpath("//x:a[@href='ch2.xhtml']/x:div[@class='teaser']/x:p", namespaces=ns)
    assert len(teaser) == 1
    code = xml_tree(after["OEBPS/text/ch2.xhtml"]).xpath("//x:code/text()", namespaces=ns)
    assert code == ["tie(rope)"]

    # The cover has no prose: only its language changes.
    cover = xml_tree(after["OEBPS/cover.xhtml"])
    assert cover.get(XML_LANG) == "de"
    assert _structure(cover) == _structure(xml_tree(before["OEBPS/cover.xhtml"]))

    nav = xml_tree(after["OEBPS/nav.xhtml"])
    links = nav.xpath("//x:nav[@id='toc']//x:a", namespaces=ns)
    assert [a.get("href") for a in links] == ["text/chapter%201.xhtml", "text/ch2.xhtml#storm"]
    assert all(
        a.text and a.text not in ("The harbour at dawn", "When the storm came") for a in links
    )

    opf = xml_tree(after["OEBPS/content.opf"])
    assert opf.find(f".//{DC}title").text != "The Quiet Harbour"
    assert opf.find(f".//{DC}title").get("id") == "title"
    assert opf.find(f".//{DC}description").text.strip()
    assert opf.find(f".//{DC}description").text != (
        "A short story about ships that wait for the tide."
    )
    assert opf.find(f".//{DC}language").text == "de"
    assert opf.find(f".//{DC}creator").text == "Ann Author"
    assert opf.find(f".//{DC}identifier").text == "urn:uuid:0b4a7a3e-6d1c-4d38-9a70-2f3e6f0c1a11"
    assert opf.get(XML_LANG) == "de"
    old_opf = xml_tree(before["OEBPS/content.opf"])
    assert [(e.tag, dict(e.attrib)) for e in opf.iter("{*}item", "{*}itemref")] == [
        (e.tag, dict(e.attrib)) for e in old_opf.iter("{*}item", "{*}itemref")
    ]


async def test_an_epub2_book_with_an_ncx_comes_back_translated(
    edge_client: httpx.AsyncClient,
) -> None:
    source = make_epub2()
    response = await post_file(edge_client, "letters.epub", source)
    assert response.status_code == 200, response.text
    before, after = _members(source), _members(response.content)
    assert list(after) == list(before)
    assert after["OEBPS/style.css"] == CSS
    letter = _check_chapter(before["OEBPS/letter1.html"], after["OEBPS/letter1.html"])
    assert letter.get("lang") is None  # XHTML 1.1 has xml:lang only

    ncx = xml_tree(after["OEBPS/toc.ncx"])
    assert after["OEBPS/toc.ncx"].count(b"<!DOCTYPE ncx") == 1
    assert ncx.get(XML_LANG) == "de"
    labels = [t.text for t in ncx.iter("{*}text")]
    old = ["Letters from the Coast", "Bea Writer", "The first letter", "A postscript written later"]
    assert len(labels) == len(old)
    assert labels[1] == "Bea Writer"  # an author, not a label
    assert all(new != was for new, was in zip(labels, old, strict=True) if was != "Bea Writer")
    assert [c.get("src") for c in ncx.iter("{*}content")] == ["letter1.html", "letter1.html#ps"]

    opf = xml_tree(after["OEBPS/content.opf"])
    assert opf.find(f".//{DC}title").text != "Letters from the Coast"
    assert opf.find(f".//{DC}language").text == "de"
    description = opf.find(f".//{DC}description").text
    # Written as HTML, translated as HTML: the markup kept, the words changed.
    assert description.startswith("<p>")
    assert description.endswith("</p>")
    assert "Old" not in description or "box" not in description


async def test_a_font_obfuscated_book_is_translated(edge_client: httpx.AsyncClient) -> None:
    encryption = """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
  xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/>
    <enc:CipherData><enc:CipherReference URI="OEBPS/fonts/serif.otf"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>"""
    members = [*_members(make_epub2()).items()][1:]
    book = _zip([*members, ("META-INF/encryption.xml", encryption), ("OEBPS/fonts/serif.otf", PNG)])
    response = await post_file(edge_client, "fonts.epub", book)
    assert response.status_code == 200, response.text
    after = _members(response.content)
    assert after["OEBPS/fonts/serif.otf"] == PNG
    assert after["META-INF/encryption.xml"] == encryption.encode()


def _bomb(member: str, inflated: int) -> bytes:
    container = CONTAINER if isinstance(CONTAINER, bytes) else CONTAINER.encode()
    first = {"mimetype": b"application/epub+zip", "META-INF/container.xml": container}
    return zip_bomb(member, inflated, first)


def _doctype_laughs(root: str) -> str:
    """A DOCTYPE declaring the billion laughs: `&lol9;` expands to 10**9 "lol"s."""
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)
    ]
    return f"<!DOCTYPE {root} [{''.join(entities)}]>"


def _laughs() -> str:
    return OPF3.replace("<package xmlns", f"{_doctype_laughs('package')}\n<package xmlns").replace(
        "The Quiet Harbour", "&lol9;"
    )


async def test_hostile_and_damaged_books_are_refused(edge_client: httpx.AsyncClient) -> None:
    bomb = _bomb("OEBPS/text/ch1.xhtml", 80 << 20)  # past the 64 MiB of max_unzipped_bytes
    assert len(bomb) < 200_000
    error = assert_error(await post_file(edge_client, "bomb.epub", bomb), 413, "payload_too_large")
    assert "max_unzipped_bytes" in error["message"]

    members = [*_members(make_epub3()).items()][1:]  # all but the mimetype
    laughs = _zip([(n, _laughs() if n == "OEBPS/content.opf" else c) for n, c in members])
    started = time.monotonic()
    response = await post_file(edge_client, "laughs.epub", laughs)
    assert time.monotonic() - started < 5
    error = assert_error(response, 422, "invalid_request")
    assert "entities in OEBPS/content.opf" in error["message"]
    # Entities declared but harmless are refused too: tolk expands none.
    one = OPF3.replace("<package xmlns", '<!DOCTYPE package [<!ENTITY t "Tide">]>\n<package xmlns')
    declared = _zip(
        [(n, one.replace("Harbour", "&t;") if n.endswith(".opf") else c) for n, c in members]
    )
    error = assert_error(
        await post_file(edge_client, "entity.epub", declared), 422, "invalid_request"
    )
    assert "entities" in error["message"]

    bomb_chapter = CHAPTER_2.replace("<!DOCTYPE html>", _doctype_laughs("html"))
    bomb_chapter = bomb_chapter.replace("Stay inside", "&lol9;")
    assert "<!ENTITY lol9" in bomb_chapter
    chapter_laughs = _zip([(n, bomb_chapter if n.endswith("ch2.xhtml") else c) for n, c in members])
    started = time.monotonic()
    error = assert_error(
        await post_file(edge_client, "laughs.epub", chapter_laughs), 422, "invalid_request"
    )
    assert time.monotonic() - started < 5
    assert "entities in OEBPS/text/ch2.xhtml" in error["message"]

    no_container = _zip([(n, c) for n, c in members if n != "META-INF/container.xml"])
    error = assert_error(
        await post_file(edge_client, "plain.epub", no_container), 422, "invalid_request"
    )
    assert "META-INF/container.xml" in error["message"]
    assert error["field"] == "file"

    wrong = _zip(members, mimetype=b"application/zip")
    error = assert_error(await post_file(edge_client, "wrong.epub", wrong), 422, "invalid_request")
    assert "mimetype" in error["message"]

    drm = """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
  xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>
    <enc:CipherData><enc:CipherReference URI="OEBPS/text/ch2.xhtml"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>"""
    encrypted = _zip([*members, ("META-INF/encryption.xml", drm)])
    error = assert_error(
        await post_file(edge_client, "drm.epub", encrypted), 422, "invalid_request"
    )
    assert "DRM" in error["message"]
    assert "OEBPS/text/ch2.xhtml" in error["message"]

    missing = _zip([(n, c) for n, c in members if n != "OEBPS/text/ch2.xhtml"])
    error = assert_error(
        await post_file(edge_client, "missing.epub", missing), 422, "invalid_request"
    )
    assert "OEBPS/text/ch2.xhtml" in error["message"]

    broken_opf = _zip([(n, "<package>" if n.endswith(".opf") else c) for n, c in members])
    assert_error(await post_file(edge_client, "broken.epub", broken_opf), 422, "invalid_request")
    assert_error(
        await post_file(edge_client, "notzip.epub", b"not a zip at all"), 422, "invalid_request"
    )

    refs = '<itemref idref="ch1"/>' * (MAX_SPINE + 1)
    long_opf = OPF3.replace('<itemref idref="ch1"/>', refs)
    long = _zip([(n, long_opf if n.endswith(".opf") else c) for n, c in members])
    error = assert_error(await post_file(edge_client, "long.epub", long), 413, "payload_too_large")
    assert str(MAX_SPINE) in error["message"]
