"""Draining on shutdown, and running a handler until it finishes, its client leaves, or the
drain's grace period runs out.

On SIGTERM uvicorn stops accepting connections and waits for open requests; tolk's server
(tolk.cli) also calls `Lifecycle.begin_drain()`. From then on new translation requests get
503 `shutting_down`, and requests still running when the grace period ends are stopped (their
engine requests aborted) and answered with 503 too, so no accepted request ends without an
answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

from tolk.errors import ClientDisconnected, ShuttingDown
from tolk.wire.asgi import wait_for_disconnect

T = TypeVar("T")
log = logging.getLogger("tolk.server")


# The exit status of a server that gave up on a model whose engine kept dying (after
# draining): its supervisor should start a fresh process.
EXIT_ENGINE_FAILED = 3
# Seconds uvicorn keeps going after the drain's grace period, for the 503s it sent to be
# written; a supervisor's stop timeout must cover shutdown_grace + this.
WRITE_MARGIN = 5


class Lifecycle:
    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.draining = False
        # Why this server gave up (its /health then answers 503 and it exits after draining)
        self.failed: str | None = None
        self.grace_over = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None

    def begin_drain(self) -> None:
        if self.draining:
            return
        self.draining = True
        log.info("draining: refusing new requests, %.0f s for in-flight ones", self.grace)
        self._timer = asyncio.get_running_loop().call_later(self.grace, self.grace_over.set)

    def give_up(self, reason: str) -> None:
        """Stop for good: refuse new work, drain, then exit with EXIT_ENGINE_FAILED. The
        server keeps listening while it drains, so that probes and proxies see /health and
        /ready answer 503 and clients get JSON refusals rather than refused connections."""
        if self.failed is None:
            self.failed = reason
        self.begin_drain()

    def exit_due(self, requests_inside: int) -> bool:
        """Whether a server that gave up has drained (no request inside: ModelPool's count)
        or its grace period has run out."""
        return self.failed is not None and (requests_inside == 0 or self.grace_over.is_set())

    def refuse_if_draining(self) -> None:
        if self.draining:
            raise ShuttingDown(
                "this server is shutting down and takes no new requests; retry on another server"
            )

    async def guard(self, request: Request, work: Coroutine[Any, Any, T]) -> T:
        """Run `work`; cancel it (which aborts its engine requests) if the client disconnects
        or the shutdown grace period ends first."""
        task = asyncio.ensure_future(work)
        disconnect = asyncio.ensure_future(wait_for_disconnect(request))
        grace_over = asyncio.ensure_future(self.grace_over.wait())
        try:
            await asyncio.wait({task, disconnect, grace_over}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (disconnect, grace_over):
                waiter.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            if disconnect.done() and not disconnect.cancelled():
                raise ClientDisconnected
            raise ShuttingDown(
                "this server shut down before the translation finished; retry on another server"
            )
        return task.result()
