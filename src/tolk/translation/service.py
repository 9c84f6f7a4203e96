"""A translation request becomes engine requests and comes back as one response.

Each text is cut into segments (tolk.translation.segment: lines, long ones at sentences,
everything between them kept byte for byte), and each distinct segment of the whole request
is its own engine request, submitted concurrently, so a document batches with everything
else in vLLM's continuous batching. Admission is decided for all the segments at once, they
share one deadline, and if any part fails the rest is cancelled (which aborts it in the
engine): a request ends complete or as one error, never half done.

Every segment's output is checked (tolk.translation.checks: wrong language, the source
echoed, a loop, cut at the budget, placeholders lost); one with a problem is tried once more
(tolk.translation.fidelity), and what is still wrong comes back as a warning of its text.
Documents go through the model in passes (tolk.translation.plan).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from tolk.budget import DEFAULT_RATIO
from tolk.config import ModelSettings, PlaceholderSyntax
from tolk.detect import Detection, Detector
from tolk.engine import Generation, ModelEngine, ModelPool, Tokenizer
from tolk.errors import (
    DeadlineExceeded,
    InvalidRequest,
    PayloadTooLarge,
    UnknownGlossary,
)
from tolk.languages import Lang, lang, request_lang
from tolk.translation.checks import (
    LOOP_MIN_CHARS,
    OutputChecks,
    Verdict,
    loop_span,
    strip_cut_characters,
)
from tolk.translation.document import PLACEHOLDER, Document, for_model, from_model
from tolk.translation.fidelity import (
    Attempt,
    CheckCounts,
    TextWarning,
    firmer,
    lost_placeholders,
)
from tolk.translation.formats import Format, Splitter, parse
from tolk.translation.glossary import Glossary, Terms
from tolk.translation.html_format import DEFAULT_RULES, TagRules
from tolk.translation.pacing import Pacer
from tolk.translation.plan import DocumentPlan, Done
from tolk.translation.prompts import (
    FORMAL_REGISTERS,
    FORMATS,
    INSTRUCTED,
    NO_INSTRUCTIONS,
    ChatPrompt,
    Instructions,
    Prompt,
    clean,
    keep_outer_whitespace,
)
from tolk.translation.segment import Segmented, SplitMode, segment

T = TypeVar("T")


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


@dataclass
class _Progress:
    planned: int
    done: int = 0
    in_flight: int = 0


_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


@dataclass(frozen=True)
class Limits:
    max_request_chars: int
    max_texts: int
    max_file_chars: int = 1_000_000
    segment_seconds: float = 0.0  # added to the deadline per round of segments


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    characters: int
    segments: int


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
    warnings: tuple[TextWarning, ...] = ()
    checks: CheckCounts = field(default_factory=CheckCounts)

    def source_of(self, index: int) -> str:
        """The source tag of text `index`: detected, or the request's."""
        return self.detections[index].language if self.detections else self.source.tag


@dataclass(frozen=True)
class EngineJob:
    index: int
    prompt_ids: list[int]
    max_tokens: int
    source_tokens: int


@asynccontextmanager
async def _deadline(seconds: float) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise DeadlineExceeded(
            f"the translation did not finish within the {seconds:g} s deadline and was "
            "stopped; retry later, send shorter texts, or allow a longer deadline",
            deadline=seconds,
        ) from exc


def work_deadline(base: float, per_round: float, segments: int, window: int) -> float:
    """A request's deadline: `base`, plus `per_round` seconds for each round of its segments
    (how many the engine runs at once, `window`), so it follows the amount of work."""
    return base + per_round * math.ceil(segments / max(1, window))


def render(prompt: Prompt, tokenizer: Tokenizer) -> list[int]:
    """Token ids for a prompt: chat prompts through the model's own chat template."""
    if isinstance(prompt, ChatPrompt):
        text = tokenizer.apply_chat_template(
            prompt.messages, tokenize=False, add_generation_prompt=True
        )
        return tokenizer.encode(str(text), add_special_tokens=False)
    return tokenizer.encode(prompt.text)


def plan_job(
    settings: ModelSettings,
    tokenizer: Tokenizer,
    max_model_len: int,
    index: int,
    text: str,
    source: Lang,
    target: Lang,
    terms: Terms = (),
    instructions: Instructions = NO_INSTRUCTIONS,
    ratio: float | None = None,
) -> EngineJob:
    """The engine request tolk makes of one segment: its prompt token ids and output budget
    (`ratio`: output tokens per source token for this pair, tolk.budget; the configured or
    default one if None). The benchmarks that feed an engine directly (tolk.bench.overhead,
    .versus) use it too, so both sides of a comparison get the very same prompts."""
    prompt = FORMATS[settings.prompt_format](
        for_model(text.strip(), settings.placeholders), source, target, terms, instructions
    )
    prompt_ids = render(prompt, tokenizer)
    source_tokens = len(tokenizer.encode(text, add_special_tokens=False))
    budget = output_budget(
        source_tokens,
        len(prompt_ids),
        ratio or settings.max_tokens_ratio or DEFAULT_RATIO,
        settings.max_tokens_extra,
        max_model_len,
    )
    return EngineJob(index, prompt_ids, budget, source_tokens)


def output_budget(
    source_tokens: int, prompt_tokens: int, ratio: float, extra: int, max_model_len: int
) -> int:
    """max_tokens for one text: follows the input length, never past the context."""
    room = max_model_len - prompt_tokens
    return max(0, min(math.ceil(source_tokens * ratio) + extra, room))


async def run_all(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all; on the first failure cancel the rest and raise that failure itself."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_as_coroutine(a)) for a in awaitables]
    except BaseExceptionGroup as grouped:
        raise grouped.exceptions[0] from None
    return [t.result() for t in tasks]


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def is_auto(source_lang: str | None) -> bool:
    """Whether a request leaves its source language to detection."""
    return source_lang is None or source_lang.strip().lower() in ("", "auto")


def _merge(
    parts: Sequence[Translation],
    indices: Sequence[Sequence[int]],
    detections: tuple[Detection, ...],
) -> Translation:
    """One Translation of several parts (texts by detected language), texts in request order."""
    texts: dict[int, str] = {}
    for part, ix in zip(parts, indices, strict=True):
        texts |= dict(zip(ix, part.texts, strict=True))
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
        ),
        engine_seconds=max(p.engine_seconds for p in parts),
        lengths=[pair for p in parts for pair in p.lengths],
        detections=detections,
        warnings=tuple(
            dataclasses.replace(w, text=ix[w.text])
            for part, ix in zip(parts, indices, strict=True)
            for w in part.warnings
        ),
        checks=CheckCounts.total([p.checks for p in parts]),
    )


def _instructions(engine: ModelEngine, target: Lang, asked: Instructions) -> Instructions:
    """What of `asked` goes into this model's prompts: all of it where the prompt format
    takes instructions; a `prefer_` formality is dropped where it cannot apply, a plain one
    refused (as DeepL refuses formality for a target without registers)."""
    if not asked:
        return asked
    fmt = engine.settings.prompt_format
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


@dataclass(frozen=True)
class GlossaryRequest:
    """A request's glossary: its own entries, the ids of configured (or API-made)
    glossaries whose entries it uses, and terms that must come back untranslated."""

    entries: Mapping[str, str] = field(default_factory=dict)
    ids: Sequence[str] = ()
    do_not_translate: Sequence[str] = ()


@dataclass(frozen=True)
class NamedGlossary:
    source: str
    target: str
    entries: Mapping[str, str]


class Translator:
    def __init__(
        self,
        pool: ModelPool,
        limits: Limits,
        glossaries: Mapping[str, NamedGlossary] | None = None,
        find_glossary: Callable[[str], NamedGlossary | None] | None = None,
    ) -> None:
        self.pool = pool
        self.limits = limits
        self.glossaries = dict(glossaries or {})
        # Glossaries made elsewhere (another server sharing the key store) found on a miss.
        self.find_glossary = find_glossary or (lambda glossary_id: None)
        # Among the languages the models translate from.
        self.detector = Detector(pool.sources)
        # Output checks tell among every language served, targets too.
        self.checks = OutputChecks([*pool.sources, *pool.targets])
        # Per-text work waits for a turn: one piece per pass of the event loop.
        self.pacer = Pacer()

    def detect(self, texts: Sequence[str]) -> list[Detection]:
        return self.detector.detect_all(texts)

    def _glossary(self, request: GlossaryRequest, source: Lang, target: Lang) -> Glossary:
        entries: dict[str, str] = {}
        for glossary_id in request.ids:
            named = self.glossaries.get(glossary_id) or self.find_glossary(glossary_id)
            if named is None:
                known = ", ".join(sorted(self.glossaries)) or "none are configured"
                raise UnknownGlossary(
                    f"no glossary '{glossary_id}' on this server ({known})",
                    field="glossary_id",
                )
            pair = (lang(named.source).code, lang(named.target).code)
            if pair != (source.code, target.code):
                raise UnknownGlossary(
                    f"glossary '{glossary_id}' is for {named.source}>{named.target}, "
                    f"not {source.tag}>{target.tag}",
                    field="glossary_id",
                )
            entries |= named.entries
        entries |= request.entries
        return Glossary(entries, request.do_not_translate)

    def _check_limits(self, texts: Sequence[str]) -> None:
        if len(texts) > self.limits.max_texts:
            raise PayloadTooLarge(
                f"{len(texts)} texts in one request; at most {self.limits.max_texts} are accepted, "
                "send the rest in further requests",
                field="text",
                limit=self.limits.max_texts,
            )
        chars = sum(len(t) for t in texts)
        if chars > self.limits.max_request_chars:
            raise PayloadTooLarge(
                f"{chars} characters of text in one request; at most "
                f"{self.limits.max_request_chars} are accepted, send the rest in further requests",
                field="text",
                limit=self.limits.max_request_chars,
            )

    def _job(
        self,
        engine: ModelEngine,
        index: int,
        text: str,
        source: Lang,
        target: Lang,
        terms: Terms = (),
        instructions: Instructions = NO_INSTRUCTIONS,
    ) -> EngineJob:
        job = plan_job(
            engine.settings,
            engine.tokenizer,
            engine.max_model_len,
            index,
            text,
            source,
            target,
            terms,
            instructions,
            engine.budgets.ratio(source, target),
        )
        if job.max_tokens < min(job.source_tokens, 16) or job.max_tokens < 1:
            raise PayloadTooLarge(
                f"segment {index} needs {len(job.prompt_ids)} prompt tokens, which leaves no "
                f"room for its translation in model '{engine.name}''s context of "
                f"{engine.max_model_len} tokens; send it with split 'sentences' (the default) "
                "or in shorter texts",
                field="text",
                prompt_tokens=len(job.prompt_ids),
                max_model_len=engine.max_model_len,
            )
        return job

    async def translate(
        self,
        texts: Sequence[str],
        source_lang: str | None,
        target_lang: str,
        model: str | None,
        deadline: float,
        split: SplitMode = "sentences",
        fmt: Format = "text",
        on_segment: OnSegment | None = None,
        glossary: GlossaryRequest | None = None,
        instructions: Instructions | None = None,
        rules: TagRules = DEFAULT_RULES,
    ) -> Translation:
        """`source_lang` None or "auto": each text's language is detected; texts in different
        languages are translated as one request per language, side by side (one deadline;
        if one part fails, the others are cancelled)."""
        self._check_limits(texts)

        async def part(indices: Sequence[int], source: str) -> Translation:
            chosen = [texts[i] for i in indices]
            return await self.translate_documents(
                lambda cut: [parse(fmt, t, cut, rules) for t in chosen],
                sum(len(t) for t in chosen),
                source,
                target_lang,
                model,
                deadline,
                split,
                on_segment=on_segment,
                glossary=glossary,
                instructions=instructions,
            )

        if not is_auto(source_lang):
            assert source_lang is not None
            return await part(range(len(texts)), source_lang)
        if not texts:
            return await part([], self.detector.fallback)
        detections = self.detect(texts)
        groups: dict[str, list[int]] = {}
        for i, detection in enumerate(detections):
            groups.setdefault(detection.language, []).append(i)
        parts = await run_all([part(ix, source) for source, ix in groups.items()])
        return _merge(parts, list(groups.values()), tuple(detections))

    async def translate_documents(
        self,
        documents: Callable[[Splitter], Sequence[Document]],
        characters: int,
        source_lang: str | None,
        target_lang: str,
        model: str | None,
        deadline: float,
        split: SplitMode = "sentences",
        *,
        on_segment: OnSegment | None = None,
        glossary: GlossaryRequest | None = None,
        instructions: Instructions | None = None,
        sample: str = "",
    ) -> Translation:
        """The one path every request takes (texts, markup, files): `documents(cut)` makes
        the documents once the model (and so its tokenizer) is known. Without a source
        language, it is detected from `sample` (a file's text)."""
        detections: tuple[Detection, ...] = ()
        if is_auto(source_lang):
            detections = (self.detector.detect(sample),)
            source_lang = detections[0].language
        assert source_lang is not None
        source = request_lang(source_lang, "source_lang")
        target = request_lang(target_lang, "target_lang")
        engine = self.pool.route(source.tag, target.tag, model)
        engine.check_alive()
        told = _instructions(engine, target, instructions or NO_INSTRUCTIONS)
        cut = self._splitter(engine, split, source)
        resolved = self._glossary(glossary or GlossaryRequest(), source, target)
        await self.pacer.turn()
        docs = [resolved.protect(d) for d in documents(cut)]
        plan = DocumentPlan(docs, cut, self._fits(engine))
        # Admission is decided for the whole request before any per-segment work.
        segments = len(plan.first) + len(plan.known_runs)
        with engine.admit(segments) as window:
            started = time.monotonic()
            slots = asyncio.Semaphore(window)
            seconds = work_deadline(deadline, self.limits.segment_seconds, segments, window)
            async with _deadline(seconds):
                progress = _Progress(segments)
                done: dict[str, Done] = {}
                pending = plan.first
                # Passes: units whole; those whose placeholders did not come back without
                # their paired markup; what still fails, and units over the budget, run by run.
                while pending:
                    progress.planned = max(progress.planned, len(done) + len(pending))
                    done |= await self._generate_all(
                        engine, pending, source, target, slots, on_segment, progress, resolved, told
                    )
                    pending = plan.restore(done)
        engine_seconds = time.monotonic() - started
        generations = list(done.values())
        texts = plan.render(done)
        return Translation(
            texts=texts,
            source=source,
            target=target,
            model=engine.name,
            usage=Usage(
                prompt_tokens=sum(g.prompt_tokens for g in generations),
                completion_tokens=sum(g.completion_tokens for g in generations),
                characters=characters,
                segments=len(done),
            ),
            engine_seconds=engine_seconds,
            lengths=[(g.source_tokens, g.completion_tokens) for g in generations],
            detections=detections,
            warnings=tuple(
                TextWarning(text, code, units)
                for text, codes in enumerate(plan.warnings(done))
                for code, units in sorted(codes.items())
            ),
            checks=CheckCounts.of(
                [g.found for g in generations],
                [(not g.problems) if g.retried else None for g in generations],
            ),
        )

    @staticmethod
    def _splitter(engine: ModelEngine, split: SplitMode, source: Lang) -> Splitter:
        tokenizer = engine.tokenizer

        def cut(text: str) -> Segmented:
            return segment(
                text,
                split,
                language=source.code,
                max_tokens=engine.settings.max_segment_tokens,
                count=lambda piece: len(tokenizer.encode(piece, add_special_tokens=False)),
            )

        return cut

    @staticmethod
    def _fits(engine: ModelEngine) -> Callable[[str], bool]:
        """Whether a markup unit goes to the model whole; one over `max_segment_tokens` is
        translated run by run instead."""
        limit = engine.settings.max_segment_tokens
        return lambda masked: (
            len(masked.encode()) <= limit
            or len(engine.tokenizer.encode(masked, add_special_tokens=False)) <= limit
        )

    async def _generate_all(
        self,
        engine: ModelEngine,
        segments: Sequence[str],
        source: Lang,
        target: Lang,
        slots: asyncio.Semaphore,
        on_segment: OnSegment | None,
        progress: _Progress,
        glossary: Glossary,
        instructions: Instructions,
    ) -> dict[str, Done]:
        """Every segment through the engine, at most `slots` at a time; each one's prompt
        is built when its turn comes, so a long document does not hold the event loop."""

        numbered_from = progress.done
        checks = engine.settings.checks

        async def attempt(
            index: int, text: str, stop: bool, again: Verdict | None
        ) -> list[Attempt]:
            """One try (the first, or the retry after `again`'s problems); a markup retry
            is `markup_candidates` sampled outputs of one engine request."""
            told = instructions
            if again is not None and checks.retry_instruction:
                told = firmer(engine, told, text, source, target, again)
            job = self._job(engine, index, text, source, target, glossary.terms(text), told)
            sampling, n = None, 1
            if again is not None:
                sampling = checks.retry_sampling
                if "placeholders" in again.problems and checks.markup_candidates > 1:
                    sampling, n = checks.markup_sampling, checks.markup_candidates
            progress.in_flight += 1
            try:
                generations = await engine.generate_n(
                    job.prompt_ids, job.max_tokens, sampling, stop, n
                )
            finally:
                progress.in_flight -= 1
            return [judge(text, g, job.source_tokens) for g in generations]

        def judge(text: str, generation: Generation, source_tokens: int) -> Attempt:
            output, cut = self._finish(text, generation, target, engine.settings.placeholders)
            verdict = (
                self.checks.check(
                    PLACEHOLDER.sub(" ", text),
                    PLACEHOLDER.sub(" ", output),
                    source.tag,
                    target.tag,
                    finish_reason=generation.finish_reason,
                    cut_character=cut,
                    lost_placeholders=lost_placeholders(text, output),
                )
                if checks.enabled
                else Verdict(("cut_character",) if cut else ())
            )
            return Attempt(output, verdict, generation, source_tokens)

        async def one(index: int, text: str) -> Done:
            async with slots:
                await self.pacer.turn()
                # A loop is stopped where it shows, not run to the budget (a source that
                # repeats itself may be translated so: its generations run to the end).
                stop = checks.enabled and checks.stop_loops and loop_span(text) < LOOP_MIN_CHARS
                (first,) = await attempt(index, text, stop, None)
                chosen, tries = first, [first]
                if checks.enabled and checks.retry and first.verdict.retryable:
                    again = await attempt(index, text, stop, first.verdict)
                    tries += again
                    # The first candidate with the fewest problems, if it has fewer.
                    best = min(again, key=lambda a: len(a.verdict.problems))
                    if len(best.verdict.problems) < len(first.verdict.problems):
                        chosen = best
                progress.done += 1
                finished = Done(
                    text=chosen.output,
                    prompt_tokens=sum(t.generation.prompt_tokens for t in tries),
                    completion_tokens=sum(t.generation.completion_tokens for t in tries),
                    source_tokens=first.source_tokens,
                    problems=tuple(p for p in chosen.verdict.problems if p != "placeholders"),
                    found=first.verdict.problems,
                    retried=len(tries) > 1,
                )
                if on_segment is not None:
                    on_segment(
                        SegmentDone(
                            numbered_from + index,
                            text,
                            finished.text,
                            progress.done,
                            progress.planned,
                            progress.in_flight,
                        )
                    )
                return finished

        done = await run_all([one(i, s) for i, s in enumerate(segments)])
        return dict(zip(segments, done, strict=True))

    @staticmethod
    def _finish(
        source_text: str, generation: Generation, target: Lang, syntax: PlaceholderSyntax
    ) -> tuple[str, bool]:
        """The output as a translation, and whether a cut character was removed from it (the
        budget stopped the model inside a multi-byte character: never returned)."""
        whole, cut = strip_cut_characters(generation.text, source_text)
        translation = clean(from_model(source_text, whole, syntax), source_text, target)
        if "\n" not in source_text:
            # A line's translation stays one line, or the text's line structure would move.
            translation = _LINE_BREAKS.sub(" ", translation)
        return keep_outer_whitespace(source_text, translation), cut


__all__ = [
    "DocumentPlan",
    "Done",
    "GlossaryRequest",
    "Limits",
    "NamedGlossary",
    "SegmentDone",
    "TextWarning",
    "Translation",
    "Translator",
    "Usage",
]
