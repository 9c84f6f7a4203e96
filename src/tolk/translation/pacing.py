"""Turns for per-text work on the event loop: one turn per pass of the loop.

A request's per-text work (parsing a document, segmenting it, tokenising and rendering each
segment's prompt, handing it to the engine) is synchronous Python on the one event loop that
also reads sockets, answers probes and refuses the excess. Each piece is short (a segment's
prompt: about a millisecond here), but pieces that become ready together run back to back in
one pass of the loop: 80 requests admitted at once, or a document's 16 first segments let in
by its window, keep the loop from reading its sockets for tens of milliseconds, and every
refusal and /health that arrived meanwhile waits behind them.

So each piece waits for a turn, and turns are granted one per pass, first come first served:
between any two pieces the loop polls its sockets and runs whatever became ready, so cheap
answers (a refusal, a probe) wait behind at most one piece, never behind a whole burst. The
total work and its order are unchanged; what it costs is one extra pass (microseconds) per
piece.

Written here because asyncio has no priorities: a Semaphore or Lock hands over within the
same pass, and `asyncio.sleep(0)` puts a task behind the ready queue, not behind the next
poll of the sockets, so neither spreads pieces over passes.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Pacer:
    """Grants turns one per loop pass, in arrival order. Used from one event loop."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._granting = False

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in self._waiting)

    async def turn(self) -> None:
        """Return once this caller's turn has come (its piece of work runs right after)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        if not self._granting:
            self._granting = True
            loop.call_soon(self._grant, loop)
        await future

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        # One turn, then the rest wait for the next pass: a callback scheduled from a
        # callback runs after the loop's next poll of its sockets (asyncio and uvloop alike).
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():  # a waiter cancelled (deadline, client gone) is skipped
                future.set_result(None)
                break
        if self._waiting:
            loop.call_soon(self._grant, loop)
        else:
            self._granting = False
