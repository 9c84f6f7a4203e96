"""What tolk learns per language pair about its own tries, and stops doing where it is waste.

Five things tolk does for quality cost a whole engine request or more each and are measured,
per model and language pair, by the outcomes of the last WINDOW times they were done:

- **Examples** (`prompt_examples`) lift chrF++ on most pairs (docs/benchmarks.md, section 10).
  Where the model cannot translate into a language it copies them instead: on the H100 and
  H200 with the 0.5B Qwen, 73% of en-ne first tries answered with an example's Nepali
  (`copied_example`), and every one was tried again without examples, the second request
  after the first. Past `examples_copy_limit` of copies, the pair's first tries go as its
  retries would: without examples and (with `checks.retry_instruction`) told again which
  language to answer in.
- **The markup retry** (`checks.markup_candidates` sampled outputs when a unit's placeholders
  did not come back) mended 0-2 of about 20 failed en-de and en-ne units on the H200 and 5-7
  of en-fr, en-es and en-zh, at four times a first try's tokens and seconds of latency, before
  the unit falls back to its plain text anyway (docs/benchmarks.md, section 17). Below
  `checks.markup_retry_min_mended` of retries that brought every placeholder back, the pair's
  units go to that fallback at once.
- **Other retries** (an output off target, echoed, looping, cut at the budget: tried once more
  without examples, told again which language to answer in) mend most en-de and en-fr
  problems; where the model cannot write a language, the retry is as wrong as the first try,
  and the first try's client waits for both. Below `checks.retry_min_mended` of retries whose
  output was less bad than the first try's, the pair's first tries are returned with their
  problems flagged. A copy of the examples is always retried (its words are another
  sentence's).
- **The usual first try** (greedy, the examples shown) is itself waste where the pair's
  retries replace most of them: the 0.5B Qwen's greedy Nepali loops in 84% of first tries
  and the penalised retry mends all but 7% (docs/benchmarks.md, section 18), so each en-ne
  text cost two engine requests, the first a loop (stopped by vLLM's loop detection only
  once it has repeated itself eight times). Past `checks.first_as_retry_limit` of first
  tries replaced by their retry's output, the pair's first tries go as its retries do (no
  examples, told what the last replaced one's retry was told, `checks.retry_sampling`), and
  are not retried the same way again. Only plain texts are counted and switched: a segment
  with placeholders keeps its usual first try (section 23).
- **The markup ladder's first rung.** A unit with markup goes to the model whole (its
  placeholders paired), then, if they do not come back, without its emphasis, then run by
  run, the markup where it was (tolk.translation.plan). Where the model cannot keep paired
  placeholders, the whole unit's first try and its markup retry are spent on outputs thrown
  away: on one H200 3 of 24 en-ne units kept their markup whole, and en-ne's units made 71%
  of tolk's markup tokens (docs/benchmarks.md, section 29). Past `checks.markup_skip_limit`
  of a pair's units that did not keep it, its requests' units with emphasis start without
  it, flagged as a unit that fell back there is. Only this rung is skipped: starting such
  units run by run as well halved the markup passes' tokens but put every run of every unit
  in the engine at once, and the other pairs' units waited twice as long (section 30).

While a pair is past its limit, one time in PROBE_EVERY still does the thing, so the share
keeps being measured, and when the model's behaviour changes the pair comes back. Before
MIN_SEEN outcomes nothing is skipped, save where the caller presumes the step waste
(`presumed`): the markup steps (the whole first rung, the markup retry) of a pair whose plain
first tries go as retries, a language the model does not write (`checks.markup_skip_unwritten`).
A markup pass sends all its units at once, so a pair's own outcomes come only after every one
of its units went whole and was retried: on one H200 en-ne's first markup pass took 4.7-5.6 s
a unit, its later ones 3.8 s (docs/benchmarks.md, section 30). Presumed so, the pair skips the
step from its first unit on (the probes, one in PROBE_EVERY, gather its own outcomes), and once
it has MIN_SEEN of them they decide (a pair skipping so goes back to the step only HYSTERESIS
under the limit, as one that learnt it). A presumed pair's whole-unit probes go without the
presumed markup retry (save its own probes), so they measure the whole unit's first try: what
the pair skips. Nothing is hidden from the client: a copy or a lost
placeholder is still flagged as before. Per process and in memory: a restarted server measures
again within its first tries; the log says when a pair starts and stops skipping, and
`/metrics` has each pair's `tolk_pair_waste_share` and `tolk_pair_skipping` per step.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

log = logging.getLogger("tolk.translation")

WINDOW = 200  # the outcomes remembered per pair
MIN_SEEN = 20  # before this many, nothing is skipped
PROBE_EVERY = 10  # while skipping, one time in this many still does it
# A pair skipping goes back to doing the step only once its waste is this much under the
# limit, so that a share near the limit does not switch it back and forth (measured: en-ne's
# markup retries crossed 0.8 three times in a second).
HYSTERESIS = 0.1


@dataclass
class _Pair:
    wasted: deque[bool] = field(default_factory=lambda: deque(maxlen=WINDOW))
    waste: int = 0  # of those remembered
    skipping: bool = False
    turns: int = 0  # times asked while skipping, for the probes
    # The caller presumed the step waste at the last turn taken (read while unmeasured; a
    # step taken only by some requests, such as markup_whole's, updates it with them).
    presumed: bool = False


class PairWatch:
    """Per (model, source, target): the share of the last WINDOW outcomes of one costly step
    that were waste, and whether the next time does the step. `what` names the step in the
    log. Used from the event loop only."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._pairs: dict[tuple[str, str, str], _Pair] = {}

    def do(self, model: str, source: str, target: str, presumed: bool = False) -> bool:
        """Whether this time does the step: unless the pair is past its limit (or, before
        its own outcomes decide, `presumed` waste), save the probes."""
        return self.take(model, source, target, presumed)[0]

    def take(
        self, model: str, source: str, target: str, presumed: bool = False
    ) -> tuple[bool, bool]:
        """`do`'s decision, and whether its turn was counted (the pair skips): for a step
        decided before it is known to apply, whose turn `give_back` returns where it did not
        (taken at once, so that callers deciding side by side each see the turns of those
        before them)."""
        does = self.next_does(model, source, target, presumed)
        return does, self.turn(model, source, target, presumed)

    def next_does(self, model: str, source: str, target: str, presumed: bool = False) -> bool:
        """Whether the next `do` would do the step, without taking its turn."""
        pair = self._pairs.get((model, source, target))
        if not _skips(pair, presumed):
            return True
        turns = pair.turns if pair is not None else 0
        return (turns + 1) % PROBE_EVERY == 0

    def turn(self, model: str, source: str, target: str, presumed: bool = False) -> bool:
        """The turn `next_does` looked at, taken (counted while the pair skips: then true),
        and what the caller presumes kept for `states` (the metrics)."""
        key = (model, source, target)
        pair = self._pairs.get(key)
        skips = _skips(pair, presumed)
        if pair is None:
            if not skips:
                return False
            pair = self._pairs[key] = _Pair()
        if presumed != pair.presumed and len(pair.wasted) < MIN_SEEN:
            log.info(
                "model '%s' %s: %s %s before measured (%s); %s",
                model, f"{source}>{target}", self.what, "skipped" if presumed else "done again",
                "the model not writing the language: its plain first tries go as retries"
                if presumed else "its plain first tries no longer go as retries",
                f"one in {PROBE_EVERY} still done" if presumed else "as usual",
            )  # fmt: skip
        pair.presumed = presumed
        if skips:
            pair.turns += 1
        return skips

    def give_back(self, model: str, source: str, target: str) -> None:
        """A turn `take` counted, returned: the step turned out not to apply."""
        pair = self._pairs.get((model, source, target))
        if pair is not None and pair.turns > 0:
            pair.turns -= 1

    def record(self, model: str, source: str, target: str, wasted: bool, limit: float) -> None:
        """One outcome of the step: whether it was waste. Past `limit` (a share of the
        outcomes remembered) the pair skips the step; a pair skipping it, or presumed to
        before it had MIN_SEEN outcomes, does it again only HYSTERESIS under the limit."""
        pair = self._pairs.setdefault((model, source, target), _Pair())
        before = _skips(pair, pair.presumed)
        if len(pair.wasted) == WINDOW:
            pair.waste -= pair.wasted[0]
        pair.wasted.append(wasted)
        pair.waste += wasted
        share = pair.waste / len(pair.wasted)
        if len(pair.wasted) >= MIN_SEEN:
            pair.skipping = share > (limit - HYSTERESIS if before else limit)
        if _skips(pair, pair.presumed) != before:
            log.info(
                "model '%s' %s: %d of the last %d %s were waste; %s",
                model, f"{source}>{target}", pair.waste, len(pair.wasted), self.what,
                "done again" if before else f"skipped (one in {PROBE_EVERY} still done)",
            )  # fmt: skip

    def waste_rate(self, model: str, source: str, target: str) -> float | None:
        pair = self._pairs.get((model, source, target))
        return pair.waste / len(pair.wasted) if pair and pair.wasted else None

    def skipping(self, model: str, source: str, target: str) -> bool:
        pair = self._pairs.get((model, source, target))
        return pair is not None and pair.skipping

    def states(self) -> list[tuple[str, str, float | None, bool]]:
        """(model, "source>target", waste share or None before any outcome, skipping) of
        every pair seen or presumed, for the metrics (tolk_pair_waste_share,
        tolk_pair_skipping)."""
        return [
            (
                model,
                f"{source}>{target}",
                pair.waste / len(pair.wasted) if pair.wasted else None,
                _skips(pair, pair.presumed),
            )
            for (model, source, target), pair in list(self._pairs.items())
            if pair.wasted or pair.turns  # (one ever skipped stays shown, at 0 once done again)
        ]


def _skips(pair: _Pair | None, presumed: bool) -> bool:
    """Whether the step is skipped for the pair: as its own outcomes say once it has
    MIN_SEEN of them (`skipping` is never set before), else as the caller presumes."""
    if pair is not None and len(pair.wasted) >= MIN_SEEN:
        return pair.skipping
    return presumed
