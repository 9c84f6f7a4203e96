"""Shared fixtures: the test model, and real tolk servers shared across tests."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import (
    InProcessServer,
    ServerProcess,
    TextMaker,
    model_config,
    run_tolk,
    runtime_env,
    server_config,
)
from tolk.local.processes import free_port


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
    # The 100 KB document (test_server_api) takes ~30 s here, more on a machine whose page
    # cache is being reclaimed; the deadline tests set their own, shorter deadlines.
    "request_timeout": 180,
    "max_request_chars": 120_000,
    "max_texts": 64,
    "max_body_bytes": 262_144,
    "shutdown_grace": 5,
}

MAIN_GLOSSARIES = {
    "product": {"source_lang": "en", "target_lang": "de", "entries": {"batch": "Stapel"}}
}


MAIN_LANGUAGES = ["en", "de", "fr", "es", "pt", "zh", "ne"]


@dataclass(frozen=True)
class MainKeys:
    """Keys in the main server's key store, made with `tolk keys add` before it starts."""

    db: Path
    full: str  # no quota, no rate
    tiny: str  # a quota of 20 characters a month
    slow: str  # 2 requests a minute


@pytest.fixture(scope="session")
def main_keys(tmp_path_factory: pytest.TempPathFactory) -> MainKeys:
    workdir = tmp_path_factory.mktemp("main-keys")
    db = workdir / "keys.db"

    def add(name: str, *options: str) -> str:
        made = run_tolk("keys", "add", name, "--db", str(db), *options, cwd=workdir)
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    return MainKeys(
        db, add("full"), add("tiny", "--quota", "20"), add("slow", "--rate", "2/minute")
    )


@pytest.fixture(scope="session")
def main_server(
    test_model: Path, tmp_path_factory: pytest.TempPathFactory, main_keys: MainKeys
) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("main-server")
    server = ServerProcess.launch(
        workdir,
        "main",
        [model_config("demo", test_model, languages=MAIN_LANGUAGES)],
        glossaries=MAIN_GLOSSARIES,
        access={"db": str(main_keys.db)},
        **MAIN_LIMITS,
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def edge_server(
    test_model: Path, main_keys: MainKeys, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """The main server's configuration served in-process over stand-in engines
    (tolk.testing.fake_engine), for tests of the HTTP edge: shapes, validation, errors,
    limits and the compatible APIs. What needs the engine uses main_server. The same keys,
    in a copy of the key store: quotas and usage are each server's own."""
    server = InProcessServer(main_config(test_model, main_keys, tmp_path_factory))
    yield server
    server.stop()


def main_config(
    test_model: Path, main_keys: MainKeys, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The main server's configuration on a free port, with a copy of its key store."""
    db = tmp_path_factory.mktemp("keys") / "keys.db"
    shutil.copyfile(main_keys.db, db)
    return server_config(
        [model_config("demo", test_model, languages=MAIN_LANGUAGES)],
        free_port(),
        MAIN_GLOSSARIES,
        {"db": str(db)},
        **MAIN_LIMITS,
    )


def http_client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    return httpx.AsyncClient(base_url=url, timeout=120, limits=limits)


@pytest.fixture
async def client(main_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real main server (a real engine)."""
    async with http_client(main_server.url) as c:
        yield c


@pytest.fixture
async def edge(edge_server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the in-process server over stand-in engines."""
    async with http_client(edge_server.url) as c:
        yield c


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL for the session (tests/postgres.py), started on first use."""
    from tests.postgres import running_postgres

    with running_postgres() as url:
        yield url
