"""The HTTP API on the shared real-engine main server: one translation, and /metrics with the
engine's and the service's metrics and its name filter."""

from __future__ import annotations

import re

import httpx

from tests.support.metrics import metric_samples
from tolk.bench.loadgen import server_timing


async def test_translate_one_text(engine_client: httpx.AsyncClient) -> None:
    response = await engine_client.post(
        "/translate", json={"text": "Hello, world!", "source_lang": "EN", "target_lang": "de-DE"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body["translation"], str)
    assert body["translation"]
    assert (body["source_lang"], body["target_lang"], body["model"]) == ("en", "de-DE", "demo")
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["characters"] == len("Hello, world!")
    timing = response.headers["server-timing"]
    assert timing.startswith("engine;dur=")
    elapsed = response.elapsed.total_seconds()
    engine = server_timing(response.headers, "engine")
    assert engine is not None
    assert 0 < engine < elapsed
    # Where its time went (tolk.engine.timing), from its arrival: vLLM's own marks of its
    # first engine request's first and last token (its engine core's clock) fall between the
    # hand-off and the output's return, and the segments are done and put back after that.
    marks = [
        server_timing(response.headers, name)
        for name in (
            "to-engine", "to-first-token", "to-last-token", "to-first-output", "to-translated",
            "to-rendered",
        )
    ]  # fmt: skip
    assert all(m is not None for m in marks), timing
    assert marks == sorted(marks), timing  # type: ignore[type-var]
    assert marks[0] >= 0  # type: ignore[operator]
    assert marks[-1] < elapsed  # type: ignore[operator]
    made = re.search(r'engine-requests;desc="([0-9]+)"', timing)
    assert made is not None, timing
    assert int(made.group(1)) >= 1


async def test_metrics_has_engine_and_service_metrics(engine_client: httpx.AsyncClient) -> None:
    ok = await engine_client.post(
        "/translate", json={"text": "Hi.", "source_lang": "en", "target_lang": "de"}
    )
    assert ok.status_code == 200
    text = (await engine_client.get("/metrics")).text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
        "vllm:num_preemptions_total",
    ):
        samples = metric_samples(text, name)
        assert samples, name
        assert all(labels["model_name"] == "demo" for labels, _ in samples), name
    assert metric_samples(text, "vllm:time_to_first_token_seconds_count")[0][1] >= 1
    requests = dict(
        ((labels["route"], labels["status"]), value)
        for labels, value in metric_samples(text, "tolk_requests_total")
    )
    assert requests[("/translate", "200")] >= 1
    assert metric_samples(text, "tolk_request_duration_seconds_count")
    assert metric_samples(text, "tolk_requests_in_flight")[0][1] >= 1  # this /metrics request
    overhead = metric_samples(text, "tolk_overhead_seconds_count")
    assert overhead
    assert overhead[0][0] == {"model": "demo"}
    assert overhead[0][1] >= 1
    assert metric_samples(text, "tolk_engine_up") == [({"model": "demo"}, 1.0)]
    assert metric_samples(text, "tolk_characters_translated_total")[0][1] >= 3
    # The event loop's own CPU, added each heartbeat: it has translated, so it has used some.
    assert metric_samples(text, "tolk_event_loop_cpu_seconds_total")[0][1] > 0


async def test_metrics_name_filter_returns_only_the_named_families(
    engine_client: httpx.AsyncClient,
) -> None:
    response = await engine_client.get(
        "/metrics",
        params=[("name[]", "vllm:num_requests_running"), ("name[]", "tolk_requests_in_flight")],
    )
    assert response.status_code == 200
    names = {line.split()[2] for line in response.text.splitlines() if line.startswith("# TYPE")}
    assert names == {"vllm:num_requests_running", "tolk_requests_in_flight"}
    assert metric_samples(response.text, "vllm:num_requests_running")[0][0]["model_name"] == "demo"
