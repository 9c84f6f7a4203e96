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
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import tolk
from tolk.errors import InvalidLanguage
from tolk.languages import lang, request_lang
from tolk.proxy.config import ProxyConfig
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.upstreams import Upstream, UpstreamPool
from tolk.wire.asgi import CLIENT_CLOSED, wait_for_disconnect
from tolk.wire.asgi import request_id as request_id_for
from tolk.wire.codes import from_libretranslate
from tolk.wire.endpoints import (
    CORS,
    FILE_PATHS,
    LIBRETRANSLATE_PATHS,
    LIBRETRANSLATE_PREFIX,
    SHARED_PATHS,
    api_of_path,
    is_libretranslate,
)
from tolk.wire.errors import ERROR_CODE_HEADER, Api, error_response, install_error_handlers

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


@dataclass(frozen=True)
class Route:
    source: str | None  # None: the upstream detects it ("auto", or not given)
    target: str
    model: str | None


@dataclass(frozen=True)
class Target:
    """Where an attempt goes on the upstream, and the request headers passed on."""

    method: str = "POST"
    path: str = "/translate"  # with the query string, if any
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


TRANSLATE = Target()
# Request headers a forwarded request keeps (besides the body).
FORWARDED_HEADERS = frozenset({"content-type", "authorization", "accept", "x-api-key"})


def _fields(body: bytes, media: str, query: str) -> dict[str, Any] | None:
    """A request's parameters, as the server reads them: a JSON object, or a urlencoded
    form (multipart is parsed by `_multipart_fields`), then the query string."""
    fields: dict[str, Any] = {k: v[0] for k, v in parse_qs(query).items()}
    if media == "application/x-www-form-urlencoded":
        fields |= {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        return fields
    if not body.strip():
        return fields
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return {**fields, **data} if isinstance(data, dict) else None


def route_of(body: bytes, media: str = "application/json", query: str = "") -> Route | None:
    """The language pair (normalised tags) and model of a translate body of any of the
    three APIs (tolk and DeepL: source_lang/target_lang; LibreTranslate: source/target);
    None when it is not a well-formed request (an upstream will say what is wrong)."""
    data = _fields(body, media, query)
    return None if data is None else _route(data)


def _route(data: dict[str, Any]) -> Route | None:
    source = data.get("source_lang", data.get("source"))
    target = data.get("target_lang", data.get("target"))
    model = data.get("model")
    if not isinstance(target, str) or not (source is None or isinstance(source, str)):
        return None
    # LibreTranslate's fields take its aliases (zh, zt, pb, iw, no), as the server reads them.
    read = from_libretranslate if "target_lang" not in data else request_lang
    try:
        s = None
        if source is not None and source.strip().lower() not in ("", "auto"):
            s = read(source, "source").tag
        t = read(target, "target").tag
    except InvalidLanguage:
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
                retry_after = _seconds((attempt.headers or {}).get("retry-after"), default=1.0)
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
            pool=pool,
            metrics=metrics,
            forwarder=Forwarder(config, pool, session, metrics),
            sticky=OrderedDict(),
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
        response = await _forward(request, request_id, state, config)
        metrics.requests.labels("/translate", str(response.status_code)).inc()
        metrics.latency.labels("/translate").observe(time.perf_counter() - started)
        return response

    @app.get("/models", summary="Every pair some upstream serves, by model")
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

    @app.api_route(
        "/{path:path}", methods=["GET", "POST", "DELETE", "OPTIONS"], include_in_schema=False
    )
    async def forwarded(request: Request, path: str) -> Response:
        """Everything else the servers answer: DeepL's /v2/..., LibreTranslate's paths,
        /detect, /translate/file, the web page; routed like /translate when it names a pair."""
        if not _served_by_upstreams(request.url.path):
            raise StarletteHTTPException(404)
        started = time.perf_counter()
        metrics: ProxyMetrics = state["metrics"]
        response = await _forward(request, request.state.request_id, state, config)
        label = "/" + path.split("/", 1)[0]
        metrics.requests.labels(label, str(response.status_code)).inc()
        metrics.latency.labels(label).observe(time.perf_counter() - started)
        return response

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


UPSTREAM_PATHS = frozenset(
    {"/", "/detect", "/translate/file", *SHARED_PATHS, *LIBRETRANSLATE_PATHS}
)
UPSTREAM_PREFIXES = ("/v2/", "/download_file/", "/static/", LIBRETRANSLATE_PREFIX + "/")


def _served_by_upstreams(path: str) -> bool:
    """Paths the servers answer and the proxy forwards (anything else is the proxy's 404)."""
    return path in UPSTREAM_PATHS or path.startswith(UPSTREAM_PREFIXES)


STICKY = re.compile(r"^/(?:v2/document/|download_file/)([0-9A-Fa-f]+)")
MAX_STICKY = 10_000


async def _multipart_fields(body: bytes, content_type: str) -> dict[str, Any]:
    """A multipart body's text fields (the file parts are not needed to route)."""

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", content_type.encode())],
    }
    form = await Request(scope, receive).form()
    return {k: v for k, v in form.multi_items() if isinstance(v, str)}


async def _forward(
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
        return _too_large(limit, request_id, api or "tolk")
    body = await request.body()
    if api is None:  # tolk's and LibreTranslate's shared paths: the request tells
        has_q = "q" in parse_qs(query)
        api = "libretranslate" if is_libretranslate(media.encode(), has_q, body) else "tolk"
    assert api is not None
    if len(body) > limit:
        return _too_large(limit, request_id, api)
    deadline = config.request_timeout
    asked = _seconds(request.headers.get("x-request-timeout"), default=math.inf)
    if 0 < asked < deadline:
        deadline = asked

    if path == "/translate" and request.method == "POST" and api == "tolk":
        route = route_of(body)  # the hot path: tolk's JSON
    elif media == "multipart/form-data":
        route = _route(
            {k: v for k, v in parse_qs(query).items()} | await _multipart_fields(body, content_type)
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
            return _unserved(pool, route, request_id, api)
    if not any(u.accepting() for u in candidates):
        if any(u.busy() for u in candidates):
            return _overloaded(candidates, route, request_id, api)
        return _none_healthy(config, candidates, route, request_id, api)
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
        return _none_healthy(config, candidates, route, request_id, api)
    if final.failure is not None:
        return _failed(final, attempts, deadline, request_id, api)
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
        payload = _hold(payload, final.upstream.url, sticky, str(request.base_url))
    return Response(payload, status_code=final.status, headers=headers, media_type=media_out)


def _hold(payload: bytes, upstream: str, sticky: OrderedDict[str, str], base_url: str) -> bytes:
    """A document stays on the upstream that made it: remember which, and give the client
    LibreTranslate's download URL through the proxy."""
    try:
        data = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(data, dict):
        return payload
    url = data.get("translatedFileUrl")
    doc_id = data.get("document_id")
    if isinstance(url, str):
        name = url.rsplit("/download_file/", 1)[-1]
        doc_id = name.split(".", 1)[0]
        data["translatedFileUrl"] = f"{base_url.rstrip('/')}/download_file/{name}"
        payload = json.dumps(data).encode()
    if isinstance(doc_id, str):
        sticky[doc_id.upper()] = upstream
        while len(sticky) > MAX_STICKY:
            sticky.popitem(last=False)
    return payload


def _too_large(limit: int, request_id: str, api: Api) -> Response:
    return error_response(
        413,
        "payload_too_large",
        f"the request body is larger than the proxy's limit of {limit} bytes; "
        "send fewer or shorter texts (or a smaller file) per request",
        request_id=request_id,
        limit=limit,
        api=api,
    )


def _unserved(pool: UpstreamPool, route: Route, request_id: str, api: Api) -> Response:
    if route.model is not None and route.model not in pool.served_models():
        return error_response(
            400,
            "unknown_model",
            f"no upstream serves a model named '{route.model}'; served models: "
            f"{', '.join(pool.served_models()) or 'none discovered yet'}",
            request_id=request_id,
            models=pool.served_models(),
            api=api,
        )
    scope = f"model '{route.model}'" if route.model else "any model"
    return error_response(
        400,
        "unsupported_language_pair",
        f"no upstream serves {route.source or 'any language'} to {route.target} with {scope}; "
        "see 'served_pairs' (or GET /models) for what is served",
        request_id=request_id,
        api=api,
        source_lang=route.source,
        target_lang=route.target,
        served_pairs=pool.served_pairs(),
    )


def _overloaded(
    candidates: list[Upstream], route: Route | None, request_id: str, api: Api
) -> Response:
    """Every healthy upstream for the request is full (this proxy's own requests there reach
    its capacity) or cooling after answering 503 overloaded: refused here, on sight, as
    the servers themselves would refuse it, instead of a round trip to be refused there."""
    what = f"{route.source or 'any language'} to {route.target}" if route else "this request"
    busy = [u for u in candidates if u.busy()]
    cooling = [u.cooling_until - u.clock() for u in busy if not u.full()]
    return error_response(
        503,
        "overloaded",
        f"all {len(busy)} upstream(s) serving {what} are at capacity; retry after the "
        "Retry-After seconds",
        request_id=request_id,
        api=api,
        retry_after=max(1.0, min(cooling, default=1.0)),
        upstreams=[
            {"url": u.url, "outstanding": u.outstanding, "capacity": u.capacity} for u in busy
        ],
    )


def _none_healthy(
    config: ProxyConfig,
    candidates: list[Upstream],
    route: Route | None,
    request_id: str,
    api: Api = "tolk",
) -> Response:
    what = f"{route.source or 'any language'} to {route.target}" if route else "this request"
    return error_response(
        503,
        "no_healthy_upstream",
        f"{len(candidates)} upstream(s) serve {what}, but none is healthy or accepting "
        "requests right now; retry after the Retry-After seconds",
        request_id=request_id,
        api=api,
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


def _failed(
    final: Attempt, attempts: list[Attempt], deadline: float, request_id: str, api: Api
) -> Response:
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
            api=api,
        )
    return error_response(
        502,
        "upstream_unavailable",
        f"{len(attempts)} attempt(s) on upstreams failed ({final.failure}: {final.detail}); "
        "retry later",
        request_id=request_id,
        attempts=tried,
        api=api,
    )
