"""EPUB e-books (tolk.translation.epub) without a server: the type is registered, no unit
holds a tag without its partner, and a chapter's root language is set and repaired."""

from __future__ import annotations

from tests.support.samples.epub import CHAPTER_1, COVER, XML_LANG, xml_tree
from tolk.translation.document import Tag
from tolk.translation.epub import chapter_document, well_formed, with_language
from tolk.translation.files import FILE_TYPES
from tolk.translation.html_format import escape_attribute


def test_epub_is_registered() -> None:
    assert FILE_TYPES[".epub"].media_type == "application/epub+zip"
    assert not FILE_TYPES[".epub"].text


def test_no_unit_holds_a_tag_without_its_partner() -> None:
    """An inline element around a block is cut into lone tags by the HTML format: they stay
    outside the units, where the model cannot move them; pairs inside one run stay pairs."""
    document = chapter_document(CHAPTER_1)
    for unit in document.units:
        tags = [p.source for p in unit.pieces if isinstance(p, Tag)]
        assert '<a href="ch2.xhtml">' not in tags
        assert "</a>" not in tags or '<a href="ch2.xhtml#storm">' in tags
    linked = [u for u in document.units if '<a href="ch2.xhtml#storm">' in str(u.pieces)]
    assert len(linked) == 1  # the inline link stays in its sentence
    texts = [" ".join(u.runs) for u in document.units]
    assert "Continue with the storm" in texts
    assert any(t.startswith("and more") for t in texts)
    assert not any("Wave" in t for t in texts)  # the SVG kept whole
    untranslated = {i: u.original() for i, u in enumerate(document.units)}
    for i in document.attributes:  # an attribute's value is rendered into its quotes
        untranslated[i] = [escape_attribute(" ".join(document.units[i].runs))]
    rendered = document.render(untranslated)
    assert rendered == CHAPTER_1


def test_the_root_language_and_repair() -> None:
    assert with_language(CHAPTER_1, "de").count('lang="de"') == 2
    assert 'lang="en"' not in with_language(CHAPTER_1, "de").split("<head>")[0]
    added = with_language(COVER, "pt-BR")
    assert xml_tree(added.encode()).get(XML_LANG) == "pt-BR"
    prolog = "<?xml version='1.0'?>\n<!-- a > comment --><!DOCTYPE html>\n"
    assert with_language(prolog + "<html lang='en'><p/></html>", "de") == (
        prolog + "<html lang='de'><p/></html>"
    )
    # Characters XML forbids are removed; a document that still does not parse is repaired.
    assert well_formed("<p>a\x01b\x0c</p>") == "<p>ab</p>"
    repaired = well_formed("<html><p>unclosed <b>bold</p></html>")
    assert xml_tree(repaired.encode()).tag == "html"
