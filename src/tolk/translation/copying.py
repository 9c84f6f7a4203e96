"""Whether to show a language pair's examples: not where the model copies them.

`prompt_examples` shows the model human translations before its text, which lifts chrF++ on
most pairs (docs/benchmarks.md, section 10). Where the model cannot translate into a language,
it copies them instead: measured on the H100 and H200 with the 0.5B Qwen, 73% of en-ne first
tries answered with an example's Nepali (`copied_example`), and every one was tried again
without examples, a second engine request after the first, for half of the pair's tokens and
most of its latency (docs/benchmarks.md, sections 15 and 17). Those retries are what the pair
is served with; the first tries are waste.

So each engine keeps, per language pair, whether its last WINDOW first tries shown examples
copied one. Past `examples_copy_limit` of them the pair's first tries go as its retries would,
without examples and (with `checks.retry_instruction`) told again which language to answer
in, save one in PROBE_EVERY that still shows them: the share keeps being measured,
and when the model stops copying (another model, other examples) the examples come back. Before
MIN_SEEN tries a pair shows its examples. Nothing is hidden from the client: a copy is still
flagged and retried, as before.

Per process and in memory: a restarted server measures again within its first tries.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

log = logging.getLogger("tolk.translation")

WINDOW = 200  # the first tries remembered per pair
MIN_SEEN = 20  # before this many, examples are shown
PROBE_EVERY = 10  # while withheld, one first try in this many still shows them


@dataclass
class _Pair:
    copied: deque[bool] = field(default_factory=lambda: deque(maxlen=WINDOW))
    copies: int = 0  # of those remembered
    withheld: bool = False
    turns: int = 0  # first tries while withheld, for the probes


class CopyWatch:
    """Per (model, source, target): the share of recent first tries with examples that copied
    one, and whether the next first try shows examples. Used from the event loop only."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[str, str, str], _Pair] = {}

    def show(self, model: str, source: str, target: str) -> bool:
        """Whether the next first try of this pair shows its examples."""
        pair = self._pairs.get((model, source, target))
        if pair is None or not pair.withheld:
            return True
        pair.turns += 1
        return pair.turns % PROBE_EVERY == 0

    def record(self, model: str, source: str, target: str, copied: bool, limit: float) -> None:
        """A first try that showed examples: whether it copied one. `limit`: the model's
        `examples_copy_limit`."""
        pair = self._pairs.setdefault((model, source, target), _Pair())
        if len(pair.copied) == WINDOW:
            pair.copies -= pair.copied[0]
        pair.copied.append(copied)
        pair.copies += copied
        withheld = len(pair.copied) >= MIN_SEEN and pair.copies > limit * len(pair.copied)
        if withheld != pair.withheld:
            pair.withheld = withheld
            log.info(
                "model '%s' %s: %d of its last %d first tries copied an example; examples %s",
                model, f"{source}>{target}", pair.copies, len(pair.copied),
                f"withheld (one first try in {PROBE_EVERY} still shows them)"
                if withheld else "shown again",
            )  # fmt: skip

    def copy_rate(self, model: str, source: str, target: str) -> float | None:
        pair = self._pairs.get((model, source, target))
        return pair.copies / len(pair.copied) if pair and pair.copied else None

    def withheld(self, model: str, source: str, target: str) -> bool:
        pair = self._pairs.get((model, source, target))
        return pair is not None and pair.withheld
