"""The load generator: one async HTTP client (aiohttp) with pooled keep-alive connections.

aiohttp rather than httpx: at concurrency 25 against the same server, httpx's pure-Python
HTTP handling added ~130 ms at p95 to what the client measured, aiohttp ~28 ms; a load
generator must not be what it measures.

Closed loop: `concurrency` workers, each sending its next request as soon as the last one
answered. Open loop: requests start at Poisson arrival times whatever the server is doing, so
queueing shows the way real traffic produces it.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from tolk.bench.stats import RequestRecord
from tolk.bench.workloads import WorkItem

Progress = Callable[[int], None]
KEEPALIVE = 3.0
_TIMING = re.compile(r"(?:^|,)\s*([a-z-]+);dur=([0-9.]+)")


# Benchmarks measure the engine's work: the segment cache (tolk.store.segment_cache)
# would answer their repeated texts without it. `tolk bench segment-cache` measures the cache.
BYPASS_MEMORY = {"Cache-Control": "no-store"}


def make_client(
    base_url: str,
    connections: int,
    timeout: float = 300.0,
    headers: Mapping[str, str] | None = None,
) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        base_url=base_url,
        # Idle connections are dropped before a server's keep-alive timeout (uvicorn's 5 s)
        # closes them, or a request sent on one just as it closes fails for nothing.
        connector=aiohttp.TCPConnector(limit=connections, keepalive_timeout=KEEPALIVE),
        timeout=aiohttp.ClientTimeout(total=timeout),
        headers={**BYPASS_MEMORY, **(headers or {})},
    )


async def get_text(client: aiohttp.ClientSession, path: str, **params: Any) -> tuple[int, str]:
    async with client.get(path, params=params or None) as response:
        return response.status, await response.text()


def server_timings(headers: Mapping[str, str]) -> dict[str, float]:
    """Seconds of each metric with a duration in a `Server-Timing` header (the first of a
    name): `engine` and the marks of tolk.engine.timing from a tolk server, `upstream` and
    `proxy` added by a tolk proxy."""
    found: dict[str, float] = {}
    for metric, millis in _TIMING.findall(headers.get("server-timing", "")):
        found.setdefault(metric, float(millis) / 1000)
    return found


def server_timing(headers: Mapping[str, str], name: str) -> float | None:
    """Seconds of metric `name` in a `Server-Timing` header (server_timings)."""
    return server_timings(headers).get(name)


def engine_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's engine time from its `Server-Timing: engine;dur=<ms>` header."""
    return server_timing(headers, "engine")


Encode = Callable[[WorkItem], dict[str, Any]]


@dataclass(frozen=True)
class Api:
    """How a work item is sent to one of the server's APIs (`tolk bench run --api`)."""

    name: str
    path: str
    encode: Encode
    key_header: Callable[[str], dict[str, str]]


def _deepl(item: WorkItem) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": [item.text],
        "source_lang": item.source_lang,
        "target_lang": item.target_lang,
    }
    if item.format == "html":
        body["tag_handling"] = "html"
    return body


def _libretranslate(item: WorkItem) -> dict[str, Any]:
    fmt = "html" if item.format == "html" else "text"
    return {"q": item.text, "source": item.source_lang, "target": item.target_lang, "format": fmt}


def _openai(item: WorkItem) -> dict[str, Any]:
    """A chat completion whose model names the pair (`tolk-en-de`): tolk translates its last
    user message through the same service (tolk.server.api.openai)."""
    return {
        "model": f"tolk-{item.source_lang}-{item.target_lang}",
        "messages": [{"role": "user", "content": item.text}],
    }


APIS = {
    "tolk": Api("tolk", "/translate", WorkItem.body, lambda k: {"Authorization": f"Bearer {k}"}),
    "deepl": Api(
        "deepl", "/v2/translate", _deepl, lambda k: {"Authorization": f"DeepL-Auth-Key {k}"}
    ),
    # LibreTranslate's key travels in the body; a header would not be read.
    "libretranslate": Api("libretranslate", "/translate", _libretranslate, lambda k: {}),
    "openai": Api(
        "openai", "/v1/chat/completions", _openai, lambda k: {"Authorization": f"Bearer {k}"}
    ),
}


def with_key(api: Api, key: str | None) -> Api:
    """`api` sending `key` where its clients send it."""
    if key is None or api.name != "libretranslate":
        return api
    return Api(
        api.name, api.path, lambda item: {**_libretranslate(item), "api_key": key}, api.key_header
    )


def _output_chars(body: dict[str, Any]) -> int:
    """Characters of output in a response of any API (tolk's `translation`, DeepL's
    `translations`, LibreTranslate's `translatedText`) or an OpenAI completion."""
    translation = body.get("translation", body.get("translatedText"))
    if translation is None and "translations" in body:
        translation = [t.get("text", "") for t in body["translations"]]
    if translation is None:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}  # a chat completion's, else a completion's text
        translation = message.get("content") or choice.get("text", "")
    return len(translation) if isinstance(translation, str) else sum(map(len, translation))


async def send(
    client: aiohttp.ClientSession,
    path: str,
    item: WorkItem,
    t0: float,
    encode: Encode | None = None,
) -> RequestRecord:
    """POST `item` (tolk's /translate body, or what `encode` makes of it) and record it."""
    started = time.monotonic()
    try:
        async with client.post(path, json=encode(item) if encode else item.body()) as response:
            raw = await response.read()
            status, headers = response.status, response.headers
    except (aiohttp.ClientError, TimeoutError) as exc:
        return RequestRecord(
            started - t0, time.monotonic() - started, 0, type(exc).__name__, chars_in=len(item.text)
        )
    return record(started - t0, time.monotonic() - started, status, headers, raw, item)


def record(
    start: float,
    latency: float,
    status: int,
    headers: Mapping[str, str],
    raw: bytes,
    item: WorkItem,
) -> RequestRecord:
    """What one answer (any API's, or a proxy's) says: its error code, or its output and
    usage and the server's timings."""
    try:
        body: dict[str, Any] = json.loads(raw)
    except ValueError:
        body = {}
    if status != 200:
        error = body.get("error")
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
        code = code or headers.get("X-Tolk-Error-Code", "")  # the drop-in APIs' errors
        return RequestRecord(start, latency, status, code or None, chars_in=len(item.text))
    usage = body.get("usage", {})
    return RequestRecord(
        start=start,
        latency=latency,
        status=200,
        chars_in=len(item.text),
        chars_out=_output_chars(body),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        engine_seconds=engine_seconds(headers),
        upstream_seconds=server_timing(headers, "upstream"),
    )


async def closed_loop(
    client: aiohttp.ClientSession,
    items: Iterator[WorkItem],
    concurrency: int,
    *,
    requests: int | None = None,
    duration: float | None = None,
    path: str = "/translate",
    encode: Encode | None = None,
    progress: Progress | None = None,
) -> tuple[list[RequestRecord], float]:
    """Run until `requests` are sent, or for `duration` seconds; returns records and the
    level's wall time."""
    if (requests is None) == (duration is None):
        raise ValueError("give exactly one of requests and duration")
    records: list[RequestRecord] = []
    t0 = time.monotonic()
    budget = [requests if requests is not None else -1]

    def take() -> WorkItem | None:
        if duration is not None and time.monotonic() - t0 >= duration:
            return None
        if budget[0] == 0:
            return None
        budget[0] -= 1
        return next(items)

    async def worker() -> None:
        while (item := take()) is not None:
            records.append(await send(client, path, item, t0, encode))
            if progress:
                progress(1)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sorted(records, key=lambda r: r.start), time.monotonic() - t0


def poisson_arrivals(
    rate: float, rng: random.Random, *, count: int | None = None, duration: float | None = None
) -> list[float]:
    """Arrival times (seconds from 0) of a Poisson process of `rate` per second: `count`
    arrivals, or all arrivals before `duration`."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    if (count is None) == (duration is None):
        raise ValueError("give exactly one of count and duration")
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if duration is not None and t >= duration:
            return times
        times.append(t)
        if count is not None and len(times) >= count:
            return times


async def open_loop(
    client: aiohttp.ClientSession,
    items: Iterator[WorkItem],
    rate: float,
    *,
    requests: int | None = None,
    duration: float | None = None,
    seed: int = 0,
    path: str = "/translate",
    progress: Progress | None = None,
    encode: Encode | None = None,
) -> tuple[list[RequestRecord], float]:
    arrivals = poisson_arrivals(rate, random.Random(seed), count=requests, duration=duration)
    t0 = time.monotonic()

    async def at(when: float, item: WorkItem) -> RequestRecord:
        await asyncio.sleep(max(0.0, t0 + when - time.monotonic()))
        record = await send(client, path, item, t0, encode)
        if progress:
            progress(1)
        return record

    records = await asyncio.gather(*(at(when, next(items)) for when in arrivals))
    return sorted(records, key=lambda r: r.start), time.monotonic() - t0


async def ceiling(
    client: aiohttp.ClientSession, concurrency: int, seconds: float = 2.0, path: str = "/health"
) -> float:
    """Requests/s this generator reaches against a trivial endpoint: its own ceiling."""
    done = 0
    t0 = time.monotonic()

    async def worker() -> None:
        nonlocal done
        while time.monotonic() - t0 < seconds:
            async with client.get(path) as response:
                await response.read()
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.monotonic() - t0)
