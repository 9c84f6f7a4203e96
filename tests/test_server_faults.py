"""Deadlines, disconnects and overload on a real server: engine work never outlives its
request, and an overloaded server refuses at once instead of queueing without bound."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.helpers import ServerProcess, TextMaker, metric_value, wait_until
from tests.test_server_api import assert_error

pytestmark = pytest.mark.engine


async def engine_idle(client: httpx.AsyncClient) -> bool:
    running = await metric_value(client, "vllm:num_requests_running", model_name="demo")
    waiting = await metric_value(client, "vllm:num_requests_waiting", model_name="demo")
    return running == 0 and waiting == 0


async def test_deadline_aborts_the_engine_request_and_answers_504(
    client: httpx.AsyncClient, texts: TextMaker
) -> None:
    await wait_until(lambda: engine_idle(client), within=60)
    response = await client.post(
        "/translate",
        json={"text": texts.text(400), "source_lang": "en", "target_lang": "de"},
        headers={"X-Request-Timeout": "0.5"},  # 816 tokens to write: far longer than 0.5 s
    )
    error = assert_error(response, 504, "deadline_exceeded")
    assert error["deadline"] == 0.5
    await wait_until(lambda: engine_idle(client), within=2)


async def test_disconnect_frees_the_engine_slot_within_a_second(
    main_server: ServerProcess, client: httpx.AsyncClient, texts: TextMaker
) -> None:
    await wait_until(lambda: engine_idle(client), within=60)
    before = await metric_value(client, "tolk_requests_total", route="/translate", status="499")
    async with httpx.AsyncClient(base_url=main_server.url, timeout=60) as leaving:
        request = asyncio.create_task(
            leaving.post(
                "/translate",
                json={"text": texts.text(400), "source_lang": "en", "target_lang": "de"},
            )
        )

        async def generating() -> bool:
            return await metric_value(client, "vllm:num_requests_running", model_name="demo") >= 1

        await wait_until(generating, within=30)
        request.cancel()  # the client gives up: httpx closes the connection
        with pytest.raises(asyncio.CancelledError):
            await request
    freed_after = await wait_until(lambda: engine_idle(client), within=5)
    assert freed_after < 1.0
    after = await metric_value(client, "tolk_requests_total", route="/translate", status="499")
    assert after == before + 1


async def test_overload_gets_503_with_retry_after_at_once(
    client: httpx.AsyncClient, texts: TextMaker
) -> None:
    await wait_until(lambda: engine_idle(client), within=60)
    rejected_before = await metric_value(client, "tolk_admission_rejections_total", model="demo")
    text = texts.text(150)
    # 16 running + 24 waiting fit; 80 at once must overflow the waiting bound.
    responses = await asyncio.gather(
        *[
            client.post("/translate", json={"text": text, "source_lang": "en", "target_lang": "de"})
            for _ in range(80)
        ]
    )
    statuses = [r.status_code for r in responses]
    assert set(statuses) == {200, 503}
    assert statuses.count(200) >= 40
    for response in responses:
        if response.status_code == 503:
            error = assert_error(response, 503, "overloaded")
            assert error["model"] == "demo"
            assert int(response.headers["retry-after"]) >= 1
            # Refused without waiting behind the queue.
            assert response.elapsed.total_seconds() < 2.0
    rejected_after = await metric_value(client, "tolk_admission_rejections_total", model="demo")
    assert rejected_after - rejected_before == statuses.count(503)


async def test_a_list_larger_than_capacity_goes_through_a_window(
    client: httpx.AsyncClient, texts: TextMaker
) -> None:
    await wait_until(lambda: engine_idle(client), within=60)
    # 41 texts are more than 16 running + 24 waiting: an idle server takes them through a
    # window of max_num_seqs (one batch's worth) rather than refusing them for their number.
    many = [texts.text(20) for _ in range(41)]
    response = await client.post(
        "/translate", json={"text": many, "source_lang": "en", "target_lang": "de"}
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["translation"]) == 41
    assert response.json()["usage"]["segments"] == len(set(many))
    assert await engine_idle(client)
