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
import contextvars
import dataclasses
import functools
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from tolk.config import PlaceholderSyntax
from tolk.detect import Detection, Detector
from tolk.engine import Generation, ModelEngine, ModelPool
from tolk.errors import (
    InvalidRequest,
    PayloadTooLarge,
    UnknownGlossary,
    UnknownTranslationMemory,
)
from tolk.languages import Lang, lang, request_lang
from tolk.memory import SegmentMemory, memory_key, model_revision
from tolk.tm import Match, TranslationMemories
from tolk.translation.checks import (
    LOOP_MIN_CHARS,
    OutputChecks,
    Verdict,
    loop_span,
    strip_cut_characters,
)
from tolk.translation.document import PLACEHOLDER, Document, from_model
from tolk.translation.fidelity import (
    Attempt,
    CheckCounts,
    TextWarning,
    firmer,
    lost_placeholders,
    select,
)
from tolk.translation.formats import Splitter, parse
from tolk.translation.glossary import Glossary, Terms
from tolk.translation.guide import placeholder_regex
from tolk.translation.jobs import EngineJob, plan_job
from tolk.translation.pacing import Pacer
from tolk.translation.plan import DocumentPlan, Done
from tolk.translation.policy import Limits, deadline_of, instructions_for, work_deadline
from tolk.translation.prompts import (
    INSTRUCTED,
    NO_INSTRUCTIONS,
    Instructions,
    clean,
    keep_outer_whitespace,
)
from tolk.translation.request import (
    GlossaryRequest,
    MemoryMode,
    MemoryRequest,
    TranslationRequest,
)
from tolk.translation.results import OnSegment, SegmentDone, Translation, Usage, merge
from tolk.translation.segment import Counter, ManyCounter, Segmented, SplitMode, segment

T = TypeVar("T")


@dataclass
class _Progress:
    planned: int
    segments: int = 1  # the request's size as admitted: its engine requests' rank (size_rank)
    done: int = 0
    in_flight: int = 0


_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


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
        # Per-segment work waits for a turn: one piece per pass of the event loop.
        self.pacer = Pacer()
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
        # In the caller's context, as asyncio.to_thread runs it (the segment memory's
        # partition is a context variable: tolk.memory.partition).
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args)
        return await loop.run_in_executor(self._prepare, call)

    def close(self) -> None:
        self._prepare.shutdown(wait=False, cancel_futures=True)

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

    def _job(
        self,
        engine: ModelEngine,
        index: int,
        text: str,
        source: Lang,
        target: Lang,
        terms: Terms = (),
        instructions: Instructions = NO_INSTRUCTIONS,
        show_examples: bool = True,
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
            show_examples,
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
        request: TranslationRequest,
        on_segment: OnSegment | None = None,
    ) -> Translation:
        """Without a source language each text's is detected; texts in different languages
        are translated as one request per language, side by side (one deadline; if one part
        fails, the others are cancelled)."""
        self.limits.check(texts)
        self.limits.check_alternatives(request.alternatives)
        fmt, rules = request.format, request.rules

        async def part(indices: Sequence[int], source: str) -> Translation:
            chosen = [texts[i] for i in indices]
            return await self.translate_documents(
                lambda cut: [parse(fmt, t, cut, rules) for t in chosen],
                sum(len(t) for t in chosen),
                dataclasses.replace(request, source_lang=source),
                on_segment=on_segment,
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
    ) -> Translation:
        """The one path every request takes (texts, markup, files): `documents(cut)` makes
        the documents once the model (and so its tokenizer) is known. Without a source
        language, it is detected from `sample` (a file's text)."""
        # One deadline from here, the preparation included; the allowance per round of
        # segments is added once the segments are known.
        async with deadline_of(request.deadline) as deadline:
            source_lang, model, split = request.source_lang, request.model, request.split
            detections: tuple[Detection, ...] = ()
            if is_auto(source_lang):
                detections = (self.detector.detect(sample),)  # (its first MAX_CHARS only)
                source_lang = detections[0].language
            assert source_lang is not None
            source = request_lang(source_lang, "source_lang")
            target = request_lang(request.target_lang, "target_lang")
            engine = self.pool.route(source.tag, target.tag, model)
            engine.check_alive()
            if request.translation_memory is not None:  # (the store's database: off the loop)
                await asyncio.to_thread(self._check_memory, request.translation_memory, source)
            told = instructions_for(engine, target, request.instructions)
            cut = self._splitter(engine, split, source)
            plan, resolved = await self.offload(
                self._plan, documents, cut, request.glossary, source, target, engine
            )
            # Admission is decided for the whole request before any per-segment work.
            segments = len(plan.first) + len(plan.known_runs)
            with engine.admit(segments) as window:
                started = time.monotonic()
                slots = asyncio.Semaphore(window)
                # Each segment is 1 + its sampled outputs' sequences in the engine's batch.
                sampled = max(engine.settings.candidates.n - 1, request.alternatives)
                deadline.extend(
                    work_deadline(0, self.limits.segment_seconds, segments * (1 + sampled), window)
                )
                progress = _Progress(segments, segments)
                done: dict[str, Done] = {}
                pending = plan.first
                # Passes: units whole; those whose placeholders did not come back without
                # their paired markup; what still fails, and units over the budget, run by run.
                while pending:
                    progress.planned = max(progress.planned, len(done) + len(pending))
                    done |= await self._generate_all(
                        engine,
                        pending,
                        source,
                        target,
                        slots,
                        on_segment,
                        progress,
                        resolved,
                        told,
                        request.alternatives,
                        request.memory,
                        request.translation_memory,
                    )
                    pending = await self.offload(plan.restore, done)
            engine_seconds = time.monotonic() - started
            texts, alternatives, warnings = await self.offload(
                _rendered, plan, done, request.alternatives
            )
        generations = [g for g in done.values() if not (g.from_memory or g.from_tm)]
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

    def _plan(
        self,
        documents: Callable[[Splitter], Sequence[Document]],
        cut: Splitter,
        asked: GlossaryRequest,
        source: Lang,
        target: Lang,
        engine: ModelEngine,
    ) -> tuple[DocumentPlan, Glossary]:
        """The request's documents parsed, their do-not-translate terms protected and their
        engine work planned (in the preparation pool: linear in the input)."""
        resolved = self._glossary(asked, source, target)
        docs = [resolved.protect(d) for d in documents(cut)]
        return DocumentPlan(docs, cut, self._fits(engine)), resolved

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

    def _memory_key(self, engine: ModelEngine, text: str, job: EngineJob) -> str:
        """Everything that decides a segment's translation (tolk.memory): the model and its
        revision, the segment, the exact prompt and budget, the decoding and checking."""
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
        alternatives: int = 0,
        memory_mode: MemoryMode = "use",
        tm: MemoryRequest | None = None,
    ) -> dict[str, Done]:
        """Every segment through the engine, at most `slots` at a time; each one's prompt
        is built when its turn comes, so a long document does not hold the event loop.
        With `alternatives`, at least that many sampled outputs beside the greedy one
        (`candidates.sampling`), of which those that pass the checks are its alternatives."""

        numbered_from = progress.done
        checks = engine.settings.checks
        candidates = engine.settings.candidates

        async def attempt(
            index: int,
            text: str,
            stop: bool,
            again: Verdict | None,
            job: EngineJob | None = None,
            told: Instructions = instructions,
        ) -> list[Attempt]:
            """One try (the first, or the retry after `again`'s problems). A first try with
            `candidates.n` > 1 is the greedy output and n-1 sampled ones; a markup retry is
            `markup_candidates` sampled outputs of one engine request (guided to bring its
            placeholders back if `checks.markup_guided`: tolk.translation.guide). A first
            try samples as many as `alternatives` asks for, if more; `told`: the segment's
            instructions."""
            if again is not None and checks.retry_instruction:
                told = firmer(engine, told, text, source, target, again)
            if job is None or again is not None:
                # A retry shows no examples: the model may have copied them.
                terms = glossary.terms(text)
                job = self._job(
                    engine, index, text, source, target, terms, told, show_examples=again is None
                )
            sampling, n, regex = None, 1, None
            if again is not None:
                sampling = checks.retry_sampling
                if "placeholders" in again.problems:
                    if checks.markup_candidates > 1:
                        sampling, n = checks.markup_sampling, checks.markup_candidates
                    if checks.markup_guided:
                        regex = placeholder_regex(text, engine.settings.placeholders)
            size = progress.segments
            requests = [
                engine.generate_n(
                    job.prompt_ids, job.max_tokens, sampling, stop, n, regex, segments=size
                )
            ]
            sampled = max(candidates.n - 1, alternatives)
            if again is None and sampled:  # and sampled ones beside the greedy one
                requests.append(
                    engine.generate_n(
                        job.prompt_ids,
                        job.max_tokens,
                        candidates.sampling,
                        stop,
                        sampled,
                        segments=size,
                    )
                )
            progress.in_flight += 1
            try:
                batches = await run_all(requests)
            finally:
                progress.in_flight -= 1
            return [judge(text, g, job) for batch in batches for g in batch]

        def judge(text: str, generation: Generation, job: EngineJob) -> Attempt:
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
                    examples=job.examples,
                )
                if checks.enabled
                else Verdict(("cut_character",) if cut else ())
            )
            return Attempt(output, verdict, generation, job.source_tokens)

        def report(index: int, text: str, finished: Done) -> Done:
            progress.done += 1
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

        async def one(index: int, text: str) -> Done:
            key, job, told = None, None, instructions
            if tm is not None and not PLACEHOLDER.search(text):
                # The user's translation memory: an exact match is the translation; a close
                # one is the model's reference (where the prompt format takes instructions).
                assert self.memories is not None
                match = await asyncio.to_thread(
                    self.memories.match, tm.id, target.code, text, tm.threshold
                )
                if match is not None and match.exact:
                    exact = Done(keep_outer_whitespace(text, match.target), 0, 0, 0, from_tm=True)
                    return report(index, text, exact)
                if match is not None and engine.settings.prompt_format in INSTRUCTED:
                    told = dataclasses.replace(
                        told, custom=(*told.custom, reference_instruction(match))
                    )
            memory = self.memory if memory_mode != "off" else None
            if memory is not None:
                # Looked up before waiting for an engine slot: a hit needs none.
                await self.pacer.turn()
                terms = glossary.terms(text)
                job = self._job(engine, index, text, source, target, terms, told)
                key = self._memory_key(engine, text, job)
                if memory_mode == "use" and not alternatives:
                    found = memory.cached(key)
                    if found is None:
                        found = await asyncio.to_thread(memory.lookup, key)
                    if found is not None:
                        problems = found.problems
                        hit = Done(
                            found.translation,
                            0,
                            0,
                            job.source_tokens,
                            problems=tuple(p for p in problems if p != "placeholders"),
                            found=problems,
                            from_memory=True,
                        )
                        return report(index, text, hit)
            async with slots:
                await self.pacer.turn()
                # A loop is stopped where it shows, not run to the budget (a source that
                # repeats itself may be translated so: its generations run to the end).
                stop = checks.enabled and checks.stop_loops and loop_span(text) < LOOP_MIN_CHARS
                tries = await attempt(index, text, stop, None, job, told)
                # MBR among the greedy output and candidates.n-1 sampled ones; any further
                # sampled outputs are only alternatives.
                among = tries[: candidates.n]
                first = among[0] if len(among) == 1 else await asyncio.to_thread(select, among)
                made = tries
                chosen, retried = first, False
                if checks.enabled and checks.retry and first.verdict.retryable:
                    again = await attempt(index, text, stop, first.verdict, None, told)
                    tries, retried = [*tries, *again], True
                    # The retry's least bad candidate, if it is less bad (a copy of the
                    # examples worst, then by the number of problems).
                    best = min(again, key=lambda a: a.verdict.severity)
                    if best.verdict.severity < first.verdict.severity:
                        chosen = best
            finished = Done(
                text=chosen.output,
                prompt_tokens=sum(t.generation.prompt_tokens for t in tries),
                completion_tokens=sum(t.generation.completion_tokens for t in tries),
                source_tokens=first.source_tokens,
                problems=tuple(p for p in chosen.verdict.problems if p != "placeholders"),
                found=first.verdict.problems,
                retried=retried,
                alternatives=_alternatives(made, chosen.output, alternatives),
                looked_up=key is not None and memory_mode == "use" and not alternatives,
            )
            # Remembered with what the checks found in it: served again with its flags.
            if memory is not None and key is not None:
                memory.put(key, finished.text, chosen.verdict.problems)
            return report(index, text, finished)

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


def _rendered(
    plan: DocumentPlan, done: Mapping[str, Done], alternatives: int
) -> tuple[list[str], list[list[str]], tuple[TextWarning, ...]]:
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


def reference_instruction(match: Match) -> str:
    """A close translation-memory unit as the model's reference."""
    return (
        "A similar sentence was translated before; follow its terminology and style where it "
        f'fits: "{match.source}" was translated as "{match.target}"'
    )


def _alternatives(tries: Sequence[Attempt], chosen: str, wanted: int) -> tuple[str, ...]:
    """Up to `wanted` outputs of a first try's candidates that passed the checks, distinct
    and other than the one chosen, in the order they were made (the greedy one first)."""
    seen = {chosen}
    out: list[str] = []
    for attempt in tries:
        if len(out) == wanted:
            break
        if not attempt.verdict.problems and attempt.output.strip() and attempt.output not in seen:
            seen.add(attempt.output)
            out.append(attempt.output)
    return tuple(out)


__all__ = ["GlossaryRequest", "NamedGlossary", "TranslationRequest", "Translator", "run_all"]
