"""`engine.scheduling: shortest_first` on a real engine of its own that runs one sequence at
a time: a sentence runs before a document's waiting segments."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.samples.scheduling import DOCUMENT, SENTENCES
from tests.support.servers import ServerProcess, model_config


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
