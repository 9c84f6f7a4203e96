"""gettext PO/POT files (tolk.translation.gettext): made with polib, translated through every
document path of the in-process server over stand-in engines (edge) and through `tolk
translate` against the real engine, read back with polib: every entry to translate filled,
placeholders as written, plural forms as the header declares, the rest as it was."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import deepl
import httpx
import polib  # type: ignore[import-untyped]

from tests.helpers import InProcessServer, ServerProcess, run_tolk
from tests.support.errors import assert_error
from tests.support.main_server import MainKeys
from tolk.translation import gettext
from tolk.translation.document import Tag, Text
from tolk.translation.files import FILE_TYPES

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


async def test_a_catalogue_through_tolks_file_endpoint(edge: httpx.AsyncClient) -> None:
    source = make_po()
    response = await edge.post(
        "/translate/file",
        files={"file": ("app.pot", source.encode())},
        data={"source_lang": "en", "target_lang": "de"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/x-gettext-translation")
    check(source, response.text)
    assert FILE_TYPES[".po"].media_type == FILE_TYPES[".pot"].media_type


async def test_hostile_and_broken_catalogues_are_refused(edge: httpx.AsyncClient) -> None:
    for content in (b'msgid "a"\nfoo bar\n', b"/etc/passwd", b"/proc/self/environ"):
        # polib reads a path it is given as the content: never so here.
        broken = await edge.post(
            "/translate/file", files={"file": ("bad.po", content)}, data={"target_lang": "de"}
        )
        assert_error(broken, 422, "invalid_request")
        assert "not a gettext PO file" in broken.json()["error"]["message"]
    many = "".join(f'msgid "entry {i}"\nmsgstr ""\n\n' for i in range(gettext.MAX_ENTRIES + 1))
    begun = time.perf_counter()
    refused = await edge.post(
        "/translate/file",
        files={"file": ("many.po", many.encode())},
        data={"source_lang": "en", "target_lang": "de"},
    )
    assert_error(refused, 413, "payload_too_large")
    assert time.perf_counter() - begun < 30


def test_a_catalogue_through_deepl_and_libretranslate(
    edge_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    source = make_po()
    path = tmp_path / "app.po"
    path.write_text(source, encoding="utf-8")
    deepl.http_client.max_network_retries = 0
    client = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    out = tmp_path / "out.po"
    status = client.translate_document_from_filepath(path, out, source_lang="EN", target_lang="DE")
    assert status.done, status
    check(source, out.read_text(encoding="utf-8"))
    lt: Any = httpx.post(
        f"{edge_server.url}/translate_file",
        files={"file": ("app.po", source.encode())},
        data={"source": "en", "target": "de", "api_key": main_keys.full},
        timeout=60,
    )
    assert lt.status_code == 200, lt.text
    download = httpx.get(lt.json()["translatedFileUrl"], timeout=60)
    assert download.status_code == 200
    check(source, download.text)


def test_tolk_translate_fills_a_catalogue_with_the_real_engine(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    source = make_po()
    (tmp_path / "app.pot").write_text(source, encoding="utf-8")
    done = run_tolk("translate", "app.pot", "--to", "de", "--url", main_server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"app.pot -> app.de.pot", done.stderr), done.stderr[-2000:]
    check(source, (tmp_path / "app.de.pot").read_text(encoding="utf-8"))
