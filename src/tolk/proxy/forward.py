"""Forwarding one request: to the least-loaded healthy upstream for its route, retried on
another when one cannot take it (its status or error code says so), each attempt accounted
to its upstream; the answer streamed back with the headers clients need."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from fastapi import Request, Response

from tolk.proxy.config import ProxyConfig
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.refusals import failed, none_healthy, overloaded, too_large, unserved
from tolk.proxy.routing import (
    TRANSLATE,
    Target,
    hold_sticky,
    multipart_fields,
    route_of,
    route_of_fields,
)
from tolk.proxy.upstream import Upstream
from tolk.proxy.upstreams import UpstreamPool
from tolk.wire.asgi import CLIENT_CLOSED, wait_for_disconnect
from tolk.wire.endpoints import (
    CORS,
    FILE_PATHS,
    STICKY,
    api_of_path,
    is_libretranslate,
)
from tolk.wire.errors import ERROR_CODE_HEADER, Api

log = logging.getLogger("tolk.proxy")

# Statuses an upstream answers when it cannot take a request now; another may.
RETRYABLE_CODES = {"overloaded", "shutting_down", "engine_unavailable", "engine_restarting"}
# Codes after which the upstream gets nothing new for its Retry-After (capped at 30 s).
COOLING_CODES = {"overloaded", "engine_restarting"}
# Upstream response headers the client gets (lower-cased), besides the body.
PASSED_HEADERS = frozenset(
    {
        "content-type",
        "content-disposition",
        "retry-after",
        "x-request-id",
        "server-timing",
        "x-tolk-error-code",
        "x-tolk-segments",
        "x-tolk-detected-source-lang",
        *(name.decode() for name, _ in CORS),
    }
)


# Request headers a forwarded request keeps (besides the body).
FORWARDED_HEADERS = frozenset({"content-type", "authorization", "accept", "x-api-key"})


@dataclass
class Attempt:
    """What one try at an upstream produced: a response, or a failure before one."""

    upstream: Upstream
    seconds: float
    status: int = 0
    body: bytes = b""
    headers: dict[str, str] | None = None
    failure: str | None = None  # connect | reset | timeout
    detail: str = ""

    def error_code(self) -> str | None:
        """The upstream's error code: its header (any API's error), else the body's."""
        if self.headers and ERROR_CODE_HEADER.lower() in self.headers:
            return self.headers[ERROR_CODE_HEADER.lower()]
        try:
            error = json.loads(self.body).get("error")
        except (ValueError, AttributeError):
            return None
        return str(error.get("code")) if isinstance(error, dict) else None


class Forwarder:
    def __init__(
        self,
        config: ProxyConfig,
        pool: UpstreamPool,
        session: aiohttp.ClientSession,
        metrics: ProxyMetrics,
    ) -> None:
        self.config = config
        self.pool = pool
        self.session = session
        self.metrics = metrics

    async def attempt(
        self,
        upstream: Upstream,
        body: bytes,
        request_id: str,
        remaining: float,
        target: Target = TRANSLATE,
    ) -> Attempt:
        headers = {
            **dict(target.headers),
            "X-Request-ID": request_id,
            # The upstream stops the work itself when the proxy's deadline passes.
            "X-Request-Timeout": f"{remaining:.3f}",
        }
        upstream.outstanding += 1
        upstream.breaker.attempt()
        started = time.perf_counter()
        responded = False
        try:
            async with self.session.request(
                target.method,
                f"{upstream.url}{target.path}",
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=remaining),
            ) as response:
                responded = True
                payload = await response.read()
                return Attempt(
                    upstream,
                    time.perf_counter() - started,
                    response.status,
                    payload,
                    {
                        k.lower(): v
                        for k, v in response.headers.items()
                        if k.lower() in PASSED_HEADERS
                    },
                )
        except asyncio.CancelledError:
            upstream.breaker.abandon()
            raise
        except TimeoutError:
            return Attempt(upstream, time.perf_counter() - started, failure="timeout")
        except aiohttp.ClientConnectorError as exc:
            return Attempt(
                upstream, time.perf_counter() - started, failure="connect", detail=str(exc)
            )
        except (aiohttp.ClientError, OSError) as exc:
            # A reset before any response is safe to retry (translations are idempotent);
            # one in the middle of a response is not retried: the upstream did the work.
            kind = "reset" if not responded else "broken_response"
            return Attempt(
                upstream,
                time.perf_counter() - started,
                failure=kind,
                detail=f"{type(exc).__name__}: {exc}",
            )
        finally:
            upstream.outstanding -= 1

    def judge(self, attempt: Attempt) -> bool:
        """Feed the attempt to the upstream's health state; True if another upstream should
        be tried."""
        upstream = attempt.upstream
        outcome = attempt.failure or str(attempt.status)
        self.metrics.upstream_requests.labels(upstream.url, outcome).inc()
        self.metrics.upstream_latency.labels(upstream.url).observe(attempt.seconds)
        retry = False
        if attempt.failure is not None:
            retry = attempt.failure in ("connect", "reset")
            failed = True
        elif attempt.status in (503, 429) and attempt.error_code() != "rate_limited":
            # 429: the drop-in APIs' overload (their clients retry 429, not 503).
            code = attempt.error_code()
            retry = code in RETRYABLE_CODES
            if code == "shutting_down" and upstream.mark_down("answered 503 shutting_down"):
                self.metrics.ejections.labels(upstream.url, "shutting_down").inc()
            elif code in COOLING_CODES:
                retry_after = seconds_of((attempt.headers or {}).get("retry-after"), default=1.0)
                upstream.cool(min(retry_after, 30.0))
                self.metrics.ejections.labels(upstream.url, code).inc()
            failed = True
        else:
            failed = attempt.status >= 500
        if failed:
            if upstream.breaker.failure():
                self.metrics.ejections.labels(upstream.url, "circuit_open").inc()
                log.warning("circuit open for %s after %s", upstream.url, outcome)
        else:
            upstream.breaker.success()
        return retry

    async def forward(
        self,
        body: bytes,
        request_id: str,
        candidates: list[Upstream],
        deadline: float,
        target: Target = TRANSLATE,
    ) -> tuple[Attempt | None, float, list[Attempt]]:
        """Try candidates until one answers for good, attempts run out, or the deadline
        passes. Returns the final attempt (None if none could be made), the seconds spent
        waiting on upstreams, and every attempt."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        tried: set[str] = set()
        attempts: list[Attempt] = []
        retries = self.config.retries
        for number in range(retries.attempts):
            upstream = self.pool.pick(candidates, tried) or self.pool.pick(candidates, set())
            if upstream is None:
                break
            remaining = end - loop.time()
            if remaining <= 0:
                break
            tried.add(upstream.url)
            attempt = await self.attempt(upstream, body, request_id, remaining, target)
            attempts.append(attempt)
            if not self.judge(attempt):
                break
            if number + 1 < retries.attempts:
                reason = attempt.failure or attempt.error_code() or str(attempt.status)
                self.metrics.retries.labels(reason).inc()
                pause = retries.backoff * 2**number * self.pool.rng.uniform(0.5, 1.5)
                await asyncio.sleep(max(0.0, min(pause, end - loop.time())))
        waited = sum(a.seconds for a in attempts)
        return (attempts[-1] if attempts else None), waited, attempts


def seconds_of(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


async def forward(
    request: Request, request_id: str, state: dict[str, Any], config: ProxyConfig
) -> Response:
    """Forward a request to an upstream: a translation (any API) to one serving its pair,
    a document's later calls to the upstream that has it, anything else to any upstream;
    retried elsewhere when an upstream cannot take it."""
    pool: UpstreamPool = state["pool"]
    forwarder: Forwarder = state["forwarder"]
    metrics: ProxyMetrics = state["metrics"]
    sticky: OrderedDict[str, str] = state["sticky"]
    started = time.perf_counter()
    path = request.url.path
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";")[0].strip().lower()
    query = request.url.query
    api: Api | None = api_of_path(path)
    limit = config.max_file_bytes if path in FILE_PATHS else config.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large(limit, request_id, api or "tolk")
    body = await request.body()
    if api is None:  # tolk's and LibreTranslate's shared paths: the request tells
        has_q = "q" in parse_qs(query)
        api = "libretranslate" if is_libretranslate(media.encode(), has_q, body) else "tolk"
    assert api is not None
    if len(body) > limit:
        return too_large(limit, request_id, api)
    deadline = config.request_timeout
    asked = seconds_of(request.headers.get("x-request-timeout"), default=math.inf)
    if 0 < asked < deadline:
        deadline = asked

    if path == "/translate" and request.method == "POST" and api == "tolk":
        route = route_of(body)  # the hot path: tolk's JSON
    elif media == "multipart/form-data":
        route = route_of_fields(
            {k: v for k, v in parse_qs(query).items()} | await multipart_fields(body, content_type)
        )
    else:
        route = route_of(body, media, query) if request.method == "POST" else None
    held = STICKY.match(path)
    if held and held[1].upper() in sticky:
        url = sticky[held[1].upper()]
        candidates = [pool.upstreams[url]] if url in pool.upstreams else []
    elif route is None:
        candidates = list(pool.upstreams.values())  # any upstream can answer (or explain)
    else:
        candidates = pool.serving(route.source, route.target, route.model)
        if not candidates:
            return unserved(pool, route, request_id, api)
    if not any(u.accepting() for u in candidates):
        if any(u.busy() for u in candidates):
            return overloaded(candidates, route, request_id, api)
        return none_healthy(config, candidates, route, request_id, api)
    target = TRANSLATE
    if api != "tolk" or path != "/translate":
        target = Target(
            request.method,
            f"{path}?{query}" if query else path,
            tuple((k, v) for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS),
        )

    # If the client leaves, the forwarding is cancelled where it stands: dropping the
    # upstream connection makes the upstream abort the work. One watcher task, no second
    # task for the work itself: this is the hot path.
    handler = asyncio.current_task()
    assert handler is not None
    left = False

    async def watch() -> None:
        nonlocal left
        await wait_for_disconnect(request)
        left = True
        handler.cancel()

    watcher = asyncio.create_task(watch())
    try:
        final, waited, attempts = await forwarder.forward(
            body, request_id, candidates, deadline, target
        )
    except asyncio.CancelledError:
        if not left:
            raise
        handler.uncancel()  # our own cancellation, handled: the task goes on normally
        return Response(status_code=CLIENT_CLOSED)
    finally:
        watcher.cancel()
    if final is None:
        return none_healthy(config, candidates, route, request_id, api)
    if final.failure is not None:
        return failed(final, attempts, deadline, request_id, api)
    added = max(0.0, time.perf_counter() - started - waited)
    metrics.added.observe(added)
    headers = dict(final.headers or {})
    timing = headers.pop("server-timing", "")
    timing = ", ".join(
        t
        for t in (
            timing,
            f"upstream;dur={final.seconds * 1000:.3f}",
            f"proxy;dur={added * 1000:.3f}",
        )
        if t
    )
    headers["server-timing"] = timing
    headers["x-tolk-upstream"] = final.upstream.url
    media_out = headers.pop("content-type", "application/json")
    payload = final.body
    if final.status == 200 and path in ("/v2/document", "/translate_file"):
        payload = hold_sticky(payload, final.upstream.url, sticky, str(request.base_url))
    return Response(payload, status_code=final.status, headers=headers, media_type=media_out)
