"""What a translation request comes back as: its texts, usage, warnings and check counts
(Translation), and each finished segment as it finishes (SegmentDone, for progress)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tolk.detect import Detection
from tolk.languages import Lang
from tolk.translation.fidelity import CheckCounts, TextWarning


@dataclass(frozen=True)
class SegmentDone:
    """A finished segment, and where the request stands (for progress reports)."""

    index: int  # its number in the request (in the order segments were submitted)
    text: str
    translation: str
    done: int  # segments finished so far, this one included
    planned: int  # segments known so far (units falling back to their runs add more)
    in_flight: int  # segments of this request in the engine now


OnSegment = Callable[[SegmentDone], None]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    characters: int
    segments: int
    memory_segments: int = 0  # of `segments`, those that came from the segment cache
    memory_lookups: int = 0  # segments looked up in it (hits and misses)
    translation_memory_segments: int = 0  # exact matches in the request's translation memory


@dataclass(frozen=True)
class Translation:
    texts: list[str]
    source: Lang
    target: Lang
    model: str
    usage: Usage
    engine_seconds: float  # wall time spent waiting on the engine
    # (source tokens, output tokens) of each segment: the workload's length profile
    lengths: list[tuple[int, int]]
    # Each text's detected source, when the request named none ("auto")
    detections: tuple[Detection, ...] = ()
    # Each text's other translations, when the request asked for alternatives
    alternatives: tuple[tuple[str, ...], ...] = ()
    warnings: tuple[TextWarning, ...] = ()
    checks: CheckCounts = field(default_factory=CheckCounts)

    def source_of(self, index: int) -> str:
        """The source tag of text `index`: detected, or the request's."""
        return self.detections[index].language if self.detections else self.source.tag


def merge(
    parts: Sequence[Translation],
    indices: Sequence[Sequence[int]],
    detections: tuple[Detection, ...],
) -> Translation:
    """One Translation of several parts (texts by detected language), texts in request order."""
    texts: dict[int, str] = {}
    alternatives: dict[int, tuple[str, ...]] = {}
    for part, ix in zip(parts, indices, strict=True):
        texts |= dict(zip(ix, part.texts, strict=True))
        alternatives |= dict(zip(ix, part.alternatives, strict=False))
    first = parts[0]
    return Translation(
        texts=[texts[i] for i in range(len(texts))],
        source=first.source,
        target=first.target,
        model=first.model,
        usage=Usage(
            prompt_tokens=sum(p.usage.prompt_tokens for p in parts),
            completion_tokens=sum(p.usage.completion_tokens for p in parts),
            characters=sum(p.usage.characters for p in parts),
            segments=sum(p.usage.segments for p in parts),
            memory_segments=sum(p.usage.memory_segments for p in parts),
            memory_lookups=sum(p.usage.memory_lookups for p in parts),
            translation_memory_segments=sum(p.usage.translation_memory_segments for p in parts),
        ),
        engine_seconds=max(p.engine_seconds for p in parts),
        lengths=[pair for p in parts for pair in p.lengths],
        detections=detections,
        alternatives=tuple(alternatives.get(i, ()) for i in range(len(texts)))
        if alternatives
        else (),
        warnings=tuple(
            dataclasses.replace(w, text=ix[w.text])
            for part, ix in zip(parts, indices, strict=True)
            for w in part.warnings
        ),
        checks=CheckCounts.total([p.checks for p in parts]),
    )
