"""Quotas that hold and a segment memory that is no oracle across keys (issue 35), on
in-process servers over stand-in engines (tolk.testing.fake_engine) with a real key store:

- a request's characters are reserved at admission against the quota (used + reserved by
  requests in flight + its own), so concurrent requests cannot pass it together; a request
  that fails releases its reservation;
- a file is admitted for its characters of text, counted before it is translated, on every
  API (a file over the quota is refused before the engine sees it; DeepL's asynchronous
  /v2/document at upload, 456);
- DeepL's API takes the key from the Authorization header only;
- `memory.scope: key` (the default) partitions the segment memory per key; `shared` answers
  every key from every key's segments without saying so.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.clients import http_client
from tests.support.quotas import QUOTA
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port
from tolk.store.keys import KeyStore
from tolk.testing.fake_engine import FakeLLM

# Each stand-in engine request takes its output's time (max_tokens_ratio 2: about 50 tokens
# for a 100-character text, 0.25 s): the concurrent requests are all in flight together.
SECONDS_PER_TOKEN = 0.005


QUOTA_KEYS = (
    "tolk",
    "deepl",
    "libre",
    "tolk-file",
    "deepl-file",
    "libre-file",
    "docx",
    "failing",
)


@dataclass(frozen=True)
class Keys:
    quota: dict[str, str]  # name -> a key with a quota of QUOTA characters a month
    a: str  # no quota
    b: str  # no quota


def _make_keys(db: Path) -> Keys:
    store = KeyStore(db)
    try:
        quota = {name: store.add(name, character_limit=QUOTA)[1] for name in QUOTA_KEYS}
        return Keys(quota, store.add("a")[1], store.add("b")[1])
    finally:
        store.close()


def _server(test_model: Path, db: Path, scope: str | None) -> InProcessServer:
    config = server_config(
        [model_config("demo", test_model, languages=["en", "de"])],
        free_port(),
        access={"db": str(db)},
    )
    config["segment_cache"] = {"enabled": True} | ({"scope": scope} if scope else {})
    return InProcessServer(config, seconds_per_token=SECONDS_PER_TOKEN)


@pytest.fixture(scope="module")
def keys_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Keys]:
    db = tmp_path_factory.mktemp("quota-keys") / "keys.db"
    return db, _make_keys(db)


@pytest.fixture(scope="module")
def keys(keys_db: tuple[Path, Keys]) -> Keys:
    return keys_db[1]


@pytest.fixture(scope="module")
def quota_server(test_model: Path, keys_db: tuple[Path, Keys]) -> Iterator[InProcessServer]:
    """The default configuration (`memory.scope` unset: `key`), the memory on."""
    server = _server(test_model, keys_db[0], None)
    yield server
    server.stop()


@pytest.fixture
async def quota_client(quota_server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(quota_server.url) as c:
        yield c


def _llm(server: InProcessServer) -> FakeLLM:
    return server.engines.started["demo"]


def text_of(characters: int, tag: str) -> str:
    """A text of exactly `characters` characters, distinct by `tag` (no sentence ends: one
    segment)."""
    words = f"{tag} the quota test sends this text to count how many requests fit in it "
    return (words * (characters // len(words) + 1))[:characters]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def deepl_auth(key: str) -> dict[str, str]:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


def is_tolk_quota_error(response: httpx.Response) -> bool:
    return response.status_code == 429 and response.json()["error"]["code"] == "quota_exceeded"


def is_deepl_quota_error(response: httpx.Response) -> bool:
    body = response.json()
    return (
        response.status_code == 456
        and set(body) == {"message", "code"}
        and (body["code"] == "quota_exceeded")
    )


def is_libre_quota_error(response: httpx.Response) -> bool:
    body = response.json()
    return response.status_code == 403 and set(body) == {"error"} and "quota" in body["error"]


async def deepl_used(client: httpx.AsyncClient, key: str) -> int:
    usage = await client.get("/v2/usage", headers=deepl_auth(key))
    assert usage.status_code == 200, usage.text
    assert usage.json()["character_limit"] == QUOTA
    used: int = usage.json()["character_count"]
    return used


async def _burst(send: Any) -> list[httpx.Response]:
    return list(await asyncio.gather(*(send(i) for i in range(20))))


async def test_twenty_concurrent_requests_on_a_300_character_quota_tolk(
    quota_client: httpx.AsyncClient, keys: Keys
) -> None:
    key = keys.quota["tolk"]

    async def send(i: int) -> httpx.Response:
        body = {"text": text_of(100, f"t{i}"), "source_lang": "en", "target_lang": "de"}
        return await quota_client.post("/translate", json=body, headers=bearer(key))

    answers = await _burst(send)
    ok = [a for a in answers if a.status_code == 200]
    assert len(ok) == 3, [a.status_code for a in answers]  # 3 x 100 = the quota, no more
    assert all(is_tolk_quota_error(a) for a in answers if a.status_code != 200)
    assert sum(a.json()["usage"]["characters"] for a in ok) == QUOTA
    # The quota is spent: even a one-character request is refused now.
    one = {"text": "x", "source_lang": "en", "target_lang": "de"}
    assert is_tolk_quota_error(await quota_client.post("/translate", json=one, headers=bearer(key)))


async def test_twenty_concurrent_requests_on_a_300_character_quota_deepl(
    quota_client: httpx.AsyncClient, keys: Keys
) -> None:
    key = keys.quota["deepl"]

    async def send(i: int) -> httpx.Response:
        body = {"text": [text_of(100, f"d{i}")], "source_lang": "EN", "target_lang": "DE"}
        return await quota_client.post("/v2/translate", json=body, headers=deepl_auth(key))

    answers = await _burst(send)
    assert sum(a.status_code == 200 for a in answers) == 3, [a.status_code for a in answers]
    assert all(is_deepl_quota_error(a) for a in answers if a.status_code != 200)
    assert await deepl_used(quota_client, key) == QUOTA


async def test_twenty_concurrent_requests_on_a_300_character_quota_libretranslate(
    quota_client: httpx.AsyncClient, keys: Keys
) -> None:
    key = keys.quota["libre"]

    async def send(i: int) -> httpx.Response:
        body = {"q": text_of(100, f"l{i}"), "source": "en", "target": "de", "api_key": key}
        return await quota_client.post("/translate", json=body)

    answers = await _burst(send)
    assert sum(a.status_code == 200 for a in answers) == 3, [a.status_code for a in answers]
    assert all(is_libre_quota_error(a) for a in answers if a.status_code != 200)


async def test_a_request_that_fails_releases_its_reservation(
    quota_client: httpx.AsyncClient, keys: Keys
) -> None:
    key = keys.quota["failing"]
    whole = {"text": text_of(QUOTA, "f"), "source_lang": "en", "target_lang": "de"}
    # Admitted (the whole quota reserved), then failed inside the work: nothing charged.
    unknown = await quota_client.post(
        "/translate", json=whole | {"glossary_id": "no-such"}, headers=bearer(key)
    )
    assert unknown.status_code == 400, unknown.text
    # Cancelled by its deadline while the engine works: nothing charged either.
    late = await quota_client.post(
        "/translate", json=whole, headers=bearer(key) | {"X-Request-Timeout": "0.05"}
    )
    assert late.status_code == 504, late.text
    assert await deepl_used(quota_client, key) == 0
    done = await quota_client.post("/translate", json=whole, headers=bearer(key))
    assert done.status_code == 200, done.text
    assert await deepl_used(quota_client, key) == QUOTA


def _docx(text: str) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


async def test_a_file_over_the_quota_is_refused_tolk(
    quota_client: httpx.AsyncClient, keys: Keys, quota_server: InProcessServer
) -> None:
    key = keys.quota["tolk-file"]
    fields = {"target_lang": "de", "source_lang": "en"}

    def upload(name: str, content: bytes) -> Any:
        return quota_client.post(
            "/translate/file", files={"file": (name, content)}, data=fields, headers=bearer(key)
        )

    before = _llm(quota_server).requests
    over = await upload("big.txt", text_of(QUOTA + 100, "big").encode())
    assert is_tolk_quota_error(over), over.text
    assert "needs 400" in over.json()["error"]["message"]
    assert _llm(quota_server).requests == before  # never translated
    # One that fits is charged its characters; the next no longer fits.
    fits = await upload("fits.txt", text_of(250, "fits").encode())
    assert fits.status_code == 200, fits.text
    assert await deepl_used(quota_client, key) == 250
    assert is_tolk_quota_error(await upload("more.txt", text_of(100, "more").encode()))
    # A Word document's text is counted, not its zipped bytes.
    docx_key = keys.quota["docx"]
    word = await quota_client.post(
        "/translate/file",
        files={"file": ("big.docx", _docx(text_of(QUOTA + 1, "word")))},
        data=fields,
        headers=bearer(docx_key),
    )
    assert is_tolk_quota_error(word), word.text
    assert "needs 301" in word.json()["error"]["message"]
    assert await deepl_used(quota_client, docx_key) == 0


async def test_a_file_over_the_quota_is_refused_at_upload_deepl(
    quota_client: httpx.AsyncClient, keys: Keys, quota_server: InProcessServer
) -> None:
    key = keys.quota["deepl-file"]

    def upload(name: str, content: bytes) -> Any:
        return quota_client.post(
            "/v2/document",
            files={"file": (name, content)},
            data={"target_lang": "DE", "source_lang": "EN"},
            headers=deepl_auth(key),
        )

    before = _llm(quota_server).requests
    over = await upload("big.txt", text_of(3029, "big").encode())
    assert is_deepl_quota_error(over), over.text  # at upload: no document to poll
    assert _llm(quota_server).requests == before
    fits = await upload("fits.txt", text_of(250, "fits").encode())
    assert fits.status_code == 200, fits.text
    # Reserved while it translates in the background: a second one is refused meanwhile.
    assert is_deepl_quota_error(await upload("more.txt", text_of(100, "more").encode()))
    document = fits.json()
    status: dict[str, Any] = {}
    for _ in range(600):
        status = (
            await quota_client.post(
                f"/v2/document/{document['document_id']}",
                json={"document_key": document["document_key"]},
                headers=deepl_auth(key),
            )
        ).json()
        if status["status"] != "translating":
            break
        await asyncio.sleep(0.05)  # polled, as DeepL's clients poll
    assert status["status"] == "done", status
    assert status["billed_characters"] == 250
    assert await deepl_used(quota_client, key) == 250


async def test_a_file_over_the_quota_is_refused_libretranslate(
    quota_client: httpx.AsyncClient, keys: Keys, quota_server: InProcessServer
) -> None:
    key = keys.quota["libre-file"]

    def upload(name: str, content: bytes) -> Any:
        return quota_client.post(
            "/translate_file",
            files={"file": (name, content)},
            data={"source": "en", "target": "de", "api_key": key},
        )

    before = _llm(quota_server).requests
    over = await upload(
        "big.srt", f"1\n00:00:01,000 --> 00:00:02,000\n{text_of(400, 's')}\n".encode()
    )
    assert is_libre_quota_error(over), over.text
    assert _llm(quota_server).requests == before
    fits = await upload("fits.txt", text_of(250, "fits").encode())
    assert fits.status_code == 200, fits.text
    assert await deepl_used(quota_client, key) == 250


async def test_deepl_takes_the_key_from_the_authorization_header_only(
    quota_client: httpx.AsyncClient, keys: Keys
) -> None:
    key = keys.quota["deepl"]
    for refused in (
        quota_client.get(f"/v2/usage?auth_key={key}"),
        quota_client.get(f"/v2/usage?auth_key={key}", headers=deepl_auth(key)),  # with a header too
        quota_client.post(  # a form body, as older clients sent it
            "/v2/translate", data={"text": "x", "target_lang": "DE", "auth_key": key}
        ),
        quota_client.post(
            "/v2/translate", json={"text": ["x"], "target_lang": "DE", "auth_key": key}
        ),
        quota_client.get(f"/v2/glossaries?auth_key={key}"),
    ):
        answer = await refused
        assert answer.status_code == 403, answer.text
        assert set(answer.json()) == {"message", "code"}
        assert answer.json()["code"] == "invalid_key"
        assert "Authorization header" in answer.json()["message"]
    assert (await quota_client.get("/v2/usage", headers=deepl_auth(key))).status_code == 200


async def test_key_b_is_not_answered_from_key_as_memory(
    quota_client: httpx.AsyncClient, keys: Keys, quota_server: InProcessServer
) -> None:
    llm = _llm(quota_server)
    text = "A sentence key A translated first."
    body = {"text": text, "source_lang": "en", "target_lang": "de"}
    first = await quota_client.post("/translate", json=body, headers=bearer(keys.a))
    assert first.json()["usage"]["memory_segments"] == 0
    before = llm.requests
    other = await quota_client.post("/translate", json=body, headers=bearer(keys.b))
    assert other.status_code == 200, other.text
    assert other.json()["usage"]["memory_segments"] == 0
    assert other.headers["X-Tolk-Memory-Segments"] == "0"
    assert llm.requests == before + 1  # the engine translated it for B
    # On the drop-in APIs too.
    deepl_body = {"text": ["A DeepL sentence key A translated first."], "target_lang": "DE"}
    deepl_body["source_lang"] = "EN"
    await quota_client.post("/v2/translate", json=deepl_body, headers=deepl_auth(keys.a))
    before = llm.requests
    b_deepl = await quota_client.post("/v2/translate", json=deepl_body, headers=deepl_auth(keys.b))
    assert b_deepl.headers["X-Tolk-Memory-Segments"] == "0"
    assert llm.requests == before + 1
    # Each key is still answered from its own.
    again = await quota_client.post("/translate", json=body, headers=bearer(keys.a))
    assert again.json()["usage"]["memory_segments"] == 1
    assert again.json()["translation"] == first.json()["translation"]
    assert llm.requests == before + 1
    # Callers without a key share one partition, apart from every key's.
    anonymous = await quota_client.post("/translate", json=body)
    assert anonymous.json()["usage"]["memory_segments"] == 0
    assert (await quota_client.post("/translate", json=body)).json()["usage"][
        "memory_segments"
    ] == 1


async def test_with_a_shared_memory_a_hit_is_not_told(test_model: Path, tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    keys = _make_keys(db)
    server = _server(test_model, db, "shared")
    try:
        async with http_client(server.url) as client:
            llm = _llm(server)
            body = {"text": "Shared between keys.", "source_lang": "en", "target_lang": "de"}
            first = await client.post("/translate", json=body, headers=bearer(keys.a))
            before = llm.requests
            hit = await client.post("/translate", json=body, headers=bearer(keys.b))
            assert hit.status_code == 200, hit.text
            assert llm.requests == before  # answered from A's translation...
            assert hit.json()["translation"] == first.json()["translation"]
            # ... and nothing in the answer tells it from A's, which the engine made.
            assert hit.json()["usage"] == first.json()["usage"]
            assert hit.json()["usage"]["memory_segments"] == 0
            assert hit.json()["usage"]["completion_tokens"] == 0
            assert "X-Tolk-Memory-Segments" not in hit.headers
            assert "Server-Timing" not in hit.headers  # its engine time would be none
            assert "Server-Timing" not in first.headers
            assert hit.json()["usage"]["characters"] == len(body["text"])  # charged alike
            deepl_body = {"text": [body["text"]], "source_lang": "EN", "target_lang": "DE"}
            drop_in = await client.post(
                "/v2/translate", json=deepl_body, headers=deepl_auth(keys.b)
            )
            assert drop_in.status_code == 200, drop_in.text
            assert "X-Tolk-Memory-Segments" not in drop_in.headers
            assert drop_in.json()["translations"][0]["billed_characters"] == len(body["text"])
    finally:
        server.stop()
