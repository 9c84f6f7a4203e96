"""Where an HTTP request's time goes, for its response's Server-Timing header
(tolk.server.gateway) and `tolk bench quality`'s per-unit records.

A translation's latency holds the wait for the server to take it up (a burst's other
requests are parsed first), its preparation (parsing, planning, prompts), the wait for its
engine requests' group (`engine.gather_ms`), vLLM's queue and the prompt's reading, the
decoding, and what follows (checks, more tries, putting the text back, the answer). vLLM's
own metrics give the engine's part summed over all requests; these marks give each
request's own, from its arrival (tolk.server.middleware's RequestAccounting sets a clock in
a context variable; the handler and the tasks it starts share it), so a slow unit reads as
slow before, in or after the engine. Constant work per engine request. The engine core's
timestamps are the same monotonic clock as this process's (`time.monotonic`, one host).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestClock:
    """Monotonic marks of one HTTP request: when it arrived, when its first engine request
    was handed to vLLM (after gathering), and of the first engine request to come back:
    when vLLM made its first and last tokens (its engine core's clock) and when its output
    was back here; when all its segments were done, and put back into its documents.
    `engine_requests` counts them all."""

    started: float = field(default_factory=time.monotonic)
    handed: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    answered: float | None = None
    translated: float | None = None  # every segment done (all its passes)
    rendered: float | None = None  # and put back into its documents
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
        # 0.0: not recorded. The engine core's clock is this host's monotonic clock; marks
        # outside this request's own span (an engine elsewhere) are left out, not shown wrong.
        if first and last and (self.handed or 0.0) <= first <= last <= self.answered:
            self.first_token, self.last_token = float(first), float(last)

    def marks(self) -> dict[str, float]:
        """Seconds from the start to each mark reached, by its Server-Timing name."""
        marks = {
            "to-engine": self.handed,
            "to-first-token": self.first_token,
            "to-last-token": self.last_token,
            "to-first-output": self.answered,
            "to-translated": self.translated,
            "to-rendered": self.rendered,
        }
        return {name: at - self.started for name, at in marks.items() if at is not None}


CLOCK: ContextVar[RequestClock | None] = ContextVar("tolk_request_clock", default=None)
