"""What the service does with a segment's output besides cleaning it: the retry's firmer
instructions, placeholders lost, and the warnings a translation comes back with.

The checks themselves (what is wrong with an output) are tolk.translation.checks; this is
what the service makes of them. A segment with a problem is tried once more
(SegmentRun in translation/run.py); what is still wrong becomes a `TextWarning` of its text.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tolk.engine import Generation, ModelEngine
from tolk.languages import Lang
from tolk.translation.checks import DESCRIPTIONS, Verdict
from tolk.translation.consensus import consensus
from tolk.translation.document import PLACEHOLDER, shows_links
from tolk.translation.prompts import INSTRUCTED, Instructions


@dataclass(frozen=True)
class TextWarning:
    """Something tolk suspects about one text's translation (tolk.translation.checks'
    problems, or how its markup fared); `units`: how many of its segments or units."""

    text: int
    code: str
    units: int

    @property
    def message(self) -> str:
        return WARNINGS.get(self.code, self.code)


# How a unit's markup fell back (tolk.translation.plan), as the APIs say it.
MARKUP_WARNINGS: dict[str, str] = {
    "markup_dropped": "the model could not keep the inline markup; the sentence was "
    "translated whole, its emphasis left out",
    "markup_split": "the model could not keep the inline markup; the text runs between it "
    "were translated one by one",
    "untranslated": "no translation kept the markup valid; the source was returned",
}
# What each warning code means, as the APIs say it.
WARNINGS: dict[str, str] = dict(DESCRIPTIONS) | MARKUP_WARNINGS


@dataclass(frozen=True)
class CheckCounts:
    """Segments whose first output had each problem, and what the retries did."""

    found: Mapping[str, int] = field(default_factory=dict)
    retried: int = 0
    mended: int = 0  # retried segments whose second output had no problem left

    @classmethod
    def of(cls, found: Sequence[tuple[str, ...]], retried: Sequence[bool | None]) -> CheckCounts:
        """From each segment's first-try problems and whether it was retried and mended
        (None: not retried)."""
        return cls(
            found=dict(Counter(code for problems in found for code in problems)),
            retried=sum(1 for r in retried if r is not None),
            mended=sum(1 for r in retried if r),
        )

    @classmethod
    def total(cls, parts: Sequence[CheckCounts]) -> CheckCounts:
        found: Counter[str] = Counter()
        for part in parts:
            found.update(part.found)
        return cls(dict(found), sum(p.retried for p in parts), sum(p.mended for p in parts))


@dataclass(frozen=True)
class Attempt:
    output: str
    verdict: Verdict
    generation: Generation
    source_tokens: int


def select(tries: Sequence[Attempt]) -> Attempt:
    """Of one try's candidates, among those with the fewest problems the one the others
    agree with most (tolk.translation.consensus; the first of equals)."""
    fewest = min(a.verdict.severity for a in tries)
    among = [i for i, a in enumerate(tries) if a.verdict.severity == fewest]
    return tries[consensus([a.output for a in tries], among)]


def placeholders(text: str) -> list[str]:
    """The placeholders in a segment (tolk.translation.document), as written, in order."""
    return [m[0] for m in PLACEHOLDER.finditer(text)]


def lost_placeholders(text: str, output: str) -> bool:
    """Whether the output lacks (or invents) any of the segment's placeholders."""
    return sorted(placeholders(text)) != sorted(placeholders(output))


def firmer(
    engine: ModelEngine,
    asked: Instructions,
    text: str,
    source: Lang,
    target: Lang,
    verdict: Verdict,
) -> Instructions:
    """The retry's instructions: the first try's, and a line on what went wrong, for
    prompt formats that take instructions (others retry with other sampling alone)."""
    settings = engine.settings
    if settings.prompt_format not in INSTRUCTED:
        return asked
    lines = [f"Write the translation in {target.name} only, not in {source.name}"]
    if "loop" in verdict.problems or "truncated" in verdict.problems:
        lines.append("Translate each sentence once, without repeating words")
    # Placeholders shown as links get no line of their own: an instruction in the user's
    # message is what the 0.5B model translated into its answer, and one that names no
    # placeholder would come back with a translation that restores (its words in the
    # output). The retry's other sampling is what may mend them. Tags are named: a copied
    # list of tags repeats them, which `restore` refuses.
    if "placeholders" in verdict.problems and not shows_links(text, settings.placeholders):
        tags = " ".join(placeholders(text))
        lines.append(f"Keep each of these tags exactly once, around the words they mark: {tags}")
    return dataclasses.replace(asked, custom=(*asked.custom, *lines))
