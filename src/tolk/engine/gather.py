"""New engine requests handed to vLLM together while the engine is busy (`engine.gather_ms`).

Why: on the GPU, vLLM runs an engine step that only decodes as one captured CUDA graph, and a
step that also reads a new request's prompt as graphs between the attention layers, with
attention launched from the CPU (`cudagraph_mode` FULL_AND_PIECEWISE, its default). On the
H200 with the real 0.5B model those steps took twice as long (10.8 ms against 5.4 where every
step ran as one graph; docs/benchmarks.md section 26), and at 256 clients nearly every step
reads a prompt: about three engine requests arrive during each one. Handing the requests that
arrive within a few milliseconds to vLLM at once puts their prompts into one step and leaves
the steps between them decoding only. vLLM has no such setting (its scheduler takes whatever
has arrived before each step), hence this.

Only while more than `gather_above` engine requests are in flight: a quiet engine starts each
request at once, as before. A request waits at most `gather_ms` after the first of its group
arrived, and less where the group fills first: a group goes once it holds `gather_most`
requests. In a burst (a markup pass's 120 units sent at once) the front end hands requests on
about one a millisecond, so a group of 32 is full within tens of milliseconds and its prompts
make a large step already; waiting out the interval only delayed them (on one H200 the HTML
units of such a pass, which arrive after the markdown ones, waited about 50 ms more before
vLLM saw them: docs/benchmarks.md section 32). Steady traffic, a few new requests a step,
rarely fills one. One cancelled while it waits (its client gone, its deadline passed) leaves
the group without it: it no longer counts toward `gather_most`, and a group all of whose
requests went is not released. Used on the event loop's thread only; constant work per
request.
"""

from __future__ import annotations

import asyncio


class Gather:
    """Groups of new engine requests released together, `interval` seconds after the first of
    each group arrived or once it holds `most` (0: no such bound), while more than `above`
    requests are in flight; `interval` 0: off."""

    def __init__(self, interval: float, above: int, most: int = 0) -> None:
        self.interval = interval
        self.above = above
        self.most = most
        # Each waiting request's future and when it came (a dict: one cancelled leaves in
        # constant time, and the rest keep their order)
        self._waiting: dict[asyncio.Future[None], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.gathered = 0  # requests that waited for their group, since the start
        self.groups = 0  # groups released
        self.waited = 0.0  # seconds the released requests waited, all together

    async def wait(self, in_flight: int) -> None:
        """Return when this request may go to the engine: at once where gathering is off or
        the engine holds `above` or fewer requests; else with its group."""
        if self.interval <= 0 or in_flight <= self.above:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._waiting[future] = loop.time()
        self.gathered += 1
        if self.most and len(self._waiting) >= self.most:
            self._release()  # full: it goes now (this request's future is done already)
        elif self._timer is None:
            self._timer = loop.call_later(self.interval, self._release)
        try:
            await future
        except asyncio.CancelledError:
            self._leave(future)
            raise

    def _leave(self, future: asyncio.Future[None]) -> None:
        """A request cancelled while it waited: out of its group, and the group's timer
        stopped if it was the last in it."""
        if future not in self._waiting:  # released already (with its group)
            return
        del self._waiting[future]
        if not self._waiting and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()  # a full group goes before its time
        self._timer = None
        waiting, self._waiting = self._waiting, {}
        self.groups += 1
        now = asyncio.get_running_loop().time()
        for future, came in waiting.items():
            if not future.done():  # (cancelled, its task not yet run to leave the group)
                future.set_result(None)
                self.waited += now - came
