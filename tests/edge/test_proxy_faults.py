"""The proxy's fault handling, against stand-in upstreams (tolk.proxy.standin, named so):
real processes on loopback that can be told to be slow, fail with 500s, reset connections,
refuse with 503, or go away, which real tolk servers cannot be made to do on demand. The
same faults against real tolk servers are in test_proxy_servers.py where they can be made."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import metric_samples, metric_value
from tests.support.polling import wait_until
from tolk.local.processes import LocalServer, start_proxy, start_standin

INTERVAL, RISE, FALL = 0.3, 2, 2
OPEN_SECONDS = 1.0
BODY = {"text": "Hello there", "source_lang": "en", "target_lang": "de"}


class Rig:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.u1 = start_standin(workdir, "u1", capacity=4, hold=0.02, languages="en,de,fr")
        self.u2 = start_standin(workdir, "u2", capacity=4, hold=0.02, languages="en,de,es")

    def start_proxy(self) -> LocalServer:
        """A fresh proxy: every test starts with clean health, circuits and counters."""
        return start_proxy(
            self.workdir,
            "proxy",
            [self.u1.url, self.u2.url],
            health={"interval": INTERVAL, "timeout": 0.5, "rise": RISE, "fall": FALL,
                    "load_interval": 0.2},
            breaker={"failures": 3, "open_seconds": OPEN_SECONDS},
            retries={"attempts": 3, "backoff": 0.01},
            request_timeout=20,
            max_body_bytes=4096,
        )  # fmt: skip

    def set(self, server: LocalServer, **change: Any) -> None:
        httpx.post(f"{server.url}/_standin", json=change, timeout=5).raise_for_status()

    def stop(self) -> None:
        for server in (self.u1, self.u2):
            server.stop()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    rig = Rig(tmp_path_factory.mktemp("proxy-faults"))
    yield rig
    rig.stop()


@pytest.fixture
async def proxy(rig: Rig) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a new proxy in front of both stand-ins, told to behave."""
    for server in (rig.u1, rig.u2):
        rig.set(server, mode="ok", hold=0.02, slow_hold=2.0, retry_after=1)
    server = rig.start_proxy()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            states = (await client.get("/upstreams")).json()["upstreams"]
            assert all(u["healthy"] and u["circuit"] == "closed" for u in states)
            yield client
    finally:
        server.stop()


async def counts(client: httpx.AsyncClient, n: int, concurrency: int) -> Counter[tuple[int, str]]:
    """(status, upstream) of n translations sent `concurrency` at a time."""
    out: Counter[tuple[int, str]] = Counter()
    queue = list(range(n))

    async def worker() -> None:
        while queue:
            queue.pop()
            r = await client.post("/translate", json=BODY)
            out[(r.status_code, r.headers.get("x-tolk-upstream", ""))] += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def test_routes_by_pair_and_refuses_unserved_pairs(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    fr = await proxy.post("/translate", json={**BODY, "target_lang": "fr"})
    es = await proxy.post("/translate", json={**BODY, "target_lang": "es"})
    assert (fr.status_code, fr.headers["x-tolk-upstream"]) == (200, rig.u1.url)
    assert (es.status_code, es.headers["x-tolk-upstream"]) == (200, rig.u2.url)
    assert fr.json()["translation"] == "Hello there"[::-1]  # the stand-in's "translation"
    assert "upstream;dur=" in fr.headers["server-timing"]
    assert "proxy;dur=" in fr.headers["server-timing"]
    nobody = await proxy.post("/translate", json={**BODY, "source_lang": "fr", "target_lang": "es"})
    assert nobody.status_code == 400
    error = nobody.json()["error"]
    assert error["code"] == "unsupported_language_pair"
    assert {"en>fr", "en>es", "en>de"} <= set(error["served_pairs"])
    assert error["request_id"] == nobody.headers["x-request-id"]
    model = await proxy.post("/translate", json={**BODY, "model": "nope"})
    assert (model.status_code, model.json()["error"]["code"]) == (400, "unknown_model")
    big = await proxy.post("/translate", json={**BODY, "text": "x" * 5000})
    assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")
    languages = (await proxy.get("/models")).json()["models"]
    assert {m["model"] for m in languages} == {"u1", "u2"}
    missing = await proxy.get("/nowhere")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")


async def test_most_traffic_avoids_a_slow_upstream(rig: Rig, proxy: httpx.AsyncClient) -> None:
    rig.set(rig.u1, mode="slow", slow_hold=0.4)
    seen = await counts(proxy, 80, concurrency=8)
    assert set(seen) <= {(200, rig.u1.url), (200, rig.u2.url)}
    assert seen[(200, rig.u2.url)] >= 0.8 * 80, seen


async def test_resets_are_retried_elsewhere_and_open_the_circuit(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="reset")
    seen = await counts(proxy, 30, concurrency=4)
    assert seen == Counter({(200, rig.u2.url): 30})  # no client saw a failure
    assert await metric_value(proxy, "tolk_proxy_retries_total", reason="reset") >= 1
    states = {u["url"]: u for u in (await proxy.get("/upstreams")).json()["upstreams"]}
    assert states[rig.u1.url]["circuit"] in ("open", "half_open")
    assert await metric_value(proxy, "tolk_proxy_ejections_total", upstream=rig.u1.url,
                        reason="circuit_open") >= 1  # fmt: skip


async def test_500s_open_the_circuit_and_a_probe_closes_it(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="error")
    statuses: Counter[tuple[int, str]] = Counter()
    for _ in range(30):
        r = await proxy.post("/translate", json=BODY)
        statuses[(r.status_code, r.headers.get("x-tolk-upstream", ""))] += 1
        if statuses[(500, rig.u1.url)] >= 3:
            break
    # 500s are answers, not retried (the work may be what fails); after 3 the circuit opens.
    assert statuses[(500, rig.u1.url)] == 3
    for r in [await proxy.post("/translate", json=BODY) for _ in range(10)]:
        assert (r.status_code, r.headers["x-tolk-upstream"]) == (200, rig.u2.url)
    rig.set(rig.u1, mode="ok")

    async def u1_serves_again() -> bool:
        r = await proxy.post("/translate", json=BODY)
        return bool(r.headers.get("x-tolk-upstream") == rig.u1.url)

    # Half-open after OPEN_SECONDS: one probe succeeds and closes the circuit.
    await wait_until(u1_serves_again, within=OPEN_SECONDS + 10, interval=0.05)
    states = {u["url"]: u for u in (await proxy.get("/upstreams")).json()["upstreams"]}
    assert states[rig.u1.url]["circuit"] == "closed"


async def test_overloaded_upstream_is_retried_elsewhere_and_not_hammered(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="overload")
    seen = await counts(proxy, 40, concurrency=4)
    assert seen == Counter({(200, rig.u2.url): 40})
    refused = await metric_value(proxy, "tolk_proxy_upstream_requests_total", upstream=rig.u1.url,
                           outcome="503")  # fmt: skip
    # Each 503 keeps u1 out for its Retry-After (1 s) and 3 open the circuit: a handful, not 40.
    assert 1 <= refused <= 6


async def test_all_overloaded_gives_503_with_retry_after(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="overload", retry_after=20)
    rig.set(rig.u2, mode="overload", retry_after=20)
    r = await proxy.post("/translate", json=BODY)
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "overloaded"
    assert int(r.headers["retry-after"]) >= 1
    # Both now cool for their Retry-After: the proxy refuses on sight, in the same shape.
    r = await proxy.post("/translate", json=BODY)
    assert (r.status_code, r.json()["error"]["code"]) == (503, "overloaded")
    assert int(r.headers["retry-after"]) >= 10
    assert "x-tolk-upstream" not in r.headers
    assert {u["url"] for u in r.json()["error"]["upstreams"]} == {rig.u1.url, rig.u2.url}


async def test_a_full_upstream_is_refused_on_sight(tmp_path: Path) -> None:
    """The proxy counts its own requests at each upstream against the capacity the server
    publishes in /models (max_num_seqs + max_waiting): past it a request is refused at once,
    in the server's shape, never sent there to be refused."""
    small = start_standin(tmp_path, "small", capacity=2, hold=3.0, languages="en,de",
                          max_waiting=2)  # fmt: skip
    proxy = start_proxy(
        tmp_path, "proxy-small", [small.url],
        health={"interval": INTERVAL, "timeout": 0.5, "rise": RISE, "fall": FALL},
        request_timeout=20,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=30) as client:

            async def capacity_known() -> bool:
                upstream = (await client.get("/upstreams")).json()["upstreams"][0]
                return bool(upstream["healthy"] and upstream["capacity"] == 4)

            await wait_until(capacity_known, within=10)
            answers = await asyncio.gather(
                *(client.post("/translate", json=BODY) for _ in range(10))
            )
            sent_and_refused = await metric_value(
                client, "tolk_proxy_upstream_requests_total", upstream=small.url, outcome="503"
            )
            served = [r for r in answers if r.status_code == 200]
            refused = [r for r in answers if r.status_code != 200]
            assert len(served) == 4
            assert len(refused) == 6
            for r in refused:
                assert r.status_code == 503
                assert r.json()["error"]["code"] == "overloaded"
                assert r.json()["error"]["upstreams"] == [
                    {"url": small.url, "outstanding": 4, "capacity": 4}
                ]
                assert int(r.headers["retry-after"]) >= 1
                assert "x-tolk-upstream" not in r.headers
            assert sent_and_refused == 0
            standin = await client.get(f"{small.url}/_standin")
            assert standin.json()["served"] == 4
    finally:
        proxy.stop()
        small.stop()


async def test_shutting_down_upstream_is_drained(rig: Rig, proxy: httpx.AsyncClient) -> None:
    rig.set(rig.u1, mode="shutdown")
    seen = await counts(proxy, 20, concurrency=4)
    assert seen == Counter({(200, rig.u2.url): 20})
    states = {u["url"]: u for u in (await proxy.get("/upstreams")).json()["upstreams"]}
    assert not states[rig.u1.url]["healthy"]


async def test_no_healthy_upstream_gives_503(rig: Rig, proxy: httpx.AsyncClient) -> None:
    assert await metric_value(proxy, "tolk_proxy_pair_upstreams_healthy", pair="en>de") == 2
    rig.set(rig.u1, mode="unready")
    rig.set(rig.u2, mode="unready")

    async def proxy_not_ready() -> bool:
        return (await proxy.get("/ready")).status_code == 503

    took = await wait_until(proxy_not_ready, within=(FALL + 2) * INTERVAL + 5)
    assert took <= FALL * INTERVAL + 0.5 + 1.0  # fall checks, each within its timeout
    r = await proxy.post("/translate", json=BODY)
    assert r.status_code == 503
    error = r.json()["error"]
    assert error["code"] == "no_healthy_upstream"
    assert len(error["upstreams"]) == 2
    assert int(r.headers["retry-after"]) >= 1
    # What the alert on a pair with no healthy upstream reads.
    text = (await proxy.get("/metrics")).text
    healthy = dict(
        (labels["pair"], value)
        for labels, value in metric_samples(text, "tolk_proxy_pair_upstreams_healthy")
    )
    assert healthy["en>de"] == healthy["fr>en"] == healthy["es>de"] == 0


async def test_deadline_gives_504(rig: Rig, proxy: httpx.AsyncClient) -> None:
    rig.set(rig.u1, mode="slow", slow_hold=3.0)
    rig.set(rig.u2, mode="slow", slow_hold=3.0)
    started = time.monotonic()
    r = await proxy.post("/translate", json=BODY, headers={"X-Request-Timeout": "0.5"})
    assert time.monotonic() - started < 2.5
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "deadline_exceeded"


async def test_refused_connections_are_retried_and_the_upstream_returns(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    port = int(rig.u1.url.rsplit(":", 1)[1])
    rig.u1.stop()
    stopped = time.monotonic()
    seen = await counts(proxy, 20, concurrency=4)
    assert seen == Counter({(200, rig.u2.url): 20})

    async def u1_down() -> bool:
        states = {u["url"]: u for u in (await proxy.get("/upstreams")).json()["upstreams"]}
        return not states[rig.u1.url]["healthy"]

    await wait_until(u1_down, within=10)
    assert time.monotonic() - stopped <= FALL * INTERVAL + 2 * 0.5 + 1.0
    rig.u1 = start_standin(rig.workdir, "u1", capacity=4, hold=0.02, languages="en,de,fr",
                           port=port)  # fmt: skip

    async def u1_serves() -> bool:
        r = await proxy.post("/translate", json={**BODY, "target_lang": "fr"})
        return r.status_code == 200 and r.headers["x-tolk-upstream"] == rig.u1.url

    await wait_until(u1_serves, within=(RISE + 2) * INTERVAL + 5)


async def test_a_client_leaving_drops_the_upstream_request(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="slow", slow_hold=5.0)
    rig.set(rig.u2, mode="slow", slow_hold=5.0)
    with pytest.raises(httpx.ReadTimeout):
        await proxy.post("/translate", json=BODY, timeout=0.5)

    async def nothing_held() -> bool:
        held: list[int] = [
            (await proxy.get(f"{u.url}/_standin")).json()["in_flight"] for u in (rig.u1, rig.u2)
        ]
        return sum(held) == 0

    # The proxy dropped its upstream connection, so the upstream stopped holding the request
    # long before its 5 s were up.
    took = await wait_until(nothing_held, within=3)
    assert took < 2

    async def recorded_as_499() -> bool:
        return await metric_value(proxy, "tolk_proxy_requests_total", status="499") == 1

    await wait_until(recorded_as_499, within=3)


async def test_metrics_and_upstreams_describe_the_pool(rig: Rig, proxy: httpx.AsyncClient) -> None:
    await proxy.post("/translate", json=BODY)
    text = (await proxy.get("/metrics")).text
    for name in (
        "tolk_proxy_requests_total",
        "tolk_proxy_request_duration_seconds_bucket",
        "tolk_proxy_added_seconds_bucket",
        "tolk_proxy_upstream_healthy",
        "tolk_proxy_upstream_circuit",
        "tolk_proxy_upstream_outstanding",
    ):
        assert metric_samples(text, name), name
    states = (await proxy.get("/upstreams")).json()["upstreams"]
    assert {u["url"] for u in states} == {rig.u1.url, rig.u2.url}
    assert all(u["healthy"] and u["circuit"] == "closed" for u in states)
    assert (await proxy.get("/ready")).json()["status"] == "ready"


async def test_every_upstream_failing_gives_502_after_capped_retries(
    rig: Rig, proxy: httpx.AsyncClient
) -> None:
    rig.set(rig.u1, mode="reset")
    rig.set(rig.u2, mode="reset")
    r = await proxy.post("/translate", json=BODY)
    assert r.status_code == 502
    error = r.json()["error"]
    assert error["code"] == "upstream_unavailable"
    assert [a["failure"] for a in error["attempts"]] == ["reset"] * 3  # the cap: 3 tries
    assert {a["upstream"] for a in error["attempts"]} == {rig.u1.url, rig.u2.url}
    assert await metric_value(proxy, "tolk_proxy_retries_total", reason="reset") == 2


def test_upstreams_found_through_dns(rig: Rig) -> None:
    """A name resolving to the upstream's address (here `localhost`) is an upstream."""
    for server in (rig.u1, rig.u2):
        rig.set(server, mode="ok", hold=0.02)
    port = int(rig.u1.url.rsplit(":", 1)[1])
    server = start_proxy(
        rig.workdir,
        "proxy-dns",
        [],
        dns=[{"name": "localhost", "port": port, "interval": 0.5}],
        health={"interval": INTERVAL, "timeout": 0.5},
    )
    try:
        listed = httpx.get(f"{server.url}/upstreams", timeout=5).json()["upstreams"]
        found = {u["url"]: u for u in listed}[f"http://127.0.0.1:{port}"]
        assert found["origin"] == "dns:localhost"
        assert found["healthy"]
        r = httpx.post(f"{server.url}/translate", json={**BODY, "target_lang": "fr"}, timeout=10)
        assert (r.status_code, r.headers["x-tolk-upstream"]) == (200, f"http://127.0.0.1:{port}")
    finally:
        server.stop()
