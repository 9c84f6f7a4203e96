"""Minimum-Bayes-risk selection (`candidates` in a model's config) on a server in-process over
the stand-in engine (named so): the engine requests it makes for each segment. The real
engine's `n` is tested in tests/engine/test_real_model.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port


@pytest.fixture(scope="module")
def mbr_edge(test_model: Path) -> Iterator[InProcessServer]:
    server = InProcessServer(
        server_config(
            [model_config("mbr", test_model, languages=["en", "de"], candidates={"n": 4})],
            free_port(),
        )
    )
    try:
        yield server
    finally:
        server.stop()


def test_each_segment_is_one_greedy_and_one_sampled_request(mbr_edge: InProcessServer) -> None:
    llm = mbr_edge.engines.started["mbr"]
    requests, outputs = llm.requests, llm.outputs
    sentences = ["The museum opens at nine.", "It closes at six.", "Entry is free."]
    answer = httpx.post(
        f"{mbr_edge.url}/translate",
        json={"text": sentences, "source_lang": "en", "target_lang": "de"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["translation"]) == 3
    # Per segment: the greedy request (n 1) and the sampled one (n 3), 4 outputs.
    assert llm.requests - requests == 2 * len(sentences)
    assert llm.outputs - outputs == 4 * len(sentences)
    # Every candidate's tokens are counted: the stand-in writes its whole budget each time.
    single = body["usage"]["completion_tokens"] / 4
    assert single == int(single) > 0, body["usage"]
