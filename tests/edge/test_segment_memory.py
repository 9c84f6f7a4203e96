"""The segment memory (tolk.store.segment_cache) on servers over stand-in engines
(in-process, named so) with the memory on: a segment translated once is answered without the
engine, whatever the API; what decides a translation is in its key; a flagged output is never
remembered; requests can bypass it; `tolk bench memory`; two servers sharing it on
PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import metric_samples
from tests.support.polling import wait_until_sync
from tests.support.processes import run_tolk
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port
from tolk.store.segment_cache import SegmentMemory
from tolk.testing.fake_engine import FakeLLM


@pytest.fixture(scope="module")
def remembering(test_model: Path) -> Iterator[InProcessServer]:
    config = server_config(
        [model_config("demo", test_model, languages=["en", "de", "fr"])],
        free_port(),
        glossaries={"terms": {"source_lang": "en", "target_lang": "de", "entries": {"a": "b"}}},
    )
    config["segment_cache"] = {"enabled": True}
    server = InProcessServer(config)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def memory_client(remembering: InProcessServer) -> Iterator[httpx.Client]:
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
    memory_client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "The memory test's first sentence.\nAnd its second line."
    before = llm.requests
    first = _translate(memory_client, text)
    assert llm.requests - before == 2
    assert first["usage"]["memory_segments"] == 0
    again = _translate(memory_client, text)
    assert llm.requests - before == 2  # no engine work
    assert again["translation"] == first["translation"]
    assert again["usage"]["memory_segments"] == 2
    assert again["usage"]["completion_tokens"] == 0
    # One line changed: only that line goes to the engine.
    edited = _translate(memory_client, "The memory test's first sentence.\nAnd a new second line.")
    assert llm.requests - before == 3
    assert edited["usage"]["memory_segments"] == 1
    assert edited["translation"].split("\n")[0] == first["translation"].split("\n")[0]
    samples = metric_samples(memory_client.get("/metrics").text, "tolk_memory_segments_total")
    counted = {s[0]["result"]: s[1] for s in samples if s[0]["model"] == "demo"}
    assert counted["hit"] >= 3
    assert counted["miss"] >= 3


def test_what_reaches_the_prompt_is_part_of_the_key(
    memory_client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "Keys hold everything that decides a translation."
    _translate(memory_client, text)
    before = llm.requests
    for fields in (
        {"target_lang": "fr"},
        {"glossary_id": "terms"},  # its term "a" is in the text: the prompt differs
        {"instructions": ["Use British spelling"]},
    ):
        answer = _translate(memory_client, text, **fields)
        assert answer["usage"]["memory_segments"] == 0, fields
    assert llm.requests - before == 3
    # The same segment and prompt as HTML (no tags in it): the same translation, remembered.
    assert _translate(memory_client, text, format="html")["usage"]["memory_segments"] == 1


def test_requests_can_bypass_it(memory_client: httpx.Client, remembering: InProcessServer) -> None:
    llm = _llm(remembering)
    text = "A sentence sent with and without the memory."
    off = _translate(memory_client, text, memory="off")
    before = llm.requests
    assert _translate(memory_client, text)["usage"]["memory_segments"] == 0  # off stored nothing
    assert _translate(memory_client, text, memory="refresh")["usage"]["memory_segments"] == 0
    assert _translate(memory_client, text)["usage"]["memory_segments"] == 1
    no_cache = _translate(memory_client, text, headers={"Cache-Control": "no-cache"})
    assert no_cache["usage"]["memory_segments"] == 0
    assert llm.requests - before == 3
    assert off["translation"] == no_cache["translation"]


def test_the_drop_in_apis_use_it_and_say_so(
    memory_client: httpx.Client, remembering: InProcessServer
) -> None:
    llm = _llm(remembering)
    text = "Drop-in clients repeat themselves too."
    _translate(memory_client, text)
    before = llm.requests
    body = {"text": [text], "source_lang": "EN", "target_lang": "DE"}
    deepl = memory_client.post("/v2/translate", json=body)
    assert deepl.status_code == 200, deepl.text
    assert deepl.headers["X-Tolk-Memory-Segments"] == "1"
    libre = memory_client.post("/translate", json={"q": text, "source": "en", "target": "de"})
    assert libre.headers["X-Tolk-Memory-Segments"] == "1"
    assert llm.requests == before
    bypassed = memory_client.post(
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
    config["segment_cache"] = {"enabled": True}
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
        "bench", "segment-cache", "--url", remembering.url, "--requests", "40", "--strings", "12",
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
        config["segment_cache"] = {"url": postgres_url}
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
