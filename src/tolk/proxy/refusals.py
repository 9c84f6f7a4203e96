"""The proxy's own refusals, each in the shape of the API the client spoke: too large, no
upstream serves the pair, all overloaded, none healthy, every try failed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Response

from tolk.proxy.config import ProxyConfig
from tolk.proxy.routing import Route
from tolk.proxy.upstream import Upstream
from tolk.proxy.upstreams import UpstreamPool
from tolk.wire.errors import Api, error_response

if TYPE_CHECKING:  # forward imports this module
    from tolk.proxy.attempts import Attempt


def too_large(limit: int, request_id: str, api: Api) -> Response:
    return error_response(
        413,
        "payload_too_large",
        f"the request body is larger than the proxy's limit of {limit} bytes; "
        "send fewer or shorter texts (or a smaller file) per request",
        request_id=request_id,
        limit=limit,
        api=api,
    )


def unserved(pool: UpstreamPool, route: Route, request_id: str, api: Api) -> Response:
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


def overloaded(
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


def none_healthy(
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


def failed(
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
