"""Every kind of file on the HTTP document paths of the in-process server over stand-in
engines (edge_server): DeepL's /v2/document through the official client and LibreTranslate's
/translate_file and its download, with the sample file of each kind (src/tolk/data/samples).
What each format keeps is tested in its own file (test_office_formats, test_opendocument,
test_epub, test_xliff, test_locales, test_gettext, test_pdf); here, that each path takes each
kind and gives back a file of the right kind under the right name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest

from tests.support.document_paths import readable, translated_name
from tests.support.main_server import MainKeys
from tests.support.servers import InProcessServer
from tolk.bench.documents import samples


def test_every_kind_through_deepls_client(
    edge_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    deepl.http_client.max_network_retries = 0
    client = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    for name, content in samples().items():
        source = tmp_path / name
        source.write_bytes(content)
        # A PDF is translated into a Word document: DeepL's client asks for the output path's
        # format (output_format=docx) where it differs from the input's.
        out = tmp_path / f"out-{translated_name(name)}"
        status = client.translate_document_from_filepath(
            source, out, source_lang="EN", target_lang="DE"
        )
        assert status.done, (name, status)
        translated = out.read_bytes()
        assert translated != content, name
        readable(out.name.removeprefix("out-"), translated)


def test_a_pdf_without_output_format_is_refused_by_deepls_api(
    edge_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    deepl.http_client.max_network_retries = 0
    client = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    source = tmp_path / "paper.pdf"
    source.write_bytes(samples()["paper.pdf"])
    with pytest.raises(deepl.DeepLException, match="output_format=docx"):
        client.translate_document_from_filepath(
            source, tmp_path / "paper.de.pdf", source_lang="EN", target_lang="DE"
        )


def test_every_kind_through_libretranslates_translate_file(
    edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    for name, content in samples().items():
        response: Any = httpx.post(
            f"{edge_server.url}/translate_file",
            files={"file": (name, content)},
            data={"source": "en", "target": "de", "api_key": main_keys.full},
            timeout=60,
        )
        assert response.status_code == 200, (name, response.text)
        url = response.json()["translatedFileUrl"]
        assert url.endswith(translated_name(name)), url  # a PDF's is a .docx
        download = httpx.get(url, timeout=60)
        assert download.status_code == 200, name
        disposition = download.headers["content-disposition"]
        assert disposition.endswith(translated_name(name)), disposition
        readable(translated_name(name), download.content)
