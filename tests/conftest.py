"""Shared fixtures: the test model, and real tolk servers shared across tests; the `engine`
marker, set here from the fixtures each test uses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import (
    InProcessServer,
    ServerProcess,
    TextMaker,
    model_config,
    run_tolk,
    runtime_env,
)
from tests.support.clients import http_client
from tests.support.main_server import (
    MAIN_GLOSSARIES,
    MAIN_LANGUAGES,
    MAIN_LIMITS,
    MainKeys,
    main_config,
)

# The fixtures that start a real vLLM engine: the shared main server, and servers of a module's
# own that tests not in the slow tier use (the slow tier starts engines of its own: all of it
# needs one).
ENGINE_FIXTURES = frozenset(
    {"main_server", "real_server", "checked_salad", "pair_server", "one_at_a_time"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`engine` on every test that needs a real engine: one of ENGINE_FIXTURES among its
    fixtures (directly or through others, as `client` uses `main_server`), or `slow`.
    `-m "not engine"` runs the rest: unit tests and the in-process server over stand-ins."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & ENGINE_FIXTURES or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.engine)


@pytest.fixture(scope="session")
def test_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runtime_env()
    from tolk.testing.model import make_test_model

    return make_test_model(tmp_path_factory.mktemp("model") / "test-model")


@pytest.fixture(scope="session")
def texts(test_model: Path) -> TextMaker:
    return TextMaker(test_model)


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
