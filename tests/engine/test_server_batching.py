"""Continuous batching, seen from outside: concurrency, independence, a full batch."""

from __future__ import annotations

import asyncio
import random
import time

import httpx

from tests.support.metrics import metric_value
from tests.support.polling import wait_until
from tests.support.texts import TextMaker


class RunningSampler:
    """Samples vllm:num_requests_running while a load runs; keeps the highest value seen."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.peak = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            running = await metric_value(
                self.client, "vllm:num_requests_running", model_name="demo"
            )
            self.peak = max(self.peak, running)
            await asyncio.sleep(0.02)

    async def __aenter__(self) -> RunningSampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_concurrent_variable_length_requests_fill_the_batch(
    engine_client: httpx.AsyncClient, texts: TextMaker
) -> None:
    rng = random.Random(7)
    lengths = [rng.randint(10, 200) for _ in range(36)]
    items = [texts.text(n) for n in lengths]
    async with RunningSampler(engine_client) as sampler:
        responses = await asyncio.gather(
            *[
                engine_client.post(
                    "/translate",
                    # whole texts, so that each one's budget is exactly 2n + 16
                    json={"text": t, "source_lang": "en", "target_lang": "de", "split": "none"},
                )
                for t in items
            ]
        )
    assert [r.status_code for r in responses] == [200] * len(items)
    for response, n in zip(responses, lengths, strict=True):
        assert response.json()["usage"]["completion_tokens"] == 2 * n + 16
    assert sampler.peak == 16  # max_num_seqs: the engine ran a full batch, never more


async def test_short_requests_submitted_late_finish_before_long_ones(
    engine_client: httpx.AsyncClient, texts: TextMaker
) -> None:
    finished: dict[str, list[float]] = {"long": [], "short": []}

    async def translate(kind: str, text: str) -> int:
        response = await engine_client.post(
            "/translate", json={"text": text, "source_lang": "en", "target_lang": "fr"}
        )
        finished[kind].append(time.monotonic())
        return response.status_code

    long_tasks = [asyncio.create_task(translate("long", texts.text(200))) for _ in range(6)]

    async def longs_running() -> bool:
        return (
            await metric_value(engine_client, "vllm:num_requests_running", model_name="demo") >= 6
        )

    await wait_until(longs_running, within=30)
    short_statuses = await asyncio.gather(*[translate("short", texts.text(10)) for _ in range(6)])
    long_statuses = await asyncio.gather(*long_tasks)
    assert short_statuses == [200] * 6
    assert long_statuses == [200] * 6
    # Static batching would hold the short ones until the long batch finished.
    assert max(finished["short"]) < min(finished["long"])
