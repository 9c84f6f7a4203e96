"""A document of sentences for the scheduling tests: a line is a unit."""

from __future__ import annotations

SENTENCES = [
    f"Sentence number {n} of the long document talks about batching and queues." for n in range(14)
]


DOCUMENT = "\n".join(SENTENCES)  # a line is a unit: 14 segments
