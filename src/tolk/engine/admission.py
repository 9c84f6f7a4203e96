"""Admission control: how many texts a model may hold before new requests are refused.

tolk's own bookkeeping rather than vLLM's (0.32's `max_num_queued_reqs`, which 0.26 lacks):
every text of a request is counted from the moment the request is admitted (before any
per-text work: prompt building, tokenisation) until its engine request ends, against
`max_num_seqs + max_waiting` (the running batch plus the allowed queue). A request is
admitted whole or not at all. Because every admitted text is submitted to the engine at once,
this count is what vLLM would count as running plus waiting, plus texts still being prepared,
so vLLM's own check would see the same requests later and could add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Admission:
    """Texts held against a capacity. Pure bookkeeping, used on the event loop's thread."""

    capacity: int
    held: int = 0
    refused: int = 0  # requests refused so far

    def try_acquire(self, n: int) -> bool:
        """Hold `n` more texts if they fit; False (and nothing held) if they do not.
        A request of more texts than the whole capacity never fits."""
        if n < 0:
            raise ValueError("n must not be negative")
        if self.held + n > self.capacity:
            self.refused += 1
            return False
        self.held += n
        return True

    def release(self, n: int) -> None:
        if n > self.held:
            raise ValueError(f"releasing {n} texts but only {self.held} are held")
        self.held -= n
