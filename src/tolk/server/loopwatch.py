"""A watch beside the event loop that names what holds it.

`tolk_event_loop_stall_seconds` (tolk.server.app.watch_loop) says after the fact how long the
loop was held, not by what. A daemon thread here looks at a heartbeat the loop writes every
quarter of `threshold`: once it is older than the threshold, the loop is busy in one step that
has not yielded, and the thread logs the loop thread's stack at that moment (the step, from
`sys._current_frames`) once per stall and counts it in `tolk_event_loop_stalls_total`.
Written here because asyncio's own report of slow callbacks exists only in debug mode, which
costs too much to run in production, and says which callback, not where inside it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

from prometheus_client import Counter

log = logging.getLogger("tolk.server")


class StallWatch:
    def __init__(self, threshold: float, stalls: Counter) -> None:
        self.threshold = threshold
        self.stalls = stalls
        self._beat = time.monotonic()
        self._loop_thread = 0
        self._stopped = threading.Event()

    async def run(self) -> None:
        """The heartbeat, on the loop; starts the watching thread and stops it when cancelled."""
        self._loop_thread = threading.get_ident()
        watcher = threading.Thread(target=self._watch, name="tolk-loop-watch", daemon=True)
        watcher.start()
        try:
            while True:
                self._beat = time.monotonic()
                await asyncio.sleep(self.threshold / 4)
        finally:
            self._stopped.set()

    def _watch(self) -> None:
        reported = None  # the heartbeat whose stall was logged already
        while not self._stopped.wait(self.threshold / 4):
            beat = self._beat
            held = time.monotonic() - beat - self.threshold / 4  # less the heartbeat's sleep
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
