"""The segment memory (tolk.store.segment_cache): the store on its own (SQLite in memory and
in a file), then a server over stand-in engines (in-process, named so) with the memory on: a segment
translated once is answered without the engine, whatever the API; what decides a translation
is in its key; a flagged output is never remembered; requests can bypass it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import InProcessServer, metric_samples, model_config, run_tolk, server_config
from tests.support.polling import wait_until_sync
from tolk.local.processes import free_port
from tolk.store.segment_cache import Remembered, SegmentMemory, memory_key, model_revision
from tolk.testing.fake_engine import FakeLLM

# --- The store ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same tests on a SQLite file and on a real PostgreSQL (emptied first)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'memory.db'}"
        return
    url = request.getfixturevalue("postgres_url")
    emptied = SegmentMemory(url, max_entries=1)
    emptied.clear()
    emptied.close()
    yield url


def test_put_is_seen_at_once_and_kept_by_flush(store_url: str) -> None:
    url = store_url
    memory = SegmentMemory(url, max_entries=100)
    key = memory_key({"segment": "Hello."})
    assert memory.lookup(key) is None
    memory.put(key, "Hallo.", ("loop",))
    assert memory.cached(key) == Remembered("Hallo.", ("loop",))  # before any write
    assert len(memory) == 0
    assert memory.flush() == 1
    assert len(memory) == 1
    memory.close()
    # Another server (or this one restarted) on the same file finds it in the database.
    again = SegmentMemory(url, max_entries=100)
    assert again.cached(key) is None
    assert again.lookup(key) == Remembered("Hallo.", ("loop",))
    assert again.cached(key) == Remembered("Hallo.", ("loop",))
    again.close()


def test_the_least_recently_used_go_past_max_entries(store_url: str) -> None:
    memory = SegmentMemory(store_url, max_entries=2, cache_entries=1)
    keys = [memory_key({"segment": str(i)}) for i in range(3)]
    memory.put(keys[0], "null")
    memory.put(keys[1], "eins")
    memory.flush()
    assert memory.lookup(keys[0]) == Remembered("null")  # used: key 1 is the least recent
    memory.put(keys[2], "zwei")
    memory._pruned = float("-inf")  # prune at this flush (once a minute otherwise)
    memory.flush()
    assert len(memory) == 2
    memory.put(keys[0], "null")  # pushes key 1 out of the one-entry cache
    assert memory.lookup(keys[1]) is None
    assert memory.lookup(keys[0]) == Remembered("null")
    assert memory.lookup(keys[2]) == Remembered("zwei")
    memory.close()


def test_keys_change_with_what_decides_the_translation(tmp_path: Path) -> None:
    base = {"model": "m", "segment": "Hi.", "prompt": [1, 2, 3], "max_tokens": 20}
    assert memory_key(base) == memory_key(dict(reversed(list(base.items()))))
    for change in ({"prompt": [1, 2, 4]}, {"max_tokens": 21}, {"segment": "Hi. "}):
        assert memory_key(base | change) != memory_key(base)
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"1234")
    before = model_revision(str(tmp_path))
    weights.write_bytes(b"12345")  # new weights: a new revision, so no old entry matches
    assert model_revision(str(tmp_path)) != before
    assert model_revision("Qwen/Some-Model") == "Qwen/Some-Model"


# --- Through a server -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def remembering(test_model: Path) -> Iterator[InProcessServer]:
    config = server_config(
        [model_config("demo", test_model, languages=["en", "de", "fr"])],
        free_port(),
        glossaries={"terms": {"source_lang": "en", "target_lang": "de", "entries": {"a": "b"}}},
    )
    config["memory"] = {"enabled": True}
    server = InProcessServer(config)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(remembering: InProcessServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=remembering.url, timeout=60) as c:
        yield c


def _llm(server: InProcessServer) -> FakeLLM:
    return server.engines.started["demo"]


def _translate(client: httpx.Client, text: Any, **fields: Any) -> dict[str, Any]:
    headers = fields.pop("headers", None)
    body = {"text": text, "source_lang": "en", "target_lang": "de", **fields}
    answer = client.post("/translate", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_a_segment_translated_once_comes_from_memory(
    client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "The memory test's first sentence.\nAnd its second line."
    before = llm.requests
    first = _translate(client, text)
    assert llm.requests - before == 2
    assert first["usage"]["memory_segments"] == 0
    again = _translate(client, text)
    assert llm.requests - before == 2  # no engine work
    assert again["translation"] == first["translation"]
    assert again["usage"]["memory_segments"] == 2
    assert again["usage"]["completion_tokens"] == 0
    # One line changed: only that line goes to the engine.
    edited = _translate(client, "The memory test's first sentence.\nAnd a new second line.")
    assert llm.requests - before == 3
    assert edited["usage"]["memory_segments"] == 1
    assert edited["translation"].split("\n")[0] == first["translation"].split("\n")[0]
    samples = metric_samples(client.get("/metrics").text, "tolk_memory_segments_total")
    counted = {s[0]["result"]: s[1] for s in samples if s[0]["model"] == "demo"}
    assert counted["hit"] >= 3
    assert counted["miss"] >= 3


def test_what_reaches_the_prompt_is_part_of_the_key(
    client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "Keys hold everything that decides a translation."
    _translate(client, text)
    before = llm.requests
    for fields in (
        {"target_lang": "fr"},
        {"glossary_id": "terms"},  # its term "a" is in the text: the prompt differs
        {"instructions": ["Use British spelling"]},
    ):
        answer = _translate(client, text, **fields)
        assert answer["usage"]["memory_segments"] == 0, fields
    assert llm.requests - before == 3
    # The same segment and prompt as HTML (no tags in it): the same translation, remembered.
    assert _translate(client, text, format="html")["usage"]["memory_segments"] == 1


def test_requests_can_bypass_it(client: httpx.Client, remembering: InProcessServer) -> None:
    llm = _llm(remembering)
    text = "A sentence sent with and without the memory."
    off = _translate(client, text, memory="off")
    before = llm.requests
    assert _translate(client, text)["usage"]["memory_segments"] == 0  # off stored nothing
    assert _translate(client, text, memory="refresh")["usage"]["memory_segments"] == 0
    assert _translate(client, text)["usage"]["memory_segments"] == 1
    no_cache = _translate(client, text, headers={"Cache-Control": "no-cache"})
    assert no_cache["usage"]["memory_segments"] == 0
    assert llm.requests - before == 3
    assert off["translation"] == no_cache["translation"]


def test_the_drop_in_apis_use_it_and_say_so(
    client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "Drop-in clients repeat themselves too."
    _translate(client, text)
    before = llm.requests
    body = {"text": [text], "source_lang": "EN", "target_lang": "DE"}
    deepl = client.post("/v2/translate", json=body)
    assert deepl.status_code == 200, deepl.text
    assert deepl.headers["X-Tolk-Memory-Segments"] == "1"
    libre = client.post("/translate", json={"q": text, "source": "en", "target": "de"})
    assert libre.headers["X-Tolk-Memory-Segments"] == "1"
    assert llm.requests == before
    bypassed = client.post(
        "/translate",
        json={"q": text, "source": "en", "target": "de"},
        headers={"Cache-Control": "no-store"},
    )
    assert bypassed.headers["X-Tolk-Memory-Segments"] == "0"
    assert llm.requests == before + 1


def test_a_flagged_translation_comes_back_flagged(test_model: Path) -> None:
    """With output checks on, the stand-in's token salad is flagged (its outputs always run to
    the budget): remembered with its problems, it is served again with the same warnings,
    never as good; `refresh` has it translated (and checked) anew."""
    config = server_config(
        [model_config("demo", test_model, languages=["en", "de"], checks={"enabled": True})],
        free_port(),
    )
    config["memory"] = {"enabled": True}
    server = InProcessServer(config)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            llm = _llm(server)
            first = _translate(c, "A flagged sentence.")
            assert first["warnings"]
            before = llm.requests
            again = _translate(c, "A flagged sentence.")
            assert again["usage"]["memory_segments"] == 1
            assert llm.requests == before
            assert again["warnings"] == first["warnings"]
            assert again["translation"] == first["translation"]
            fresh = _translate(c, "A flagged sentence.", memory="refresh")
            assert fresh["warnings"]
            assert llm.requests > before
    finally:
        server.stop()


def test_bench_memory_measures_an_edited_document_and_a_repeating_stream(
    remembering: InProcessServer, tmp_path: Path
) -> None:
    result = run_tolk(
        "bench", "memory", "--url", remembering.url, "--requests", "40", "--strings", "12",
        "--concurrency", "4", "--targets", "de,fr", "--out", "m", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads((tmp_path / "m" / "memory.json").read_text())
    document = data["document"]
    assert (document["paragraphs"], document["edited"]) == (82, 8)
    first, edit, same = document["passes"]
    assert first["memory_segments"] == 0  # refreshed: all through the engine
    assert 0 < edit["memory_segments"] < edit["segments"]
    assert 0 < edit["tokens_ratio"] < 0.2  # only the edited paragraphs' segments
    assert (same["tokens"], same["memory_segments"]) == (0, same["segments"])
    off, cold, warm = data["stream"]["passes"]
    assert (off["memory_segments"], warm["memory_segments"]) == (0, 40)
    # Cold: each first occurrence through the engine (a repeat sent while its first is still
    # in flight is one more miss, as into an empty memory).
    assert 40 - cold["memory_segments"] >= data["stream"]["distinct"]
    assert warm["tokens"] == 0 < cold["tokens"] < off["tokens"]
    assert (tmp_path / "m" / "memory.png").stat().st_size > 0
    assert "edited" in result.stdout


def test_servers_sharing_a_postgresql_memory_answer_each_others_segments(
    test_model: Path, postgres_url: str
) -> None:
    """Two servers (a fleet) on one PostgreSQL: what one translated, the other answers from
    memory once it is written (FLUSH_SECONDS), without its engine."""
    shared = SegmentMemory(postgres_url, max_entries=1000)
    shared.clear()
    servers = []
    for _ in range(2):
        config = server_config(
            [model_config("demo", test_model, languages=["en", "de"])], free_port()
        )
        config["memory"] = {"url": postgres_url}
        servers.append(InProcessServer(config))
    try:
        a, b = servers
        with httpx.Client(base_url=a.url, timeout=60) as ca:
            first = _translate(ca, "Written by one server, read by the other.")
        # until server a's flush has written it
        wait_until_sync(
            lambda: len(shared) > 0, within=30, message="server a never wrote its translation"
        )
        before = _llm(b).requests
        with httpx.Client(base_url=b.url, timeout=60) as cb:
            again = _translate(cb, "Written by one server, read by the other.")
        assert again["usage"]["memory_segments"] == 1
        assert again["translation"] == first["translation"]
        assert _llm(b).requests == before
    finally:
        for server in servers:
            server.stop()
        shared.close()
