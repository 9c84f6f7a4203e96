"""XLIFF 1.2 and 2.0 files (tolk.translation.xliff): files as Angular (`ng extract-i18n`,
both formats), Okapi and Xcode write them and the OASIS specification's inline examples,
translated through the in-process server over stand-in engines (edge) and read back with
lxml: every unit to translate has a target, its inline codes the source's (ids, attributes,
code content), units under translate="no" and human translations untouched, the rest of the
file the same elements as before; entity bombs, malformed XML, other namespaces and too
many units refused with a 4xx. Unit tests drive open_file and save with made-up
translations: codes moved by the model, flagged translations, codes that did not survive."""

from __future__ import annotations

import copy
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from lxml import etree  # type: ignore[import-untyped]

from tests.support.errors import assert_error
from tests.support.files import post_file
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.languages import lang
from tolk.translation import xliff
from tolk.translation.document import PLACEHOLDER, Document, Text
from tolk.translation.fidelity import TextWarning
from tolk.translation.files import FILE_TYPES, Opened
from tolk.translation.results import Translation, Usage
from tolk.translation.segment import Segmented

X12 = f"{{{xliff.NS12}}}"
X20 = f"{{{xliff.NS20}}}"
CODES12 = {"g", "x", "bx", "ex", "ph", "bpt", "ept", "it", "mrk"}
CODES20 = {"pc", "ph", "sc", "ec", "mrk", "sm", "em", "cp"}
PAIRED = {"g", "pc", "mrk"}

# What `ng extract-i18n` writes (XLIFF 1.2): interpolations and elements as <x/>, an ICU
# plural, context groups and the developer's notes.
ANGULAR_12 = """<?xml version="1.0" encoding="UTF-8" ?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en-US" datatype="plaintext" original="ng2.template">
    <body>
      <trans-unit id="introductionHeader" datatype="html">
        <source>Hello i18n!</source>
        <context-group purpose="location">
          <context context-type="sourcefile">src/app/app.component.html</context>
          <context context-type="linenumber">4</context>
        </context-group>
        <note priority="1" from="description">An introduction header for this sample</note>
        <note priority="1" from="meaning">User welcome</note>
      </trans-unit>
      <trans-unit id="5206857922697139278" datatype="html">
        <source>Updated <x id="INTERPOLATION" equiv-text="{{ minutes }}"/> minutes ago</source>
        <context-group purpose="location">
          <context context-type="sourcefile">src/app/app.component.html</context>
          <context context-type="linenumber">11</context>
        </context-group>
      </trans-unit>
      <trans-unit id="linkText" datatype="html">
        <source>Click <x id="START_LINK" ctype="x-a" equiv-text="&lt;a href=&quot;#&quot;&gt;"/>\
here<x id="CLOSE_LINK" ctype="x-a" equiv-text="&lt;/a&gt;"/> to read the <x id="START_BOLD_TEXT" \
ctype="x-b" equiv-text="&lt;b&gt;"/>whole<x id="CLOSE_BOLD_TEXT" ctype="x-b" \
equiv-text="&lt;/b&gt;"/> story.</source>
      </trans-unit>
      <trans-unit id="countOnly" datatype="html">
        <source><x id="INTERPOLATION" equiv-text="{{ count }}"/></source>
      </trans-unit>
      <trans-unit id="done" datatype="html">
        <source>Cancel the upload</source>
        <target>Hochladen abbrechen</target>
      </trans-unit>
    </body>
  </file>
</xliff>
"""

# Okapi's XLIFF 1.2 (Rainbow): segmented sources, bpt/ept around a link, ph, targets
# pre-filled with the source, an alternative translation, a group not to translate, and an
# Xcode-style second file with xml:space="preserve" and the XSD's schemaLocation.
OKAPI_12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2" \
xmlns:okp="okapi-framework:xliff-extensions" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
xsi:schemaLocation="urn:oasis:names:tc:xliff:document:1.2 xliff-core-1.2-strict.xsd">
<file original="page.html" source-language="en" target-language="fr" datatype="html" \
okp:inputEncoding="UTF-8">
<header><skl><external-file href="page.html.skl"></external-file></skl>
<tool tool-id="okapi" tool-name="Rainbow"/></header>
<body>
<trans-unit id="tu1" xml:space="preserve" resname="intro">
<source xml:lang="en">Read <bpt id="1" ctype="link">&lt;a href="x.html"></bpt>this page<ept \
id="1">&lt;/a></ept> first. Then press <ph id="2" ctype="lb">&lt;br/></ph>the <g id="3" \
ctype="bold">green</g> button.</source>
<seg-source><mrk mid="0" mtype="seg">Read <bpt id="1" ctype="link">&lt;a href="x.html"></bpt>\
this page<ept id="1">&lt;/a></ept> first.</mrk> <mrk mid="1" mtype="seg">Then press <ph id="2" \
ctype="lb">&lt;br/></ph>the <g id="3" ctype="bold">green</g> button.</mrk></seg-source>
<target xml:lang="fr" state="needs-translation"><mrk mid="0" mtype="seg">Read <bpt id="1" \
ctype="link">&lt;a href="x.html"></bpt>this page<ept id="1">&lt;/a></ept> first.</mrk> \
<mrk mid="1" mtype="seg">Then press <ph id="2" ctype="lb">&lt;br/></ph>the <g id="3" \
ctype="bold">green</g> button.</mrk></target>
<alt-trans match-quality="80"><source>Read this page.</source>\
<target>Lisez cette page.</target></alt-trans>
</trans-unit>
<group id="g1" translate="no" resname="brand">
<trans-unit id="tu2"><source>Acme Rocket Skates</source></trans-unit>
</group>
<trans-unit id="tu3"><source>Copy the <it id="4" pos="open">&lt;i></it>quoted \
<mrk mtype="protected" mid="p1">Acme Config</mrk> text<x id="5" ctype="image"/>, \
<bx id="6"/>then paste it<ex id="6"/>.</source></trans-unit>
<trans-unit id="tu4" approved="yes"><source>Save</source>\
<target state="final">Enregistrer</target></trans-unit>
<trans-unit id="tu5" translate="no"><source>Do not translate this</source></trans-unit>
</body>
</file>
<file original="MyApp/en.lproj/Localizable.strings" source-language="en" datatype="plaintext">
<header><tool tool-id="com.apple.dt.xcode" tool-name="Xcode" tool-version="15.0"/></header>
<body>
<trans-unit id="Open the document browser" xml:space="preserve">
<source>Open  the document browser</source>
<note>Toolbar button title</note>
</trans-unit>
</body>
</file>
</xliff>
"""

# What `ng extract-i18n --format=xlf2` writes, with the OASIS XLIFF 2.0 specification's
# inline examples (pc, ph with originalData, sc/ec, mrk, sm/em, cp), an ignorable, a unit
# under translate="no", a reviewed human translation and notes.
ANGULAR_20 = """<?xml version="1.0" encoding="UTF-8" ?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en-US">
  <file id="ngi18n" original="ng.template">
    <unit id="introductionHeader">
      <notes>
        <note category="location">src/app/app.component.html:4</note>
        <note category="description">An introduction header for this sample</note>
      </notes>
      <segment>
        <source>Hello i18n!</source>
      </segment>
    </unit>
    <unit id="2793614983468390085">
      <notes>
        <note category="location">src/app/app.component.html:11</note>
      </notes>
      <segment>
        <source>Updated <ph id="0" equiv="INTERPOLATION" disp="{{ minutes }}"/> minutes ago</source>
      </segment>
    </unit>
    <unit id="spec-pc">
      <originalData>
        <data id="d1">&lt;B></data>
        <data id="d2">&lt;/B></data>
        <data id="d3">&lt;BR/></data>
      </originalData>
      <segment id="s1">
        <source>Press <pc id="1" dataRefStart="d1" dataRefEnd="d2" type="fmt" \
subType="xlf:b">the big</pc> button.</source>
      </segment>
      <ignorable>
        <source> </source>
      </ignorable>
      <segment id="s2">
        <source>Then<ph id="2" dataRef="d3"/>wait <sc id="3" type="fmt"/>a \
moment<ec startRef="3" type="fmt"/> and read the <mrk id="m1" type="term" \
ref="#t1">manual</mrk><cp hex="001A"/>.</source>
      </segment>
    </unit>
    <unit id="spec-sm">
      <segment>
        <source>Use <sm id="c1" type="comment" value="check"/>the <mrk id="m2" \
translate="no">tolk</mrk> server<em startRef="c1"/> for this.</source>
      </segment>
    </unit>
    <unit id="brand" translate="no">
      <segment>
        <source>Acme Rocket Skates</source>
      </segment>
    </unit>
    <unit id="reviewed">
      <segment state="reviewed">
        <source>Cancel the upload</source>
        <target>Hochladen abbrechen</target>
      </segment>
    </unit>
    <unit id="preserved">
      <segment>
        <source xml:space="preserve">  Keep   these   spaces  </source>
      </segment>
    </unit>
  </file>
</xliff>
"""


def _parse(data: bytes) -> Any:
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))


def _local(element: Any) -> str:
    return str(etree.QName(element).localname)


def _codes(element: Any, names: set[str]) -> Counter[tuple[str, ...]]:
    """The inline codes under `element`: a paired one as its name and attributes, a
    standalone one whole (its code content too); a code inside a kept one is part of it."""
    found: Counter[tuple[str, ...]] = Counter()

    def walk(node: Any) -> None:
        for child in node:
            if not isinstance(child.tag, str):
                continue
            name = _local(child)
            attributes = tuple(f"{k}={v}" for k, v in sorted(child.attrib.items()))
            translatable = name in PAIRED and not (
                child.get("mtype") == "protected" or child.get("translate") == "no"
            )
            if translatable:
                found[(name, *attributes)] += 1
                walk(child)
            else:
                whole = copy.deepcopy(child)
                whole.tail = None
                found[(name, etree.tostring(whole, encoding="unicode"))] += 1

    walk(element)
    assert set(n for n, *_ in found) <= names
    return found


def _text(element: Any) -> str:
    """An element's text, what is inside its standalone codes left out."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and _local(child) in PAIRED:
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _skeleton(root: Any, ns: str, owners: str) -> str:
    """The document without what translating it may change: the targets of its units
    (segments), tolk's notes, states, the target language; whitespace-only text out."""
    tree = copy.deepcopy(root)
    for owner in tree.iter(f"{{{ns}}}{owners}"):
        owner.attrib.pop("state", None)
        for target in owner.findall(f"{{{ns}}}target"):
            owner.remove(target)
    for note in list(tree.iter(f"{{{ns}}}note")):
        if note.get("from") == "tolk" or note.get("category") == "tolk":
            note.getparent().remove(note)
    for notes in list(tree.iter(f"{{{ns}}}notes")):
        if len(notes) == 0:
            notes.getparent().remove(notes)
    for file in tree.iter(f"{{{ns}}}file"):
        file.attrib.pop("target-language", None)
    tree.attrib.pop("trgLang", None)
    for node in tree.iter():
        if node.text is not None and not node.text.strip():
            node.text = None
        if node.tail is not None and not node.tail.strip():
            node.tail = None
    return str(etree.tostring(tree, method="c14n").decode())


def _check_translated(source: Any, target: Any, codes: set[str], copied: bool = False) -> None:
    """A target against its source: the same codes, other text (`copied`: the same)."""
    assert target is not None, etree.tostring(source)
    assert _codes(target, codes) == _codes(source, codes)
    if copied:
        assert _text(target) == _text(source)
    elif any(c.isalpha() for c in _text(source)):
        assert _text(target).strip()
        assert _text(target) != _text(source)
    else:  # no words: the source as it is
        assert (
            etree.tostring(target, encoding="unicode").split(">", 1)[1].rsplit("<", 1)[0]
            == (etree.tostring(source, encoding="unicode").split(">", 1)[1].rsplit("<", 1)[0])
        )


def check12(before: bytes, after: bytes, copied: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A translated XLIFF 1.2 file against its source; its translated units by id (those
    `copied`: their source copied into their target)."""
    old, new = _parse(before), _parse(after)
    assert _skeleton(new, xliff.NS12, "trans-unit") == _skeleton(old, xliff.NS12, "trans-unit")
    assert [f.get("target-language") for f in new.iter(f"{X12}file")] == ["de"] * len(
        old.findall(f"{X12}file")
    )
    translated = {}
    for was, unit in zip(old.iter(f"{X12}trans-unit"), new.iter(f"{X12}trans-unit"), strict=True):
        source, target = unit.find(f"{X12}source"), unit.find(f"{X12}target")
        held = was.find(f"{X12}target")
        skipped = any(n.get("translate") == "no" for n in [unit, *unit.iterancestors()])
        if skipped or unit.get("approved") == "yes":
            assert etree.tostring(unit) == etree.tostring(was)
            continue
        if held is not None and _text(held) != _text(was.find(f"{X12}source")):
            continue  # a person's translation: kept (checked where a test has one)
        segments = unit.find(f"{X12}seg-source")
        # The target right after the source (after seg-source, if there is one).
        assert target.getprevious() is (source if segments is None else segments)
        if held is not None:  # its attributes kept, but for the language
            assert {k: v for k, v in target.attrib.items() if k != "state"} == {
                k: ("de" if k == xliff.XML_LANG else v)
                for k, v in held.attrib.items()
                if k != "state"
            }
        if segments is not None:
            marks = [m for m in target if m.get("mtype") == "seg"]
            assert [m.get("mid") for m in marks] == [
                m.get("mid") for m in segments if m.get("mtype") == "seg"
            ]
            for mark, seg in zip(marks, [m for m in segments if _local(m) == "mrk"], strict=True):
                _check_translated(seg, mark, CODES12)
        else:
            _check_translated(source, target, CODES12, unit.get("id") in copied)
        notes = [n for n in unit.findall(f"{X12}note") if n.get("from") == "tolk"]
        if target.get("state") == "needs-review-translation":
            assert len(notes) == 1
            assert notes[0].text.startswith("tolk: ")
        else:
            assert target.get("state") == "translated"
            assert notes == []
        translated[unit.get("id")] = unit
    return translated


def check20(before: bytes, after: bytes) -> dict[tuple[str, int], Any]:
    """A translated XLIFF 2.0 file against its source; its translated segments by unit id
    and segment number."""
    old, new = _parse(before), _parse(after)
    assert _skeleton(new, xliff.NS20, "segment") == _skeleton(old, xliff.NS20, "segment")
    assert new.get("trgLang") == "de"
    translated: dict[tuple[str, int], Any] = {}
    for was, unit in zip(old.iter(f"{X20}unit"), new.iter(f"{X20}unit"), strict=True):
        if unit.get("translate") == "no":
            assert etree.tostring(unit) == etree.tostring(was)
            continue
        notes = [n for n in unit.iter(f"{X20}note") if n.get("category") == "tolk"]
        flagged = 0
        olds = was.findall(f"{X20}segment")
        for n, (seg, old_seg) in enumerate(zip(unit.findall(f"{X20}segment"), olds, strict=True)):
            if old_seg.get("state") in ("reviewed", "final"):
                assert etree.tostring(seg) == etree.tostring(old_seg)
                continue
            source, target = seg.find(f"{X20}source"), seg.find(f"{X20}target")
            assert target.getprevious() is source
            _check_translated(source, target, CODES20)
            assert seg.get("state") in ("translated", "initial")
            flagged += seg.get("state") == "initial"
            translated[(unit.get("id"), n)] = seg
        assert len(notes) == flagged
        if notes:  # in the unit's notes, before the segments
            assert unit.index(notes[0].getparent()) < unit.index(unit.find(f"{X20}segment"))
    return translated


def test_the_types_are_registered() -> None:
    assert FILE_TYPES[".xlf"].kind == FILE_TYPES[".xliff"].kind == "xliff"
    assert FILE_TYPES[".xlf"].media_type.startswith("application/xliff+xml")


def _documents(opened: Opened) -> Sequence[Document]:
    """The file's documents (XLIFF's are made whole: the splitter is never called)."""

    def never(text: str) -> Segmented:
        raise AssertionError(text)

    return opened.documents(never)


def test_inline_codes_become_placeholders_and_text_the_words() -> None:
    opened = xliff.open_file("a.xlf", OKAPI_12.encode(), 0)
    docs = _documents(opened)
    # tu1's two segments, tu3, the Xcode unit; not tu2, tu4 (approved), tu5.
    assert len(docs) == 4
    second, copied, xcode = docs[1].units[0], docs[2].units[0], docs[3].units[0]
    assert second.masked == "Then press <x1/>the <g2>green</g2> button."
    # An isolated tag, a protected mrk, an x, bx and ex: each a standalone placeholder.
    assert copied.masked == "Copy the <x1/>quoted <x2/> text<x3/>, <x4/>then paste it<x5/>."
    assert xcode.masked == "Open  the document browser"  # xml:space="preserve": as written
    assert opened.characters == sum(
        len(p.text) for d in docs for p in d.units[0].pieces if isinstance(p, Text)
    )
    assert opened.sample.startswith("Read this page first.")
    # Without xml:space="preserve", a pretty-printed source's layout is one space.
    loose = ANGULAR_12.replace(
        "<source>Hello i18n!</source>", "<source>\n  Hello\n  i18n!</source>"
    )
    first = _documents(xliff.open_file("l.xlf", loose.encode(), 0))[0]
    assert first.units[0].masked == " Hello i18n!"
    assert [p.source for p in first.units[0].pieces if isinstance(p, Text)] == [
        "\n  Hello\n  i18n!"
    ]


def _translation(opened: Opened, answer: Any, flagged: tuple[int, ...] = ()) -> Translation:
    """The documents translated as `answer(masked)` says (tolk's placeholders in it),
    those of `flagged` warned about."""
    texts = []
    for doc in _documents(opened):
        outputs = {}
        for i, unit in enumerate(doc.units):
            assert unit.masked is not None
            restored = unit.restore(answer(unit.masked))
            assert restored is not None
            outputs[i] = restored
        texts.append(doc.render(outputs))
    return Translation(
        texts,
        lang("en"),
        lang("de"),
        "demo",
        Usage(0, 0, 0, 0),
        0.0,
        [],
        warnings=tuple(TextWarning(i, "off_target", 1) for i in flagged),
    )


def _upper(masked: str) -> str:
    return "".join(
        p if PLACEHOLDER.fullmatch(p) else p.upper() for p in re.split(r"(<[^>]+>)", masked)
    )


def test_codes_the_model_moved_come_back_where_it_put_them() -> None:
    source = ANGULAR_20.encode()
    opened = xliff.open_file("m.xlf", source, 0)
    moved = {
        "Press <g1>the big</g1> button.": "<g1>Den großen</g1> Knopf drücken.",
        "Then<x1/>wait <x2/>a moment<x3/> and read the <g4>manual</g4><x5/>.": (
            "Lies das <g4>Handbuch</g4><x5/>, dann<x1/>warte <x2/>einen Moment<x3/>."
        ),
    }
    out = opened.save(_translation(opened, lambda m: moved.get(m) or _upper(m)))
    check20(source, out)
    root = _parse(out)
    segments = {s.get("id"): s for s in root.iter(f"{X20}segment")}
    s1 = segments["s1"].find(f"{X20}target")
    assert s1.text is None
    assert s1[0].get("dataRefStart") == "d1"
    assert s1[0].text == "Den großen"
    assert s1[0].tail == " Knopf drücken."
    s2 = segments["s2"].find(f"{X20}target")
    assert [_local(c) for c in s2] == ["mrk", "cp", "ph", "sc", "ec"]
    assert s2.text == "Lies das "
    assert etree.tostring(s2, encoding="unicode").count('ref="#t1"') == 1
    assert b'trgLang="de"' in out
    assert out.startswith(b'<?xml version="1.0" encoding="UTF-8" ?>\n<xliff ')


def test_flagged_translations_are_marked_for_review_with_a_note() -> None:
    source = OKAPI_12.encode()
    opened = xliff.open_file("f.xlf", source, 0)
    out = opened.save(_translation(opened, _upper, flagged=(1,)))  # tu1's second segment
    units = check12(source, out)
    tu1 = units["tu1"]
    target = tu1.find(f"{X12}target")
    assert target.get("state") == "needs-review-translation"
    assert target.get(xliff.XML_LANG) == "de"
    (note,) = [n for n in tu1.findall(f"{X12}note") if n.get("from") == "tolk"]
    assert "not in the target language" in note.text
    assert note.getprevious() is target
    assert [m.text for m in target] == ["READ ", "THEN PRESS "]
    assert units["tu3"].find(f"{X12}target").get("state") == "translated"
    # Saved again unflagged (the file uploaded again): the old note is gone.
    again = xliff.open_file("f.xlf", out, 0)
    clean = check12(source, again.save(_translation(again, _upper)))
    assert clean["tu1"].find(f"{X12}target").get("state") == "translated"
    # 2.0: the segment back to initial, a note in the unit's notes, made where it had none.
    source20 = ANGULAR_20.encode()
    opened20 = xliff.open_file("f.xlf", source20, 0)
    out20 = opened20.save(_translation(opened20, _upper, flagged=(2,)))  # spec-pc's s1
    segments = check20(source20, out20)
    assert segments[("spec-pc", 0)].get("state") == "initial"
    assert segments[("spec-pc", 1)].get("state") == "translated"
    unit = segments[("spec-pc", 0)].getparent()
    assert [_local(c) for c in unit] == ["notes", "originalData", "segment", "ignorable", "segment"]
    assert unit[0][0].text.startswith("tolk, segment s1: the output is not in")
    # ... and the unit's notes indented as the elements around them.
    assert b'<unit id="spec-pc">\n      <notes>\n        <note category="tolk"' in out20


def test_a_translation_whose_codes_did_not_survive_gets_the_source_flagged() -> None:
    source = ANGULAR_12.encode()
    opened = xliff.open_file("l.xlf", source, 0)
    translation = _translation(opened, _upper)
    # The link's rendered translation with a code lost (as no tolk path renders it).
    texts = list(translation.texts)
    assert texts[2].count("\ufdd2") == 4
    texts[2] = re.sub("\ufdd2\\d+\ufdd3", "", texts[2], count=1)
    out = opened.save(
        Translation(texts, translation.source, translation.target, "demo", translation.usage, 0, [])
    )
    units = check12(source, out, copied=frozenset({"linkText"}))
    link = units["linkText"]
    target = link.find(f"{X12}target")
    assert target.get("state") == "needs-review-translation"
    assert _text(target) == _text(link.find(f"{X12}source"))  # the source, copied
    assert "could not put the inline codes back" in link.find(f"{X12}note[@from='tolk']").text
    assert units["introductionHeader"].find(f"{X12}target").text == "HELLO I18N!"
    assert "linkText" in units
    assert "done" not in units  # a person's translation, kept
    kept = _parse(out).find(f".//{X12}trans-unit[@id='done']/{X12}target")
    assert kept.text == "Hochladen abbrechen"
    assert kept.get("state") is None


async def test_an_angular_xliff_12_file_comes_back_translated(edge: httpx.AsyncClient) -> None:
    source = ANGULAR_12.encode()
    response = await post_file(edge, "messages.xlf", source)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xliff+xml")
    units = check12(source, response.content)
    assert set(units) == {"introductionHeader", "5206857922697139278", "linkText", "countOnly"}
    count = units["countOnly"].find(f"{X12}target")
    assert [c.get("equiv-text") for c in count] == ["{{ count }}"]
    assert response.content.startswith(b'<?xml version="1.0" encoding="UTF-8" ?>\n<xliff ')


async def test_an_okapi_and_xcode_xliff_12_file_comes_back_translated(
    edge: httpx.AsyncClient,
) -> None:
    source = OKAPI_12.encode()
    response = await post_file(edge, "page.xliff", source)
    assert response.status_code == 200, response.text
    units = check12(source, response.content)
    assert set(units) == {"tu1", "tu3", "Open the document browser"}
    root = _parse(response.content)
    alt = root.find(f".//{X12}alt-trans/{X12}target")
    assert alt.text == "Lisez cette page."  # an alternative's target is not the unit's


async def test_an_xliff_20_file_comes_back_translated(edge: httpx.AsyncClient) -> None:
    source = ANGULAR_20.encode()
    response = await post_file(edge, "messages.xlf", source)
    assert response.status_code == 200, response.text
    segments = check20(source, response.content)
    assert set(segments) == {
        ("introductionHeader", 0),
        ("2793614983468390085", 0),
        ("spec-pc", 0),
        ("spec-pc", 1),
        ("spec-sm", 0),
        ("preserved", 0),
    }
    preserved = segments[("preserved", 0)].find(f"{X20}target")
    assert preserved.text.startswith("  ")  # the source's outer spaces, kept
    assert preserved.text.endswith("  ")


def _bomb(levels: int) -> bytes:
    entities = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, levels + 1))
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE xliff [\n<!ENTITY lol0 "lol">\n'
        f"{entities}]>\n"
        f'<xliff version="1.2" xmlns="{xliff.NS12}"><file source-language="en" '
        'datatype="plaintext" original="x"><body><trans-unit id="1">'
        f"<source>Boom &lol{levels};</source></trans-unit></body></file></xliff>"
    ).encode()


async def test_hostile_and_broken_files_are_refused(
    edge: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for levels in (9, 2):  # a billion laughs, and an expansion small enough to parse
        begun = time.perf_counter()
        bomb = await post_file(edge, "bomb.xlf", _bomb(levels))
        assert_error(bomb, 422, "invalid_request")
        assert "entities" in bomb.json()["error"]["message"]
        assert time.perf_counter() - begun < 5
    broken = await post_file(edge, "broken.xlf", ANGULAR_12.replace("</body>", "").encode())
    error = assert_error(broken, 422, "invalid_request")
    assert "not well-formed XML" in error["message"]
    assert error["field"] == "file"
    other = ANGULAR_12.replace(xliff.NS12, "urn:oasis:names:tc:xliff:document:1.1")
    unknown = await post_file(edge, "old.xlf", other.encode())
    error = assert_error(unknown, 422, "invalid_request")
    assert "urn:oasis:names:tc:xliff:document:1.1" in error["message"]
    plain = await post_file(edge, "plain.xlf", b"<html><body>Hi</body></html>")
    assert "<html> in no namespace" in assert_error(plain, 422, "invalid_request")["message"]
    latin = ANGULAR_12.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').encode()
    assert (
        "UTF-8"
        in assert_error(await post_file(edge, "l.xlf", latin), 422, "invalid_request")["message"]
    )
    utf16 = await post_file(edge, "w.xlf", ANGULAR_12.replace("UTF-8", "UTF-16").encode("utf-16"))
    assert_error(utf16, 422, "invalid_request")
    # Too many units (the limit lowered: a file over the real one is over the body limit).
    monkeypatch.setattr(xliff, "MAX_UNITS", 3)
    many = await post_file(edge, "many.xlf", ANGULAR_12.encode())
    assert_error(many, 413, "payload_too_large")
    assert "at most 3" in many.json()["error"]["message"]


def test_limits_hold_without_the_server() -> None:
    units = "".join(
        f'<unit id="u{i}"><segment><source>a</source></segment></unit>'
        for i in range(xliff.MAX_UNITS + 1)
    )
    big = f'<xliff xmlns="{xliff.NS20}" version="2.0"><file id="f">{units}</file></xliff>'
    begun = time.perf_counter()
    with pytest.raises(PayloadTooLarge) as refused:
        xliff.open_file("big.xlf", big.encode(), 0)
    assert time.perf_counter() - begun < 10
    assert refused.value.details["limit"] == xliff.MAX_UNITS
    deep = "<g id='1'>" * (xliff.MAX_DEPTH + 2) + "words" + "</g>" * (xliff.MAX_DEPTH + 2)
    nested = ANGULAR_12.replace("Hello i18n!", deep)
    with pytest.raises(InvalidRequest, match="nests inline codes"):
        xliff.open_file("deep.xlf", nested.encode(), 0)
    # Nested within the limit: one paired placeholder per level.
    fine = ANGULAR_12.replace("Hello i18n!", "<g id='1'>" * 5 + "words" + "</g>" * 5)
    doc: Document = _documents(xliff.open_file("ok.xlf", fine.encode(), 0))[0]
    assert doc.units[0].masked == "<g1><g2><g3><g4><g5>words</g5></g4></g3></g2></g1>"
