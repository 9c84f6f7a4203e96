"""`tolk proxy` in front of two real tolk servers (the test model): A serves en, de, fr and
B serves en, de, es, so en<>de is on both, en>fr only on A, en>es only on B, fr>es nowhere."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.metrics import metric_samples
from tests.support.polling import wait_until
from tests.support.processes import still_running
from tests.support.servers import ServerProcess, model_config
from tolk.bench.loadgen import server_timing
from tolk.local.processes import LocalServer, start_proxy

pytestmark = pytest.mark.slow

INTERVAL, TIMEOUT, RISE, FALL = 0.5, 1.0, 2, 2
DE = {"text": "The proxy routes by language pair.", "source_lang": "en", "target_lang": "de"}


@dataclass
class Pair:
    workdir: Path
    test_model: Path
    a: ServerProcess
    b: ServerProcess
    proxy: LocalServer

    def launch_b(self, port: int | None = None) -> ServerProcess:
        return launch(self.workdir, self.test_model, "b", ["en", "de", "es"], port)


def launch(
    workdir: Path, test_model: Path, name: str, languages: list[str], port: int | None = None
) -> ServerProcess:
    model = model_config(name, test_model, languages=languages)
    return ServerProcess.launch(workdir, name, [model], port=port, shutdown_grace=5)


@pytest.fixture(scope="module")
def servers(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    workdir = tmp_path_factory.mktemp("proxy-servers")
    a = launch(workdir, test_model, "a", ["en", "de", "fr"])
    b = launch(workdir, test_model, "b", ["en", "de", "es"])
    proxy = start_proxy(
        workdir,
        "proxy",
        [a.url, b.url],
        health={"interval": INTERVAL, "timeout": TIMEOUT, "rise": RISE, "fall": FALL},
        retries={"attempts": 3, "backoff": 0.05},
    )
    pair = Pair(workdir, test_model, a, b, proxy)
    yield pair
    for server in (pair.proxy, pair.a, pair.b):
        server.stop()


async def test_each_pair_lands_on_the_server_that_serves_it(servers: Pair) -> None:
    async with httpx.AsyncClient(base_url=servers.proxy.url, timeout=60) as client:
        fr = await client.post("/translate", json={**DE, "target_lang": "fr"})
        es = await client.post("/translate", json={**DE, "target_lang": "es"})
        assert (fr.status_code, es.status_code) == (200, 200), (fr.text, es.text)
        assert (fr.status_code, fr.headers["x-tolk-upstream"]) == (200, servers.a.url)
        assert (es.status_code, es.headers["x-tolk-upstream"]) == (200, servers.b.url)
        assert (fr.json()["model"], es.json()["model"]) == ("a", "b")
        assert server_timing(fr.headers, "engine") is not None  # the upstream's own

        nobody = await client.post(
            "/translate", json={**DE, "source_lang": "fr", "target_lang": "es"}
        )
        assert nobody.status_code == 400
        error = nobody.json()["error"]
        assert error["code"] == "unsupported_language_pair"
        assert {"en>fr", "en>es", "en>de", "de>en"} <= set(error["served_pairs"])
        assert "fr>es" not in error["served_pairs"]

        # A list goes to one upstream as one request.
        before = (await client.get(f"{servers.a.url}/metrics")).text
        texts = ["One.", "Two texts.", "And three."]
        many = await client.post("/translate", json={**DE, "text": texts, "target_lang": "fr"})
        after = (await client.get(f"{servers.a.url}/metrics")).text
        assert many.status_code == 200
        assert len(many.json()["translation"]) == 3

        def ok_translations(text: str) -> float:
            return sum(
                v
                for labels, v in metric_samples(text, "tolk_requests_total")
                if labels == {"route": "/translate", "status": "200"}
            )

        assert ok_translations(after) - ok_translations(before) == 1

        # A malformed request is the upstream's to explain, in tolk's one error shape.
        bad = await client.post("/translate", json={"text": "x", "source_lang": "en"})
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "invalid_request"

        listed = (await client.get("/upstreams")).json()["upstreams"]
        assert {u["url"]: sorted(u["models"]) for u in listed} == {
            servers.a.url: ["a"],
            servers.b.url: ["b"],
        }


async def test_deepl_and_libretranslate_requests_route_by_their_bodies(servers: Pair) -> None:
    async with httpx.AsyncClient(base_url=servers.proxy.url, timeout=60) as proxy:
        deepl_form = await proxy.post(
            "/v2/translate",
            data={"text": ["Bonjour", "Salut"], "target_lang": "FR", "source_lang": "EN"},
            headers={"Authorization": "DeepL-Auth-Key any"},
        )
        assert deepl_form.status_code == 200, deepl_form.text
        assert deepl_form.headers["x-tolk-upstream"] == servers.a.url  # only A serves fr
        assert len(deepl_form.json()["translations"]) == 2
        mastodon = await proxy.post(
            "/translate",
            json={
                "q": ["<p>Hello there, friends</p>"],
                "source": "auto",
                "target": "es",
                "format": "html",
                "api_key": "",
            },
        )
        assert mastodon.status_code == 200, mastodon.text
        assert mastodon.headers["x-tolk-upstream"] == servers.b.url  # only B serves es
        assert mastodon.headers["access-control-allow-origin"] == "*"
        assert mastodon.json()["detectedLanguage"][0]["language"] == "en"
        multipart = await proxy.post(
            "/translate",
            files={"q": (None, "Hello"), "source": (None, "en"), "target": (None, "fr")},
        )
        assert multipart.headers["x-tolk-upstream"] == servers.a.url
        nobody = await proxy.post("/translate", data={"q": "x", "source": "fr", "target": "es"})
        assert nobody.status_code == 400
        assert set(nobody.json()) == {"error"}
        deepl_nobody = await proxy.post(
            "/v2/translate", json={"text": ["x"], "source_lang": "FR", "target_lang": "ES"}
        )
        assert deepl_nobody.status_code == 400
        assert "message" in deepl_nobody.json()

        # A file's later calls reach the server that has it, through the proxy's own URL.
        upload = await proxy.post(
            "/translate_file",
            files={
                "file": ("a.txt", b"Hello world\n"),
                "source": (None, "en"),
                "target": (None, "es"),
            },
        )
        url = upload.json()["translatedFileUrl"]
        assert url.startswith(servers.proxy.url)
        assert (await proxy.get(url)).status_code == 200
        document = await proxy.post(
            "/v2/document",
            files={"file": ("b.txt", b"Good morning\n")},
            data={"target_lang": "FR"},
            headers={"Authorization": "DeepL-Auth-Key any"},
        )
        ids = document.json()
        for _ in range(3):  # whichever upstream the status calls would land on otherwise
            status = await proxy.post(
                f"/v2/document/{ids['document_id']}",
                json={"document_key": ids["document_key"]},
                headers={"Authorization": "DeepL-Auth-Key any"},
            )
            assert status.json()["status"] == "done"
        result = await proxy.post(
            f"/v2/document/{ids['document_id']}/result",
            json={"document_key": ids["document_key"]},
            headers={"Authorization": "DeepL-Auth-Key any"},
        )
        assert result.status_code == 200
        assert result.text.endswith("\n")
        languages = (await proxy.get("/languages")).json()
        assert all({"code", "name", "targets"} <= set(entry) for entry in languages)


async def test_stopping_and_restarting_a_server_under_load(servers: Pair) -> None:
    results: list[tuple[float, int, str]] = []
    stop = asyncio.Event()

    async def load(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            r = await client.post("/translate", json=DE)
            results.append((time.monotonic(), r.status_code, r.headers.get("x-tolk-upstream", "")))

    async def states(client: httpx.AsyncClient) -> dict[str, bool]:
        listed = (await client.get("/upstreams")).json()["upstreams"]
        return {u["url"]: u["healthy"] for u in listed}

    async with httpx.AsyncClient(base_url=servers.proxy.url, timeout=60) as client:
        workers = [asyncio.create_task(load(client)) for _ in range(4)]
        try:

            async def both_served() -> bool:
                seen = {u for _, _, u in results}
                return {servers.a.url, servers.b.url} <= seen

            await wait_until(both_served, within=60)

            b_url = servers.b.url
            stopping = time.monotonic()
            stopper = asyncio.create_task(asyncio.to_thread(servers.b.stop))

            async def b_down() -> bool:
                return not (await states(client))[b_url]

            await wait_until(b_down, within=30)
            # /ready answers 503 from the moment B starts draining: FALL failed checks.
            assert time.monotonic() - stopping <= FALL * INTERVAL + TIMEOUT + 1.5
            await stopper
            stopped = time.monotonic()

            async def served_after_stop() -> bool:
                return sum(1 for when, _, _ in results if when > stopped) >= 8

            await wait_until(served_after_stop, within=60)

            port = int(b_url.rsplit(":", 1)[1])
            servers.b = await asyncio.to_thread(servers.launch_b, port)
            ready = time.monotonic()

            async def b_up() -> bool:
                return (await states(client))[b_url]

            await wait_until(b_up, within=30)
            assert time.monotonic() - ready <= RISE * INTERVAL + TIMEOUT + 1.5

            async def b_serves_again() -> bool:
                return any(t > ready and u == b_url for t, _, u in results)

            await wait_until(b_serves_again, within=30)
        finally:
            stop.set()
            await asyncio.gather(*workers)

    # Through the stop and the restart, no client saw a failure.
    assert len(results) > 20
    assert {status for _, status, _ in results} == {200}


class Load:
    """Four clients translating en>de through the proxy (both servers serve it) until
    stopped; every response recorded."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.results: list[tuple[float, int, str]] = []
        self._stop = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []

    async def _one(self) -> None:
        while not self._stop.is_set():
            r = await self.client.post("/translate", json=DE)
            self.results.append(
                (time.monotonic(), r.status_code, r.text if r.status_code != 200 else "")
            )

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._one()) for _ in range(4)]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._workers)

    def served_since(self, moment: float) -> int:
        return sum(1 for when, status, _ in self.results if when > moment and status == 200)


async def test_an_upstream_whose_engine_restarts_costs_no_request(servers: Pair) -> None:
    async with httpx.AsyncClient(base_url=servers.proxy.url, timeout=120) as client:
        load = Load(client)
        load.start()
        try:
            await wait_until(lambda: _true(load.served_since(0) >= 8), within=60)
            core = next(p for p in servers.b.descendants() if "EngineCore" in " ".join(p.cmdline()))
            worker = next(p for p in core.children() if "Worker" in " ".join(p.cmdline()))
            worker.kill()  # B's engine dies under load; B restarts it
            killed = time.monotonic()

            async def b_restarted() -> bool:
                ready = await client.get("/upstreams")
                listed = {u["url"]: u for u in ready.json()["upstreams"]}
                return (
                    "restart" in servers.b.log()
                    and listed[servers.b.url]["healthy"]
                    and ("serves again" in servers.b.log())
                )

            await wait_until(b_restarted, within=120)
            await wait_until(lambda: _true(load.served_since(killed) >= 8), within=60)
        finally:
            await load.stop()
    failures = [(status, text) for _, status, text in load.results if status != 200]
    assert failures == []
    assert "the engine for model 'b' serves again" in servers.b.log()


async def test_an_upstream_killed_outright_costs_no_request_and_leaves_no_process(
    servers: Pair,
) -> None:
    async with httpx.AsyncClient(base_url=servers.proxy.url, timeout=120) as client:
        load = Load(client)
        load.start()
        try:
            await wait_until(lambda: _true(load.served_since(0) >= 8), within=60)
            family = servers.b.descendants()
            assert any("EngineCore" in " ".join(p.cmdline()) for p in family)
            servers.b.proc.kill()  # SIGKILL: no chance to stop its engine
            killed = time.monotonic()
            # Soon nothing of B's is left (its engine follows it: no orphans). It takes a
            # second or two; 30 s allows a killed process stuck a while in disk sleep.
            assert await asyncio.to_thread(still_running, family, 30) == []
            await wait_until(lambda: _true(load.served_since(killed) >= 8), within=60)
        finally:
            await load.stop()
    failures = [(status, text) for _, status, text in load.results if status != 200]
    assert failures == []


async def _true(value: bool) -> bool:
    return value
