"""XLIFF 1.2 and 2.0 files as Angular, Okapi and Xcode write them, and the check of a translated
one: inline codes kept, skeleton untouched."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from tolk.translation import xliff

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


def xliff_tree(data: bytes) -> Any:
    return etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))


def local(element: Any) -> str:
    return str(etree.QName(element).localname)


def _codes(element: Any, names: set[str]) -> Counter[tuple[str, ...]]:
    """The inline codes under `element`: a paired one as its name and attributes, a
    standalone one whole (its code content too); a code inside a kept one is part of it."""
    found: Counter[tuple[str, ...]] = Counter()

    def walk(node: Any) -> None:
        for child in node:
            if not isinstance(child.tag, str):
                continue
            name = local(child)
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


def plain_text(element: Any) -> str:
    """An element's text, what is inside its standalone codes left out."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and local(child) in PAIRED:
            parts.append(plain_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def skeleton(root: Any, ns: str, owners: str) -> str:
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


def check_translated(source: Any, target: Any, codes: set[str], copied: bool = False) -> None:
    """A target against its source: the same codes, other text (`copied`: the same)."""
    assert target is not None, etree.tostring(source)
    assert _codes(target, codes) == _codes(source, codes)
    if copied:
        assert plain_text(target) == plain_text(source)
    elif any(c.isalpha() for c in plain_text(source)):
        assert plain_text(target).strip()
        assert plain_text(target) != plain_text(source)
    else:  # no words: the source as it is
        assert (
            etree.tostring(target, encoding="unicode").split(">", 1)[1].rsplit("<", 1)[0]
            == (etree.tostring(source, encoding="unicode").split(">", 1)[1].rsplit("<", 1)[0])
        )


def check12(before: bytes, after: bytes, copied: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A translated XLIFF 1.2 file against its source; its translated units by id (those
    `copied`: their source copied into their target)."""
    old, new = xliff_tree(before), xliff_tree(after)
    assert skeleton(new, xliff.NS12, "trans-unit") == skeleton(old, xliff.NS12, "trans-unit")
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
        if held is not None and plain_text(held) != plain_text(was.find(f"{X12}source")):
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
            for mark, seg in zip(marks, [m for m in segments if local(m) == "mrk"], strict=True):
                check_translated(seg, mark, CODES12)
        else:
            check_translated(source, target, CODES12, unit.get("id") in copied)
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
    old, new = xliff_tree(before), xliff_tree(after)
    assert skeleton(new, xliff.NS20, "segment") == skeleton(old, xliff.NS20, "segment")
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
            check_translated(source, target, CODES20)
            assert seg.get("state") in ("translated", "initial")
            flagged += seg.get("state") == "initial"
            translated[(unit.get("id"), n)] = seg
        assert len(notes) == flagged
        if notes:  # in the unit's notes, before the segments
            assert unit.index(notes[0].getparent()) < unit.index(unit.find(f"{X20}segment"))
    return translated
