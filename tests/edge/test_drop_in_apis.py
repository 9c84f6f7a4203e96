"""The drop-in APIs through DeepL's official client (`deepl`) and replays of the exact
requests the research note records for Weblate, Mastodon, Discourse and Nextcloud
(../shared/research/compat-apis.md), on the in-process server over stand-in engines
(edge_server): their shapes, validation, errors and rate limits, and their place in the
OpenAPI document. Each API's client end to end on the real engine:
tests/engine/test_drop_in_apis_engine.py."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import deepl
import httpx
import pytest

from tests.support.deepl import one
from tests.support.main_server import MainKeys
from tests.support.servers import InProcessServer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def deepl_client(edge_server: InProcessServer, main_keys: MainKeys) -> deepl.DeepLClient:
    deepl.http_client.max_network_retries = 0  # error tests fail fast
    return deepl.DeepLClient(main_keys.full, server_url=edge_server.url)


def test_deepl_languages_and_usage(deepl_client: deepl.DeepLClient) -> None:
    sources = {lang.code for lang in deepl_client.get_source_languages()}
    targets = {lang.code: lang for lang in deepl_client.get_target_languages()}
    assert {"EN", "DE", "NE", "ZH", "PT"} <= sources
    # The edge sends `type=target` in the body of a GET: the lists must differ.
    assert {"EN-US", "EN-GB", "PT-BR", "ZH-HANS"} <= set(targets)
    assert "EN" not in targets
    assert targets["DE"].supports_formality
    assert not targets["NE"].supports_formality
    usage = deepl_client.get_usage()
    assert usage.character.valid
    assert not usage.any_limit_reached


def test_deepl_document_round_trip(deepl_client: deepl.DeepLClient, tmp_path: Path) -> None:
    out = io.BytesIO()
    source = "Hello world.\n\nA second paragraph.\n"
    status = deepl_client.translate_document(
        source.encode(), out, target_lang="DE", filename="a.txt"
    )
    assert status.done
    assert status.billed_characters == len(source)
    translated = out.getvalue().decode()
    assert translated.count("\n\n") == 1
    assert translated.strip()
    page = tmp_path / "page.html"
    page.write_text("<h1>Title</h1><p>Some <b>bold</b> text.</p>")
    deepl_client.translate_document_from_filepath(page, tmp_path / "out.html", target_lang="FR")
    html = (tmp_path / "out.html").read_text()
    assert html.startswith("<h1>")
    # The random model never keeps placeholders: the bold is kept where it was (the runs
    # translated one by one) or left out with the sentence translated whole; never unpaired.
    assert html.count("<b>") == html.count("</b>") <= 1
    assert html.count("<p>") == html.count("</p>") == 1


def test_deepl_glossary_create_use_and_delete(deepl_client: deepl.DeepLClient) -> None:
    pairs = deepl_client.get_glossary_languages()
    assert any((p.source_lang, p.target_lang) == ("en", "de") for p in pairs)
    glossary = deepl_client.create_glossary("terms", "EN", "DE", {"batch": "Stapel", "GPU": "GPU"})
    assert glossary.entry_count == 2
    assert glossary.ready
    assert deepl_client.get_glossary_entries(glossary) == {"batch": "Stapel", "GPU": "GPU"}
    assert glossary.glossary_id in {g.glossary_id for g in deepl_client.list_glossaries()}
    used = one(
        deepl_client.translate_text(
            "Every batch runs on one GPU.", source_lang="EN", target_lang="DE", glossary=glossary
        )
    )
    assert used.text
    deepl_client.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        deepl_client.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="no glossary"):
        deepl_client.translate_text(
            "x", source_lang="EN", target_lang="DE", glossary=glossary.glossary_id
        )


def test_deepl_errors_the_client_understands(
    edge_server: InProcessServer, main_keys: MainKeys
) -> None:
    deepl.http_client.max_network_retries = 0
    wrong = deepl.DeepLClient("not-a-key", server_url=edge_server.url)
    with pytest.raises(deepl.AuthorizationException):
        wrong.translate_text("Hello", target_lang="DE")

    tiny = deepl.DeepLClient(main_keys.tiny, server_url=edge_server.url)
    tiny.translate_text("Hello, world!", target_lang="DE")  # 13 of its 20 characters
    with pytest.raises(deepl.QuotaExceededException):
        tiny.translate_text("Hello, world!", target_lang="DE")
    usage = tiny.get_usage()
    assert (usage.character.count, usage.character.limit) == (13, 20)

    full = deepl.DeepLClient(main_keys.full, server_url=edge_server.url)
    with pytest.raises(deepl.DeepLException) as raised:
        full.translate_text(["word " * 30_000], target_lang="DE")  # 150 KB > the body limit
    assert raised.value.http_status_code == 413
    assert one(full.translate_text("Hello", target_lang="DE", formality="more")).text
    with pytest.raises(deepl.DeepLException) as raised:
        full.translate_text("Hello", target_lang="NE", formality="more")
    assert raised.value.http_status_code == 400
    assert one(full.translate_text("Hello", target_lang="NE", formality="prefer_more")).text


def test_deepl_rate_limit_is_429(edge_server: InProcessServer, main_keys: MainKeys) -> None:
    deepl.http_client.max_network_retries = 0
    slow = deepl.DeepLClient(main_keys.slow, server_url=edge_server.url)
    slow.translate_text("One", target_lang="DE")
    slow.translate_text("Two", target_lang="DE")
    with pytest.raises(deepl.TooManyRequestsException):
        slow.translate_text("Three", target_lang="DE")
    # The same key's rate, spent, in the other two APIs' shapes.
    lt = httpx.post(
        f"{edge_server.url}/translate",
        json={"q": "Four", "source": "en", "target": "de", "api_key": main_keys.slow},
    )
    assert lt.status_code == 429
    assert lt.json()["error"].startswith("Slowdown: ")
    own = httpx.post(
        f"{edge_server.url}/translate",
        json={"text": "Five", "source_lang": "en", "target_lang": "de"},
        headers={"Authorization": f"Bearer {main_keys.slow}"},
    )
    assert own.status_code == 429
    assert own.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(own.headers["retry-after"]) <= 60


async def test_deepl_form_requests_as_deepl_node_and_mastodon_send_them(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    response = await edge_client.post(
        "/v2/translate",
        data={
            "text": ["<p>One</p>", "<p>Two &amp; three</p>"],
            "source_lang": "EN",
            "target_lang": "de",
            "tag_handling": "html",
            "show_billed_characters": "1",
            "split_sentences": "on",
            "preserve_formatting": "1",
        },
        headers=auth,
    )
    assert response.status_code == 200, response.text
    items = response.json()["translations"]
    assert [i["billed_characters"] for i in items] == [10, 22]
    assert all(i["text"].startswith("<p>") for i in items)
    assert all(i["text"].endswith("</p>") for i in items)
    targets = (await edge_client.get("/v2/languages?type=target", headers=auth)).json()
    assert "EN-GB" in {t["language"] for t in targets}
    bad = await edge_client.get("/v2/languages?type=nope", headers=auth)
    assert bad.status_code == 400
    assert "message" in bad.json()


async def test_weblate_deepl_requests_keep_placeables_and_entities(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    pairs = await edge_client.get("/v2/glossary-language-pairs", headers=auth)
    assert {"source_lang": "en", "target_lang": "de"} in pairs.json()["supported_languages"]
    texts = [
        'Hello <x id="1"></x>, you have <x id="2"></x> new messages &amp; more',
        'Saved &lt;draft&gt; as <x id="7"></x>',
    ]
    response = await edge_client.post(
        "/v2/translate",
        json={
            "text": texts,
            "source_lang": "EN",
            "target_lang": "DE",
            "formality": "default ",  # Weblate's "Default" choice has a trailing space
            "tag_handling": "xml",
            "ignore_tags": ["x"],
        },
        headers=auth,
    )
    assert response.status_code == 200, response.text
    for source, item in zip(texts, response.json()["translations"], strict=True):
        out = item["text"]
        for placeable in ('<x id="1"></x>', '<x id="2"></x>', '<x id="7"></x>'):
            assert out.count(placeable) == source.count(placeable)
        ET.fromstring(f"<root>{out}</root>")  # still XML: entities and escapes intact


async def test_mastodon_batch_of_html_with_auto_source(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate",
        json={
            "q": ["<p>Hello, how are you today?</p>", '<p>See <a href="https://x.y/">this</a></p>'],
            "source": "auto",
            "target": "de",
            "format": "html",
            "api_key": "",
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["translatedText"]) == 2
    assert body["translatedText"][1].count('<a href="https://x.y/">') == 1
    assert body["detectedLanguage"][0]["language"] == "en"
    assert all(0 <= d["confidence"] <= 100 for d in body["detectedLanguage"])
    assert response.headers["access-control-allow-origin"] == "*"
    languages = (
        await edge_client.get("/languages", headers={"Content-Type": "application/json"})
    ).json()
    for entry in languages:
        assert entry["code"] not in entry["targets"]  # Mastodon: targets.without(code)
    codes = {entry["code"] for entry in languages}
    assert {"en", "de", "zh-Hans", "zh-Hant", "pt-BR", "zh", "ne"} <= codes


async def test_weblate_libretranslate_request_keeps_its_placeables(
    edge_client: httpx.AsyncClient,
) -> None:
    response = await edge_client.post(
        "/translate",
        json={
            "api_key": "",
            "q": ["Hello [X12X], you have [X3X] messages", "Plain"],
            "source": "en",
            "target": "de",
        },
    )
    assert response.status_code == 200, response.text
    out = response.json()["translatedText"]
    assert out[0].count("[X12X]") == 1
    assert out[0].count("[X3X]") == 1
    assert "detectedLanguage" not in response.json()


async def test_discourse_and_nextcloud_requests(edge_client: httpx.AsyncClient) -> None:
    detect = await edge_client.post(
        "/detect", data={"q": "Bonjour tout le monde, ça va ?", "api_key": ""}
    )
    assert detect.json()[0]["language"] == "fr"
    translated = await edge_client.post(
        "/translate",
        data={"q": "<p>Cooked <em>HTML</em></p>", "source": "en", "target": "zh", "format": "html"},
    )
    assert translated.status_code == 200, translated.text
    assert isinstance(translated.json()["translatedText"], str)
    # Nextcloud (PHP curl with an array): multipart, and /detect with q in the query only.
    multipart = await edge_client.post(
        "/translate",
        files={
            "q": (None, "Hello"),
            "source": (None, "en"),
            "target": (None, "fr"),
            "format": (None, "html"),
        },
    )
    assert isinstance(multipart.json()["translatedText"], str)
    query_only = await edge_client.post("/detect?q=Guten%20Morgen%20zusammen&api_key=")
    assert query_only.json()[0]["language"] == "de"
    settings = (await edge_client.get("/frontend/settings")).json()
    assert settings["filesTranslation"]
    assert ".docx" in settings["supportedFilesFormat"]
    upload = await edge_client.post(
        "/translate_file",
        files={
            "file": ("notes.srt", b"1\n00:00:01,000 --> 00:00:02,000\nHello there\n"),
            "source": (None, "auto"),
            "target": (None, "de"),
        },
    )
    url = upload.json()["translatedFileUrl"]
    assert url.endswith(".notes.srt")
    downloaded = await edge_client.get(url)
    assert downloaded.text.startswith("1\n00:00:01,000 --> 00:00:02,000\n")
    assert "notes.srt" in downloaded.headers["content-disposition"]


async def test_libretranslate_errors(edge_client: httpx.AsyncClient) -> None:
    unknown = await edge_client.post("/translate", data={"q": "x", "source": "en", "target": "zz"})
    assert (unknown.status_code, unknown.json()) == (400, {"error": "zz is not supported"})
    missing = await edge_client.post("/translate", json={"q": "x", "target": "de"})
    assert missing.json() == {"error": "Invalid request: missing source parameter"}
    bad_format = await edge_client.post(
        "/translate", json={"q": "x", "source": "en", "target": "de", "format": "pdf"}
    )
    assert bad_format.json() == {"error": "pdf format is not supported"}
    assert (await edge_client.post("/suggest", data={"q": "x"})).status_code == 403
    preflight = await edge_client.options("/translate")
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-methods"] == "GET, POST"


async def test_tolk_detects_a_missing_source(edge_client: httpx.AsyncClient) -> None:
    response = await edge_client.post(
        "/translate",
        json={
            "text": ["Guten Morgen, wie geht es dir?", "नमस्ते, तपाईंलाई कस्तो छ?"],
            "target_lang": "en",
        },
    )
    assert response.status_code == 200, response.text
    detected = response.json()["detected"]
    assert [d["language"] for d in detected] == ["de", "ne"]
    found = (await edge_client.post("/detect", json={"text": ["12 34", "Bonjour à tous"]})).json()
    assert found["detected"][0] == {
        "language": "en",
        "confidence": 0.0,
        "reliable": False,
        "candidates": [],
    }
    assert found["detected"][1]["language"] == "fr"
    assert found["detected"][1]["reliable"]


def test_every_api_is_in_the_openapi_document(edge_server: InProcessServer) -> None:
    paths = set(json.loads(httpx.get(f"{edge_server.url}/openapi.json").text)["paths"])
    assert {
        "/translate",
        "/detect",
        "/models",
        "/v2/translate",
        "/v2/languages",
        "/v2/usage",
        "/v2/document",
        "/libretranslate/translate",
        "/libretranslate/detect",
        "/languages",
        "/frontend/settings",
        "/translate_file",
    } <= paths
