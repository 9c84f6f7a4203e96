"""Every kind of file on every document path: DeepL's /v2/document through the official
client, LibreTranslate's /translate_file and its download, and `tolk translate` against the
real engine, with the sample file of each kind (src/tolk/data/samples). What each format
keeps is tested in its own file (test_office_formats, test_opendocument, test_epub,
test_xliff, test_locales, test_gettext, test_pdf); here, that each path takes each kind and
gives back a file of the right kind under the right name."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import deepl
import docx
import httpx
import pytest
import yaml
from lxml import etree  # type: ignore[import-untyped]

from tests.helpers import InProcessServer, ServerProcess, run_tolk
from tests.support.main_server import MainKeys
from tolk.bench.documents import samples
from tolk.translation.files import file_type

ZIPPED = {"docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"}


def readable(name: str, content: bytes) -> None:
    """`content` is a file of the kind `name` says, as its readers would open it."""
    kind = file_type(name).kind
    if kind in ZIPPED:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            assert archive.testzip() is None
        if kind == "docx":
            docx.Document(io.BytesIO(content))
    elif kind == "xliff":
        etree.fromstring(content)
    elif kind == "json":
        json.loads(content)
    elif kind == "yaml":
        yaml.safe_load(content)
    else:
        content.decode("utf-8")


def translated_name(name: str) -> str:
    return file_type(name).translated_name(name)


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


def test_tolk_translate_every_kind_with_the_real_engine(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    shipped = samples()
    for name, content in shipped.items():
        (tmp_path / name).write_bytes(content)
    done = run_tolk(
        "translate", *shipped, "--from", "en", "--to", "de", "--url", main_server.url,
        "--out-dir", "out", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name, content in shipped.items():
        stem, suffix = Path(name).stem, Path(translated_name(name)).suffix
        translated = (tmp_path / "out" / f"{stem}.de{suffix}").read_bytes()
        assert translated != content, name
        readable(f"{stem}{suffix}", translated)
