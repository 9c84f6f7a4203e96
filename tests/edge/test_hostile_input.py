"""Hostile input (issue 35): every request a clean 4xx in the shape of the API it was sent
to, never a 500. Lone UTF-16 surrogates, JSON nested thousands deep, broken glossary
entries and forms, on the in-process server over stand-in engines (edge_server); then the
same through a `tolk proxy` in front of it, whose circuit breaker must not count any of them
against the upstream."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.clients import http_client
from tests.support.main_server import MainKeys
from tests.support.samples.hostile import CRLF_FILE, DEEP, LONE, MULTIPART, PART, body
from tests.support.servers import InProcessServer
from tolk.local.processes import LocalServer, start_proxy
from tolk.wire.bodies import MAX_DEPTH

JSON = {"Content-Type": "application/json"}


def deepl(key: str) -> dict[str, str]:
    return {**JSON, "Authorization": f"DeepL-Auth-Key {key}"}


def tolk_error(response: httpx.Response, status: int, code: str) -> str:
    """tolk's shape: {"error": {"code", "message", "request_id", ...}}; its message."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["request_id"] == response.headers["x-request-id"]
    assert response.headers["x-tolk-error-code"] == code
    return str(error["message"])


def deepl_error(response: httpx.Response, status: int, code: str) -> str:
    """DeepL's shape: {"message", "code"}; its message."""
    assert response.status_code == status, response.text
    error = response.json()
    assert set(error) == {"message", "code"}
    assert error["code"] == code
    return str(error["message"])


def libretranslate_error(response: httpx.Response, status: int) -> str:
    """LibreTranslate's shape: {"error": "..."}, with its CORS headers; the message."""
    assert response.status_code == status, response.text
    error = response.json()
    assert set(error) == {"error"}
    assert isinstance(error["error"], str)
    assert response.headers["access-control-allow-origin"] == "*"
    return str(error["error"])


async def test_a_lone_surrogate_in_a_text_is_a_400_in_each_apis_shape(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    own = await edge_client.post(
        "/translate", content=body('{{"text": {t}, "target_lang": "de"}}', t=LONE), headers=JSON
    )
    message = tolk_error(own, 400, "invalid_request")
    assert message.startswith("invalid text: lone UTF-16 surrogate at text, character 3")
    assert own.json()["error"]["field"] == "text"
    listed = await edge_client.post(
        "/translate",
        content=body('{{"text": ["ok", {t}], "target_lang": "de"}}', t=LONE),
        headers=JSON,
    )
    assert "lone UTF-16 surrogate at text[1]" in tolk_error(listed, 400, "invalid_request")
    in_glossary = await edge_client.post(
        "/translate",
        content=body('{{"text": "x", "target_lang": "de", "glossary": {{{t}: "y"}}}}', t=LONE),
        headers=JSON,
    )
    assert "a member name in glossary" in tolk_error(in_glossary, 400, "invalid_request")

    v2 = await edge_client.post(
        "/v2/translate",
        content=body('{{"text": [{t}], "target_lang": "DE"}}', t=LONE),
        headers=deepl(main_keys.full),
    )
    assert "lone UTF-16 surrogate at text[0]" in deepl_error(v2, 400, "invalid_request")

    lt = await edge_client.post(
        "/translate",
        content=body('{{"q": {t}, "source": "en", "target": "de"}}', t=LONE),
        headers=JSON,
    )
    assert "lone UTF-16 surrogate at q" in libretranslate_error(lt, 400)
    # Its raw bytes (ED A0 80, which json.loads decodes to the same surrogate) too.
    raw = await edge_client.post(
        "/v2/translate",
        content=b'{"text": ["caf\xed\xa0\x80"], "target_lang": "DE"}',
        headers=deepl(main_keys.full),
    )
    assert "lone UTF-16 surrogate at text[0]" in deepl_error(raw, 400, "invalid_request")


async def test_a_lone_surrogate_in_a_key_is_refused_before_it_is_hashed(
    edge_client: httpx.AsyncClient,
) -> None:
    lt = await edge_client.post(
        "/translate",
        content=body('{{"q": "x", "source": "en", "target": "de", "api_key": {t}}}', t=LONE),
        headers=JSON,
    )
    assert "lone UTF-16 surrogate at api_key" in libretranslate_error(lt, 400)
    v2 = await edge_client.post(
        "/v2/translate",
        content=body('{{"text": ["x"], "target_lang": "DE", "auth_key": {t}}}', t=LONE),
        headers=JSON,
    )
    assert "lone UTF-16 surrogate at auth_key" in deepl_error(v2, 400, "invalid_request")
    # A header cannot carry a surrogate (its bytes are Latin-1): a key of such bytes, or
    # a query's percent-escaped ones (decoded with replacement characters), is a key that
    # does not exist.
    surrogate_bytes = b"caf\xed\xa0\x80"
    header = await edge_client.post(
        "/v2/translate",
        json={"text": ["x"], "target_lang": "DE"},
        headers={b"Authorization": b"DeepL-Auth-Key " + surrogate_bytes},
    )
    assert "not valid" in deepl_error(header, 403, "invalid_key")
    bearer = await edge_client.post(
        "/translate",
        json={"text": "x", "target_lang": "de"},
        headers={b"Authorization": b"Bearer " + surrogate_bytes},
    )
    tolk_error(bearer, 403, "invalid_key")
    query = await edge_client.post(
        "/v2/translate?auth_key=caf%ED%A0%80", json={"text": ["x"], "target_lang": "DE"}
    )
    deepl_error(query, 403, "invalid_key")


async def test_a_lone_surrogate_in_a_glossarys_or_style_rules_name_or_entries(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    headers = deepl(main_keys.full)
    v2 = await edge_client.post(
        "/v2/glossaries",
        content=body(
            '{{"name": {t}, "source_lang": "en", "target_lang": "de", "entries": "a\\tb"}}',
            t=LONE,
        ),
        headers=headers,
    )
    assert "lone UTF-16 surrogate at name" in deepl_error(v2, 400, "invalid_request")
    entries = await edge_client.post(
        "/v3/glossaries",
        content=body(
            '{{"name": "n", "dictionaries": [{{"source_lang": "en", "target_lang": "de", '
            '"entries": {t}, "entries_format": "tsv"}}]}}',
            t=LONE,
        ),
        headers=headers,
    )
    message = deepl_error(entries, 400, "invalid_request")
    assert "lone UTF-16 surrogate at dictionaries[0].entries" in message
    rule = await edge_client.post(
        "/v3/style_rules",
        content=body('{{"name": {t}, "language": "de"}}', t=LONE),
        headers=headers,
    )
    assert "lone UTF-16 surrogate at name" in deepl_error(rule, 400, "invalid_request")
    # Nothing was stored: the key's glossaries and rules list as before, without a 500.
    assert (await edge_client.get("/v3/glossaries", headers=headers)).status_code == 200
    assert (await edge_client.get("/v3/style_rules", headers=headers)).status_code == 200


async def test_json_nested_thousands_deep_is_a_400_in_each_apis_shape(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    bound = f"nested deeper than {MAX_DEPTH} levels"
    v2 = await edge_client.post(
        "/v2/translate", content=body('{{"text": {d}}}', d=DEEP), headers=deepl(main_keys.full)
    )
    assert bound in deepl_error(v2, 400, "invalid_request")
    glossary = await edge_client.post(
        "/v3/glossaries", content=body('{{"name": {d}}}', d=DEEP), headers=deepl(main_keys.full)
    )
    assert bound in deepl_error(glossary, 400, "invalid_request")
    lt = await edge_client.post("/translate", content=body('{{"q": {d}}}', d=DEEP), headers=JSON)
    assert bound in libretranslate_error(lt, 400)
    own = await edge_client.post(
        "/translate", content=body('{{"text": {d}}}', d=DEEP), headers=JSON
    )
    assert bound in tolk_error(own, 400, "invalid_request")
    bare = await edge_client.post("/translate", content=DEEP.encode(), headers=JSON)
    assert bound in tolk_error(bare, 400, "invalid_request")
    # Just past the bound, far below what would exhaust json.loads' recursion.
    past = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    shallow = await edge_client.post(
        "/translate", content=body('{{"text": "x", "target_lang": "de", "x": {p}}}', p=past),
        headers=JSON,
    )  # fmt: skip
    assert bound in tolk_error(shallow, 400, "invalid_request")


async def test_broken_glossary_entries_name_their_line(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    headers = deepl(main_keys.full)
    carriage = {"name": "cr", "source_lang": "en", "target_lang": "de"}
    tsv = await edge_client.post(
        "/v2/glossaries",
        json={**carriage, "entries": "a\rb\tc\nd\te", "entries_format": "tsv"},
        headers=headers,
    )
    message = deepl_error(tsv, 400, "invalid_request")
    assert message.startswith("Invalid glossary entries: line 1 has a carriage return (\\r)")
    csv_body = {
        "name": "cr",
        "dictionaries": [
            {"source_lang": "en", "target_lang": "de", "entries": "x,y\na\rb,c\nd,e",
             "entries_format": "csv"}
        ],
    }  # fmt: skip
    csv = await edge_client.post("/v3/glossaries", json=csv_body, headers=headers)
    assert "line 2 has a carriage return" in deepl_error(csv, 400, "invalid_request")
    huge = await edge_client.post(
        "/v2/glossaries",
        json={**carriage, "entries": "a\tb\nterm\t" + "x" * (128 * 1024 + 1)},
        headers=headers,
    )
    message = deepl_error(huge, 400, "invalid_request")
    assert message == "Invalid glossary entries: line 2 has a term longer than 131072 characters"
    # Line endings of either kind are fine.
    fine = await edge_client.post(
        "/v2/glossaries", json={**carriage, "entries": "a\tb\r\nc\td\r\n"}, headers=headers
    )
    assert fine.status_code == 201, fine.text
    assert fine.json()["entry_count"] == 2
    glossary_id = fine.json()["glossary_id"]
    assert (
        await edge_client.delete(f"/v2/glossaries/{glossary_id}", headers=headers)
    ).status_code == 204


async def test_configured_rules_sent_as_a_form_is_a_415(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    headers = {"Authorization": f"DeepL-Auth-Key {main_keys.full}"}
    made = await edge_client.post(
        "/v3/style_rules", json={"name": "r", "language": "de"}, headers=headers
    )
    assert made.status_code == 201, made.text
    style_id = made.json()["style_id"]
    try:
        path = f"/v3/style_rules/{style_id}/configured_rules"
        form = await edge_client.put(path, data={"punctuation": "x"}, headers=headers)
        assert "as a JSON body" in deepl_error(form, 415, "unsupported_media_type")
        empty = await edge_client.put(path, headers=headers)
        assert "must be a {category" in deepl_error(empty, 400, "invalid_request")
        rules = {"punctuation": {"quotation_mark": "use_guillemets"}}
        ok = await edge_client.put(path, json=rules, headers=headers)
        assert (ok.status_code, ok.json()["configured_rules"]) == (200, rules)
    finally:
        await edge_client.delete(f"/v3/style_rules/{style_id}", headers=headers)


NO_BOUNDARY = {"Content-Type": "multipart/form-data"}


async def test_unreadable_multipart_bodies_are_400s(
    edge_client: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    v2 = await edge_client.post(
        "/v2/translate",
        content=PART,
        headers={**NO_BOUNDARY, "Authorization": f"DeepL-Auth-Key {main_keys.full}"},
    )
    message = deepl_error(v2, 400, "invalid_request")
    assert message.startswith("the form body cannot be read (Missing boundary in multipart.)")
    lt = await edge_client.post("/translate", content=PART, headers=NO_BOUNDARY)
    assert "Missing boundary" in libretranslate_error(lt, 400)
    lt_file = await edge_client.post("/translate_file", content=CRLF_FILE, headers=MULTIPART)
    assert "Invalid multipart data" in libretranslate_error(lt_file, 400)
    own_file = await edge_client.post("/translate/file", content=CRLF_FILE, headers=MULTIPART)
    message = tolk_error(own_file, 400, "invalid_request")
    assert message.startswith("the form body cannot be read (Invalid multipart data.)")
    assert "Missing boundary" in tolk_error(
        await edge_client.post("/translate/file", content=PART, headers=NO_BOUNDARY),
        400, "invalid_request",
    )  # fmt: skip
    # A CRLF that arrives whole, escaped as RFC 7578 has clients write it (httpx does).
    escaped = await edge_client.post(
        "/translate/file",
        files={"file": ("a\r\nb.txt", b"Hello", "text/plain")},
        data={"target_lang": "de"},
    )
    assert escaped.status_code < 500, escaped.text


@pytest.fixture(scope="module")
def proxy_server(
    edge_server: InProcessServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    """`tolk proxy` in front of the in-process server; one counted failure would open the
    upstream's circuit for longer than this module runs."""
    server = start_proxy(
        tmp_path_factory.mktemp("hostile-proxy"),
        "proxy",
        [edge_server.url],
        health={"interval": 0.3, "timeout": 2, "rise": 1, "fall": 50},
        breaker={"failures": 1, "open_seconds": 600},
        request_timeout=30,
    )
    yield server
    server.stop()


@pytest.fixture
async def proxy(proxy_server: LocalServer) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(proxy_server.url) as client:
        yield client


async def circuit(proxy: httpx.AsyncClient) -> tuple[str, int]:
    (upstream,) = (await proxy.get("/upstreams")).json()["upstreams"]
    return upstream["circuit"], upstream["consecutive_failures"]


async def test_hostile_requests_through_the_proxy_leave_the_breaker_closed(
    proxy: httpx.AsyncClient, main_keys: MainKeys
) -> None:
    assert await circuit(proxy) == ("closed", 0)
    headers = deepl(main_keys.full)
    tolk_error(
        await proxy.post("/translate", content=body('{{"text": {d}}}', d=DEEP), headers=JSON),
        400, "invalid_request",
    )  # fmt: skip
    libretranslate_error(
        await proxy.post("/translate", content=body('{{"q": {d}}}', d=DEEP), headers=JSON), 400
    )
    deepl_error(
        await proxy.post("/v2/translate", content=body('{{"text": {d}}}', d=DEEP), headers=headers),
        400, "invalid_request",
    )  # fmt: skip
    surrogate = body('{{"text": {t}, "target_lang": "de"}}', t=LONE)
    for _ in range(3):
        assert "surrogate" in tolk_error(
            await proxy.post("/translate", content=surrogate, headers=JSON), 400, "invalid_request"
        )
    in_pair = body('{{"text": "x", "source_lang": {t}, "target_lang": "de"}}', t=LONE)
    tolk_error(
        await proxy.post("/translate", content=in_pair, headers=JSON), 400, "invalid_request"
    )
    libretranslate_error(await proxy.post("/translate", content=PART, headers=NO_BOUNDARY), 400)
    libretranslate_error(
        await proxy.post("/translate_file", content=CRLF_FILE, headers=MULTIPART), 400
    )
    tolk_error(
        await proxy.post("/translate/file", content=CRLF_FILE, headers=MULTIPART),
        400, "invalid_request",
    )  # fmt: skip
    deepl_error(
        await proxy.post(
            "/v2/glossaries", headers=headers,
            json={"name": "g", "source_lang": "en", "target_lang": "de", "entries": "a\rb\tc"},
        ),
        400, "invalid_request",
    )  # fmt: skip
    # A key's spent quota is the caller's business too (tolk's own shape answers it 429).
    spent = {"Authorization": f"Bearer {main_keys.tiny}"}
    for _ in range(3):
        refused = await proxy.post(
            "/translate", json={"text": "x" * 40, "target_lang": "de"}, headers=spent
        )
        tolk_error(refused, 429, "quota_exceeded")
    assert await circuit(proxy) == ("closed", 0)
    served = await proxy.post("/translate", json={"text": "Hello", "target_lang": "de"})
    assert served.status_code == 200, served.text
    assert await circuit(proxy) == ("closed", 0)
    assert json.loads((await proxy.get("/ready")).text)["status"] == "ready"
