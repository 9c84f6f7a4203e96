"""Forwarding one request: read it, find its route and the upstreams that may answer, try
them (tolk.proxy.attempts) while watching for the client leaving, and answer with the
headers clients need."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import parse_qs

from fastapi import Request, Response

from tolk.proxy.attempts import FORWARDED_HEADERS, Attempt, Forwarder, seconds_of
from tolk.proxy.config import ProxyConfig
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.refusals import failed, none_healthy, overloaded, too_large, unserved
from tolk.proxy.routing import (
    TRANSLATE,
    Route,
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
    DOCUMENT_UPLOADS,
    STICKY,
    api_of_path,
    is_libretranslate,
    takes_large_bodies,
)
from tolk.wire.errors import Api, error_response


@dataclass
class ProxyState:
    """What the proxy holds while it runs: made by its lifespan, read by every request."""

    config: ProxyConfig
    pool: UpstreamPool
    forwarder: Forwarder
    metrics: ProxyMetrics
    # Documents' ids -> the upstream holding them (their later calls must go there).
    sticky: OrderedDict[str, str]


@dataclass(frozen=True)
class Incoming:
    """A request as the proxy reads it: its API, body, media type, query and deadline."""

    api: Api
    body: bytes
    media: str
    content_type: str
    query: str
    deadline: float
    clients_deadline: bool = False  # the client's X-Request-Timeout, shorter than the proxy's


async def read_incoming(
    request: Request, request_id: str, config: ProxyConfig
) -> Incoming | Response:
    """The request's body and what routing needs, or the refusal of a body over the limit
    (refused by its Content-Length before it is read when it declares one)."""
    path = request.url.path
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";")[0].strip().lower()
    query = request.url.query
    api: Api | None = api_of_path(path)
    limit = config.max_file_bytes if takes_large_bodies(path) else config.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return too_large(limit, request_id, api or "tolk")
    # Read as it comes, never past the limit (a chunked body declares no length: 20 MB was
    # taken whole before the 413), and within body_timeout (a client sending a byte at a
    # time, or stopping half-way, held a connection for ever).
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(config.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    refusal = too_large(limit, request_id, api or "tolk")
                    refusal.headers["Connection"] = "close"  # the rest is not read
                    return refusal
                chunks.append(chunk)
    except TimeoutError:
        return error_response(
            408,
            "request_timeout",
            f"the request body did not arrive within {config.body_timeout:g} s; send it whole",
            request_id=request_id,
            headers={"Connection": "close"},
            api=api or "tolk",
        )
    body = b"".join(chunks)
    if api is None:  # tolk's and LibreTranslate's shared paths: the request tells
        has_q = "q" in parse_qs(query)
        api = "libretranslate" if is_libretranslate(media.encode(), has_q, body) else "tolk"
    if len(body) > limit:
        return too_large(limit, request_id, api)
    deadline = config.request_timeout
    asked = seconds_of(request.headers.get("x-request-timeout"), default=math.inf)
    clients = 0 < asked < deadline
    if clients:
        deadline = asked
    return Incoming(api, body, media, content_type, query, deadline, clients)


async def route_of_request(request: Request, incoming: Incoming) -> Route | None:
    """The request's language pair and model, from whichever body or query it came in."""
    if request.url.path == "/translate" and request.method == "POST" and incoming.api == "tolk":
        return route_of(incoming.body)  # the hot path: tolk's JSON
    if incoming.media == "multipart/form-data":
        fields = dict(parse_qs(incoming.query))
        fields |= await multipart_fields(incoming.body, incoming.content_type)
        return route_of_fields(fields)
    if request.method == "POST":
        return route_of(incoming.body, incoming.media, incoming.query)
    return None


def candidates_for(
    state: ProxyState, path: str, route: Route | None, request_id: str, api: Api
) -> list[Upstream] | Response:
    """The upstreams that may answer, or the refusal when none can now."""
    pool = state.pool
    held = STICKY.match(path)
    if held and held[1].upper() in state.sticky:
        url = state.sticky[held[1].upper()]
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
        return none_healthy(state.config, candidates, route, request_id, api)
    return candidates


async def forward(request: Request, request_id: str, state: ProxyState) -> Response:
    """Forward a request to an upstream: a translation (any API) to one serving its pair,
    a document's later calls to the upstream that has it, anything else to any upstream;
    retried elsewhere when an upstream cannot take it."""
    started = time.perf_counter()
    incoming = await read_incoming(request, request_id, state.config)
    if isinstance(incoming, Response):
        return incoming
    path, api = request.url.path, incoming.api
    route = await route_of_request(request, incoming)
    candidates = candidates_for(state, path, route, request_id, api)
    if isinstance(candidates, Response):
        return candidates
    passed = tuple((k, v) for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS)
    # tolk's /translate keeps its JSON content type and the caller's key and cache directive.
    target = dataclasses.replace(
        TRANSLATE,
        headers=(*TRANSLATE.headers, *((k, v) for k, v in passed if k.lower() != "content-type")),
    )
    if api != "tolk" or path != "/translate":
        query = incoming.query
        target = Target(request.method, f"{path}?{query}" if query else path, passed)
    tried = await forward_watched(
        request, state.forwarder, incoming, request_id, candidates, target
    )
    if isinstance(tried, Response):
        return tried
    final, waited, attempts = tried
    if final is None:
        return none_healthy(state.config, candidates, route, request_id, api)
    if final.failure is not None:
        return failed(final, attempts, incoming.deadline, request_id, api)
    added = max(0.0, time.perf_counter() - started - waited)
    state.metrics.added.observe(added)
    payload = final.body
    if final.status == 200 and path in DOCUMENT_UPLOADS:
        payload = hold_sticky(payload, final.upstream.url, state.sticky, str(request.base_url))
    return answer(final, payload, added)


async def forward_watched(
    request: Request,
    forwarder: Forwarder,
    incoming: Incoming,
    request_id: str,
    candidates: list[Upstream],
    target: Target,
) -> tuple[Attempt | None, float, list[Attempt]] | Response:
    """Forwarder.forward, cancelled where it stands if the client leaves (499): dropping
    the upstream connection makes the upstream abort the work. One watcher task, no second
    task for the work itself: this is the hot path."""
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
        return await forwarder.forward(
            incoming.body, request_id, candidates, incoming.deadline, target,
            incoming.clients_deadline,
        )  # fmt: skip
    except asyncio.CancelledError:
        if not left:
            raise
        handler.uncancel()  # our own cancellation, handled: the task goes on normally
        return Response(status_code=CLIENT_CLOSED)
    finally:
        watcher.cancel()


def answer(final: Attempt, payload: bytes, added: float) -> Response:
    """The upstream's answer with the headers clients need: Server-Timing (the upstream's
    own, its time as the proxy saw it, the proxy's), and which upstream answered."""
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
    return Response(payload, status_code=final.status, headers=headers, media_type=media_out)
