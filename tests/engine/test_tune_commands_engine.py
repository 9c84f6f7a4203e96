"""The workload a server records for `tolk tune` (texts in flight and their lengths), on
the shared real-engine main server."""

from __future__ import annotations

import asyncio

import httpx

from tests.support.metrics import metric_samples
from tests.support.texts import TextMaker


def busy_samples(metrics_text: str) -> float:
    """Samples of tolk_concurrent_texts with at least one text in flight."""
    samples = metric_samples(metrics_text, "tolk_concurrent_texts_bucket")
    total = sum(v for labels, v in samples if labels["le"] == "+Inf")
    idle = sum(v for labels, v in samples if labels["le"] == "0.0")
    return total - idle


async def test_server_records_in_flight_texts_and_lengths(
    engine_client: httpx.AsyncClient, texts: TextMaker
) -> None:
    before = (await engine_client.get("/metrics")).text
    lengths = [20, 40, 60]
    bodies = [{"text": texts.text(n), "source_lang": "en", "target_lang": "fr"} for n in lengths]
    responses = await asyncio.gather(*(engine_client.post("/translate", json=b) for b in bodies))
    assert [r.status_code for r in responses] == [200, 200, 200]
    after = (await engine_client.get("/metrics")).text

    def source(text: str, suffix: str) -> float:
        return sum(
            v
            for labels, v in metric_samples(text, f"tolk_source_tokens_{suffix}")
            if labels == {"model": "demo", "pair": "en>fr"}
        )

    assert source(after, "count") - source(before, "count") == 3
    assert source(after, "sum") - source(before, "sum") == sum(lengths)
    # Each request took longer than the 0.1 s sampling interval, so busy samples were taken.
    assert busy_samples(after) > busy_samples(before)
