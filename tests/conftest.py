"""Shared fixtures: the test model, and real tolk servers shared across tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import ServerProcess, TextMaker, model_config, runtime_env


@pytest.fixture(scope="session")
def test_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runtime_env()
    from tolk.testing.model import make_test_model

    return make_test_model(tmp_path_factory.mktemp("model") / "test-model")


@pytest.fixture(scope="session")
def texts(test_model: Path) -> TextMaker:
    return TextMaker(test_model)


# The main server: one model, max_num_seqs 16, up to 24 waiting, small limits to test.
MAIN_LIMITS = {
    "request_timeout": 60,
    "max_request_chars": 120_000,
    "max_texts": 64,
    "max_body_bytes": 262_144,
    "shutdown_grace": 5,
}

MAIN_GLOSSARIES = {
    "product": {"source_lang": "en", "target_lang": "de", "entries": {"batch": "Stapel"}}
}


@pytest.fixture(scope="session")
def main_server(
    test_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("main-server")
    server = ServerProcess.launch(
        workdir,
        "main",
        [model_config("demo", test_model, languages=["en", "de", "fr", "ne"])],
        glossaries=MAIN_GLOSSARIES,
        **MAIN_LIMITS,
    )
    yield server
    server.stop()


@pytest.fixture
async def client(main_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=main_server.url, timeout=120, limits=limits) as c:
        yield c
