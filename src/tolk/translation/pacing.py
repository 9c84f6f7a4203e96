"""Turns for per-text work on the event loop: a bounded amount of it per pass of the loop.

A request's per-text work (parsing a document, segmenting it, tokenising and rendering each
segment's prompt, handing it to the engine) is synchronous Python on the one event loop that
also reads sockets, answers probes and refuses the excess. Each piece is short (a segment's
prompt: about a millisecond here), but pieces that become ready together run back to back in
one pass of the loop: 80 requests admitted at once, or a document's 16 first segments let in
by its window, keep the loop from reading its sockets for tens of milliseconds, and every
refusal and /health that arrived meanwhile waits behind them.

So each piece waits for a turn, and turns are granted per pass of the loop, first come first
served, as many as fit a time budget (`server.turn_budget_ms`): between two passes' pieces the
loop polls its sockets and runs whatever became ready, so cheap answers (a refusal, a probe)
wait behind at most a budget's worth of pieces, never behind a whole burst. The total work and
its order are unchanged.

Why a budget and not one piece a pass (what this did first): on a busy server each pass also
runs everything else that became ready (vLLM's output handler, other requests' reads and
replies), a millisecond or more on the GPU host, so one piece a pass let a burst of 100
requests reach the engine over 100 passes: measured on the H200 at 256 clients, tolk's time
outside the engine reached 101-114 ms at p95 (docs/benchmarks.md, section 18). The pieces of
one pass run back to back right after the pass that granted them, so how long they took is
measured exactly (from the first one's start to the next grant), and the number granted next
follows that measured cost: budget / a piece's running mean, at least one.

A turn asked for while nobody waits, no granted piece is still to run, and the pieces taken
lately leave room is taken at once, without waiting for the next pass: on a busy loop each
pass lasts milliseconds (everything else that became ready runs in it), and at 256 clients on
the H200 every sentence waited one or two of them for a turn it could have had at once
(docs/benchmarks.md, section 28). Turns are still taken in arrival order. The room is a
pass's grant, counted from the first piece taken at once until a callback scheduled then
runs: asyncio tells no pass where it starts, and that callback runs partway through the next
pass, so a pass may hold the end of one count and a whole next one: at most twice its grant
(twice the budget). With no budget (one piece a pass) or no piece measured yet, none is
taken at once.

Written here because asyncio has no priorities: a Semaphore or Lock hands over within the
same pass, and `asyncio.sleep(0)` puts a task behind the ready queue, not behind the next
poll of the sockets, so neither spreads pieces over passes.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

# Weight of the newest pass in a piece's running mean cost.
SMOOTHING = 0.3
# Fewest seconds a piece is taken to cost (a clock's resolution), so the turns a pass are finite.
FLOOR = 1e-6


class Pacer:
    """Grants turns per loop pass, in arrival order, as many as `budget` seconds of pieces
    (one at least; 0 grants exactly one a pass). Used from one event loop."""

    def __init__(self, budget: float = 0.0) -> None:
        self.budget = budget
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._granting = False
        self._granted = 0  # turns granted by the last pass
        self._begun: float | None = None  # when the first of them started running
        self.piece = 0.0  # a piece's running mean cost, seconds (0: none measured yet)
        self._this_pass = 0  # pieces let through since the count began, at once or granted
        self._counting = False  # a reset of _this_pass is scheduled (for the next pass)

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in self._waiting)

    async def turn(self) -> None:
        """Return once this caller's turn has come (its piece of work runs right after)."""
        loop = asyncio.get_running_loop()
        if not self._granting and not self._waiting and self._this_pass < self.room():
            self._count(loop, 1)  # room, and nobody before it: at once
            return
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        if not self._granting:
            self._granting = True
            self._granted, self._begun = 0, None
            loop.call_soon(self._grant, loop)
        await future
        if self._begun is None:
            self._begun = time.perf_counter()

    def per_pass(self) -> int:
        """How many turns the next pass grants."""
        if self.budget <= 0 or self.piece <= 0:
            return 1
        return max(1, int(self.budget / max(self.piece, FLOOR)))

    def room(self) -> int:
        """How many pieces a count may take at once: what a pass grants (a pass may hold the
        end of one count and a whole next one), none without a budget or before a piece's
        cost is known."""
        if self.budget <= 0 or self.piece <= 0:
            return 0
        return self.per_pass()

    def _count(self, loop: asyncio.AbstractEventLoop, pieces: int) -> None:
        """`pieces` more let through in this pass; the count starts again with the next."""
        self._this_pass += pieces
        if not self._counting:
            self._counting = True
            loop.call_soon(self._next_pass)

    def _next_pass(self) -> None:
        self._this_pass, self._counting = 0, False

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        # The turns granted by the last pass woke their tasks in this pass's order, before this
        # callback (scheduled after them): the time since the first of them started is what
        # their pieces cost, and nothing else ran in between.
        ran = self._granted
        if self._granted and self._begun is not None:
            cost = (time.perf_counter() - self._begun) / self._granted
            self.piece = cost if self.piece <= 0 else self.piece + SMOOTHING * (cost - self.piece)
        self._granted, self._begun = 0, None
        wanted = self.per_pass()
        while self._waiting and self._granted < wanted:
            future = self._waiting.popleft()
            if not future.done():  # a waiter cancelled (deadline, client gone) is skipped
                future.set_result(None)
                self._granted += 1
        # The rest wait for the next pass: a callback scheduled from a callback runs after the
        # loop's next poll of its sockets (asyncio and uvloop alike). So does the check after
        # the last grant, once its pieces have run: until then a turn asked for is not taken
        # at once, or it would run before pieces granted earlier.
        if self._waiting or self._granted:
            loop.call_soon(self._grant, loop)
        else:
            self._granting = False
            # The pieces granted last ran in this pass: turns taken at once are counted
            # with them.
            self._count(loop, ran)
