"""gettext PO/POT files (tolk.translation.gettext), made with polib, through the document
paths of the in-process server over stand-in engines (edge: tolk's /translate/file, DeepL's and
LibreTranslate's), read back with polib: every entry to translate filled, placeholders as
written, plural forms as the header declares, the rest as it was; hostile and broken
catalogues refused."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import deepl
import httpx

from tests.support.errors import assert_error
from tests.support.main_server import MainKeys
from tests.support.samples.gettext import check, make_po
from tests.support.servers import InProcessServer
from tolk.translation import gettext
from tolk.translation.files import FILE_TYPES


async def test_a_catalogue_through_tolks_file_endpoint(edge_client: httpx.AsyncClient) -> None:
    source = make_po()
    response = await edge_client.post(
        "/translate/file",
        files={"file": ("app.pot", source.encode())},
        data={"source_lang": "en", "target_lang": "de"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/x-gettext-translation")
    check(source, response.text)
    assert FILE_TYPES[".po"].media_type == FILE_TYPES[".pot"].media_type


async def test_hostile_and_broken_catalogues_are_refused(edge_client: httpx.AsyncClient) -> None:
    for content in (b'msgid "a"\nfoo bar\n', b"/etc/passwd", b"/proc/self/environ"):
        # polib reads a path it is given as the content: never so here.
        broken = await edge_client.post(
            "/translate/file", files={"file": ("bad.po", content)}, data={"target_lang": "de"}
        )
        assert_error(broken, 422, "invalid_request")
        assert "not a gettext PO file" in broken.json()["error"]["message"]
    many = "".join(f'msgid "entry {i}"\nmsgstr ""\n\n' for i in range(gettext.MAX_ENTRIES + 1))
    begun = time.perf_counter()
    refused = await edge_client.post(
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
