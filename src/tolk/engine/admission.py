"""Admission control: how many segments a model may hold before new requests are refused.

tolk's own bookkeeping rather than vLLM's (0.32's `max_num_queued_reqs`, which 0.26 lacks):
a request's segments are counted from the moment it is admitted (before any per-segment
work: prompt building, tokenisation) until their engine requests end, against
`max_num_seqs + max_waiting` (the running batch plus the allowed queue). A request is
admitted whole or not at all. Because an admitted request's segments are all submitted to
the engine at once (or, for one larger than the capacity, through its window), this count
is what vLLM would count as running plus waiting, plus segments still being prepared, so
vLLM's own check would see the same requests later and could add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Admission:
    """Places held against a capacity. Pure bookkeeping, used on the event loop's thread."""

    capacity: int  # max_num_seqs + max_waiting
    batch: int = 0  # max_num_seqs: the window of a request larger than the capacity
    held: int = 0
    refused: int = 0  # requests refused so far

    def window(self, n: int) -> int:
        """Places a request of `n` segments holds: all of them when they fit in the
        capacity; else one batch's worth, through which its segments are fed (a long
        document is neither refused for its size nor able to crowd out everyone else)."""
        return n if n <= self.capacity or not self.batch else min(self.batch, self.capacity)

    def admit(self, n: int) -> int | None:
        """Hold the window of a request of `n` segments; None (nothing held) if it does not
        fit beside what is held already."""
        window = self.window(n)
        return window if self.try_acquire(window) else None

    def try_acquire(self, n: int) -> bool:
        """Hold exactly `n` more places if they fit; False (and nothing held) if they do not."""
        if n < 0:
            raise ValueError("n must not be negative")
        if self.held + n > self.capacity:
            self.refused += 1
            return False
        self.held += n
        return True

    def release(self, n: int) -> None:
        if n > self.held:
            raise ValueError(f"releasing {n} places but only {self.held} are held")
        self.held -= n
