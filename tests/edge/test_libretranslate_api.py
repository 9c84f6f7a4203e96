"""LibreTranslate's own API tests (libretranslate/tests/test_api/*.py: 6 files, 14 tests),
their exact requests and assertions, sent over HTTP to the in-process server over stand-in
engines (es replaced by de, which the test server serves)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.servers import InProcessServer


@pytest.fixture
def lt(edge_server: InProcessServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=edge_server.url, timeout=60) as client:
        yield client


def test_detect(lt: httpx.Client) -> None:
    found = lt.post("/detect", data={"q": "Hello"})
    assert found.status_code == 200
    assert "confidence" in found.json()[0]
    assert "language" in found.json()[0]
    bare = lt.post("/detect")  # no body at all
    assert bare.status_code == 400
    assert bare.json() == {"error": "Invalid request: missing q parameter"}
    assert lt.get("/detect").status_code == 405


def test_languages_settings_health_and_spec(lt: httpx.Client) -> None:
    languages = lt.get("/languages")
    assert languages.status_code == 200
    assert "code" in languages.json()[0]
    assert "name" in languages.json()[0]
    assert lt.post("/languages").status_code == 405
    assert lt.get("/frontend/settings").status_code == 200
    health = lt.get("/health")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert lt.post("/health").status_code == 405
    spec = lt.get("/spec")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    # At the paths LibreTranslate's clients call, and only its API.
    assert {"/translate", "/detect", "/languages", "/translate_file", "/spec"} <= set(paths)
    assert "/v2/translate" not in paths
    assert lt.post("/spec").status_code == 405


def test_translate(lt: httpx.Client) -> None:
    one = lt.post(
        "/translate", data={"q": "Hello", "source": "en", "target": "de", "format": "text"}
    )
    assert one.status_code == 200
    assert "translatedText" in one.json()
    batch = lt.post(
        "/translate",
        json={"q": ["Hello", "World"], "source": "en", "target": "de", "format": "text"},
    )
    assert batch.status_code == 200
    assert isinstance(batch.json()["translatedText"], list)
    assert len(batch.json()["translatedText"]) == 2
    unsupported = lt.post(
        "/translate", data={"q": "Hello", "source": "en", "target": "zz", "format": "text"}
    )
    assert (unsupported.status_code, unsupported.json()) == (400, {"error": "zz is not supported"})
    missing = lt.post("/translate", data={"source": "en", "target": "de", "format": "text"})
    assert missing.status_code == 400
    assert missing.json() == {"error": "Invalid request: missing q parameter"}
