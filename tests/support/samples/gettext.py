"""A gettext catalogue made with polib, its placeholders, and the check of a translated one."""

from __future__ import annotations

import polib  # type: ignore[import-untyped]

from tolk.translation import gettext

HEADER = {
    "Project-Id-Version": "demo 1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Plural-Forms": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : 1);",
}


def make_po() -> str:
    po = polib.POFile(wrapwidth=0)
    po.metadata = dict(HEADER)
    po.append(polib.POEntry(msgid="Open the settings window", occurrences=[("app.py", "10")]))
    po.append(polib.POEntry(msgid="Hello %(name)s, you have new messages", flags=["python-format"]))
    po.append(
        polib.POEntry(
            msgid="One file was saved",
            msgid_plural="%d files were saved",
            msgstr_plural={0: "", 1: "", 2: ""},
            flags=["c-format"],
        )
    )
    po.append(polib.POEntry(msgid="Saved {count} pages in {0} seconds", msgctxt="status"))
    po.append(polib.POEntry(msgid="Cancel the upload", msgstr="Hochladen abbrechen"))
    po.append(
        polib.POEntry(
            msgid="Delete every file",
            msgstr="Alte Übersetzung",
            flags=["fuzzy"],
            previous_msgid="Delete a file",
        )
    )
    po.append(polib.POEntry(msgid="%s%%", msgstr=""))  # no words: left as it was
    po.append(polib.POEntry(msgid="Old string", msgstr="Alter Text", obsolete=True))
    return str(po.__unicode__())


def placeholders(text: str) -> list[str]:
    return [m.group() for m in gettext.PLACEHOLDER.finditer(text)]


def check(source: str, translated: str) -> None:
    before, after = polib.pofile(source), polib.pofile(translated)
    assert after.metadata["Language"] == "de"
    assert after.metadata["Plural-Forms"] == HEADER["Plural-Forms"]
    old = {(e.msgctxt, e.msgid): e for e in before}
    new = {(e.msgctxt, e.msgid): e for e in after}
    assert old.keys() == new.keys()
    for key, entry in new.items():
        was = old[key]
        assert entry.occurrences == was.occurrences
        assert entry.obsolete == was.obsolete
        assert [f for f in entry.flags if f != "fuzzy"] == [f for f in was.flags if f != "fuzzy"]
    hello = new[(None, "Hello %(name)s, you have new messages")]
    assert hello.msgstr
    assert hello.msgstr != hello.msgid
    assert placeholders(hello.msgstr) == ["%(name)s"]
    plural = new[(None, "One file was saved")]
    assert sorted(plural.msgstr_plural) == [0, 1, 2]  # nplurals=3, as the header says
    assert plural.msgstr_plural[1] == plural.msgstr_plural[2]
    assert placeholders(plural.msgstr_plural[1]) == ["%d"]
    assert placeholders(plural.msgstr_plural[0]) == []
    status = new[("status", "Saved {count} pages in {0} seconds")]
    assert sorted(placeholders(status.msgstr)) == ["{0}", "{count}"]
    assert new[(None, "Open the settings window")].msgstr
    assert new[(None, "Cancel the upload")].msgstr == "Hochladen abbrechen"  # a human's, kept
    fuzzy = new[(None, "Delete every file")]
    assert fuzzy.msgstr != "Alte Übersetzung"  # translated again ...
    assert "fuzzy" not in fuzzy.flags  # ... and no longer fuzzy (nothing flagged it)
    assert fuzzy.previous_msgid is None
    assert new[(None, "%s%%")].msgstr == ""
    assert new[(None, "Old string")].msgstr == "Alter Text"
