"""XLIFF 1.2 and 2.0 files (tolk.translation.xliff) without a server: open_file and save
driven with made-up translations: inline codes become placeholders, codes moved by the model
come back where it put them, flagged translations are marked for review, a translation whose
codes did not survive gets the source, flagged; the limits hold."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from lxml import etree  # type: ignore[import-untyped]

from tests.support.samples.xliff import (
    ANGULAR_12,
    ANGULAR_20,
    OKAPI_12,
    X12,
    X20,
    check12,
    check20,
    local,
    plain_text,
    xliff_tree,
)
from tolk.errors import InvalidRequest, PayloadTooLarge
from tolk.languages import lang
from tolk.translation import xliff
from tolk.translation.document import PLACEHOLDER, Document, Text
from tolk.translation.fidelity import TextWarning
from tolk.translation.files import FILE_TYPES, Opened
from tolk.translation.results import Translation, Usage
from tolk.translation.segment import Segmented


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
    root = xliff_tree(out)
    segments = {s.get("id"): s for s in root.iter(f"{X20}segment")}
    s1 = segments["s1"].find(f"{X20}target")
    assert s1.text is None
    assert s1[0].get("dataRefStart") == "d1"
    assert s1[0].text == "Den großen"
    assert s1[0].tail == " Knopf drücken."
    s2 = segments["s2"].find(f"{X20}target")
    assert [local(c) for c in s2] == ["mrk", "cp", "ph", "sc", "ec"]
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
    assert [local(c) for c in unit] == ["notes", "originalData", "segment", "ignorable", "segment"]
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
    assert plain_text(target) == plain_text(link.find(f"{X12}source"))  # the source, copied
    assert "could not put the inline codes back" in link.find(f"{X12}note[@from='tolk']").text
    assert units["introductionHeader"].find(f"{X12}target").text == "HELLO I18N!"
    assert "linkText" in units
    assert "done" not in units  # a person's translation, kept
    kept = xliff_tree(out).find(f".//{X12}trans-unit[@id='done']/{X12}target")
    assert kept.text == "Hochladen abbrechen"
    assert kept.get("state") is None


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
