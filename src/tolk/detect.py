"""Language detection: which language a text is in, among the languages the server serves.

py3langid (BSD-3, its naive-Bayes model ships inside its 4.6 MB wheel, 139 languages with
Nepali) classifies; the identifier is restricted to the languages the loaded models serve,
which is what makes short texts come out right (a 4-language choice, not a 139-language one).

What a text that cannot be told gives (documented in docs/api.md, "Language detection", and in
OpenAPI):
- no letters at all (digits, emoji, punctuation, whitespace): the configured fallback
  language (default `en`) with confidence 0 and `reliable: false`;
- letters, but a best score under `min_confidence` (very short or mixed text): the best guess
  with its confidence and `reliable: false`.

A call costs tens of microseconds on a sentence (reported by `tolk bench detect`); only the
first `MAX_CHARS` characters are looked at, so a long document costs no more than a page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from py3langid.langid import MODEL_FILE, LanguageIdentifier

from tolk.languages import lang

MAX_CHARS = 2000


@dataclass(frozen=True)
class Detection:
    language: str  # a served BCP-47 tag (e.g. "zh-Hans"), or the fallback
    confidence: float  # 0..1: the classifier's probability among the candidate languages
    reliable: bool
    candidates: tuple[tuple[str, float], ...] = ()  # best first, up to three


class Detector:
    """Detects among `served` (BCP-47 tags); codes py3langid does not know are left out."""

    def __init__(
        self, served: Iterable[str], fallback: str = "en", min_confidence: float = 0.5
    ) -> None:
        self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        known = set(self._identifier.labels)
        # The served tag for each py3langid code: the first one configured ("zh" -> "zh-Hans").
        self.tags: dict[str, str] = {}
        for tag in served:
            code = lang(tag).code
            if code in known:
                self.tags.setdefault(code, tag)
        if self.tags:
            self._identifier.set_languages(sorted(self.tags))
        self.fallback = lang(fallback).tag
        self.min_confidence = min_confidence

    @property
    def languages(self) -> list[str]:
        """The tags detection chooses among."""
        return list(self.tags.values())

    def detect(self, text: str) -> Detection:
        sample = text[:MAX_CHARS]
        if not any(c.isalpha() for c in sample):
            return Detection(self.fallback, 0.0, False)
        ranked = self._identifier.rank(sample)[:3]
        candidates = tuple((self.tags.get(code, code), round(p, 4)) for code, p in ranked)
        best, confidence = candidates[0]
        if len(ranked) > 1 and ranked[0][1] - ranked[1][1] < 1e-6:
            # A tie: nothing in the text told the candidates apart.
            return Detection(self.fallback, 0.0, False, candidates)
        return Detection(best, confidence, confidence >= self.min_confidence, candidates)

    def detect_all(self, texts: Sequence[str]) -> list[Detection]:
        return [self.detect(t) for t in texts]
