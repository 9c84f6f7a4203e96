"""`engine.scheduling: shortest_first` on a server in-process over stand-in engines, which
record the ranks reaching them: each engine request carries its translation request's rank
(fcfs engines get 0)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.samples.scheduling import DOCUMENT, SENTENCES
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port


@pytest.fixture(scope="module")
def ranked_edge(test_model: Path) -> Iterator[InProcessServer]:
    models = [
        model_config("ranked", test_model, languages=["en", "de"]),
        model_config("plain", test_model, languages=["en", "fr"]),
    ]
    models[0]["engine"]["scheduling"] = "shortest_first"
    server = InProcessServer(server_config(models, free_port()))
    try:
        yield server
    finally:
        server.stop()


def test_each_engine_request_carries_its_translation_requests_rank(
    ranked_edge: InProcessServer,
) -> None:
    """Stand-in engines: the ranks tolk gives vLLM (fcfs engines get 0: vLLM refuses others)."""
    ranked = ranked_edge.engines.started["ranked"]
    plain = ranked_edge.engines.started["plain"]
    with httpx.Client(base_url=ranked_edge.url, timeout=30) as client:
        for text, target in (
            (SENTENCES[0], "de"),
            (DOCUMENT, "de"),
            ("\n".join(SENTENCES[:3]), "de"),
            (DOCUMENT, "fr"),
        ):
            body = {"text": text, "source_lang": "en", "target_lang": target, "split": "sentences"}
            client.post("/translate", json=body).raise_for_status()
    # 1 sentence, then 14 segments (rank 4), then 3 (rank 2): in the stand-in's arrival order
    assert list(ranked.priorities)[-18:] == [0] + [4] * 14 + [2] * 3
    assert set(list(plain.priorities)[-14:]) == {0}
