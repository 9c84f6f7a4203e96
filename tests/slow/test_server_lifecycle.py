"""A real two-model server through its life, on two engines of its own: per-model engine
metrics, and finally SIGTERM with requests in flight. (An engine dying:
test_server_supervision.)

The tests share the server and run in file order; each checks the state it needs before
acting.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.errors import assert_error
from tests.support.metrics import metric_samples
from tests.support.pair_server import pair_models, translate
from tests.support.polling import wait_until
from tests.support.servers import ServerProcess
from tests.support.texts import TextMaker

# The in-flight requests write 136 tokens, well under the grace period at any speed seen here.
# The long one is kept running past it by freezing its engine once the others are done (a
# fast host wrote its ~2,700 tokens inside 5 s, CI stop 48), so the test needs no speed.
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


@pytest.fixture(scope="module")
def pair_server(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PairServer]:
    workdir = tmp_path_factory.mktemp("pair-server")
    server = ServerProcess.launch(
        workdir, "pairs", pair_models(test_model), request_timeout=120, shutdown_grace=GRACE
    )
    yield PairServer(server)
    server.stop()


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
        assert not too_long.done()  # it has 20 times their tokens to write
        # The fault: alpha's engine stops stepping, so the long request is still running
        # when the grace period ends, whatever the host's speed.
        alpha_core = pair_server.engine_cores()[0]
        alpha_core.suspend()
        try:
            stopped = await too_long
        finally:
            alpha_core.resume()
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
