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
import logging
from collections.abc import Callable, Coroutine
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
        # Each running guard's way to stop its work (called when the grace period ends).
        self._stops: set[Callable[[type[Exception]], None]] = set()

    def begin_drain(self) -> None:
        if self.draining:
            return
        self.draining = True
        log.info("draining: refusing new requests, %.0f s for in-flight ones", self.grace)
        self._timer = asyncio.get_running_loop().call_later(self.grace, self._grace_ended)

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
        or the shutdown grace period ends first.

        The work runs in this task, not a task of its own: starting one and waking this
        task when it ends cost two passes of the event loop, milliseconds each on a busy
        server (docs/benchmarks.md, section 28). A watcher of the client's disconnect and the
        grace period's end cancel this task instead, only while the work runs."""
        if self.grace_over.is_set():
            work.close()
            raise ShuttingDown(
                "this server shut down before the translation finished; retry on another server"
            )
        task = asyncio.current_task()
        assert task is not None
        why: type[Exception] | None = None  # why the work was stopped, once it is
        # False once the work has ended (a disconnect callback already scheduled may still run)
        running = True

        def stop(reason: type[Exception]) -> None:
            # A callback of the loop: this task is suspended inside the work (its only
            # awaits), so the cancellation is raised there; never once the work has ended.
            nonlocal why
            if running and why is None:
                why = reason
                task.cancel()

        def left(watcher: asyncio.Future[None]) -> None:
            if not watcher.cancelled():  # the client's disconnect (or its receive failing)
                stop(ClientDisconnected)

        disconnect = asyncio.ensure_future(wait_for_disconnect(request))
        disconnect.add_done_callback(left)
        self._stops.add(stop)
        try:
            result = await work
        except (Exception, asyncio.CancelledError) as exc:
            if why is not None:
                # Stopped here: the cancellation, or what the work's cleanup made of it (a
                # task group's error, a cleanup that failed), is answered as the stop.
                task.uncancel()
                raise self._stopped(why) from None
            if isinstance(exc, asyncio.CancelledError) and not task.cancelling():
                # Cancelled inside the work, not this task: answered 503, as when the work
                # ran in a task of its own, never as a handler that vanished.
                raise self._stopped(ShuttingDown) from None
            raise  # failed, or cancelled from outside: not this guard's to answer
        finally:
            running = False
            self._stops.discard(stop)
            disconnect.remove_done_callback(left)
            disconnect.cancel()
        if why is not None:  # the work swallowed the cancellation and ended: it was stopped
            task.uncancel()
            raise self._stopped(why)
        return result

    @staticmethod
    def _stopped(reason: type[Exception]) -> Exception:
        if reason is ClientDisconnected:
            return ClientDisconnected()
        return ShuttingDown(
            "this server shut down before the translation finished; retry on another server"
        )

    def _grace_ended(self) -> None:
        """The grace period is over: requests still running are stopped (guard)."""
        self.grace_over.set()
        for stop in list(self._stops):
            stop(ShuttingDown)
