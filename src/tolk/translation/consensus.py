"""Minimum-Bayes-risk selection among a segment's candidate translations.

With `candidates.n` > 1 a segment is translated `n` times (the greedy output and `n`-1
sampled ones, tolk.translation.service) and the output kept is the one that agrees most with
the others: the highest mean chrF++ against every other candidate, each candidate standing in
as a reference for the rest (MBR decoding with chrF++ as the utility, as in Freitag et al.,
"Epsilon Sampling Rocks", 2023). A sampled translation that wanders off alone loses to the
consensus; where the candidates agree, the greedy one is as good as any.

sacrebleu's chrF++ (the metric `tolk bench quality` reports) scores the pairs; only the
selection rule is tolk's, as no well-kept library offers MBR over given strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from sacrebleu.metrics.chrf import CHRF


@lru_cache(maxsize=1)
def _chrf() -> CHRF:
    return CHRF(word_order=2)


def consensus(outputs: Sequence[str], among: Sequence[int] | None = None) -> int:
    """The index of the output with the highest mean chrF++ against all the others (the
    first of equals: the greedy one comes first), chosen `among` these indices (all if
    None; every output still counts as a reference). Fewer than three: the first."""
    eligible = list(range(len(outputs)) if among is None else among)
    if len(outputs) < 3 or len(eligible) < 2:
        return eligible[0]
    chrf = _chrf()
    pairs: dict[tuple[int, int], float] = {}
    for i in eligible:
        for j in range(len(outputs)):
            if i != j:
                pairs[i, j] = chrf.sentence_score(outputs[i], [outputs[j]]).score
    means = {i: sum(pairs[i, j] for j in range(len(outputs)) if j != i) for i in eligible}
    return max(eligible, key=lambda i: (means[i], -i))


__all__ = ["consensus"]
