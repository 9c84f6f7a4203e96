"""Output budgets per language pair, measured with the served model's own tokenizer.

A segment's `max_tokens` follows its source length: `ceil(source_tokens * ratio) + extra`.
One ratio for every pair is wrong for a real model: a BPE vocabulary trained mostly on Latin
script and Chinese spends several times more tokens on a Devanagari sentence than on the same
sentence in English, so en->ne output was cut at the budget (mid-character, too) while a loop
into German ran twice as long as any translation could. So the ratio is measured per pair:
the parallel sample shipped in tolk/data/parallel (100 FLORES-101 sentences in eight
languages) is tokenized with the model's tokenizer, and the ratio is the 95th percentile of
the per-sentence `target tokens / source tokens` of the sample times a headroom. A
translation is then never cut by a budget it could not fit (a loop is stopped where it shows:
tolk.translation.checks.token_loop).

A configured `max_tokens_ratio` applies to every pair as before (benchmarks that need outputs
of a known length set it). Pairs outside the sample use DEFAULT_RATIO.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from tolk.languages import Lang, lang

DEFAULT_RATIO = 2.0
# The ratio a long translation of the sample reaches (its 95th percentile: the largest is
# an outlier, a two-word heading)...
QUANTILE = 0.95
# ...and room above it for a sentence phrased longer still. Short segments also get the
# configured `max_tokens_extra` (16 tokens) on top.
HEADROOM = 1.5
# Never tighter than this, whatever the sample says (a short source can grow a lot).
MIN_RATIO = 1.5

# The sample's files by language code (ISO 639-3 names, as FLORES has them).
_FILES = {
    "en": "eng",
    "de": "deu",
    "fr": "fra",
    "es": "spa",
    "pt": "por",
    "ne": "npi",
    "zh": "cmn_Hans",
    "ja": "jpn",
}


@cache
def sample(code: str) -> tuple[str, ...] | None:
    """The parallel sample's sentences in language `code`, or None outside it."""
    name = _FILES.get(code)
    if name is None:
        return None
    text = (resources.files("tolk") / "data" / "parallel" / f"{name}.txt").read_text("utf-8")
    return tuple(line for line in text.splitlines() if line.strip())


def counting(tokenizer: Any) -> Callable[[str], int]:
    """A text's token count by `tokenizer`, special tokens left out: what Budgets measure."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


class Budgets:
    """Ratios per (source, target) for one model's tokenizer, measured on first use."""

    def __init__(self, count: Callable[[str], int], fixed: float | None = None) -> None:
        self._count = count
        self.fixed = fixed
        self._lengths: dict[str, list[int]] = {}
        self._ratios: dict[tuple[str, str], float] = {}

    def prepare(self) -> None:
        """Count every sample language's tokens now (unless one ratio is configured)."""
        if self.fixed is None:
            for code in _FILES:
                self._tokens(code)

    def _tokens(self, code: str) -> list[int] | None:
        if code not in self._lengths:
            sentences = sample(code)
            if sentences is None:
                return None
            self._lengths[code] = [max(1, self._count(s)) for s in sentences]
        return self._lengths[code]

    def ratio(self, source: Lang, target: Lang) -> float:
        if self.fixed is not None:
            return self.fixed
        key = (source.code, target.code)
        if key not in self._ratios:
            src, tgt = self._tokens(source.code), self._tokens(target.code)
            if src is None or tgt is None or source.code == target.code:
                measured = DEFAULT_RATIO
            else:
                ratios = sorted(t / s for s, t in zip(src, tgt, strict=True))
                high = ratios[min(len(ratios) - 1, int(QUANTILE * len(ratios)))]
                measured = max(MIN_RATIO, round(high * HEADROOM, 2))
            self._ratios[key] = measured
        return self._ratios[key]

    def table(self, codes: list[str]) -> dict[str, float]:
        """Every pair among `codes` ('en>ne': ratio), for docs/api.md's output budgets and
        `tolk bench`."""
        return {f"{a}>{b}": self.ratio(lang(a), lang(b)) for a in codes for b in codes if a != b}
