"""OpenDocument files (tolk.translation.opendocument) without a server: the three types are
registered, and a paragraph is cut into units where something stays in place."""

from __future__ import annotations

from typing import Any

from tests.support.samples.opendocument import (
    ODP,
    ODS,
    ODT,
    make_ods,
    make_odt,
)
from tolk.translation import opendocument
from tolk.translation.document import Text
from tolk.translation.files import FILE_TYPES


def _units(filename: str, package: bytes) -> list[str]:
    """Each unit a file is opened into, its formatted runs in brackets."""
    opened = opendocument.open_file(filename, package, 64 << 20)
    out: list[str] = []
    unused: Any = None  # the splitter: paragraphs are not cut into sentences here
    for document in opened.documents(unused):
        for unit in document.units:
            marks = {"open": "[", "close": "]"}
            out.append(
                "".join(p.text if isinstance(p, Text) else marks[p.kind] for p in unit.pieces)
            )
    assert opened.characters == sum(len(u.replace("[", "").replace("]", "")) for u in out)
    return out


def test_paragraphs_are_cut_where_something_stays_in_place() -> None:
    """A paragraph is one unit, its spans and link paired placeholders (the nested span
    flattened); tabs, line breaks, extra spaces, fields and footnotes cut it, and a
    footnote's body is a unit of its own; comments and fields are not translated."""
    assert _units("report.odt", make_odt()) == [
        "A report on batching",
        "Why it helps",
        "Plain words come first, [bold words ][nested in italics] and then [the guide online].",
        "Written on ",
        " by the team",
        "First line of the verse",
        "second line after a break",
        "Text before a tab",
        "text after the tab",
        "Spaced ",
        "words around them",
        "A claim that needs a source",
        " and more words after it.",
        "The footnote explains the source",
        "Item one of the list",
        "Item two of the list",
        "Body cell 00 words",
        "Body cell 01 words",
        "Body cell 10 words",
        "Body cell 11 words",
        "Running header text",  # styles.xml's master page
        "Page ",
        " of the report",
    ]
    assert _units("book.ods", make_ods()) == [
        "Quarterly report",
        "Revenue",
        "Closing date",
        "Total",
        "A cell without a value type",
        "Same words three times",
        "Shown words here",
        "Plain words and [bold ones]",
        "The queue stays short.",
    ]


def test_the_three_types_are_registered() -> None:
    assert FILE_TYPES[".odt"].media_type == ODT
    assert FILE_TYPES[".odp"].media_type == ODP
    assert FILE_TYPES[".ods"].media_type == ODS
    assert not any(FILE_TYPES[s].text for s in (".odt", ".odp", ".ods"))
