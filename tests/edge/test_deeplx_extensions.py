"""DeepLX's API (`/deeplx/...`), Immersive Translate's (`/immersive/translate`) and KISS
Translator's (`/kiss/translate`) custom APIs, and DeepLX clients pointed at tolk's own
`/translate`, on the in-process server over stand-in engines (edge_server): each request the
research recorded (tests/data/chat_apps, from the apps' sources: docs/research/chat-apps.md)
replayed exactly (body bytes, headers; the path rewritten to tolk's), asserting the fields
each app reads; errors in each API's shape; keys in headers and DeepLX's `?token=`; and a
`tolk proxy` routing these paths by language pair."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.errors import assert_error
from tests.support.main_server import MainKeys
from tests.support.paths import TEST_DATA
from tests.support.polling import wait_until_sync
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import LocalServer, free_port, start_proxy

RECORDINGS = TEST_DATA / "chat_apps"


DEEPLX_APPS = ["deeplx-kiss", "deeplx-pot", "deeplx-zotero", "deeplx-server"]


DEEPLX_FIELDS = {"code", "id", "data", "alternatives", "source_lang", "target_lang", "method"}


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDINGS / f"{name}.json").read_text())
    return data


def headers_of(recording: dict[str, Any], key: str | None = None) -> dict[str, str]:
    """The headers the app sends: its own, with `Authorization` as it sends it: always
    (`Bearer <key>`, KISS's custom API, even without a key), or only with a key."""
    out: dict[str, str] = {}
    for name, value in recording["headers"].items():
        if name.lower() != "authorization":
            out[name] = value
        elif value == "Bearer <key>" or key:
            # Without a key KISS sends `Bearer `; fetch() trims a header's value, so the
            # server gets `Bearer`.
            out[name] = f"Bearer {key}" if key else "Bearer"
    return out


async def replay(
    client: httpx.AsyncClient,
    name: str,
    path: str,
    key: str | None = None,
    body: dict[str, Any] | None = None,
) -> httpx.Response:
    """The recording's request, its exact body (or `body`) and headers, at `path`."""
    recording = recorded(name)
    content = json.dumps(body if body is not None else recording["body"]).encode()
    return await client.post(path, content=content, headers=headers_of(recording, key))


async def standin_translation(
    client: httpx.AsyncClient, text: str | list[str], target: str, source: str | None = None
) -> Any:
    """What the stand-in engine makes of `text` through tolk's own API (greedy: the same
    request gives the same output, whatever API carried it)."""
    body = {"text": text, "target_lang": target}
    if source:
        body["source_lang"] = source
    response = await client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translation"]


def assert_deeplx_error(response: httpx.Response, status: int, code: str) -> str:
    """DeepLX's error shape: `{"code": <status>, "message"}` with that status; tolk's code in
    X-Tolk-Error-Code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message"}
    assert body["code"] == status
    assert response.headers["x-tolk-error-code"] == code
    message: str = body["message"]
    assert len(message) > 10
    return message


@pytest.mark.parametrize("app", DEEPLX_APPS)
async def test_deeplx_apps_read_their_translation(edge_client: httpx.AsyncClient, app: str) -> None:
    recording = recorded(app)
    expected = await standin_translation(edge_client, recording["body"]["text"], "de")
    for path in ("/deeplx/translate", "/deeplx/v1/translate"):
        response = await replay(edge_client, app, path)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == DEEPLX_FIELDS
        assert body["data"] == expected  # what every DeepLX client reads
        assert body["source_lang"] == "EN"  # KISS reads it (detected, or as asked: Zotero's)
        assert body["target_lang"] == "DE"  # echoed as sent: KISS compares the two
        assert (body["code"], body["alternatives"], body["method"]) == (200, [], "tolk")
        assert isinstance(body["id"], int)
        assert response.headers["server-timing"].startswith("engine;dur=")


async def test_kiss_skips_a_text_already_in_its_target(edge_client: httpx.AsyncClient) -> None:
    """KISS's `isSame`: source `auto` and the answered `source_lang` equal to its target."""
    body = {
        "text": "Guten Morgen, wie geht es dir heute?",
        "target_lang": "DE",
        "source_lang": "auto",
    }
    response = await replay(edge_client, "deeplx-kiss", "/deeplx/translate", body=body)
    assert response.status_code == 200, response.text
    assert response.json()["source_lang"] == "DE"
    chinese = {"text": "今天天气很好。", "target_lang": "EN-US", "source_lang": "ZH"}
    response = await replay(edge_client, "deeplx-pot", "/deeplx/translate", body=chinese)
    assert (response.json()["source_lang"], response.json()["target_lang"]) == ("ZH", "EN-US")
    to_chinese = {"text": "Hello there.", "target_lang": "ZH-HANS", "source_lang": "auto"}
    response = await replay(edge_client, "deeplx-kiss", "/deeplx/translate", body=to_chinese)
    assert response.json()["data"] == await standin_translation(
        edge_client, "Hello there.", "zh-Hans"
    )


@pytest.mark.parametrize("app", ["deeplx-kiss", "deeplx-pot", "deeplx-zotero"])
async def test_deeplx_apps_pointed_at_tolks_own_translate(
    edge_client: httpx.AsyncClient, app: str
) -> None:
    """tolk's /translate takes a DeepLX client's body already; its answer carries DeepLX's
    fields beside tolk's own."""
    recording = recorded(app)
    assert recording["path"] == "/translate"
    response = await replay(edge_client, app, recording["path"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["data"] == body["translation"]
    assert body["data"] == await standin_translation(edge_client, recording["body"]["text"], "de")
    assert (body["code"], body["method"]) == (200, "tolk")
    assert isinstance(body["id"], int)
    assert (body["source_lang"], body["target_lang"]) == ("en", "de")  # tolk's tags
    assert body["model"] == "demo"
    # A list's answer has no `data` (DeepLX clients send one string).
    listed = await edge_client.post(
        "/translate", json={"text": ["One.", "Two."], "target_lang": "DE"}
    )
    assert listed.json()["data"] is None


async def test_deeplx_v2_answers_in_deepls_shape(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    texts = ["The weather is nice today.", "Click Save to continue."]
    expected = await standin_translation(edge_client, texts, "de")
    auth = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    as_json = await edge_client.post(
        "/deeplx/v2/translate", json={"text": texts, "target_lang": "DE"}, headers=auth
    )
    as_form = await edge_client.post(
        "/deeplx/v2/translate", data={"text": texts, "target_lang": "DE"}, headers=auth
    )
    for response in (as_json, as_form):
        assert response.status_code == 200, response.text
        assert response.json() == {
            "translations": [{"detected_source_language": "EN", "text": text} for text in expected]
        }


async def test_deeplx_markup_and_extra_fields(edge_client: httpx.AsyncClient) -> None:
    html = {"text": "<p>Hello <b>there</b></p>", "source_lang": "EN", "target_lang": "FR",
            "tag_handling": "html", "formality": "more", "split_sentences": "1"}  # fmt: skip
    response = await edge_client.post("/deeplx/translate", json=html)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data.startswith("<p>")
    assert data.endswith("</p>")


async def test_deeplx_errors_in_deeplxs_shape(edge_client: httpx.AsyncClient) -> None:
    ok = {"text": "Hello", "source_lang": "auto", "target_lang": "DE"}
    unknown = await edge_client.post("/deeplx/translate", json={**ok, "target_lang": "XX-NOPE"})
    assert "target_lang" in assert_deeplx_error(unknown, 400, "invalid_language")
    unserved = await edge_client.post("/deeplx/translate", json={**ok, "target_lang": "JA"})
    assert_deeplx_error(unserved, 400, "unsupported_language_pair")
    no_target = await edge_client.post("/deeplx/translate", json={"text": "Hello"})
    assert "target_lang" in assert_deeplx_error(no_target, 400, "invalid_request")
    for body in ({**ok, "text": ""}, {"target_lang": "DE"}):  # DeepLX's 404
        empty = await edge_client.post("/deeplx/translate", json=body)
        assert assert_deeplx_error(empty, 404, "invalid_request") == "No text to translate"
    tags = await edge_client.post("/deeplx/translate", json={**ok, "tag_handling": "markdown"})
    assert "tag_handling" in assert_deeplx_error(tags, 400, "invalid_request")
    not_json = await edge_client.post(
        "/deeplx/translate", content=b"{text", headers={"Content-Type": "application/json"}
    )
    assert_deeplx_error(not_json, 400, "invalid_request")
    lone_surrogate = await edge_client.post(
        "/deeplx/translate",
        content=b'{"text": "caf\\ud800", "target_lang": "DE"}',
        headers={"Content-Type": "application/json"},
    )
    assert_deeplx_error(lone_surrogate, 400, "invalid_request")
    too_long = await edge_client.post("/deeplx/translate", json={**ok, "text": "ab " * 40_001})
    assert_deeplx_error(too_long, 413, "payload_too_large")
    too_many = await edge_client.post(
        "/deeplx/v2/translate", json={"text": ["Hi."] * 65, "target_lang": "DE"}
    )
    assert_deeplx_error(too_many, 413, "payload_too_large")
    v2_empty = await edge_client.post("/deeplx/v2/translate", json={"target_lang": "DE"})
    assert_deeplx_error(v2_empty, 404, "invalid_request")
    v2_no_target = await edge_client.post("/deeplx/v2/translate", json={"text": ["Hi."]})
    assert_deeplx_error(v2_no_target, 400, "invalid_request")
    # Nothing a malformed body holds is a 500.
    for junk in ([1, 2], {"text": 5, "target_lang": "DE"}, {"text": ["a"], "target_lang": "DE"}):
        answer = await edge_client.post("/deeplx/translate", json=junk)
        assert answer.status_code in (400, 404), answer.text
        assert set(answer.json()) == {"code", "message"}
    # Refused before a route is reached, and still DeepLX's shape (known from the path).
    oversized = await edge_client.post(
        "/deeplx/translate",
        content=b'{"text": "' + b"a" * 270_000 + b'", "target_lang": "DE"}',
        headers={"Content-Type": "application/json"},
    )
    assert_deeplx_error(oversized, 413, "payload_too_large")
    nowhere = await edge_client.post("/deeplx/v9/translate", json=ok)
    assert_deeplx_error(nowhere, 404, "not_found")


async def test_deeplx_keys_in_headers_or_the_urls_token(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    body = {"text": "Hello", "target_lang": "DE"}
    for header in (f"Bearer {main_keys.full}", f"DeepL-Auth-Key {main_keys.full}"):
        good = await edge_client.post(
            "/deeplx/translate", json=body, headers={"Authorization": header}
        )
        assert good.status_code == 200, good.text
    # Pot and Zotero send no headers: the key is in the URL they are given.
    response = await replay(edge_client, "deeplx-pot", f"/deeplx/translate?token={main_keys.full}")
    assert response.status_code == 200, response.text
    assert response.json()["data"]
    for path in ("/deeplx/translate?token=nope", "/deeplx/v2/translate?token=nope"):
        wrong = await edge_client.post(
            path, json={**body, "text": ["Hello"]} if "v2" in path else body
        )
        assert_deeplx_error(wrong, 401, "invalid_key")
    wrong_header = await replay(edge_client, "deeplx-kiss", "/deeplx/translate", key="not-a-key")
    assert_deeplx_error(wrong_header, 401, "invalid_key")
    # The token in the URL is DeepLX's (and Immersive Translate's) only: not tolk's own.
    own = await edge_client.post("/translate?token=nope", json=body)
    assert own.status_code == 200  # anonymous: the query's token is not read there


async def test_immersive_translate_reads_each_translation(edge_client: httpx.AsyncClient) -> None:
    recording = recorded("immersive-custom")
    texts = recording["body"]["text_list"]
    expected = await standin_translation(edge_client, texts, "de")
    response = await replay(edge_client, "immersive-custom", "/immersive/translate")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "translations": [{"detected_source_lang": "en", "text": text} for text in expected]
    }
    # Its reserved placeholders come back as sent; Chinese by its region code.
    body = {
        "source_lang": "auto",
        "target_lang": "zh-CN",
        "text_list": ["Press {0} to save {1} now.", "A <b0></b0> star and more words here.",
                      "今天天气很好。我们去公园散步吧。"],
    }  # fmt: skip
    response = await replay(edge_client, "immersive-custom", "/immersive/translate", body=body)
    assert response.status_code == 200, response.text
    first, second, third = response.json()["translations"]
    assert "{0}" in first["text"]
    assert "{1}" in first["text"]
    assert "<b0></b0>" in second["text"]
    assert third["detected_source_lang"] == "zh-CN"
    taiwan = {**body, "text_list": ["Hello there."], "target_lang": "zh-TW"}
    response = await replay(edge_client, "immersive-custom", "/immersive/translate", body=taiwan)
    assert response.json()["translations"][0]["text"] == await standin_translation(
        edge_client, "Hello there.", "zh-Hant"
    )


async def test_immersive_errors_and_keys(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    ok = {"source_lang": "auto", "target_lang": "de", "text_list": ["Hello"]}
    assert_error(
        await edge_client.post("/immersive/translate", json={**ok, "target_lang": "xx-nope"}),
        400,
        "invalid_language",
    )
    assert_error(
        await edge_client.post("/immersive/translate", json={"target_lang": "de"}),
        422,
        "invalid_request",
    )
    assert_error(
        await edge_client.post("/immersive/translate", json={**ok, "text_list": ["Hi."] * 65}),
        413,
        "payload_too_large",
    )
    assert_error(
        await edge_client.post("/immersive/translate?token=nope", json=ok), 403, "invalid_key"
    )
    keyed = await edge_client.post(f"/immersive/translate?token={main_keys.full}", json=ok)
    assert keyed.status_code == 200, keyed.text


async def test_kiss_custom_batch_and_single(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    texts = recorded("kiss-custom")["body"]["texts"]
    expected = await standin_translation(edge_client, texts, "de")
    for key in (None, main_keys.full):  # KISS sends `Bearer ` even without a key
        batch = await replay(edge_client, "kiss-custom", "/kiss/translate", key=key)
        assert batch.status_code == 200, batch.text
        assert batch.json() == [{"text": text, "src": "en"} for text in expected]
        single = await replay(edge_client, "kiss-custom-single", "/kiss/translate", key=key)
        assert single.status_code == 200, single.text
        assert single.json() == {"text": expected[0], "src": "en"}
    chinese = {"text": "今天天气很好。我们去公园散步吧。", "from": "auto", "to": "zh-TW"}
    response = await replay(edge_client, "kiss-custom-single", "/kiss/translate", body=chinese)
    assert response.json()["src"] == "zh-CN"
    asked = {"texts": ["Hello there."], "from": "en", "to": "zh-CN"}
    response = await replay(edge_client, "kiss-custom", "/kiss/translate", body=asked)
    assert response.json() == [
        {
            "text": await standin_translation(edge_client, "Hello there.", "zh-Hans", "en"),
            "src": "en",
        }
    ]


async def test_kiss_errors(edge_client: httpx.AsyncClient) -> None:
    ok = {"texts": ["Hello"], "from": "auto", "to": "de"}
    assert_error(
        await edge_client.post("/kiss/translate", json={**ok, "to": "xx-nope"}),
        400,
        "invalid_language",
    )
    assert_error(
        await edge_client.post("/kiss/translate", json={**ok, "from": "klingon!"}),
        400,
        "invalid_language",
    )
    for body in ({"from": "auto", "to": "de"}, {**ok, "text": "Hello"}, {"texts": ["Hi"]}):
        assert_error(await edge_client.post("/kiss/translate", json=body), 422, "invalid_request")
    assert_error(
        await edge_client.post("/kiss/translate", json={**ok, "texts": ["Hi."] * 65}),
        413,
        "payload_too_large",
    )
    wrong = await replay(edge_client, "kiss-custom", "/kiss/translate", key="not-a-key")
    assert_error(wrong, 403, "invalid_key")
    # Keys are headers here: a token in the URL is not read.
    assert (await edge_client.post("/kiss/translate?token=nope", json=ok)).status_code == 200


async def test_the_openapi_document_shows_their_fields(edge_client: httpx.AsyncClient) -> None:
    spec = (await edge_client.get("/openapi.json")).json()
    paths = spec["paths"]
    assert {
        "/deeplx/translate",
        "/deeplx/v1/translate",
        "/deeplx/v2/translate",
        "/immersive/translate",
        "/kiss/translate",
    } <= set(paths)
    schemas = spec["components"]["schemas"]
    assert {"text", "source_lang", "target_lang"} <= set(schemas["DeepLXTranslate"]["properties"])
    assert set(schemas["DeepLXTranslated"]["properties"]) == DEEPLX_FIELDS
    assert {"text", "texts", "from", "to"} <= set(schemas["KissTranslate"]["properties"])
    assert "text_list" in schemas["ImmersiveTranslate"]["properties"]
    assert "text" in json.dumps(paths["/deeplx/v2/translate"]["post"]["requestBody"])


@pytest.fixture(scope="module")
def routed(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[InProcessServer, InProcessServer, LocalServer]
]:  # fmt: skip
    """`tolk proxy` in front of two in-process servers over stand-in engines: A serves en,
    de, fr and B en, de, es."""
    workdir = tmp_path_factory.mktemp("deeplx-proxy")
    a, b = (
        InProcessServer(server_config([model_config(name, test_model, languages=langs)],
                                      free_port()))
        for name, langs in (("a", ["en", "de", "fr"]), ("b", ["en", "de", "es"]))
    )  # fmt: skip
    proxy = start_proxy(
        workdir, "proxy", [a.url, b.url], health={"interval": 0.5, "rise": 1, "fall": 2}
    )
    wait_until_sync(
        lambda: all(u["healthy"] for u in httpx.get(f"{proxy.url}/upstreams").json()["upstreams"]),
        within=60,
        interval=0.1,
        message="the proxy did not find both upstreams healthy",
    )
    yield a, b, proxy
    proxy.stop()
    a.stop()
    b.stop()


async def test_the_proxy_routes_them_by_pair(
    routed: tuple[InProcessServer, InProcessServer, LocalServer],
) -> None:
    a, b, proxy = routed
    async with httpx.AsyncClient(base_url=proxy.url, timeout=60) as client:
        for target, upstream in (("FR", a), ("ES", b)):
            body = {**recorded("deeplx-pot")["body"], "target_lang": target}
            response = await replay(client, "deeplx-pot", "/deeplx/translate?token=x", body=body)
            assert response.status_code == 200, response.text
            assert response.headers["x-tolk-upstream"] == upstream.url
            assert response.json()["target_lang"] == target
        for to, upstream in (("es", b), ("fr", a)):
            body = {**recorded("kiss-custom")["body"], "to": to}
            response = await replay(client, "kiss-custom", "/kiss/translate", body=body)
            assert response.status_code == 200, response.text
            assert response.headers["x-tolk-upstream"] == upstream.url
            assert len(response.json()) == 2
        body = {**recorded("immersive-custom")["body"], "target_lang": "es"}
        response = await replay(client, "immersive-custom", "/immersive/translate", body=body)
        assert response.headers["x-tolk-upstream"] == b.url
        # OpenAI's chat completions: the pair in the model's name, or Qwen-MT's options.
        for model, upstream in (("tolk-en-es", b), ("tolk-en-fr", a)):
            chat = await client.post(
                "/v1/chat/completions",
                json={"model": model, "messages": [{"role": "user", "content": "Hello."}]},
            )
            assert chat.status_code == 200, chat.text
            assert chat.headers["x-tolk-upstream"] == upstream.url
        options = {"source_lang": "English", "target_lang": "Spanish"}
        chat = await client.post(
            "/v1/chat/completions",
            json={"model": "tolk", "messages": [{"role": "user", "content": "Hello."}],
                  "translation_options": options},
        )  # fmt: skip
        assert chat.headers["x-tolk-upstream"] == b.url
        assert chat.headers["x-tolk-chat"] == "translation; shape=translation_options"
        nobody = await client.post("/kiss/translate", json={"text": "x", "from": "fr", "to": "es"})
        assert nobody.status_code == 400
        assert nobody.json()["error"]["code"] == "unsupported_language_pair"
