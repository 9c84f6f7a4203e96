"""Self-healing on a real two-model server: a model whose engine dies is restarted while the
other keeps serving; one that dies again past `max_restarts` makes the server give up and
exit 3 after draining. Also the server's bounds: a body sent too slowly is cut off with
408, connections past `max_connections` get tolk's JSON 503.

The tests share one server and run in file order (the last one ends it)."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.errors import assert_error
from tests.support.metrics import metric_samples
from tests.support.polling import wait_until
from tests.support.servers import ServerProcess, model_config
from tests.support.texts import TextMaker

pytestmark = pytest.mark.slow

BODY_TIMEOUT = 1.0
MAX_CONNECTIONS = 24
BETA = {"text": "Hello there.", "source_lang": "en", "target_lang": "ne"}
ALPHA = {"text": "Hello there.", "source_lang": "en", "target_lang": "de"}


class Rig:
    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.url = server.url

    def engine(self, model_order: int, kind: str) -> psutil.Process:
        """The `kind` process (EngineCore or Worker) of the `model_order`-th engine alive
        (alpha started first; a restarted beta is the newest)."""
        family = self.server.descendants()
        cores = sorted(
            (p for p in family if "EngineCore" in " ".join(p.cmdline())),
            key=lambda p: p.create_time(),
        )
        core = cores[model_order]
        if kind == "EngineCore":
            return core
        return next(p for p in core.children() if "Worker" in " ".join(p.cmdline()))


@pytest.fixture(scope="module")
def rig(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    workdir = tmp_path_factory.mktemp("supervised")
    server = ServerProcess.launch(
        workdir,
        "supervised",
        [
            model_config("alpha", test_model, languages=["en", "de"], max_tokens_ratio=3),
            model_config("beta", test_model, pairs=["en>ne"], engine={"max_num_seqs": 4}),
        ],
        request_timeout=120,
        shutdown_grace=90,  # the long translation below drains whole on slow CPUs too
        max_restarts=1,
        restart_backoff=0.2,
        body_timeout=BODY_TIMEOUT,
        max_connections=MAX_CONNECTIONS,
    )
    yield Rig(server)
    server.stop()


async def test_a_dead_engine_is_restarted_while_the_other_model_serves(rig: Rig) -> None:
    async with httpx.AsyncClient(base_url=rig.url, timeout=60) as client:
        in_flight = [asyncio.create_task(client.post("/translate", json=BETA)) for _ in range(6)]
        rig.engine(1, "Worker").send_signal(signal.SIGKILL)  # beta's model process dies

        async def restarting() -> bool:
            answer = await client.get("/ready")
            return bool(answer.headers.get("x-tolk-error-code") == "engine_restarting")

        await wait_until(restarting, within=15)
        error = assert_error(await client.get("/ready"), 503, "engine_restarting")
        assert error["models"] == {"alpha": "ready", "beta": "restarting"}

        refused = await client.post("/translate", json=BETA)
        error = assert_error(refused, 503, "engine_restarting")
        assert error["model"] == "beta"
        assert int(refused.headers["Retry-After"]) >= 1
        assert (await client.get("/health")).status_code == 200  # no reason to kill it
        assert (await client.post("/translate", json=ALPHA)).status_code == 200

        # Every request that was in flight got its translation or a JSON 503.
        for response in await asyncio.gather(*in_flight):
            if response.status_code != 200:
                assert response.status_code == 503, response.text
                assert response.json()["error"]["code"] in (
                    "engine_unavailable",
                    "engine_restarting",
                )

        async def ready() -> bool:
            return (await client.get("/ready")).status_code == 200

        await wait_until(ready, within=120)
        served = await client.post("/translate", json=BETA)
        assert served.status_code == 200, served.text
        assert served.json()["model"] == "beta"
        text = (await client.get("/metrics")).text
        restarts = dict(
            (labels["model"], value)
            for labels, value in metric_samples(text, "tolk_engine_restarts_total")
        )
        assert restarts == {"beta": 1.0}
        states = {
            (labels["model"], labels["state"]): value
            for labels, value in metric_samples(text, "tolk_engine_state")
        }
        assert states[("beta", "ready")] == 1.0
        assert states[("beta", "restarting")] == 0.0
    assert "restarting the engine for model 'beta'" in rig.server.log()


async def test_a_body_sent_too_slowly_is_cut_off_with_408(rig: Rig) -> None:
    host, port = rig.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    started = time.monotonic()
    answer = await trickle(reader, writer)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b'"code":"request_timeout"' in answer
    assert time.monotonic() - started < BODY_TIMEOUT + 3
    writer.close()


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """A byte every 0.1 s for up to 4 s (the body needs 99): the server's whole answer.

    The answer may come in more than one packet (headers, then body), so once its first bytes
    arrive the rest is read up to the end of the connection, which the server closes.
    """
    for _ in range(40):
        writer.write(b" ")
        await writer.drain()
        try:
            first = await asyncio.wait_for(reader.read(4096), 0.1)
        except TimeoutError:
            continue
        return first + await asyncio.wait_for(reader.read(), 5)
    return b""


def test_connections_past_the_limit_get_a_json_503(rig: Rig) -> None:
    host, port = rig.url.removeprefix("http://").split(":")
    # Open connections that have sent nothing yet count against the limit too.
    held = [socket.create_connection((host, int(port))) for _ in range(MAX_CONNECTIONS)]
    try:
        error = assert_error(httpx.get(f"{rig.url}/health", timeout=10), 503, "overloaded")
        assert f"{MAX_CONNECTIONS} connections" in error["message"]
    finally:
        for connection in held:
            connection.close()


async def test_an_engine_dying_past_max_restarts_makes_the_server_exit_3(
    rig: Rig, texts: TextMaker
) -> None:
    server = rig.server
    family = server.descendants()
    async with httpx.AsyncClient(base_url=rig.url, timeout=120) as client:
        # A long alpha translation keeps the server draining while we look at it: 900 source
        # tokens, 2,716 output at alpha's ratio of 3, held in flight by freezing alpha's
        # engine while the checks below run (on a fast host the server could otherwise drain
        # and exit before they connect, as it did with 300 tokens on a CPU with native bf16).
        long = asyncio.create_task(
            client.post("/translate", json={**ALPHA, "text": texts.text(900), "split": "none"})
        )

        async def alpha_running() -> bool:
            text = (await client.get("/metrics")).text
            running = metric_samples(text, "vllm:num_requests_running")
            return any(lbl["model_name"] == "alpha" and v >= 1 for lbl, v in running)

        await wait_until(alpha_running, within=30)
        alpha_core = rig.engine(0, "EngineCore")
        alpha_core.suspend()
        try:
            rig.engine(1, "EngineCore").send_signal(signal.SIGKILL)  # beta dies a second time

            async def given_up() -> bool:
                return (await client.get("/health")).status_code == 503

            await wait_until(given_up, within=15)
            error = assert_error(await client.get("/health"), 503, "engine_failed")
            assert "model 'beta'" in error["message"]
            assert (await client.get("/ready")).status_code == 503
            refused = await client.post("/translate", json=ALPHA)
            assert_error(refused, 503, "shutting_down")
            assert not long.done()  # still draining: alpha's translation is in flight
        finally:
            alpha_core.resume()
        finished = await long
        assert finished.status_code == 200, finished.text

    assert server.proc.wait(timeout=120) == 3
    _, alive = psutil.wait_procs(family, timeout=15)
    assert alive == []
    log = server.log()
    assert "giving up on model 'beta'" in log
    assert "exiting with status 3" in log
