"""SubRip files made from cue texts, and what of a subtitle file a translation keeps: cue sizes,
texts and heads."""

from __future__ import annotations

from tests.support.documents import subtitle_blocks
from tolk.translation.document import Document
from tolk.translation.subtitles import (
    CueGroup,
)


def srt(*texts: str) -> str:
    """A SubRip file of one cue per text, made-up timings."""
    return "".join(
        f"{n}\n00:00:{n:02d},000 --> 00:00:{n:02d},900\n{text}\n\n"
        for n, text in enumerate(texts, 1)
    )


def sizes(doc: Document) -> list[int]:
    """How many cues each unit holds."""
    return [len(u.cues) if isinstance(u, CueGroup) else 1 for u in doc.units]


def cue_text(subtitles: str) -> list[str]:
    """Each cue's text lines (after its number and timing)."""
    out = []
    for block in subtitle_blocks(subtitles):
        timing = [i for i, line in enumerate(block) if "-->" in line]
        if timing:
            out.append("\n".join(block[timing[0] + 1 :]))
    return out


def heads(subtitles: str) -> list[str]:
    """Every line that is not cue text: numbers, timings, header, notes, blank lines."""
    out = []
    for block in subtitles.split("\n\n"):
        lines = block.split("\n")
        timing = [i for i, line in enumerate(lines) if "-->" in line]
        out += lines[: timing[0] + 1] if timing else lines
    return out
