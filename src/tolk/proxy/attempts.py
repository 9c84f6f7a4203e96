"""Trying upstreams for one request: the least-loaded healthy one for its route first,
retried on another when one cannot take it (its status or error code says so), each attempt
accounted to its upstream."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

import aiohttp

from tolk.proxy.config import ProxyConfig
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.routing import TRANSLATE, Target
from tolk.proxy.upstream import Upstream
from tolk.proxy.upstreams import UpstreamPool
from tolk.wire.endpoints import CORS
from tolk.wire.errors import ERROR_CODE_HEADER

log = logging.getLogger("tolk.proxy")

# Statuses an upstream answers when it cannot take a request now; another may.
RETRYABLE_CODES = {"overloaded", "shutting_down", "engine_unavailable", "engine_restarting"}
# Codes after which the upstream gets nothing new for its Retry-After (capped at 30 s).
COOLING_CODES = {"overloaded", "engine_restarting"}
# Refusals about the caller (its key's rate or quota), whatever their status: another
# upstream would refuse it the same, and the upstream is well.
CALLER_CODES = {"rate_limited", "quota_exceeded"}
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
        # What the drop-in APIs' bodies have no place for: the warnings (a translation tolk
        # suspects stays flagged through the proxy), segment cache hits, the chat endpoint's path.
        "x-tolk-warnings",
        "x-tolk-memory-segments",
        "x-tolk-chat",
        *(name.decode() for name, _ in CORS),
    }
)


# Request headers a forwarded request keeps (besides the body): the key, and Cache-Control
# (the segment cache's bypass).
FORWARDED_HEADERS = frozenset(
    {"content-type", "authorization", "accept", "x-api-key", "cache-control"}
)


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
        started = time.perf_counter()
        responded = False
        with upstream.trying():
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
                    passed = {
                        k.lower(): v
                        for k, v in response.headers.items()
                        if k.lower() in PASSED_HEADERS
                    }
                    seconds = time.perf_counter() - started
                    return Attempt(upstream, seconds, response.status, payload, passed)
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

    def judge(self, attempt: Attempt, clients_deadline: bool = False) -> bool:
        """Feed the attempt to the upstream's health state; True if another upstream should
        be tried. `clients_deadline`: the request's deadline is the client's, shorter than
        the proxy's own (X-Request-Timeout)."""
        upstream = attempt.upstream
        outcome = attempt.failure or str(attempt.status)
        self.metrics.upstream_requests.labels(upstream.url, outcome).inc()
        self.metrics.upstream_latency.labels(upstream.url).observe(attempt.seconds)
        retry = False
        code = attempt.error_code() if attempt.status >= 400 else None
        if attempt.failure is not None:
            retry = attempt.failure in ("connect", "reset")
        elif attempt.status in (503, 429) and code not in CALLER_CODES:
            # 429: the drop-in APIs' overload (their clients retry 429, not 503).
            retry = code in RETRYABLE_CODES
            if code == "shutting_down" and upstream.mark_down("answered 503 shutting_down"):
                self.metrics.ejections.labels(upstream.url, "shutting_down").inc()
            elif code in COOLING_CODES:
                retry_after = seconds_of((attempt.headers or {}).get("retry-after"), default=1.0)
                upstream.cool(min(retry_after, 30.0))
                self.metrics.ejections.labels(upstream.url, str(code)).inc()
        if upstream.settle(upstream_failed(attempt, code, clients_deadline)):
            self.metrics.ejections.labels(upstream.url, "circuit_open").inc()
            log.warning("circuit open for %s after %s", upstream.url, outcome)
        return retry

    async def forward(
        self,
        body: bytes,
        request_id: str,
        candidates: list[Upstream],
        deadline: float,
        target: Target = TRANSLATE,
        clients_deadline: bool = False,
    ) -> tuple[Attempt | None, float, list[Attempt]]:
        """Try candidates until one answers for good, attempts run out, or the deadline
        passes (`clients_deadline`: one the client set, shorter than the proxy's own).
        Returns the final attempt (None if none could be made), the seconds spent waiting
        on upstreams, and every attempt."""
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
            if not self.judge(attempt, clients_deadline):
                break
            if number + 1 < retries.attempts:
                reason = attempt.failure or attempt.error_code() or str(attempt.status)
                self.metrics.retries.labels(reason).inc()
                pause = retries.backoff * 2**number * self.pool.rng.uniform(0.5, 1.5)
                await asyncio.sleep(max(0.0, min(pause, end - loop.time())))
        waited = sum(a.seconds for a in attempts)
        return (attempts[-1] if attempts else None), waited, attempts


def upstream_failed(attempt: Attempt, code: str | None, clients_deadline: bool) -> bool:
    """Whether an attempt counts against its upstream's circuit breaker: only what says
    the upstream is unwell (no connection, a reset, a timeout, a 5xx or an overload's 429),
    never what the request itself brought about, which any client could send to open every
    upstream's circuit: a 4xx (a malformed or hostile request), a refusal of the caller's
    rate or quota, or a deadline the client chose shorter than the proxy's own."""
    if attempt.failure is not None:
        return not (attempt.failure == "timeout" and clients_deadline)
    if code in CALLER_CODES or (code == "deadline_exceeded" and clients_deadline):
        return False
    return attempt.status >= 500 or attempt.status == 429


def seconds_of(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default
