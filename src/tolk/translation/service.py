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

The Translator here does what is per request: routing, planning, admission and putting the
results together; each pass's segments go through the engine step by step in a SegmentRun
(tolk.translation.run).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from tolk.detect import Detection, Detector
from tolk.engine import ModelEngine, ModelPool
from tolk.engine.timing import CLOCK
from tolk.errors import InvalidRequest, UnknownGlossary, UnknownTranslationMemory
from tolk.languages import Lang, lang, request_lang
from tolk.store.memories import TranslationMemories
from tolk.store.segment_cache import SegmentMemory, memory_key, model_revision
from tolk.translation import chat
from tolk.translation.chat import ChatCompletion
from tolk.translation.checks import OutputChecks, Problem
from tolk.translation.document import Document
from tolk.translation.fidelity import CheckCounts, TextWarning
from tolk.translation.formats import Splitter, parse
from tolk.translation.glossary import Glossary
from tolk.translation.jobs import EngineJob
from tolk.translation.pacing import Pacer
from tolk.translation.plan import DocumentPlan, Done
from tolk.translation.policy import (
    Deadline,
    Limits,
    deadline_of,
    instructions_for,
    work_deadline,
)
from tolk.translation.request import ChatRequest, GlossaryRequest, MemoryRequest, TranslationRequest
from tolk.translation.results import OnSegment, Translation, Usage, merge
from tolk.translation.run import Flow, Progress, Routed, SegmentRun, run_all
from tolk.translation.segment import Counter, ManyCounter, Segmented, SplitMode, segment
from tolk.translation.watch import WINDOW, PairWatch

T = TypeVar("T")


def is_auto(source_lang: str | None) -> bool:
    """Whether a request leaves its source language to detection."""
    return source_lang is None or source_lang.strip().lower() in ("", "auto")


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
        find_glossary: Callable[[str], Sequence[NamedGlossary] | None] | None = None,
        memory: SegmentMemory | None = None,
        memories: TranslationMemories | None = None,
    ) -> None:
        self.pool = pool
        self.limits = limits
        self.glossaries = dict(glossaries or {})
        # Glossaries made through an API (kept in the key store, which other servers may
        # share) found on a miss: each dictionary of one, a language pair apiece.
        self.find_glossary = find_glossary or (lambda glossary_id: None)
        self.memory = memory
        self.memories = memories
        # Per engine name: what identifies its model in segment-memory keys
        self._models: dict[str, dict[str, Any]] = {}
        # Among the languages the models translate from.
        self.detector = Detector(pool.sources)
        # Output checks tell among every language served, targets too.
        self.checks = OutputChecks([*pool.sources, *pool.targets])
        # Per-segment work waits for a turn: a time budget of pieces per pass of the loop.
        self.pacer = Pacer(limits.turn_budget)
        # And requests prepared on the loop (`_prepared`) get turns of their own: a burst of
        # them is spread over passes, and none waits behind other requests' segments.
        self.preparing = Pacer(limits.turn_budget)
        # Per model and pair: whether first tries copy the examples shown, whether markup
        # retries bring placeholders back and whether other retries mend; so whether each is
        # done (tolk.translation.watch).
        self.copying = PairWatch("first tries shown examples")
        self.markup_retries = PairWatch("markup retries")
        # And whether a pair's markup units keep their paired markup: where they rarely do,
        # they start without their emphasis (DocumentPlan's `whole`).
        self.markup_whole = PairWatch("markup units sent whole")
        self.retries = PairWatch("retries")
        # And whether most first tries are replaced by their retry's output: then they go as
        # retries do, and the problems of the last one replaced are what they are told.
        self.first_tries = PairWatch("first tries replaced by their retry")
        self.replaced: dict[tuple[str, str, str], tuple[Problem, ...]] = {}
        # Per-request work whose cost grows with the input (parsing, segmenting, the
        # glossary, planning and rendering documents) runs here, never on the event loop,
        # so one large or hostile request cannot stall every other client; the pool's size
        # bounds how many such requests use CPU at once (`server.prepare_threads`).
        self._prepare = ThreadPoolExecutor(
            max_workers=limits.prepare_threads, thread_name_prefix="tolk-prepare"
        )

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the preparation pool. Cancelling the caller (a deadline, a client
        gone) does not stop the call, which is why every such step is linear in its input
        and bounded by the request size limits."""
        loop = asyncio.get_running_loop()
        # In the caller's context, as asyncio.to_thread runs it (the segment cache's
        # partition is a context variable: tolk.store.segment_cache.partition).
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args)
        return await loop.run_in_executor(self._prepare, call)

    def _inline(self, characters: int, request: TranslationRequest) -> bool:
        """Whether a request of texts is prepared on the event loop: at most
        `limits.inline_chars` characters in all (its parts by language together) and no
        glossary (whose ids may be looked up in the store's database, and whose entries grow
        the work)."""
        glossary = request.glossary
        return characters <= self.limits.inline_chars and not (
            glossary.entries or glossary.ids or glossary.do_not_translate
        )

    async def _prepared(self, inline: bool, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` here, on the event loop, where `inline`; else in the preparation
        pool.

        Parsing, planning and putting back a sentence takes tens of microseconds; the pool's
        hand-off costs more: each call waits for a worker thread to take the interpreter
        lock from the loop (up to its 5 ms switch interval while the loop is busy) and then
        for the loop to run its result, and a request makes three such calls. Only requests
        of at most `limits.inline_chars` characters are prepared here: on the project's
        2-core CPU at most about 3 ms a request for 1,000 characters of the costliest
        markdown found (scripts/prepare-cost.py, docs/benchmarks.md section 28). Each step
        takes a turn of a pacer of its own (`preparing`, tolk.translation.pacing), at once
        while nobody waits: requests arrive in bursts (a client's whole batch in one pass),
        and requests sent together finish together (one engine step hands back all their
        outputs); their segments' turns are another queue."""
        if inline:
            await self.preparing.turn()
            return fn(*args)
        return await self.offload(fn, *args)

    def close(self) -> None:
        self._prepare.shutdown(wait=False, cancel_futures=True)

    async def chat(self, model: str | None, asked: ChatRequest) -> ChatCompletion:
        """A plain chat completion (tolk.translation.chat) by `model` (default: the first
        configured), its conversation rendered off the loop, all of it under its deadline."""
        engine = self.pool.get(model) if model else self.pool.engines[0]
        async with deadline_of(asked.deadline):
            ids = await self.offload(chat.prompt_ids, engine, asked.messages)
            return await chat.complete(engine, ids, asked)

    def detect(self, texts: Sequence[str]) -> list[Detection]:
        return self.detector.detect_all(texts)

    def _glossary(self, request: GlossaryRequest, source: Lang, target: Lang) -> Glossary:
        entries: dict[str, str] = {}
        for glossary_id in request.ids:
            configured = self.glossaries.get(glossary_id)
            found = [configured] if configured else self.find_glossary(glossary_id)
            if not found:
                known = ", ".join(sorted(self.glossaries)) or "none are configured"
                raise UnknownGlossary(
                    f"no glossary '{glossary_id}' on this server ({known})",
                    field="glossary_id",
                )
            pair = (source.code, target.code)
            named = next(
                (g for g in found if (lang(g.source).code, lang(g.target).code) == pair), None
            )
            if named is None:
                has = ", ".join(f"{g.source}>{g.target}" for g in found)
                raise UnknownGlossary(
                    f"glossary '{glossary_id}' has no dictionary for {source.tag}>{target.tag} "
                    f"(it has {has})",
                    field="glossary_id",
                )
            entries |= named.entries
        entries |= request.entries
        return Glossary(entries, request.do_not_translate)

    async def translate(
        self,
        texts: Sequence[str],
        request: TranslationRequest,
        on_segment: OnSegment | None = None,
        *,
        alone: bool = True,
    ) -> Translation:
        """Without a source language each text's is detected; texts in different languages
        are translated as one request per language, side by side (one deadline; if one part
        fails, the others are cancelled). `alone`: not one of several translations of one
        request run side by side (only a request alone may be prepared on the loop: `_inline`
        counts its characters)."""
        characters = self.limits.check(texts)
        self.limits.check_alternatives(request.alternatives)
        fmt, rules = request.format, request.rules
        in_context = self.limits.subtitles_in_context
        inline = alone and self._inline(characters, request)

        async def part(indices: Sequence[int], source: str) -> Translation:
            chosen = [texts[i] for i in indices]
            return await self.translate_documents(
                lambda cut: [parse(fmt, t, cut, rules, in_context) for t in chosen],
                sum(len(t) for t in chosen),
                dataclasses.replace(request, source_lang=source),
                on_segment=on_segment,
                inline=inline,
                plain=fmt == "text",
            )

        if not is_auto(request.source_lang):
            assert request.source_lang is not None
            return await part(range(len(texts)), request.source_lang)
        if not texts:
            return await part([], self.detector.fallback)
        detections = self.detect(texts)
        groups: dict[str, list[int]] = {}
        for i, detection in enumerate(detections):
            groups.setdefault(detection.language, []).append(i)
        parts = await run_all([part(ix, source) for source, ix in groups.items()])
        return merge(parts, list(groups.values()), tuple(detections))

    async def translate_documents(
        self,
        documents: Callable[[Splitter], Sequence[Document]],
        characters: int,
        request: TranslationRequest,
        *,
        on_segment: OnSegment | None = None,
        sample: str = "",
        inline: bool = False,
        plain: bool = False,
    ) -> Translation:
        """The one path every request takes (texts, markup, files): `documents(cut)` makes
        the documents once the model (and so its tokenizer) is known. Without a source
        language, it is detected from `sample` (a file's text). `inline`: the documents are
        parsed, planned and rendered on the event loop, not in the preparation pool
        (`_inline`). `plain`: the documents are plain text (no unit has emphasis)."""
        # One deadline from here, the preparation included; the allowance per round of
        # segments is added once the segments are known. The HTTP request's clock, if any
        # (tolk.engine.timing), marks when its segments were done and put back.
        clock = CLOCK.get()
        async with deadline_of(request.deadline) as deadline:
            routed, detections, plan = await self._routed(documents, request, sample, inline, plain)
            done, engine_seconds = await self._passes(
                routed, plan, request, deadline, on_segment, inline
            )
            if clock is not None:
                clock.translated = time.monotonic()
            rendered = await self._prepared(inline, _rendered, plan, done, request.alternatives)
        if clock is not None:
            clock.rendered = time.monotonic()
        return _translation(routed, request, done, rendered, characters, engine_seconds, detections)

    async def _routed(
        self,
        documents: Callable[[Splitter], Sequence[Document]],
        request: TranslationRequest,
        sample: str,
        inline: bool,
        plain: bool,
    ) -> tuple[Routed, tuple[Detection, ...], DocumentPlan]:
        """The request's source language (detected from `sample` if it names none), its
        engine, its glossary and instructions, and its documents' plan."""
        source_lang = request.source_lang
        detections: tuple[Detection, ...] = ()
        if is_auto(source_lang):
            detections = (self.detector.detect(sample),)  # (its first MAX_CHARS only)
            source_lang = detections[0].language
        assert source_lang is not None
        source = request_lang(source_lang, "source_lang")
        target = request_lang(request.target_lang, "target_lang")
        engine = self.pool.route(source.tag, target.tag, request.model)
        engine.check_alive()
        if request.translation_memory is not None:  # (the store's database: off the loop)
            await asyncio.to_thread(self._check_memory, request.translation_memory, source)
        told = instructions_for(engine, target, request.instructions)
        cut = self._splitter(engine, request.split, source)
        # (Decided here, on the loop, whose the watches are: the plan is made off it.) The
        # turn is taken now, not once the plan shows units with emphasis: requests of a burst
        # wait side by side for their plans, and each must see the turns of those before it
        # (else all go whole, or none, where one in 10 should); given back without such units.
        # Plain text has none (so goes whole) and takes no turn: holding one while its plan
        # is made would move the probes.
        presumed = self._skips_whole_unmeasured(engine, source, target)
        pair = (engine.name, source.tag, target.tag)
        whole, taken = (True, False) if plain else self.markup_whole.take(*pair, presumed)
        split = engine.settings.checks.markup_split_unwritten and not self.writes(
            engine, source, target
        )
        try:
            plan, resolved = await self._prepared(
                inline,
                self._plan,
                documents,
                cut,
                request.glossary,
                source,
                target,
                engine,
                whole,
                split,
            )
        except BaseException:
            if taken:  # (refused, or cancelled while it waited: it had no turn)
                self.markup_whole.give_back(*pair)
            raise
        if taken and not plan.emphasised:
            # A probe's turn is a request the decision applied to (not a plain text's).
            self.markup_whole.give_back(*pair)
        return Routed(engine, source, target, resolved, told), detections, plan

    async def _passes(
        self,
        routed: Routed,
        plan: DocumentPlan,
        request: TranslationRequest,
        deadline: Deadline,
        on_segment: OnSegment | None,
        inline: bool,
    ) -> tuple[dict[str, Done], float]:
        """Every segment of the plan translated, pass by pass, and the seconds spent on the
        engine. Admission is decided for the whole request before any per-segment work."""
        engine = routed.engine
        segments = len(plan.first)
        with engine.admit(segments) as window:
            started = time.monotonic()
            slots = asyncio.Semaphore(window)
            # Each segment is 1 + its sampled outputs' sequences in the engine's batch (a
            # markup segment's twin, `candidates.markup_n`, not counted: aborted once the
            # greedy output passes, it runs whole only where a retry would have run).
            sampled = max(engine.settings.candidates.n - 1, request.alternatives)
            deadline.extend(
                work_deadline(0, self.limits.segment_seconds, segments * (1 + sampled), window)
            )
            progress = Progress(segments, segments)
            early = engine.settings.checks.markup_fallback_early
            flow = Flow(slots, progress, on_segment, plan.fallbacks if early else {})
            done: dict[str, Done] = {}
            pending = plan.first
            # Passes: units whole (or without their emphasis: DocumentPlan's `whole`), and
            # run by run those over the budget; those whose placeholders did not come back
            # without their paired markup (started early, beside the markup retry: Flow);
            # what still fails run by run.
            try:
                while pending:
                    progress.planned = max(progress.planned, len(done) + len(pending))
                    done |= await SegmentRun(self, routed, request, flow).translate(pending)
                    pending = await self._prepared(inline, plan.restore, done)
                    self._count_whole(routed, plan.judged())
            finally:
                flow.close()
        return done, time.monotonic() - started

    def _plan(
        self,
        documents: Callable[[Splitter], Sequence[Document]],
        cut: Splitter,
        asked: GlossaryRequest,
        source: Lang,
        target: Lang,
        engine: ModelEngine,
        whole: bool,
        split: bool,
    ) -> tuple[DocumentPlan, Glossary]:
        """The request's documents parsed, their do-not-translate terms protected and their
        engine work planned (in the preparation pool: linear in the input). `whole`: whether
        units with emphasis go whole first (the `markup_whole` watch's, decided in `_routed`);
        `split`: whether units with markup go run by run from the start
        (`checks.markup_split_unwritten`)."""
        resolved = self._glossary(asked, source, target)
        docs = [resolved.protect(d) for d in documents(cut)]
        return DocumentPlan(docs, cut, self._fits(engine), whole, split), resolved

    def _skips_whole_unmeasured(self, engine: ModelEngine, source: Lang, target: Lang) -> bool:
        """Whether the pair's units with emphasis start without it before its own outcomes
        decide (`markup_whole`'s `presumed`; with enough of them they do, save one request
        with such units in 10: `checks.markup_skip_limit`, tolk.translation.watch): where
        the model does not write the target language (`unwritten`), unless the limit is 1
        (then nothing is counted, `_count_whole`, and the pair never skips)."""
        checks = engine.settings.checks
        return checks.markup_skip_limit < 1 and self.unwritten(engine, source, target)

    def writes(self, engine: ModelEngine, source: Lang, target: Lang) -> bool:
        """Whether the model writes the pair: not where its plain first tries go as retries
        (the first-try watch skips them: most were replaced by their retry's output,
        tolk.translation.watch)."""
        return not self.first_tries.skipping(engine.name, source.tag, target.tag)

    def unwritten(self, engine: ModelEngine, source: Lang, target: Lang) -> bool:
        """Whether the pair's markup steps are presumed waste before they are measured
        (`checks.markup_skip_unwritten`): the model does not write it (`writes`)."""
        return engine.settings.checks.markup_skip_unwritten and not self.writes(
            engine, source, target
        )

    def _count_whole(self, routed: Routed, kept: Sequence[bool]) -> None:
        """The pass's units sent whole, each kept its markup or not, for the pair's watch:
        only the last WINDOW (all it remembers), so a document of thousands of units costs
        the event loop no more than one of 200."""
        engine = routed.engine
        limit = engine.settings.checks.markup_skip_limit
        if limit >= 1:
            return
        pair = (engine.name, routed.source.tag, routed.target.tag)
        for one in kept[-WINDOW:]:
            self.markup_whole.record(*pair, not one, limit)

    def _check_memory(self, asked: MemoryRequest, source: Lang) -> None:
        """The translation memory a request names exists, for its source language."""
        info = self.memories.get(asked.id) if self.memories is not None else None
        if info is None:
            raise UnknownTranslationMemory(
                f"no translation memory '{asked.id}' on this server (imported with `tolk "
                "memories import`; GET /v3/translation_memories lists them)",
                field="translation_memory_id",
            )
        if info.source_lang != source.code:
            raise InvalidRequest(
                f"translation memory '{info.name}' is for source language "
                f"{info.source_lang}, the request's is {source.code}",
                field="translation_memory_id",
            )

    def memory_key(self, engine: ModelEngine, text: str, job: EngineJob) -> str:
        """Everything that decides a segment's translation (tolk.store.segment_cache): the model
        and its revision, the segment, the exact prompt and budget, the decoding and checking."""
        model = self._models.get(engine.name)
        if model is None:  # once per engine: reading the weights' files is not per segment
            model = self._models[engine.name] = {
                "model": engine.name,
                "revision": model_revision(engine.settings.path),
                "settings": engine.settings.model_dump(
                    mode="json",
                    include={"prompt_format", "placeholders", "sampling", "checks", "candidates"},
                ),
            }
        return memory_key(
            model | {"segment": text, "prompt": job.prompt_ids, "max_tokens": job.max_tokens}
        )

    @staticmethod
    def _splitter(engine: ModelEngine, split: SplitMode, source: Lang) -> Splitter:
        count, count_many = token_counters(engine.tokenizer)

        def cut(text: str) -> Segmented:
            return segment(
                text,
                split,
                language=source.code,
                max_tokens=engine.settings.max_segment_tokens,
                count=count,
                count_many=count_many,
            )

        return cut

    @staticmethod
    def _fits(engine: ModelEngine) -> Callable[[str], bool]:
        """Whether a markup unit goes to the model whole; one over `max_segment_tokens` is
        translated run by run instead."""
        limit = engine.settings.max_segment_tokens
        count, _ = token_counters(engine.tokenizer)
        return lambda masked: len(masked.encode()) <= limit or count(masked) <= limit


def token_counters(tokenizer: Any) -> tuple[Counter, ManyCounter]:
    """Token counts of pieces, without special tokens, for the preparation threads: through
    the fast tokenizer's Rust core where there is one (`backend_tokenizer`: a quarter of the
    wrapper's cost per call, safe to share between threads since encoding does not change it;
    many pieces in one batched call), else through `encode`."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:

        def count(piece: str) -> int:
            return len(tokenizer.encode(piece, add_special_tokens=False))

        return count, lambda pieces: [count(p) for p in pieces]

    def fast(piece: str) -> int:
        return len(backend.encode(piece, add_special_tokens=False).ids)

    def many(pieces: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in backend.encode_batch(list(pieces), add_special_tokens=False)]

    return fast, many


# The documents put back together, their alternatives and warnings (_rendered).
Rendered = tuple[list[str], list[list[str]], tuple[TextWarning, ...]]


def _rendered(plan: DocumentPlan, done: Mapping[str, Done], alternatives: int) -> Rendered:
    """The documents put back together, their alternatives and warnings (in the preparation
    pool, like their parsing)."""
    texts = plan.render(done)
    others = plan.alternatives(done, alternatives)
    warnings = tuple(
        TextWarning(text, code, units)
        for text, codes in enumerate(plan.warnings(done))
        for code, units in sorted(codes.items())
    )
    return texts, others, warnings


def _translation(
    routed: Routed,
    request: TranslationRequest,
    done: Mapping[str, Done],
    rendered: Rendered,
    characters: int,
    engine_seconds: float,
    detections: tuple[Detection, ...],
) -> Translation:
    """The request's Translation: its rendered texts, alternatives and warnings, and what
    its segments cost and what the checks found in them."""
    texts, alternatives, warnings = rendered
    generations = [g for g in done.values() if not (g.from_memory or g.from_tm)]
    return Translation(
        texts=texts,
        source=routed.source,
        target=routed.target,
        model=routed.engine.name,
        usage=Usage(
            prompt_tokens=sum(g.prompt_tokens for g in generations),
            completion_tokens=sum(g.completion_tokens for g in generations),
            characters=characters,
            segments=len(done),
            memory_segments=sum(g.from_memory for g in done.values()),
            translation_memory_segments=sum(g.from_tm for g in done.values()),
            memory_lookups=sum(g.looked_up or g.from_memory for g in done.values()),
        ),
        engine_seconds=engine_seconds,
        lengths=[(g.source_tokens, g.completion_tokens) for g in generations],
        detections=detections,
        alternatives=tuple(tuple(a) for a in alternatives) if request.alternatives else (),
        warnings=warnings,
        checks=CheckCounts.of(
            [g.found for g in generations],
            [(not g.problems) if g.retried else None for g in generations],
        ),
    )


__all__ = ["GlossaryRequest", "NamedGlossary", "TranslationRequest", "Translator", "run_all"]
