"""gettext PO/POT files (tolk.translation.gettext) without a server: placeholders are atoms
and words the text; flagged entries are marked fuzzy."""

from __future__ import annotations

import time

import polib  # type: ignore[import-untyped]

from tests.support.samples.gettext import make_po, placeholders
from tolk.translation import gettext
from tolk.translation.document import Tag, Text


def test_placeholders_are_atoms_and_words_the_text() -> None:
    doc = gettext.document("Hello %(name)s, {0} of %d files: 100%%")
    (unit,) = doc.units
    tags = [p.source for p in unit.pieces if isinstance(p, Tag)]
    assert tags == ["%(name)s", "{0}", "%d", "%%"]
    assert all(p.kind == "atom" for p in unit.pieces if isinstance(p, Tag))
    assert "".join(p.text for p in unit.pieces if isinstance(p, Text)) == "Hello ,  of  files: 100"
    assert gettext.document("%s: %d").units == ()  # nothing to translate
    assert placeholders("%1$s and %2$d, %-5.2f, {value!r:>10}, {a.b[0]}") == [
        "%1$s", "%2$d", "%-5.2f", "{value!r:>10}", "{a.b[0]}",
    ]  # fmt: skip
    # Linear in the text: a hostile run of characters that begin placeholders.
    begun = time.perf_counter()
    assert len(placeholders("%(" * 50_000 + "{" * 50_000)) == 0
    assert time.perf_counter() - begun < 5


def test_flagged_entries_are_marked_fuzzy() -> None:
    source = make_po()
    catalogue = gettext.open_catalogue("app.po", source)
    texts = [f"Übersetzt {i}" for i in range(len(catalogue.sources))]
    # The second document (the hello entry) flagged by tolk's checks.
    out = polib.pofile(gettext.save(catalogue, texts, {1}, "de").decode())
    flagged = [e.msgid for e in out if "fuzzy" in e.flags]
    assert flagged == ["Hello %(name)s, you have new messages"]
