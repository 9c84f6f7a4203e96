"""`engine.scheduling: shortest_first`: a sentence is not queued behind a document's
segments. The ranks reaching the engine (a stand-in records them), the engine arguments, and
on the real engine the order in which a sentence and a document's waiting segments run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import InProcessServer, ServerProcess, model_config, server_config
from tolk.config import build_config
from tolk.engine.engine import engine_args, size_rank
from tolk.local.processes import free_port

SENTENCES = [
    f"Sentence number {n} of the long document talks about batching and queues." for n in range(14)
]
DOCUMENT = "\n".join(SENTENCES)  # a line is a unit: 14 segments


def test_size_rank_is_the_segment_count_in_powers_of_two() -> None:
    assert [size_rank(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 200)] == [0, 0, 1, 2, 2, 3, 3, 4, 8]


def test_shortest_first_asks_vllm_for_priority_scheduling(test_model: Path) -> None:
    def args(scheduling: str) -> dict[str, object]:
        model = model_config("m", test_model, languages=["en", "de"])
        model["engine"]["scheduling"] = scheduling
        settings = build_config({"models": [model]}, environ={}).models[0]
        return engine_args(settings, cpu=True)

    assert args("shortest_first")["scheduling_policy"] == "priority"
    assert "scheduling_policy" not in args("fcfs")  # vLLM's own default, fcfs


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


@pytest.fixture(scope="module")
def one_at_a_time(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real engine that runs one sequence at a time, ranking by size."""
    model = model_config("demo", test_model, languages=["en", "de"])
    model["engine"].update({"max_num_seqs": 1, "scheduling": "shortest_first", "max_waiting": 64})
    server = ServerProcess.launch(tmp_path_factory.mktemp("shortest-first"), "sf", [model])
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.slow
async def test_a_sentence_runs_before_a_documents_waiting_segments(one_at_a_time: str) -> None:
    """With one sequence at a time, first come first served would run the sentence after all
    14 of the document's segments (it arrives once they are all queued); ranked by size it
    runs after the one segment already running (at most one more, if it finished meanwhile).
    Measured by hand with `scheduling: fcfs` in this fixture: 14 segments before the sentence."""
    done: list[str] = []
    async with httpx.AsyncClient(base_url=one_at_a_time, timeout=300) as client:
        started = asyncio.Event()

        async def document() -> None:
            body = {"text": DOCUMENT, "source_lang": "en", "target_lang": "de", "stream": True}
            async with client.stream("POST", "/translate", json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.strip() == "event: segment":
                        done.append("segment")
                        started.set()

        async def sentence() -> None:
            await started.wait()  # every segment is in the engine's queue by now
            response = await client.post(
                "/translate", json={"text": SENTENCES[0], "source_lang": "en", "target_lang": "de"}
            )
            assert response.status_code == 200
            done.append("sentence")

        await asyncio.gather(document(), sentence())
    before = done.index("sentence")
    assert done.count("segment") == len(SENTENCES)
    assert before <= 3, f"{before} of the document's segments ran before the sentence: {done}"
