"""Shared fixtures: the test model, and tolk servers shared across tests (`main_server`, a real
engine; `edge_server`, in-process over stand-in engines) with their clients (`engine_client`,
`edge_client`). The tiers' markers, set here from each test's folder: `engine` on tests/engine/
and tests/slow/, `slow` on tests/slow/."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.clients import http_client
from tests.support.main_server import (
    MAIN_GLOSSARIES,
    MAIN_LANGUAGES,
    MAIN_LIMITS,
    MainKeys,
    main_config,
)
from tests.support.processes import run_tolk
from tests.support.servers import InProcessServer, ServerProcess, model_config, runtime_env
from tests.support.texts import TextMaker

# The fixtures that start a real vLLM engine: the shared main server, and servers of a module's
# own. A test that uses one (directly or through others, as `engine_client` uses `main_server`)
# belongs in tests/engine/ or tests/slow/: collection fails if one is found elsewhere.
ENGINE_FIXTURES = frozenset(
    {"main_server", "real_server", "checked_salad", "pair_server", "one_at_a_time"}
)
TESTS = Path(__file__).parent
# Each tier's folder, and the markers its tests get from it.
TIER_MARKERS = {
    "unit": (),
    "service": (),
    "edge": (),
    "engine": ("engine",),
    "slow": ("engine", "slow"),
}


def _tier(item: pytest.Item) -> str | None:
    try:
        relative = item.path.relative_to(TESTS)
    except ValueError:
        return None
    return relative.parts[0] if len(relative.parts) > 1 else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers from the folder: `engine` on tests/engine/ and tests/slow/, `slow` on
    tests/slow/ (`-m "not engine"` runs unit, service and edge; `-m "not slow"` all but the slow
    tier). A test that uses one of ENGINE_FIXTURES, or is marked `slow`, outside the folders
    that mark it fails collection: it would run without its marker."""
    misplaced = []
    for item in items:
        tier = _tier(item)
        for marker in TIER_MARKERS.get(tier or "", ()):
            item.add_marker(marker)
        engine = set(getattr(item, "fixturenames", ())) & ENGINE_FIXTURES
        if engine and tier not in ("engine", "slow"):
            misplaced.append(f"{item.nodeid} uses {', '.join(sorted(engine))}")
        elif item.get_closest_marker("slow") and tier not in ("engine", "slow"):
            misplaced.append(f"{item.nodeid} is marked slow")
    if misplaced:
        raise pytest.UsageError(
            "tests that need a real engine outside tests/engine/ and tests/slow/ (move them "
            "there, so that they are marked `engine`; `slow` ones to tests/slow/):\n  "
            + "\n  ".join(misplaced)
        )


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
async def engine_client(main_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real main server (a real engine)."""
    async with http_client(main_server.url) as c:
        yield c


@pytest.fixture
async def edge_client(edge_server: InProcessServer) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the in-process server over stand-in engines."""
    async with http_client(edge_server.url) as c:
        yield c


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL for the session (tests/support/postgres.py), started on first use."""
    from tests.support.postgres import running_postgres

    with running_postgres() as url:
        yield url
