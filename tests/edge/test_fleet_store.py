"""A fleet on one PostgreSQL store (`store.url`): two servers (in-process, over stand-in
engines, named so) behind a real `tolk proxy` process, sharing keys, usage, API-made
glossaries and the segment memory, on a real PostgreSQL (tests/support/postgres.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.polling import wait_until_sync
from tests.support.postgres import fresh_database
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import LocalServer, free_port, start_proxy
from tolk.store.keys import SYNC_SECONDS, KeyStore
from tolk.store.segment_cache import FLUSH_SECONDS, SegmentMemory

WAIT = 30.0  # a condition the servers reach within SYNC_SECONDS / FLUSH_SECONDS, generously


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll until `condition` holds (a shared store is seen within a second or two)."""
    wait_until_sync(
        condition,
        within=WAIT,
        interval=min(SYNC_SECONDS, FLUSH_SECONDS) / 10,
        message=f"never: {what}",
    )


@pytest.fixture(scope="module")
def fleet(
    test_model: Path, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[InProcessServer], LocalServer]]:
    url = fresh_database(postgres_url, "fleet_test")
    servers = []
    for _ in range(2):
        config = server_config(
            [model_config("demo", test_model, languages=["en", "de"])],
            free_port(),
            access={"require_key": True},
        )
        config["store"] = {"url": url}
        config["segment_cache"] = {"enabled": True}
        servers.append(InProcessServer(config))
    proxy = start_proxy(
        tmp_path_factory.mktemp("fleet"), "proxy", [s.url for s in servers],
        health={"interval": 0.2, "timeout": 1.0, "rise": 1, "fall": 1},
    )  # fmt: skip
    try:
        yield url, servers, proxy
    finally:
        proxy.stop()
        for server in servers:
            server.stop()


def test_a_fleet_shares_keys_glossaries_style_rules_usage_and_memory(
    fleet: tuple[str, list[InProcessServer], LocalServer],
) -> None:
    url, (a, b), proxy = fleet
    store = KeyStore(url)
    key, secret = store.add("fleet", character_limit=10_000)
    deepl = {"Authorization": f"DeepL-Auth-Key {secret}"}
    tolk = {"Authorization": f"Bearer {secret}"}

    def accepted(server: InProcessServer) -> bool:
        answer = httpx.get(f"{server.url}/v2/usage", headers=deepl, timeout=10)
        return answer.status_code == 200

    # A key made once (`tolk keys add` on the store) is valid on every server.
    eventually(lambda: accepted(a) and accepted(b), "both servers accept the new key")
    # A glossary made through one server is used through the other.
    made = httpx.post(
        f"{a.url}/v2/glossaries",
        json={
            "name": "fleet terms", "source_lang": "en", "target_lang": "de",
            "entries": "batch\tStapel", "entries_format": "tsv",
        },
        headers=deepl, timeout=10,
    )  # fmt: skip
    assert made.status_code == 201, made.text
    glossary_id = made.json()["glossary_id"]

    def glossary_known_to_b() -> bool:
        found = httpx.get(f"{b.url}/v2/glossaries/{glossary_id}", headers=deepl, timeout=10)
        return found.status_code == 200

    eventually(glossary_known_to_b, "server b sees the glossary made through a")
    # So is a style rule.
    rule = httpx.post(
        f"{a.url}/v3/style_rules", json={"name": "fleet rule", "language": "de"},
        headers=deepl, timeout=10,
    )  # fmt: skip
    assert rule.status_code == 201, rule.text
    style_id = rule.json()["style_id"]

    def rule_known_to_b() -> bool:
        found = httpx.get(f"{b.url}/v3/style_rules/{style_id}", headers=deepl, timeout=10)
        return found.status_code == 200

    eventually(rule_known_to_b, "server b sees the style rule made through a")
    body = {
        "text": "Every batch is checked twice.", "source_lang": "en", "target_lang": "de",
        "glossary_id": glossary_id,
    }  # fmt: skip
    first = httpx.post(f"{b.url}/translate", json=body, headers=tolk, timeout=30)
    assert first.status_code == 200, first.text
    # What b translated, every server answers from memory once b has written it: through
    # the proxy, whichever upstream it picks, no engine works.
    shared = SegmentMemory(url, max_entries=1_000)
    eventually(lambda: len(shared) > 0, "server b writes its translation")
    shared.close()
    engines = [s.engines.started["demo"] for s in (a, b)]
    before = [e.requests for e in engines]
    for _ in range(6):
        again = httpx.post(f"{proxy.url}/translate", json=body, headers=tolk, timeout=30)
        assert again.status_code == 200, again.text
        assert again.json()["usage"]["memory_segments"] == 1
        assert again.json()["translation"] == first.json()["translation"]
    assert [e.requests for e in engines] == before
    direct = httpx.post(f"{a.url}/translate", json=body, headers=tolk, timeout=30)
    assert direct.json()["usage"]["memory_segments"] == 1
    # Usage counted on both servers adds up in the one store.
    characters = len(body["text"]) * 8

    def counted() -> bool:
        store.sync()
        return store.used(key) == characters

    eventually(counted, "both servers' usage in the store")
    store.close()
