"""The proxy app: /translate routed by language pair to the least-loaded healthy upstream,
retried elsewhere when an upstream cannot take it; /languages, /upstreams, /health, /ready
and /metrics of its own.

Bodies pass through as bytes: the proxy parses a request only to learn its language pair
and model, and never re-serialises requests or responses.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import tolk
from tolk.languages import lang
from tolk.proxy.attempts import Forwarder
from tolk.proxy.config import ProxyConfig
from tolk.proxy.forward import ProxyState, forward
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.upstream import Upstream
from tolk.proxy.upstreams import UpstreamPool
from tolk.wire.asgi import request_id_for
from tolk.wire.endpoints import served_by_upstreams
from tolk.wire.errors import error_response, install_error_handlers

log = logging.getLogger("tolk.proxy")


def create_proxy_app(config: ProxyConfig) -> FastAPI:
    """The proxy's FastAPI app: its lifespan holds the upstream pool and one pooled HTTP
    client (ProxyState, at app.state.proxy); forwarded routes and the proxy's own."""

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
        forwarder = Forwarder(config, pool, session, metrics)
        app.state.proxy = ProxyState(config, pool, forwarder, metrics, OrderedDict())
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
    _own_routes(app, config)  # before the forwarding routes' catch-all
    app.state.translate = _forwarding_routes(app)
    return app


async def _forwarded(app: FastAPI, request: Request, label: str) -> Response:
    """Forward, and count the request and its latency under `label`. (`app` is passed, not
    read from the request: FastPath's requests never went through FastAPI.)"""
    started = time.perf_counter()
    state: ProxyState = app.state.proxy
    response = await forward(request, request.state.request_id, state)
    state.metrics.requests.labels(label, str(response.status_code)).inc()
    state.metrics.latency.labels(label).observe(time.perf_counter() - started)
    return response


def _forwarding_routes(app: FastAPI) -> Callable[[Request], Awaitable[Response]]:
    """/translate and every other path the servers answer; returns /translate's handler
    (FastPath calls it directly)."""

    @app.post("/translate", summary="Forwarded to an upstream serving the pair")
    async def translate(request: Request) -> Response:
        return await _forwarded(app, request, "/translate")

    @app.api_route(
        "/{path:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
        include_in_schema=False,
    )
    async def forwarded(request: Request, path: str) -> Response:
        """Everything else the servers answer: DeepL's /v2/..., LibreTranslate's paths,
        /detect, /translate/file, the web page; routed like /translate when it names a pair."""
        if not served_by_upstreams(request.url.path):
            raise StarletteHTTPException(404)
        return await _forwarded(app, request, "/" + path.split("/", 1)[0])

    return translate


def models_served(pool: UpstreamPool) -> list[dict[str, Any]]:
    """Every model some upstream serves: its pairs and languages across upstreams, whether
    any of them can take work, and which upstreams have it."""
    models: dict[str, dict[str, Any]] = {}
    for upstream in pool.upstreams.values():
        for info in upstream.models.values():
            entry = models.setdefault(
                info.name,
                {**info.raw, "pairs": set(), "languages": set(), "ready": False, "upstreams": []},
            )
            entry["pairs"] |= info.pairs
            entry["languages"] |= set(info.raw.get("languages", []))
            entry["ready"] = entry["ready"] or upstream.available()
            entry["upstreams"].append(upstream.url)
    return [
        {**m, "pairs": sorted(m["pairs"]), "languages": sorted(m["languages"])}
        for m in models.values()
    ]


def _own_routes(app: FastAPI, config: ProxyConfig) -> None:
    """/models, /upstreams, /health, /ready and /metrics: answered by the proxy itself."""

    @app.get("/models", summary="Every pair some upstream serves, by model")
    async def languages(request: Request) -> JSONResponse:
        return JSONResponse({"models": models_served(request.app.state.proxy.pool)})

    @app.get("/upstreams", summary="Each upstream's pairs, health and load")
    async def upstreams(request: Request) -> JSONResponse:
        pool: UpstreamPool = request.app.state.proxy.pool
        return JSONResponse({"upstreams": [u.describe() for u in pool.upstreams.values()]})

    @app.get("/health", summary="The proxy process is alive")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/ready", summary="At least one upstream is healthy")
    async def ready(request: Request) -> JSONResponse:
        pool: UpstreamPool = request.app.state.proxy.pool
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
    async def metrics_endpoint(request: Request) -> Response:
        metrics: ProxyMetrics = request.app.state.proxy.metrics
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


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
        request_id = request_id_for(scope)
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
