"""A two-model server: routing by language pair and the context limit (tolk's own, tested
in-process over stand-in engines), then a real one through its life: per-model engine
metrics, and finally SIGTERM with requests in flight. (An engine dying:
test_server_supervision.) The real server's tests are in the slow tier: it starts two
engines for them alone.

The real server's tests share it and run in file order; each checks the state it needs
before acting.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.helpers import (
    InProcessServer,
    ServerProcess,
    TextMaker,
    metric_samples,
    model_config,
    server_config,
)
from tests.support.errors import assert_error
from tests.support.polling import wait_until
from tolk.local.processes import free_port

# Margins: the in-flight requests write 136 tokens (well under a second at any speed seen
# here); the long one writes ~2,700, over 5 s even at twice the fastest single-sequence
# decode rate measured on these machines.
GRACE = 5.0


class PairServer:
    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.url = server.url
        # Every process the server started, recorded while all are alive.
        self.family = server.descendants()

    def engine_cores(self) -> list[psutil.Process]:
        """EngineCore processes in start order: alpha's first, then beta's."""
        cores = [p for p in self.family if "EngineCore" in " ".join(p.cmdline())]
        return sorted(cores, key=lambda p: p.create_time())


def pair_models(test_model: Path) -> list[dict[str, Any]]:
    return [
        model_config("alpha", test_model, languages=["en", "de"], max_tokens_ratio=3),
        model_config(
            "beta",
            test_model,
            pairs=["en>ne", "ne>en"],
            engine={"max_num_seqs": 4, "max_model_len": 256},
        ),
    ]


@pytest.fixture(scope="module")
def pair_edge(test_model: Path) -> Iterator[str]:
    server = InProcessServer(server_config(pair_models(test_model), free_port()))
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def pair_server(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PairServer]:
    workdir = tmp_path_factory.mktemp("pair-server")
    server = ServerProcess.launch(
        workdir, "pairs", pair_models(test_model), request_timeout=120, shutdown_grace=GRACE
    )
    yield PairServer(server)
    server.stop()


def translate(url: str, source: str, target: str, model: str | None = None) -> httpx.Response:
    body = {"text": "A short sentence.", "source_lang": source, "target_lang": target}
    if model:
        body["model"] = model
    return httpx.post(f"{url}/translate", json=body, timeout=60)


def test_routes_each_pair_to_the_model_that_serves_it(pair_edge: str) -> None:
    url = pair_edge
    assert translate(url, "en", "de").json()["model"] == "alpha"
    assert translate(url, "de-AT", "en").json()["model"] == "alpha"
    assert translate(url, "en", "ne").json()["model"] == "beta"
    assert translate(url, "nep", "en-GB").json()["model"] == "beta"
    assert translate(url, "en", "de", model="alpha").json()["model"] == "alpha"

    error = assert_error(translate(url, "de", "ne"), 400, "unsupported_language_pair")
    assert error["supported"] == [
        {"model": "alpha", "languages": ["en", "de"]},
        {"model": "beta", "pairs": ["en>ne", "ne>en"]},
    ]
    error = assert_error(translate(url, "en", "de", model="beta"), 400, "unsupported_language_pair")
    assert error["supported"] == [{"model": "beta", "pairs": ["en>ne", "ne>en"]}]


def test_prompt_longer_than_the_context_is_413(pair_edge: str, texts: TextMaker) -> None:
    body = {"text": texts.text(230), "source_lang": "en", "target_lang": "ne", "split": "none"}
    response = httpx.post(f"{pair_edge}/translate", json=body, timeout=60)
    error = assert_error(response, 413, "payload_too_large")
    assert error["max_model_len"] == 256
    assert error["prompt_tokens"] > 230
    assert "split 'sentences'" in error["message"]


@pytest.mark.slow
def test_metrics_keep_both_engines(pair_server: PairServer) -> None:
    url = pair_server.url
    for source, target in (("en", "de"), ("de", "en"), ("en", "de"), ("en", "ne"), ("ne", "en")):
        assert translate(url, source, target).status_code == 200
    text = httpx.get(f"{url}/metrics").text
    running = {
        labels["model_name"] for labels, _ in metric_samples(text, "vllm:num_requests_running")
    }
    assert running == {"alpha", "beta"}
    first_token = {
        labels["model_name"]: value
        for labels, value in metric_samples(text, "vllm:time_to_first_token_seconds_count")
    }
    assert first_token["alpha"] >= 3
    assert first_token["beta"] >= 2


@pytest.mark.slow
async def test_sigterm_finishes_in_flight_requests_and_leaves_no_processes(
    pair_server: PairServer, texts: TextMaker
) -> None:
    server = pair_server.server
    assert server.proc.poll() is None
    limits = httpx.Limits(max_connections=20)
    async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

        async def post(text: str) -> httpx.Response:
            return await client.post(
                "/translate",
                json={"text": text, "source_lang": "en", "target_lang": "de", "split": "none"},
            )

        # 900 source tokens as one segment -> ~2,700 to write: far past the grace period.
        too_long = asyncio.create_task(post(texts.text(900)))
        in_flight = [asyncio.create_task(post(texts.text(40))) for _ in range(4)]

        async def all_running() -> bool:
            text = (await client.get("/metrics")).text
            running = metric_samples(text, "vllm:num_requests_running")
            return any(lbl["model_name"] == "alpha" and v >= 5 for lbl, v in running)

        await wait_until(all_running, within=30)
        family = pair_server.family + server.descendants()
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)

        finished = await asyncio.gather(*in_flight)
        assert [r.status_code for r in finished] == [200] * 4

        stopped = await too_long
        error = assert_error(stopped, 503, "shutting_down")
        assert "retry on another server" in error["message"]
        assert time.monotonic() - signalled >= GRACE - 0.5

        with pytest.raises(httpx.TransportError):  # no longer accepting connections
            await httpx.AsyncClient(base_url=server.url).get("/health")

    # uvicorn re-raises the SIGTERM it caught once shutdown is complete, so the exit status
    # tells a supervisor the process was terminated; the log shows the shutdown completed.
    assert server.proc.wait(timeout=60) == -signal.SIGTERM
    _, alive = psutil.wait_procs(family, timeout=15)
    assert alive == []
    log = server.log()
    assert "draining" in log
    assert "engines shut down" in log
    assert "Application shutdown complete" in log
