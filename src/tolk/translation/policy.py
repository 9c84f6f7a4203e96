"""What a request may ask and how long it may take: the size limits, the deadline that
follows the amount of work, and which instructions a model's prompts can take."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tolk.engine import ModelEngine
from tolk.errors import DeadlineExceeded, InvalidRequest, PayloadTooLarge
from tolk.languages import Lang
from tolk.translation.prompts import FORMAL_REGISTERS, INSTRUCTED, NO_INSTRUCTIONS, Instructions


@dataclass(frozen=True)
class Limits:
    max_request_chars: int
    max_texts: int
    max_file_chars: int = 1_000_000
    segment_seconds: float = 0.0  # added to the deadline per round of segments
    max_alternatives: int = 3
    prepare_threads: int = 2  # tolk.translation.service: the pool for per-request work
    inline_chars: int = 0  # requests of texts up to this size prepared on the loop instead
    max_unzipped_bytes: int = 64 << 20  # a zipped file's members, inflated, all together
    turn_budget: float = 0.005  # seconds of per-text work a loop pass (tolk.translation.pacing)
    subtitles_in_context: bool = False  # a sentence over several cues one unit

    def check_alternatives(self, wanted: int) -> None:
        """Refuse asking for more alternative translations per text than allowed."""
        if wanted > self.max_alternatives:
            raise InvalidRequest(
                f"Invalid request: alternatives parameter must be <= {self.max_alternatives}",
                field="alternatives",
                limit=self.max_alternatives,
            )

    def check(self, texts: Sequence[str]) -> int:
        """Refuse a request of more texts or characters than these limits allow; else its
        characters."""
        if len(texts) > self.max_texts:
            raise PayloadTooLarge(
                f"{len(texts)} texts in one request; at most {self.max_texts} are accepted, "
                "send the rest in further requests",
                field="text",
                limit=self.max_texts,
            )
        chars = sum(len(t) for t in texts)
        if chars > self.max_request_chars:
            raise PayloadTooLarge(
                f"{chars} characters of text in one request; at most "
                f"{self.max_request_chars} are accepted, send the rest in further requests",
                field="text",
                limit=self.max_request_chars,
            )
        return chars


class Deadline:
    """A running deadline (`deadline_of`) that can be given more time once the work it
    covers is known."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._timeout: asyncio.Timeout | None = None

    def extend(self, seconds: float) -> None:
        """`seconds` more than it had (the allowance per round of segments)."""
        if seconds <= 0 or self._timeout is None:
            return
        when = self._timeout.when()
        if when is not None:
            self._timeout.reschedule(when + seconds)
        self.seconds += seconds


@asynccontextmanager
async def deadline_of(seconds: float) -> AsyncIterator[Deadline]:
    deadline = Deadline(seconds)
    try:
        async with asyncio.timeout(seconds) as timeout:
            deadline._timeout = timeout
            yield deadline
    except TimeoutError as exc:
        raise DeadlineExceeded(
            f"the translation did not finish within the {deadline.seconds:g} s deadline and "
            "was stopped; retry later, send shorter texts, or allow a longer deadline",
            deadline=deadline.seconds,
        ) from exc


def work_deadline(base: float, per_round: float, segments: int, window: int) -> float:
    """A request's deadline: `base`, plus `per_round` seconds for each round of its segments
    (how many the engine runs at once, `window`), so it follows the amount of work."""
    return base + per_round * math.ceil(segments / max(1, window))


def instructions_for(engine: ModelEngine, target: Lang, asked: Instructions) -> Instructions:
    """What of `asked` goes into this model's prompts: all of it where the prompt format
    takes instructions; a `prefer_` formality is dropped where it cannot apply, a plain one
    refused (as DeepL refuses formality for a target without registers)."""
    if not asked:
        return asked
    fmt = engine.settings.prompt_format
    if asked.rewrite and fmt != "chat":
        raise InvalidRequest(
            f"model '{engine.name}' ({fmt} prompts) only translates; rephrasing needs a model "
            "served with the chat prompt format",
            field="text",
        )
    instructed = fmt in INSTRUCTED
    if asked.formality and not (instructed and target.code in FORMAL_REGISTERS):
        if not asked.prefer:
            why = (
                f"{target.name} has no formal/informal register tolk can ask for"
                if instructed
                else f"model '{engine.name}' ({fmt} prompts) takes no instructions"
            )
            raise InvalidRequest(
                f"formality is not supported here: {why}; use prefer_more/prefer_less to "
                "ask for it only where it applies",
                field="formality",
            )
        asked = dataclasses.replace(asked, formality=None)
    if asked.custom and not instructed:
        raise InvalidRequest(
            f"custom instructions are not supported by model '{engine.name}' ({fmt} prompts "
            "take none); send the request without them",
            field="custom_instructions",
        )
    return asked if instructed else NO_INSTRUCTIONS
