"""The proxy app: /translate routed by language pair to the least-loaded healthy upstream,
retried elsewhere when an upstream cannot take it; /languages, /upstreams, /health, /ready
and /metrics of its own.

Bodies pass through as bytes: the proxy parses a request only to learn its language pair
and model, and never re-serialises requests or responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import tolk
from tolk.languages import InvalidLanguageCode, lang
from tolk.proxy.config import ProxyConfig
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.upstreams import Upstream, UpstreamPool
from tolk.server.errors import error_response, install_error_handlers
from tolk.server.lifecycle import wait_for_disconnect

log = logging.getLogger("tolk.proxy")

# Statuses an upstream answers when it cannot take a request now; another may.
RETRYABLE_CODES = {"overloaded", "shutting_down", "engine_unavailable"}
# Upstream response headers the client gets (lower-cased), besides the body.
PASSED_HEADERS = frozenset({"content-type", "retry-after", "x-request-id", "server-timing"})
CLIENT_CLOSED = 499


@dataclass(frozen=True)
class Route:
    source: str
    target: str
    model: str | None


def route_of(body: bytes) -> Route | None:
    """The language pair (normalised tags) and model of a translate body;
    None when the body is not a well-formed request (an upstream will say what is wrong)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    source, target, model = data.get("source_lang"), data.get("target_lang"), data.get("model")
    if not isinstance(source, str) or not isinstance(target, str):
        return None
    try:
        s, t = lang(source).tag, lang(target).tag
    except InvalidLanguageCode:
        return None
    return Route(s, t, model if isinstance(model, str) else None)


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
        self, upstream: Upstream, body: bytes, request_id: str, remaining: float
    ) -> Attempt:
        headers = {
            "Content-Type": "application/json",
            "X-Request-ID": request_id,
            # The upstream stops the work itself when the proxy's deadline passes.
            "X-Request-Timeout": f"{remaining:.3f}",
        }
        upstream.outstanding += 1
        upstream.breaker.attempt()
        started = time.perf_counter()
        responded = False
        try:
            async with self.session.post(
                f"{upstream.url}/translate",
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
        elif attempt.status == 503:
            code = attempt.error_code()
            retry = code in RETRYABLE_CODES
            if code == "shutting_down" and upstream.mark_down("answered 503 shutting_down"):
                self.metrics.ejections.labels(upstream.url, "shutting_down").inc()
            elif code == "overloaded":
                retry_after = _seconds((attempt.headers or {}).get("Retry-After"), default=1.0)
                upstream.cool(min(retry_after, 30.0))
                self.metrics.ejections.labels(upstream.url, "overloaded").inc()
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
        self, body: bytes, request_id: str, candidates: list[Upstream], deadline: float
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
            attempt = await self.attempt(upstream, body, request_id, remaining)
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


def _seconds(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def create_proxy_app(config: ProxyConfig) -> FastAPI:
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(
            limit=config.max_connections, limit_per_host=0, keepalive_timeout=60
        )
        # One pooled client for everything the proxy sends, with keep-alive.
        session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        pool = UpstreamPool(config, session)
        metrics = ProxyMetrics(pool)
        pool.listeners.append(_log_event(metrics))
        state.update(
            pool=pool, metrics=metrics, forwarder=Forwarder(config, pool, session, metrics)
        )
        app.state.pool, app.state.metrics = pool, metrics
        lang("en")  # load langcodes' data now, not on the first request
        await pool.start()
        log.info(
            "tolk proxy ready: %d upstream(s), %d healthy, pairs: %s",
            len(pool.upstreams),
            sum(u.up for u in pool.upstreams.values()),
            ", ".join(pool.served_pairs()) or "none yet",
        )
        try:
            yield
        finally:
            await pool.stop()
            await session.close()

    app = FastAPI(
        title="tolk proxy",
        version=tolk.__version__,
        summary="Routes translations to tolk servers by language pair, load and health",
        lifespan=lifespan,
    )
    install_error_handlers(app)

    @app.post("/translate", summary="Forwarded to an upstream serving the pair")
    async def translate(request: Request) -> Response:
        started = time.perf_counter()
        request_id: str = request.state.request_id
        metrics: ProxyMetrics = state["metrics"]
        response = await _translate(request, request_id, state, config)
        metrics.requests.labels("/translate", str(response.status_code)).inc()
        metrics.latency.labels("/translate").observe(time.perf_counter() - started)
        return response

    @app.get("/languages", summary="Every pair some upstream serves, by model")
    async def languages() -> JSONResponse:
        pool: UpstreamPool = state["pool"]
        models: dict[str, dict[str, Any]] = {}
        for upstream in pool.upstreams.values():
            for info in upstream.models.values():
                entry = models.setdefault(
                    info.name,
                    {
                        **info.raw,
                        "pairs": set(),
                        "languages": set(),
                        "ready": False,
                        "upstreams": [],
                    },
                )
                entry["pairs"] |= info.pairs
                entry["languages"] |= set(info.raw.get("languages", []))
                entry["ready"] = entry["ready"] or upstream.available()
                entry["upstreams"].append(upstream.url)
        return JSONResponse(
            {
                "models": [
                    {**m, "pairs": sorted(m["pairs"]), "languages": sorted(m["languages"])}
                    for m in models.values()
                ]
            }
        )

    @app.get("/upstreams", summary="Each upstream's pairs, health and load")
    async def upstreams() -> JSONResponse:
        pool: UpstreamPool = state["pool"]
        return JSONResponse({"upstreams": [u.describe() for u in pool.upstreams.values()]})

    @app.get("/health", summary="The proxy process is alive")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/ready", summary="At least one upstream is healthy")
    async def ready(request: Request) -> JSONResponse:
        pool: UpstreamPool = state["pool"]
        healthy = [u.url for u in pool.upstreams.values() if u.up]
        if not healthy:
            return error_response(
                503,
                "no_healthy_upstream",
                "no upstream tolk server is healthy; see /upstreams for each one's last error",
                retry_after=config.health.interval,
                upstreams={u.url: u.last_error for u in pool.upstreams.values()},
            )
        return JSONResponse({"status": "ready", "healthy_upstreams": healthy})

    @app.get("/metrics", summary="Prometheus metrics of the proxy")
    async def metrics_endpoint() -> Response:
        metrics: ProxyMetrics = state["metrics"]
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.state.translate = translate
    return app


def proxy_asgi(config: ProxyConfig) -> ASGIApp:
    """What uvicorn serves: request ids outermost, then the /translate fast path, then the
    FastAPI app with everything else and the lifespan."""
    return RequestId(FastPath(create_proxy_app(config)))


class FastPath:
    """POST /translate straight to its handler; everything else (and the lifespan) to the
    FastAPI app. Written by hand because the proxy's hot path is the one place where
    FastAPI's layers cost what the proxy is for: its middleware stack, routing and
    dependency handling were a quarter of the proxy's CPU per forwarded request (py-spy).
    The FastAPI route stays registered, for /docs and as the reference behaviour."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/translate" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request_id = scope["state"]["request_id"]  # set by RequestId, outside this
        request = Request(scope, receive, send)
        try:
            response = await self.app.state.translate(request)
        except Exception:
            log.exception("request %s failed unexpectedly", request_id)
            response = error_response(
                500,
                "internal_error",
                "the proxy failed to handle this request; it has been logged with the request id",
                request_id=request_id,
            )
        await response(scope, receive, send)


class RequestId:
    """X-Request-ID on every response: the client's own, or a new one (pure ASGI, so bodies
    stream through untouched). Upstreams get the same id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        request_id = given.decode("latin-1") if given else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"x-request-id" for k, _ in headers):
                    headers.append((b"x-request-id", request_id.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)


def _log_event(metrics: ProxyMetrics) -> Any:
    def listener(upstream: Upstream, event: str, detail: str) -> None:
        if event == "down":
            metrics.ejections.labels(upstream.url, "health_check").inc()
            log.warning("upstream %s is down: %s", upstream.url, detail)
        elif event == "up":
            log.info("upstream %s is up", upstream.url)
        else:
            log.info("upstream %s %s (%s)", upstream.url, event, detail)

    return listener


async def _translate(
    request: Request, request_id: str, state: dict[str, Any], config: ProxyConfig
) -> Response:
    pool: UpstreamPool = state["pool"]
    forwarder: Forwarder = state["forwarder"]
    metrics: ProxyMetrics = state["metrics"]
    started = time.perf_counter()
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
        return _too_large(config, request_id)
    body = await request.body()
    if len(body) > config.max_body_bytes:
        return _too_large(config, request_id)
    deadline = config.request_timeout
    asked = _seconds(request.headers.get("x-request-timeout"), default=math.inf)
    if 0 < asked < deadline:
        deadline = asked

    route = route_of(body)
    if route is None:
        candidates = list(pool.upstreams.values())  # any upstream can explain what is wrong
    else:
        candidates = pool.serving(route.source, route.target, route.model)
        if not candidates:
            return _unserved(pool, route, request_id)
    if not any(u.available() for u in candidates):
        return _none_healthy(config, candidates, route, request_id)

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
        final, waited, attempts = await forwarder.forward(body, request_id, candidates, deadline)
    except asyncio.CancelledError:
        if not left:
            raise
        handler.uncancel()  # our own cancellation, handled: the task goes on normally
        return Response(status_code=CLIENT_CLOSED)
    finally:
        watcher.cancel()
    if final is None:
        return _none_healthy(config, candidates, route, request_id)
    if final.failure is not None:
        return _failed(final, attempts, deadline, request_id)
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
    media = headers.pop("content-type", "application/json")
    return Response(final.body, status_code=final.status, headers=headers, media_type=media)


def _too_large(config: ProxyConfig, request_id: str) -> Response:
    return error_response(
        413,
        "payload_too_large",
        f"the request body is larger than the proxy's limit of {config.max_body_bytes} bytes; "
        "send fewer or shorter texts per request",
        request_id=request_id,
        limit=config.max_body_bytes,
    )


def _unserved(pool: UpstreamPool, route: Route, request_id: str) -> Response:
    if route.model is not None and route.model not in pool.served_models():
        return error_response(
            400,
            "unknown_model",
            f"no upstream serves a model named '{route.model}'; served models: "
            f"{', '.join(pool.served_models()) or 'none discovered yet'}",
            request_id=request_id,
            models=pool.served_models(),
        )
    scope = f"model '{route.model}'" if route.model else "any model"
    return error_response(
        400,
        "unsupported_language_pair",
        f"no upstream serves {route.source} to {route.target} with {scope}; see "
        "'served_pairs' (or GET /languages) for what is served",
        request_id=request_id,
        source_lang=route.source,
        target_lang=route.target,
        served_pairs=pool.served_pairs(),
    )


def _none_healthy(
    config: ProxyConfig, candidates: list[Upstream], route: Route | None, request_id: str
) -> Response:
    what = f"{route.source} to {route.target}" if route else "this request"
    return error_response(
        503,
        "no_healthy_upstream",
        f"{len(candidates)} upstream(s) serve {what}, but none is healthy or accepting "
        "requests right now; retry after the Retry-After seconds",
        request_id=request_id,
        retry_after=config.health.interval * config.health.rise,
        upstreams=[
            {
                "url": u.url,
                "healthy": u.up,
                "circuit": u.breaker.state.value,
                "last_error": u.last_error,
            }
            for u in candidates
        ],
    )


def _failed(final: Attempt, attempts: list[Attempt], deadline: float, request_id: str) -> Response:
    tried = [
        {"upstream": a.upstream.url, "failure": a.failure or str(a.status), "detail": a.detail}
        for a in attempts
    ]
    if final.failure == "timeout":
        return error_response(
            504,
            "deadline_exceeded",
            f"no upstream answered within the {deadline:g} s deadline; retry later or allow "
            "a longer X-Request-Timeout",
            request_id=request_id,
            deadline=deadline,
            attempts=tried,
        )
    return error_response(
        502,
        "upstream_unavailable",
        f"{len(attempts)} attempt(s) on upstreams failed ({final.failure}: {final.detail}); "
        "retry later",
        request_id=request_id,
        attempts=tried,
    )
