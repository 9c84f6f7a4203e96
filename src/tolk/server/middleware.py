"""Pure-ASGI middleware, outermost first: request accounting, then the body-size limit.

Pure ASGI rather than Starlette's BaseHTTPMiddleware so that the body streams through
untouched and a client disconnect still reaches the handler as `http.disconnect`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tolk.engine.timing import CLOCK, RequestClock
from tolk.server.metrics import ServiceMetrics
from tolk.wire.asgi import CLIENT_CLOSED, header, request_id_for
from tolk.wire.endpoints import TRANSLATING_PATHS, takes_large_bodies
from tolk.wire.errors import api_of, error_response


class RequestAccounting:
    """Request id (X-Request-ID, taken from the client or made), metrics per route and status,
    and the /translate overhead (handler time not spent waiting on the engine)."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_for(scope)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = CLIENT_CLOSED
        route_label = "unmatched"

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        in_flight = self.metrics.in_flight
        in_flight.inc()
        # Where its time goes, for its Server-Timing (tolk.engine.timing; the handler and
        # the tasks it starts share this context).
        token = CLOCK.set(RequestClock())
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            status = 500
            raise
        finally:
            CLOCK.reset(token)
            in_flight.dec()
            route = scope.get("route")
            route_label = getattr(route, "path", state.get("route_path", route_label))
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(route_label, str(status)).inc()
            self.metrics.latency.labels(route_label).observe(elapsed)
            engine_seconds = state.get("engine_seconds")
            if engine_seconds is not None and status == 200:
                self.metrics.overhead.labels(state["model"]).observe(
                    max(0.0, elapsed - engine_seconds)
                )


# The requests that translate (each API's), which a server at capacity refuses on sight.
class Shedding:
    """The cheapest refusal: while the server holds as many requests as it admits
    (ModelPool.shed's count), a new translation request is answered 503 `overloaded` here,
    before its body is parsed, validated or routed; under a burst most of the excess is
    refused at a fraction of a millisecond each. The count itself, and the exact per-model
    admission, stay in the gateway (tolk.server.gateway), which every API's handler goes through.
    Inside ApiDispatch, so that each API's clients get their own error shape."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] in TRANSLATING_PATHS
        ):
            pool = getattr(scope["app"].state, "pool", None)
            if pool is not None and pool.full:
                scope["state"]["route_path"] = scope["path"]  # the route label of its metrics
                exc = pool.overloaded()
                self.metrics.rejections.labels(str(exc.details["model"])).inc()
                refusal = error_response(
                    exc.status,
                    exc.code,
                    exc.message,
                    request_id=scope.get("state", {}).get("request_id"),
                    retry_after=exc.retry_after,
                    api=api_of(scope),
                    **exc.details,
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def answer_failure(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    failure: type[StarletteHTTPException],
    answer: Callable[[Any], ASGIApp],
    app_receive: Receive,
) -> None:
    """Run `app` reading through `app_receive`; a `failure` it raises before its response
    has started is answered with `answer(exc)` (after that, the client has a response under
    way and keeps it)."""
    started = False

    async def tracking_send(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await app(scope, app_receive, tracking_send)
    except failure as exc:
        if not started:
            await answer(exc)(scope, receive, send)


class BodySizeLimit:
    """Refuse bodies over `max_bytes` with 413: by Content-Length before reading anything,
    and for chunked bodies as soon as the running total passes the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int, large_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.large_bytes = large_bytes  # for files and glossaries (takes_large_bodies)

    def _too_large(self, scope: Scope, limit: int) -> Any:
        return error_response(
            413,
            "payload_too_large",
            f"the request body is larger than this server's limit of {limit} bytes; "
            "send fewer or shorter texts (or a smaller file) per request",
            request_id=scope.get("state", {}).get("request_id"),
            limit=limit,
            headers={"Connection": "close"},
            api=api_of(scope),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        large = takes_large_bodies(scope.get("path", ""))
        limit = self.large_bytes if large else self.max_bytes
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._too_large(scope, limit)(scope, receive, send)
            return

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge(limit)
            return message

        await answer_failure(
            self.app, scope, receive, send, _BodyTooLarge,
            lambda _: self._too_large(scope, limit), app_receive=limited_receive,
        )  # fmt: skip


class _BodyTooLarge(StarletteHTTPException):
    """An HTTPException so that FastAPI's body parsing lets it through as a 413 (it turns
    other exceptions raised while reading the body into 400s)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is larger than this server's limit of {limit} bytes; "
            "send fewer or shorter texts per request",
        )


class BodyTimeout:
    """A request body must arrive within `seconds` (all of it): a client that sends it byte
    by byte, or stops half-way, gets 408 and its connection closed, instead of holding a
    connection and a handler forever (uvicorn has no such timeout of its own)."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        end = loop.time() + self.seconds
        complete = False

        async def timed_receive() -> Message:
            nonlocal complete
            if complete:  # the body is in; what follows is the wait for a disconnect
                return await receive()
            try:
                async with asyncio.timeout_at(end):
                    message = await receive()
            except TimeoutError:
                raise _BodyTooSlow(self.seconds) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        await answer_failure(
            self.app, scope, receive, send, _BodyTooSlow,
            lambda exc: error_response(
                408,
                "request_timeout",
                str(exc.detail),
                request_id=scope.get("state", {}).get("request_id"),
                headers={"Connection": "close"},
                api=api_of(scope),
            ),
            app_receive=timed_receive,
        )  # fmt: skip


class _BodyTooSlow(StarletteHTTPException):
    """An HTTPException so that FastAPI's body parsing lets it through."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            408,
            f"the request body did not arrive within {seconds:g} s; send it at once "
            "(this server's server.body_timeout)",
            headers={"Connection": "close"},
        )


class RedactQuery(logging.Filter):
    """Access log lines without query strings: keys (`api_key`, `auth_key`) and texts (`q`)
    travel there, and neither is ever logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3:
            path = str(record.args[2])
            if "?" in path:
                args = list(record.args)
                args[2] = path.split("?", 1)[0] + "?…"
                record.args = tuple(args)
        return True


def refuse_connections_in_json(limit: int) -> None:
    """Past `limit_concurrency` connections uvicorn answers with its own plain-text 503
    before the app sees the request; this makes that answer tolk's JSON error (with the
    code a proxy or client retries on). uvicorn offers no hook for that response, so the
    function both HTTP protocols call is replaced; it must stay a cheap, fixed reply."""
    from uvicorn.protocols.http import h11_impl, httptools_impl

    message = (
        f"this server has {limit} connections open, its limit (server.max_connections); "
        "retry shortly or on another server"
    )

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        request_id = request_id_for(scope)
        refusal = error_response(
            503,
            "overloaded",
            message,
            request_id=request_id,
            retry_after=1.0,
            headers={"Connection": "close", "X-Request-ID": request_id},
        )
        await refusal(scope, receive, send)

    for module in (h11_impl, httptools_impl):
        setattr(module, "service_unavailable", refuse)  # noqa: B010 - not exported there
