"""A two-model server in-process over stand-in engines: routing by language pair and the
context limit, both tolk's own. The real two-model server: tests/slow/test_server_lifecycle.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.errors import assert_error
from tests.support.pair_server import pair_models, translate
from tests.support.servers import InProcessServer, server_config
from tests.support.texts import TextMaker
from tolk.local.processes import free_port


@pytest.fixture(scope="module")
def pair_edge(test_model: Path) -> Iterator[str]:
    server = InProcessServer(server_config(pair_models(test_model), free_port()))
    yield server.url
    server.stop()


def test_routes_each_pair_to_the_model_that_serves_it(pair_edge: str) -> None:
    url = pair_edge
    assert translate(url, "en", "de").json()["model"] == "alpha"
    assert translate(url, "de-AT", "en").json()["model"] == "alpha"
    assert translate(url, "en", "ne").json()["model"] == "beta"
    assert translate(url, "nep", "en-GB").json()["model"] == "beta"
    assert translate(url, "en", "de", model="alpha").json()["model"] == "alpha"

    error = assert_error(translate(url, "de", "ne"), 400, "unsupported_language_pair")
    assert error["supported"] == [
        {"model": "alpha", "languages": ["en", "de"]},
        {"model": "beta", "pairs": ["en>ne", "ne>en"]},
    ]
    error = assert_error(translate(url, "en", "de", model="beta"), 400, "unsupported_language_pair")
    assert error["supported"] == [{"model": "beta", "pairs": ["en>ne", "ne>en"]}]


def test_prompt_longer_than_the_context_is_413(pair_edge: str, texts: TextMaker) -> None:
    body = {"text": texts.text(230), "source_lang": "en", "target_lang": "ne", "split": "none"}
    response = httpx.post(f"{pair_edge}/translate", json=body, timeout=60)
    error = assert_error(response, 413, "payload_too_large")
    assert error["max_model_len"] == 256
    assert error["prompt_tokens"] > 230
    assert "split 'sentences'" in error["message"]
