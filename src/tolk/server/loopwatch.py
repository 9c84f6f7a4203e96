"""The event loop's heartbeat, and a watch beside it that names what holds the loop.

The heartbeat sleeps 10 ms again and again on the loop; how late each sleep wakes is
`tolk_event_loop_stall_seconds`, which says after the fact how long the loop was held, not by
what. A daemon thread looks at the same heartbeat: once it is older than `threshold`, the loop
is busy in one step that has not yielded, and the thread logs the loop thread's stack at that
moment (the step, from `sys._current_frames`) once per stall and counts it in
`tolk_event_loop_stalls_total`. Written here because asyncio's own report of slow callbacks
exists only in debug mode, which costs too much to run in production, and says which
callback, not where inside it."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

from prometheus_client import Counter

log = logging.getLogger("tolk.server")


class StallWatch:
    """The loop's one heartbeat: `run` sleeps `interval` again and again on the loop, hands
    how late each sleep woke to `lag` (tolk_event_loop_stall_seconds), and a daemon thread
    beside it logs the loop's stack when a beat is more than `threshold` late."""

    def __init__(self, threshold: float, stalls: Counter, interval: float) -> None:
        self.threshold = threshold
        self.stalls = stalls
        self.interval = interval
        self._beat = time.monotonic()
        self._loop_thread = 0
        self._stopped = threading.Event()

    async def run(
        self, lag: Callable[[float], None] | None = None, cpu: Callable[[float], None] | None = None
    ) -> None:
        """The heartbeat, on the loop; starts the watching thread and stops it when
        cancelled. `cpu` gets, each beat, the CPU seconds the loop's thread used since the
        last (tolk_event_loop_cpu_seconds_total: over a span of wall time, how busy the loop
        was, which a sampling profiler can only estimate)."""
        self._loop_thread = threading.get_ident()
        watcher = threading.Thread(target=self._watch, name="tolk-loop-watch", daemon=True)
        watcher.start()
        loop = asyncio.get_running_loop()
        used = time.thread_time()  # this thread's: the loop's
        try:
            while True:
                self._beat = time.monotonic()
                began = loop.time()
                await asyncio.sleep(self.interval)
                if lag is not None:
                    lag(max(0.0, loop.time() - began - self.interval))
                if cpu is not None:
                    now = time.thread_time()
                    cpu(now - used)
                    used = now
        finally:
            self._stopped.set()

    def _watch(self) -> None:
        reported = None  # the heartbeat whose stall was logged already
        while not self._stopped.wait(self.threshold / 4):
            beat = self._beat
            held = time.monotonic() - beat - self.interval  # less the heartbeat's sleep
            if held <= self.threshold or beat == reported:
                continue
            reported = beat
            frame = sys._current_frames().get(self._loop_thread)
            stack = "".join(traceback.format_stack(frame, limit=16)) if frame else "(gone)\n"
            self.stalls.inc()
            log.warning(
                "the event loop has run one step for %.2f s without yielding (every other "
                "request waits meanwhile); it is in:\n%s",
                held,
                stack.rstrip(),
            )
