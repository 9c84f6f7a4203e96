"""One pass of a request's segments through its engine (tolk.translation.service runs the
passes): for each segment, step by step, its translation memory's match, the segment
cache, the first try (with its sampled candidates), the retry of a flagged output, what is
remembered of it and the report of it as done.

The service keeps what is per request (routing, planning, admission, putting the results
together); what is per segment is here, as methods of one SegmentRun per pass, sharing
what is the same for all its segments (the engine, the language pair, the glossary, the
instructions, the request's options) as attributes read once per pass. A module of its
own so that each step can be read, and changed, apart from the request's bookkeeping; it
uses the Translator only for what the server shares (the output checks, the pacer, the
memories, the segment cache's keys), and the service is its only caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from tolk.config import PlaceholderSyntax
from tolk.engine import Generation, ModelEngine
from tolk.errors import PayloadTooLarge, TolkError
from tolk.languages import Lang
from tolk.store.memories import Match
from tolk.translation.checks import LOOP_MIN_CHARS, Verdict, loop_span, strip_cut_characters
from tolk.translation.document import PLACEHOLDER, from_model
from tolk.translation.fidelity import Attempt, firmer, lost_placeholders, placeholders, select
from tolk.translation.glossary import Glossary
from tolk.translation.guide import placeholder_regex
from tolk.translation.jobs import EngineJob, JobSettings, build_job
from tolk.translation.plan import Done
from tolk.translation.prompts import INSTRUCTED, Instructions, clean, keep_outer_whitespace
from tolk.translation.request import TranslationRequest
from tolk.translation.results import OnSegment, SegmentDone
from tolk.translation.watch import PairWatch

if TYPE_CHECKING:
    from tolk.translation.service import Translator

T = TypeVar("T")
log = logging.getLogger("tolk.translation")

_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


async def run_all(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all; on the first failure cancel the rest and raise that failure itself.

    One alone is awaited here, in this task: a task of its own would cost two passes of the
    event loop (one to start it, one to wake this task when it is done), and at 256 clients
    on the H200 a pass lasts milliseconds (docs/benchmarks.md, section 28); most requests are
    one segment, and most tries one engine request."""
    if len(awaitables) == 1:
        return [await awaitables[0]]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_as_coroutine(a)) for a in awaitables]
    except BaseExceptionGroup as grouped:
        raise grouped.exceptions[0] from None
    return [t.result() for t in tasks]


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _detached(awaitable: Awaitable[T]) -> asyncio.Future[T]:
    """`awaitable` running on its own, perhaps no longer waited for (a sampled candidate
    once another was good enough): its error, if any, is its alone, retrieved rather than
    logged as never retrieved."""
    task = asyncio.ensure_future(awaitable)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return task


@dataclass
class Progress:
    """Where a request stands, for its progress reports (SegmentDone)."""

    planned: int
    segments: int = 1  # the request's size as admitted: its engine requests' rank (size_rank)
    done: int = 0
    in_flight: int = 0

    @contextlib.contextmanager
    def flying(self) -> Iterator[None]:
        """One try of a segment in the engine for the body of the `with`."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


@dataclass(frozen=True)
class Routed:
    """A request once routed: its engine and language pair, the glossary resolved for that
    pair and the instructions for the target (tolk.translation.policy.instructions_for)."""

    engine: ModelEngine
    source: Lang
    target: Lang
    glossary: Glossary
    instructions: Instructions


@dataclass(frozen=True)
class Flow:
    """How a request's segments move, the same in each of its passes: at most `slots` in
    the engine at once, counted in `progress`, each told to `on_segment` when done.

    `fallbacks`: a markup unit's segment -> the segment its unit falls back to if the
    segment's placeholders do not come back (DocumentPlan.fallbacks; empty unless
    `checks.markup_fallback_early`). Such a fallback is started as soon as a first try lost
    them, beside the markup retry, and kept in `early` for the next pass (which awaits it
    instead of starting it again); cancelled if the retry brings the placeholders back."""

    slots: asyncio.Semaphore
    progress: Progress
    on_segment: OnSegment | None = None
    fallbacks: Mapping[str, str] = field(default_factory=dict)
    early: dict[str, asyncio.Task[Done]] = field(default_factory=dict)

    def start_fallback(self, text: str, produce: Callable[[str], Awaitable[Done]]) -> None:
        """`text`'s fallback started (by `produce`), unless it has none or is started."""
        fallback = self.fallbacks.get(text)
        if fallback is None or fallback in self.early:
            return
        task = asyncio.ensure_future(produce(fallback))
        # An error is the next pass's to raise; one never awaited (cancelled, not needed)
        # is read here so that asyncio does not log it as lost.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self.early[fallback] = task

    def drop_fallback(self, text: str) -> None:
        """`text`'s fallback is not needed (its placeholders came back): aborted."""
        fallback = self.fallbacks.get(text)
        task = self.early.pop(fallback, None) if fallback is not None else None
        if task is not None:
            task.cancel()

    async def stand_in(self, text: str) -> None:
        """Until `text`'s fallback started early has finished, if it runs: the fallback holds
        no slot of its own but stands in `text`'s, so a request never has more fallbacks in
        the engine than its window."""
        fallback = self.fallbacks.get(text)
        task = self.early.get(fallback) if fallback is not None else None
        if task is not None:
            await asyncio.wait({task})

    def taken(self, text: str) -> asyncio.Task[Done] | None:
        """The fallback started early for `text`, if it was and still runs or ran."""
        task = self.early.pop(text, None)
        if task is None or task.cancelled() or task.cancelling():
            return None
        return task

    def close(self) -> None:
        """Every fallback started early and never needed: aborted."""
        for task in self.early.values():
            task.cancel()
        self.early.clear()


class SegmentRun:
    """One pass of a request's segments through its engine, at most `flow.slots` at a
    time; each one's prompt is built when its turn comes, so a long document does not hold
    the event loop. With the request's `alternatives`, at least that many sampled outputs
    beside the greedy one (`candidates.sampling`), of which those that pass the checks are
    its alternatives."""

    __slots__ = (
        "_alternatives",
        "_candidates",
        "_checks",
        "_copying",
        "_engine",
        "_first_watch",
        "_flow",
        "_glossary",
        "_instructed",
        "_instructions",
        "_lookups",
        "_markup_watch",
        "_memories",
        "_memory",
        "_numbered_from",
        "_output_checks",
        "_pacer",
        "_retries",
        "_retry_watch",
        "_sampled",
        "_source",
        "_stop_loops",
        "_target",
        "_tm",
        "_translator",
        "_twin_pairs",
        "_twins",
    )

    def __init__(
        self, translator: Translator, routed: Routed, request: TranslationRequest, flow: Flow
    ) -> None:
        engine = self._engine = routed.engine
        self._source, self._target = routed.source, routed.target
        self._glossary, self._instructions = routed.glossary, routed.instructions
        self._translator = translator
        self._output_checks, self._pacer = translator.checks, translator.pacer
        self._flow = flow
        # This pass's segments are numbered after those of the passes before it.
        self._numbered_from = flow.progress.done
        settings = engine.settings
        checks = self._checks = settings.checks
        self._candidates = settings.candidates
        self._twins = settings.markup_twins
        self._twin_pairs = self._candidates.markup_twin_pairs
        self._instructed = settings.prompt_format in INSTRUCTED
        self._alternatives = request.alternatives
        # A first try samples this many outputs beside the greedy one.
        self._sampled = max(self._candidates.n - 1, request.alternatives)
        self._stop_loops = checks.enabled and checks.stop_loops
        self._retries = checks.enabled and checks.retry
        # What is learnt per pair (tolk.translation.watch): whether first tries copy the
        # examples, whether markup retries bring placeholders back.
        watch = checks.enabled and settings.prompt_examples > 0
        watch = watch and settings.prompt_format == "chat" and settings.examples_copy_limit < 1
        self._copying = translator.copying if watch else None
        watch = self._retries and checks.markup_retry_min_mended > 0
        self._markup_watch = translator.markup_retries if watch else None
        watch = self._retries and checks.retry_min_mended > 0
        self._retry_watch = translator.retries if watch else None
        # Sampled candidates and alternatives need the usual first try beside them.
        watch = self._retries and checks.first_as_retry_limit < 1 and not self._sampled
        self._first_watch = translator.first_tries if watch else None
        self._tm = request.translation_memory
        self._memories = translator.memories
        self._memory = translator.memory if request.memory != "off" else None
        # Whether the segment cache is looked up (else only written).
        self._lookups = request.memory == "use" and not request.alternatives

    async def translate(self, segments: Sequence[str]) -> dict[str, Done]:
        """Every segment of the pass, each as `segment` does it."""
        done = await run_all([self.segment(i, s) for i, s in enumerate(segments)])
        return dict(zip(segments, done, strict=True))

    async def segment(self, index: int, text: str) -> Done:
        """One segment, as `produce` makes it (or made it, started early as a fallback:
        Flow), counted and reported."""
        early = self._flow.taken(text)
        finished = await early if early is not None else await self.produce(index, text)
        return self.report(index, text, finished)

    async def produce(self, index: int, text: str, slotted: bool = True) -> Done:
        """One segment: from the request's translation memory, else from the segment
        memory, else from the engine (and remembered). `slotted`: waits for one of the
        request's engine slots (a fallback started early does not: it runs in the slot of
        its unit's segment, which waits for it: Flow.stand_in)."""
        told = self._instructions
        if self._tm is not None and not PLACEHOLDER.search(text):
            # The user's translation memory: an exact match is the translation; a close
            # one is the model's reference (where the prompt format takes instructions).
            match = await self.memory_match(text)
            if match is not None and match.exact:
                return Done(keep_outer_whitespace(text, match.target), 0, 0, 0, from_tm=True)
            if match is not None and self._instructed:
                told = dataclasses.replace(
                    told, custom=(*told.custom, reference_instruction(match))
                )
        form = self.first_form(text, told)
        job: EngineJob | None = None
        key: str | None = None
        if self._memory is not None:
            job, key, hit = await self.recall(index, text, form)
            if hit is not None:
                return hit
        finished, verdict = await self.translated(index, text, job, form, key is not None, slotted)
        self.remember(key, finished.text, verdict)
        return finished

    async def memory_match(self, text: str) -> Match | None:
        """The request's translation memory's best unit for `text` (its database: off the
        loop)."""
        assert self._tm is not None
        assert self._memories is not None
        tm = self._tm
        return await asyncio.to_thread(
            self._memories.match, tm.id, self._target.code, text, tm.threshold
        )

    async def recall(
        self, index: int, text: str, form: FirstForm
    ) -> tuple[EngineJob, str, Done | None]:
        """The segment's job and its key in the segment cache (tolk.store.segment_cache), and
        what the cache has for it if it is looked up. Looked up before waiting for an engine slot:
        a hit needs none."""
        memory = self._memory
        assert memory is not None
        await self._pacer.turn()
        job = self.job(index, text, form.told, form.examples)
        key = self._translator.memory_key(self._engine, text, job)
        if not self._lookups:
            return job, key, None
        found = memory.cached(key)
        if found is None:
            found = await asyncio.to_thread(memory.lookup, key)
        if found is None:
            return job, key, None
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
        return job, key, hit

    async def translated(
        self,
        index: int,
        text: str,
        job: EngineJob | None,
        form: FirstForm,
        looked_up: bool,
        slotted: bool = True,
    ) -> tuple[Done, Verdict]:
        """The segment through the engine once it has a slot: its first try and, if that
        has a problem another try may mend, its retry; the translation chosen, and its
        verdict. A markup unit's first try that lost placeholders starts the unit's
        fallback at once (Flow), dropped again if the retry brings them back."""
        flow = self._flow
        async with flow.slots if slotted else contextlib.nullcontext():
            await self._pacer.turn()
            # A loop is stopped where it shows, not run to the budget (a source that
            # repeats itself may be translated so: its generations run to the end).
            stop = self._stop_loops and loop_span(text) < LOOP_MIN_CHARS
            tries, first = await self.first_try(index, text, stop, job, form)
            made = tries
            chosen, retried = first, False
            if "placeholders" in first.verdict.problems:
                flow.start_fallback(text, lambda plain: self.produce(index, plain, False))
            if self._retries and first.verdict.retryable and self.retrying(first.verdict, form):
                again = await self.retry(index, text, stop, first.verdict, form.asked)
                tries, retried = [*tries, *again], True
                # The retry's least bad candidate, if it is less bad (a copy of the
                # examples worst, then by the number of problems).
                best = min(again, key=lambda a: a.verdict.severity)
                if best.verdict.severity < first.verdict.severity:
                    chosen = best
                self.count_retry(first.verdict, again, mended=chosen is best)
                if "placeholders" not in chosen.verdict.problems:
                    flow.drop_fallback(text)
            self.count_first(form, first.verdict, replaced=chosen is not first)
            if "placeholders" in chosen.verdict.problems:
                await flow.stand_in(text)
        finished = Done(
            text=chosen.output,
            prompt_tokens=sum(t.generation.prompt_tokens for t in tries),
            completion_tokens=sum(t.generation.completion_tokens for t in tries),
            source_tokens=first.source_tokens,
            problems=tuple(p for p in chosen.verdict.problems if p != "placeholders"),
            found=first.verdict.problems,
            retried=retried,
            alternatives=_alternatives(made, chosen.output, self._alternatives),
            looked_up=looked_up and self._lookups,
        )
        return finished, chosen.verdict

    async def first_try(
        self, index: int, text: str, stop: bool, job: EngineJob | None, form: FirstForm
    ) -> tuple[list[Attempt], Attempt]:
        """The segment's first try, and the output chosen of it: the greedy output (or, as
        a retry, `checks.retry_sampling`'s) and, with `candidates.n` > 1, n-1 sampled ones
        to choose among by minimum Bayes risk; as many as the request's `alternatives` if
        more, the further ones only alternatives. A segment with placeholders (at least
        `candidates.markup_twin_pairs` of them pairs) gets `candidates.markup_n`-1 where that
        is more and the model writes the pair (`writes`);
        where it would get none otherwise they are a hedge, waited for only if the greedy
        output has problems (`_hedged`). `job`: the segment's, if the segment cache's step
        made it already."""
        if job is None:
            job = self.job(index, text, form.told, form.examples)
        engine, size = self._engine, self._flow.progress.segments
        ids, budget = job.prompt_ids, job.max_tokens
        decoding = self._checks.retry_sampling if form.as_retry else None
        requests = [engine.generate_n(ids, budget, decoding, stop, 1, None, segments=size)]
        candidates, sampled, hedged = self._candidates.n, self._sampled, False
        twins = self._twins
        if twins and form.markup and form.pairs >= self._twin_pairs and self.writes():
            # `candidates.markup_n`'s, only a hedge where no candidate is asked for otherwise.
            hedged, candidates, sampled = not sampled, 1 + twins, max(sampled, twins)
        if sampled:  # and sampled ones beside the greedy one
            sampling = self._candidates.sampling
            requests.append(engine.generate_n(ids, budget, sampling, stop, sampled, segments=size))
        if hedged:
            tries = await self._hedged(requests[0], requests[1], text, job)
        else:
            tries = await self._submitted(requests, text, job)
        among = tries[:candidates]
        first = among[0] if len(among) == 1 else await asyncio.to_thread(select, among)
        if self._copying is not None and job.examples:
            copied = "copied_example" in first.verdict.problems
            limit = engine.settings.examples_copy_limit
            self._copying.record(engine.name, self._source.tag, self._target.tag, copied, limit)
        return tries, first

    def first_form(self, text: str, told: Instructions) -> FirstForm:
        """How the segment's first try goes (tolk.translation.watch): as the pair's retries
        do, where most of its first tries were replaced by their retry's output (told what
        the last such first try's retry was told, with `checks.retry_sampling`), unless it
        has placeholders; else with the pair's examples, unless the model has been copying
        them (then without, told what a copy's retry is told).

        A segment with placeholders always goes as usual: the retry's repetition penalty
        counts the prompt's tokens too, so it steers the model away from writing the
        placeholders back (measured on the H100: en-ne markup units kept none of them and
        took 0.4-1.5 s longer, docs/benchmarks.md section 23)."""
        pair = (self._engine.name, self._source.tag, self._target.tag)
        first, copying = self._first_watch, self._copying
        markup = PLACEHOLDER.search(text) is not None
        pairs = 0  # paired placeholders opened (`<gN>`), for `candidates.markup_twin_pairs`
        if markup and self._twins and self._twin_pairs:
            pairs = sum(p.startswith("<g") for p in placeholders(text))
        # Only plain texts are the first-try watch's: measured and switched.
        watched = first is not None and not markup
        if watched and first is not None and not first.do(*pair):
            problems = self._translator.replaced.get(pair, ())
            told_again = self.told_again(text, told, Verdict(problems))
            return FirstForm(told, told_again, False, watched, markup, as_retry=True)
        if copying is None or copying.do(*pair):
            return FirstForm(told, told, True, watched, markup, pairs=pairs)
        again = self.told_again(text, told, COPIED)
        return FirstForm(told, again, False, watched, markup, pairs=pairs)

    def told_again(self, text: str, told: Instructions, problems: Verdict) -> Instructions:
        """A retry's instructions after `problems`: firmer, where `checks.retry_instruction`."""
        if not self._checks.retry_instruction:
            return told
        return firmer(self._engine, told, text, self._source, self._target, problems)

    def _watch_of(self, first: Verdict) -> PairWatch | None:
        """The pair's watch over the retry `first` would have (tolk.translation.watch): the
        markup retry's where lost placeholders are all another try could mend, or, where the
        model does not write the pair (`unwritten`), where they are lost beside other
        problems; none for a copy of the examples (always retried: its words are another
        sentence's), else that of retries."""
        if _markup_only(first):
            return self._markup_watch
        if "copied_example" in first.problems:
            return None
        # Lost placeholders beside another problem: the retry is a markup retry all the same
        # (`retry`: the markup candidates, sampled; where the model rambles, each to its
        # budget), while the unit's fallback, started at once, is a fresh try of its text.
        # Where the model does not write the pair it is presumed waste as a markup-only
        # loss's is, and counted so: on the CPU the 0.5B Qwen's en-ne markup units made 72%
        # of their tokens in such retries (docs/benchmarks.md, section 33).
        markup = self._markup_watch
        lost = "placeholders" in first.problems
        engine, source, target = self._engine, self._source, self._target
        if lost and markup is not None and self._translator.unwritten(engine, source, target):
            return markup
        return self._retry_watch

    def retrying(self, first: Verdict, form: FirstForm) -> bool:
        """Whether a first try with problems is retried: yes, unless its pair's retries of
        such problems rarely mend them (tolk.translation.watch), or it went as a retry and
        its retry would be the same request (greedy `checks.retry_sampling`; a markup retry
        samples candidates, so is still done). A markup retry (any retry of lost
        placeholders, other problems or not) is presumed waste before it is measured where
        the model does not write the target language (`checks.markup_skip_unwritten`). A
        markup unit not retried falls back to its plain text at once; a text keeps its first
        try, flagged."""
        greedy = self._checks.retry_sampling.temperature == 0
        if form.as_retry and greedy and not _markup_only(first):
            return False
        watch = self._watch_of(first)
        if watch is None:
            return True
        engine, source, target = self._engine, self._source, self._target
        # (Read for each retry, as `writes` is: the pair may turn out unwritten mid-pass.)
        presumed = watch is self._markup_watch and self._translator.unwritten(
            engine, source, target
        )
        return watch.do(engine.name, source.tag, target.tag, presumed)

    def count_first(self, form: FirstForm, first: Verdict, replaced: bool) -> None:
        """A plain text's usual first try's outcome, for its pair's watch over first tries:
        waste if its retry's output replaced it. A copy of an example is the examples'
        watch's, so not counted here."""
        watch = self._first_watch
        if watch is None or not form.watched or form.as_retry:
            return
        if "copied_example" in first.problems:
            return
        pair = (self._engine.name, self._source.tag, self._target.tag)
        if replaced:  # what a first try going as a retry is told
            self._translator.replaced[pair] = first.problems
        watch.record(*pair, replaced, self._checks.first_as_retry_limit)

    def count_retry(self, first: Verdict, again: Sequence[Attempt], mended: bool) -> None:
        """A retry's outcome, for the pair's watch: a markup retry is waste if no output of
        it brought every placeholder back, another retry if its output was not less bad."""
        watch, checks = self._watch_of(first), self._checks
        if watch is None:
            return
        if watch is self._markup_watch:
            wasted = all("placeholders" in a.verdict.problems for a in again)
            limit = 1 - checks.markup_retry_min_mended
        else:
            wasted, limit = not mended, 1 - checks.retry_min_mended
        watch.record(self._engine.name, self._source.tag, self._target.tag, wasted, limit)

    async def retry(
        self, index: int, text: str, stop: bool, again: Verdict, told: Instructions
    ) -> list[Attempt]:
        """The retry after `again`'s problems, without examples (the model may have copied
        them), with firmer instructions if `checks.retry_instruction`: one output with
        `checks.retry_sampling`, or for lost placeholders `markup_candidates` sampled
        outputs (guided to bring its placeholders back if `checks.markup_guided`:
        tolk.translation.guide): of one engine request, or with `checks.markup_first_clean`
        as that many requests, until the first without a problem (`_first_clean`)."""
        checks, engine = self._checks, self._engine
        if checks.retry_instruction:
            told = firmer(engine, told, text, self._source, self._target, again)
        job = self.job(index, text, told, show_examples=False)
        sampling, n, regex = checks.retry_sampling, 1, None
        if "placeholders" in again.problems:
            if checks.markup_candidates > 1:
                sampling, n = checks.markup_sampling, checks.markup_candidates
            if checks.markup_guided:
                regex = placeholder_regex(text, engine.settings.placeholders)
        size = self._flow.progress.segments
        if n > 1 and checks.markup_first_clean:
            requests = [
                engine.generate_n(ids, job.max_tokens, sampling, stop, 1, regex, segments=size)
                for ids in [job.prompt_ids] * n
            ]
            return await self._first_clean(requests, text, job)
        request = engine.generate_n(
            job.prompt_ids, job.max_tokens, sampling, stop, n, regex, segments=size
        )
        return await self._submitted([request], text, job)

    async def _first_clean(
        self, requests: Sequence[Awaitable[list[Generation]]], text: str, job: EngineJob
    ) -> list[Attempt]:
        """Sampled candidates of one prompt, each its own engine request, judged as each
        comes back: the first without a problem ends the wait and the others are aborted in
        the engine (their tokens so far spent, not in the request's usage); where none is
        clean, all of them. The prompt's tokens are counted once, as for vLLM's `n`.

        Not one request with `n` streamed: vLLM would then hand this event loop an output
        for every candidate at every engine step, where separate requests asking for their
        final output only come back once each (and vLLM's `n` is separate requests inside
        the engine all the same: its parallel sampling fans a request out)."""
        tasks = [_detached(r) for r in requests]
        judged: list[Attempt] = []
        with self._flow.progress.flying():
            try:
                for next_back in asyncio.as_completed(tasks):
                    (generation,) = await next_back
                    if judged:
                        generation = dataclasses.replace(generation, prompt_tokens=0)
                    judged.append(self.judge(text, generation, job))
                    if not judged[-1].verdict.problems:
                        break
            finally:
                for task in tasks:
                    task.cancel()  # aborted in the engine, if still running
        return judged

    async def _submitted(
        self, requests: Sequence[Awaitable[list[Generation]]], text: str, job: EngineJob
    ) -> list[Attempt]:
        """A try's engine requests, run together, and each of their outputs judged."""
        with self._flow.progress.flying():
            batches = await run_all(requests)
        return [self.judge(text, g, job) for batch in batches for g in batch]

    def writes(self) -> bool:
        """Whether the model writes the pair well enough for a sampled twin of a first try
        to be worth its tokens: not where the pair's plain first tries are mostly replaced
        by their retries' output (tolk.translation.watch: en-ne with the 0.5B Qwen, whose
        markup units' first tries and their twins kept their placeholders in few cases)."""
        return self._translator.writes(self._engine, self._source, self._target)

    async def _hedged(
        self,
        greedy: Awaitable[list[Generation]],
        sampled: Awaitable[list[Generation]],
        text: str,
        job: EngineJob,
    ) -> list[Attempt]:
        """A first try's greedy output, and its sampled candidates only if it has problems.
        They run beside it from the start (the prompt read once, no round more if they are
        needed) and are aborted in the engine once the greedy output passes the checks, so
        a segment whose greedy output is good waits for it alone, not for the longer of its
        candidates (on one H200 at 120 markup units at once, waiting for both kept such
        units at 1.0-1.3 s, about twice vLLM's server: docs/benchmarks.md section 29). The
        tokens of aborted candidates are not in the request's usage."""
        others = _detached(sampled)
        with self._flow.progress.flying():
            try:
                first = [self.judge(text, g, job) for g in await greedy]
                if not first[0].verdict.problems:
                    return first
                try:
                    return [*first, *(self.judge(text, g, job) for g in await others)]
                except TolkError as exc:  # the greedy output is in hand: it goes on as without
                    log.warning("a sampled twin of segment %d failed: %s", job.index, exc)
                    return first
            finally:
                others.cancel()  # aborted in the engine, if still running

    def job(
        self, index: int, text: str, told: Instructions, show_examples: bool = True
    ) -> EngineJob:
        """The segment's engine request (tolk.translation.jobs) with its glossary terms,
        `told` and the pair's budget ratio; refused if its prompt leaves no room for the
        translation in the model's context."""
        engine, source, target = self._engine, self._source, self._target
        how = JobSettings(
            self._glossary.terms(text), told, engine.budgets.ratio(source, target), show_examples
        )
        job = build_job(
            engine.settings,
            engine.tokenizer,
            engine.max_model_len,
            index,
            text,
            source,
            target,
            how,
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

    def judge(self, text: str, generation: Generation, job: EngineJob) -> Attempt:
        """One output as a translation of `text`, and what the output checks find in it."""
        target = self._target
        output, cut = finish(text, generation, target, self._engine.settings.placeholders)
        verdict = (
            self._output_checks.check(
                PLACEHOLDER.sub(" ", text),
                PLACEHOLDER.sub(" ", output),
                self._source.tag,
                target.tag,
                finish_reason=generation.finish_reason,
                cut_character=cut,
                lost_placeholders=lost_placeholders(text, output),
                examples=job.examples,
            )
            if self._checks.enabled
            else Verdict(("cut_character",) if cut else ())
        )
        return Attempt(output, verdict, generation, job.source_tokens)

    def remember(self, key: str | None, translation: str, verdict: Verdict) -> None:
        """The translation in the segment cache, with what the checks found in it: served
        again with its flags."""
        if self._memory is not None and key is not None:
            self._memory.put(key, translation, verdict.problems)

    def report(self, index: int, text: str, finished: Done) -> Done:
        """`finished` counted, and told to the request's `on_segment`."""
        progress = self._flow.progress
        progress.done += 1
        on_segment = self._flow.on_segment
        if on_segment is not None:
            on_segment(
                SegmentDone(
                    self._numbered_from + index,
                    text,
                    finished.text,
                    progress.done,
                    progress.planned,
                    progress.in_flight,
                )
            )
        return finished


# What a first try without examples is told, as the retry of a copy would be.
COPIED = Verdict(("copied_example",))


def _markup_only(verdict: Verdict) -> bool:
    """Whether lost placeholders are all another try could mend (a markup retry's)."""
    return {p for p in verdict.problems if p != "cut_character"} == {"placeholders"}


@dataclass(frozen=True)
class FirstForm:
    """How a segment's first try goes (SegmentRun.first_form): `asked`, the request's
    instructions (what a retry starts from), `told`, the first try's, whether it shows the
    pair's `examples`, whether the pair's first-try watch measures it (`watched`: a plain
    text), whether the segment has placeholders (`markup`), whether it goes `as_retry`
    (with `checks.retry_sampling`) and how many of its placeholders are pairs."""

    asked: Instructions
    told: Instructions
    examples: bool
    watched: bool
    markup: bool
    as_retry: bool = False
    pairs: int = 0


def finish(
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
