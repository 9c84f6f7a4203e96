"""Where a translation request's time goes up to its first engine output, for its response's
Server-Timing header (tolk.server.gateway) and `tolk bench quality`'s per-unit records.

A request's latency holds its preparation (parsing, planning, prompts), the wait for its
engine requests' group (`engine.gather_ms`), vLLM's queue and the prompt's reading, the
decoding, and what follows (checks, more tries, rendering). vLLM's own metrics give the
middle part summed over all requests; these marks give each request's own, so a slow unit
can be read as slow before, in or after the engine. One `RequestClock` per translation
(service.translate_documents sets it in a context variable; the tasks it starts share it)
and constant work per engine request. The engine core's timestamps are the same monotonic
clock as this process's (`time.monotonic`, one host).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestClock:
    """Monotonic marks of one translation: when it started, when its first engine request
    was handed to vLLM (after gathering), and of the first engine request to come back:
    when vLLM made its first and last tokens (its engine core's clock) and when its output
    was back here. `engine_requests` counts them all."""

    started: float = field(default_factory=time.monotonic)
    handed: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    answered: float | None = None
    engine_requests: int = 0

    def hand(self) -> None:
        """An engine request handed to vLLM."""
        self.engine_requests += 1
        if self.handed is None:
            self.handed = time.monotonic()

    def answer(self, metrics: Any) -> None:
        """An engine request's final output back; `metrics`: vLLM's RequestStateStats of it,
        if it keeps them (None with a stand-in engine)."""
        if self.answered is not None:
            return
        self.answered = time.monotonic()
        first, last = (getattr(metrics, n, 0.0) for n in ("first_token_ts", "last_token_ts"))
        if first and last:  # 0.0: not recorded
            self.first_token, self.last_token = float(first), float(last)

    def marks(self) -> dict[str, float]:
        """Seconds from the start to each mark reached, by its Server-Timing name."""
        marks = {
            "to-engine": self.handed,
            "to-first-token": self.first_token,
            "to-last-token": self.last_token,
            "to-first-output": self.answered,
        }
        return {name: at - self.started for name, at in marks.items() if at is not None}


CLOCK: ContextVar[RequestClock | None] = ContextVar("tolk_request_clock", default=None)
