"""The translation service itself (tolk.translation.service.Translator, each pass's segments
in a tolk.translation.run.SegmentRun), built directly over stand-in engines
(tolk.testing.fake_engine, named so) under real ModelEngines, with no server around it: a
plain translation, the segment memory's hits, the retry of a flagged first output, the
request's translation memory, and errors coming back whole. The stand-in's answers are
scripted per test from the prompt it is given."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO
from tests.support.servers import model_config, server_config
from tolk.config import build_config
from tolk.engine import EngineMetrics, ModelEngine, ModelPool
from tolk.errors import (
    EngineUnavailable,
    PayloadTooLarge,
    UnknownGlossary,
    UnknownTranslationMemory,
    UnsupportedLanguagePair,
)
from tolk.store.database import Database
from tolk.store.memories import TranslationMemories
from tolk.store.segment_cache import SegmentMemory
from tolk.testing.fake_engine import FakeCompletion, FakeEngines, FakeLLM, FakeOutput
from tolk.translation.policy import Limits
from tolk.translation.request import GlossaryRequest, MemoryRequest, TranslationRequest
from tolk.translation.results import SegmentDone, Translation
from tolk.translation.service import Translator

SOURCE = "The museum opens at nine in the morning and closes at six in the evening."
GERMAN = "Das Museum öffnet um neun Uhr morgens und schließt um sechs Uhr abends."
LIMITS = Limits(max_request_chars=100_000, max_texts=16)

# What the stand-in answers: the text of each output, given the prompt (decoded) and which
# engine request of the test this is (0, 1, ...).
Reply = Callable[[str, int], str]


@dataclass
class Script:
    """A stand-in engine's scripted answers (installed over FakeLLM.generate), and the prompts
    it was given."""

    llm: FakeLLM
    tokenizer: Any
    reply: Reply = lambda prompt, n: GERMAN
    prompts: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)  # each prompt's
    # Awaited before answering, if set: for tests that hold requests in the engine.
    hold: Callable[[str], Any] | None = None

    def install(self) -> None:
        async def generate(
            prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
        ) -> AsyncIterator[FakeOutput]:
            ids = list(prompt["prompt_token_ids"])
            text = str(self.tokenizer.decode(ids))
            n = len(self.prompts)
            self.prompts.append(text)
            self.prompt_tokens.append(len(ids))
            if self.hold is not None:
                await self.hold(text)
            answer = self.reply(text, n)
            out = [*self.tokenizer.encode(answer, add_special_tokens=False)]
            out.append(self.tokenizer.eos_token_id)
            self.llm.requests += 1
            yield FakeOutput([FakeCompletion(out, "stop") for _ in range(sampling_params.n)])

        self.llm.generate = generate  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def standin_pool(test_model: Path) -> Iterator[tuple[ModelPool, FakeEngines]]:
    """Five models over stand-in engines: `plain` (output checks off, as the test servers
    have them), `checked` (on), `markup` (on, a sampled candidate beside the greedy first
    try of a segment with placeholders: `candidates.markup_n`), `paired` (the same, only
    for a segment with two paired placeholders or more: `candidates.markup_twin_pairs`) and
    `clean` (checks on, the markup retry's first clean candidate kept:
    `checks.markup_first_clean`)."""
    languages = ["en", "de", "fr"]
    config = build_config(
        server_config(
            [
                model_config("plain", test_model, languages=languages),
                model_config("checked", test_model, languages=languages, checks={"enabled": True}),
                model_config(
                    "markup",
                    test_model,
                    languages=languages,
                    checks={"enabled": True},
                    candidates={"markup_n": 2},
                ),
                model_config(  # the twin only where a segment has two pairs or more
                    "paired",
                    test_model,
                    languages=languages,
                    checks={"enabled": True},
                    candidates={"markup_n": 2, "markup_twin_pairs": 2},
                ),
                model_config(  # the markup retry's first clean candidate kept
                    "clean",
                    test_model,
                    languages=languages,
                    checks={"enabled": True, "markup_first_clean": True},
                ),
            ],
            port=1,
        ),
        environ={},
    )
    engines = FakeEngines()
    pool = ModelPool.start(config.models, EngineMetrics(), engines)
    try:
        yield pool, engines
    finally:
        pool.shutdown()


@pytest.fixture
def standin_script(standin_pool: tuple[ModelPool, FakeEngines]) -> Iterator[dict[str, Script]]:
    """Each model's stand-in scripted (GERMAN for everything unless a test says otherwise);
    the stand-ins' own generate comes back afterwards."""
    pool, engines = standin_pool
    scripts = {}
    for engine in pool.engines:
        llm = engines.started[engine.name]
        scripts[engine.name] = Script(llm, engine.tokenizer)
        scripts[engine.name].install()
    try:
        yield scripts
    finally:
        for script in scripts.values():
            del script.llm.generate  # the class's own again


@pytest.fixture
def standin_translator(
    standin_pool: tuple[ModelPool, FakeEngines], standin_script: dict[str, Script]
) -> Iterator[Translator]:
    translator = Translator(standin_pool[0], LIMITS)
    try:
        yield translator
    finally:
        translator.close()


def _request(model: str = "plain", **fields: Any) -> TranslationRequest:
    return TranslationRequest(
        target_lang="de", deadline=60, source_lang="en", model=model, **fields
    )


async def _holding(
    script: Script,
    hold: Callable[[str], Any],
    translating: Awaitable[Translation],
    aborted: asyncio.Event,
) -> Translation:
    """`translating` with `hold` before each of the stand-in's answers, bounded (a request
    waiting for what `hold` keeps would wait for ever), then `aborted` awaited: what `hold`
    keeps is let go only by its abort."""
    script.hold = hold
    try:
        answer = await asyncio.wait_for(translating, 30)
        await asyncio.wait_for(aborted.wait(), 5)
    finally:
        script.hold = None
    return answer


def _engine(pool: tuple[ModelPool, FakeEngines], name: str) -> ModelEngine:
    return pool[0].get(name)


async def test_standin_plain_translation_of_a_two_line_text(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    script = standin_script["plain"]
    script.reply = lambda prompt, n: "Guten Morgen." if "Good morning." in prompt else "Gute Nacht."
    reported: list[SegmentDone] = []
    answer = await standin_translator.translate(
        ["Good morning.\n  Good night. "], _request(), on_segment=reported.append
    )
    # Each line its own segment, the whitespace between and around them kept byte for byte.
    assert answer.texts == ["Guten Morgen.\n  Gute Nacht. "]
    assert (answer.source.tag, answer.target.tag, answer.model) == ("en", "de", "plain")
    assert len(script.prompts) == 2
    assert sorted(p.count("Good morning.") for p in script.prompts) == [0, 1]
    tokenizer = script.tokenizer
    usage = answer.usage
    assert usage.segments == 2
    assert usage.characters == len("Good morning.\n  Good night. ")
    assert usage.prompt_tokens == sum(script.prompt_tokens) > 0
    # Each output is its tokens and the end of sequence.
    made = [
        len(tokenizer.encode(t, add_special_tokens=False)) + 1
        for t in ("Guten Morgen.", "Gute Nacht.")
    ]
    assert usage.completion_tokens == sum(made)
    assert (usage.memory_segments, usage.memory_lookups, usage.translation_memory_segments) == (
        0,
        0,
        0,
    )
    assert sorted(c for _, c in answer.lengths) == sorted(made)
    assert answer.warnings == ()
    assert answer.checks.retried == 0
    # Each segment reported as it finished, numbered in the order submitted.
    assert sorted(r.index for r in reported) == [0, 1]
    assert [r.done for r in reported] == [1, 2]
    assert {r.planned for r in reported} == {2}
    assert {(r.text, r.translation) for r in reported} == {
        ("Good morning.", "Guten Morgen."),
        ("Good night.", "Gute Nacht."),
    }


async def test_standin_segment_memory_answers_a_segment_seen_before(
    standin_pool: tuple[ModelPool, FakeEngines],
    standin_script: dict[str, Script],
    tmp_path: Path,
) -> None:
    memory = SegmentMemory(f"sqlite:///{tmp_path / 'memory.db'}", max_entries=100)
    translator = Translator(standin_pool[0], LIMITS, memory=memory)
    script = standin_script["plain"]
    script.reply = lambda prompt, n: f"Übersetzung {n}."
    try:
        first = await translator.translate([SOURCE], _request())
        assert first.texts == ["Übersetzung 0."]
        assert (first.usage.memory_lookups, first.usage.memory_segments) == (1, 0)  # a miss
        assert len(script.prompts) == 1

        again = await translator.translate([SOURCE], _request())
        assert again.texts == ["Übersetzung 0."]
        assert len(script.prompts) == 1  # the engine was not asked
        assert (again.usage.memory_lookups, again.usage.memory_segments) == (1, 1)
        assert (again.usage.prompt_tokens, again.usage.completion_tokens) == (0, 0)
        assert again.lengths == []  # a hit is no generation

        # "off": neither looked up nor written; "refresh": translated anew and written.
        off = await translator.translate([SOURCE], _request(memory="off"))
        assert off.texts == ["Übersetzung 1."]
        assert off.usage.memory_lookups == 0
        fresh = await translator.translate([SOURCE], _request(memory="refresh"))
        assert fresh.texts == ["Übersetzung 2."]
        assert fresh.usage.memory_lookups == 0
        assert len(script.prompts) == 3
        remembered = await translator.translate([SOURCE], _request())
        assert remembered.texts == ["Übersetzung 2."]  # the refreshed one, not "off"'s
        assert len(script.prompts) == 3

        # Alternatives are sampled anew: no lookup.
        sampled = await translator.translate([SOURCE], _request(alternatives=1))
        assert sampled.usage.memory_lookups == 0
        assert len(script.prompts) == 5  # the greedy request and the sampled one

        # Another model's prompt is another key.
        other = await translator.translate([SOURCE], _request("checked"))
        assert other.usage.memory_segments == 0
        assert standin_script["checked"].prompts
    finally:
        translator.close()
        memory.close()


async def test_standin_flagged_first_output_is_retried_and_mended(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    script = standin_script["checked"]
    script.reply = lambda prompt, n: SOURCE if n == 0 else GERMAN  # an echo, then German
    answer = await standin_translator.translate([SOURCE], _request("checked"))
    assert answer.texts == [GERMAN]
    assert answer.warnings == ()
    first, retry = script.prompts
    assert SOURCE in first
    assert SOURCE in retry
    assert retry != first  # firmer about the target language (`retry_instruction`)
    assert "echo" in answer.checks.found
    assert (answer.checks.retried, answer.checks.mended) == (1, 1)
    # Both tries are paid for.
    tokenizer = script.tokenizer
    assert answer.usage.prompt_tokens == sum(script.prompt_tokens)
    outputs = [len(tokenizer.encode(t, add_special_tokens=False)) + 1 for t in (SOURCE, GERMAN)]
    assert answer.usage.completion_tokens == sum(outputs)


async def test_standin_markup_gets_a_sampled_candidate_and_keeps_the_one_with_its_tags(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    script = standin_script["markup"]
    # The greedy first try (asked first) loses the link; the sampled one keeps it.
    script.reply = lambda prompt, n: "Guten Morgen." if n == 0 else "Guten [Morgen](1)."
    html = _request("markup", format="html")
    answer = await standin_translator.translate(["Good <b>morning</b>."], html)
    assert answer.texts == ["Guten <b>Morgen</b>."]
    assert answer.warnings == ()
    assert len(script.prompts) == 2  # one try: no retry, no fallback
    assert answer.checks.retried == 0
    # A plain text of the same model: the greedy try alone.
    script.prompts.clear()
    plain = await standin_translator.translate([SOURCE], _request("markup"))
    assert plain.texts == ["Guten Morgen."]
    assert len(script.prompts) == 1
    # The greedy output passes: the sampled candidate, still running, is not waited for
    # but aborted in the engine.
    script.prompts.clear()
    script.reply = lambda prompt, n: "Guten [Morgen](1)."
    arrived, release, aborted = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hold(prompt: str) -> None:
        if len(script.prompts) == 1:  # the greedy one: answered once both are in the engine
            await arrived.wait()
            return
        arrived.set()  # the sampled candidate: held until aborted
        try:
            await release.wait()
        except asyncio.CancelledError:
            aborted.set()
            raise

    # (Were the twin waited for, this would wait for ever.)
    translating = standin_translator.translate(["Good <b>morning</b>."], html)
    hedged = await _holding(script, hold, translating, aborted)
    assert hedged.texts == ["Guten <b>Morgen</b>."]
    assert len(script.prompts) == 2
    # No twin for a pair whose plain first tries are mostly replaced by their retries'
    # output (the model does not write its target well enough). (A link: a unit with
    # emphasis would start without it there, checks.markup_skip_unwritten.)
    script.prompts.clear()
    for _ in range(20):
        standin_translator.first_tries.record("markup", "en", "de", True, 0.5)
    linked = 'Good <a href="https://example.com/">morning</a>.'
    alone = await standin_translator.translate([linked], html)
    assert alone.texts == ['Guten <a href="https://example.com/">Morgen</a>.']
    assert len(script.prompts) == 1
    for _ in range(200):
        standin_translator.first_tries.record("markup", "en", "de", False, 0.5)
    # Both candidates lose it: retried as before (the markup retry's candidates and the
    # fallback without the emphasis, started at once), the tags kept where they can be.
    script.prompts.clear()
    script.reply = lambda prompt, n: "Guten Morgen."
    lost = await standin_translator.translate(["Good <b>morning</b>."], html)
    assert lost.texts == ["Guten Morgen."]
    # The greedy try and its twin; the markup retry (one request of 4); the fallback's one
    # (its text has no placeholders left, so no twin).
    assert len(script.prompts) == 4
    assert [w.code for w in lost.warnings] == ["markup_dropped"]
    # A twin that fails: the greedy output goes on as it would without one (retried).
    from vllm.v1.engine.exceptions import EngineGenerateError

    script.prompts.clear()
    script.reply = lambda prompt, n: "Guten Morgen." if n == 0 else "Guten [Morgen](1)."

    async def fail_twin(prompt: str) -> None:
        if len(script.prompts) == 2:
            raise EngineGenerateError("the twin's engine request failed")

    script.hold = fail_twin
    try:
        mended = await standin_translator.translate(["Good <b>morning</b>."], html)
    finally:
        script.hold = None
    assert mended.texts == ["Guten <b>Morgen</b>."]
    assert mended.checks.retried == 1


async def test_standin_markup_retry_keeps_its_first_clean_candidate(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    """`checks.markup_first_clean`: the markup retry's four candidates go as four engine
    requests; the first back without a problem is kept, and the others (held here until
    aborted) are aborted in the engine rather than waited for, as is the unit's fallback
    (its plain text, started beside the retry)."""
    script = standin_script["clean"]
    marked = 0  # engine requests whose prompt has the placeholder: the first try, then candidates
    clean = False  # set by `hold` for the request it lets through with the placeholder kept
    aborted: list[str] = []
    all_aborted, never = asyncio.Event(), asyncio.Event()

    async def hold(prompt: str) -> None:
        nonlocal marked, clean
        placeholder = "](1)" in prompt.rsplit("<|im_start|>user", 1)[-1]
        if placeholder:
            marked += 1
            if marked == 1:  # the first try: answered at once, its tags lost
                return
            if marked == 3:  # the second candidate: answered at once, its tags kept
                clean = True
                return
        try:  # the other candidates and the fallback: held until aborted
            await never.wait()
        except asyncio.CancelledError:
            aborted.append("candidate" if placeholder else "plain")
            if len(aborted) == 4:
                all_aborted.set()
            raise

    def reply(prompt: str, n: int) -> str:
        nonlocal clean
        kept, clean = clean, False
        return "Guten [Morgen](1)." if kept else "Guten Morgen."

    script.reply = reply
    # (Were the held candidates waited for, this would wait for ever.)
    translating = standin_translator.translate(
        ["Good <b>morning</b>."], _request("clean", format="html")
    )
    answer = await _holding(script, hold, translating, all_aborted)
    assert answer.texts == ["Guten <b>Morgen</b>."]
    assert answer.warnings == ()
    assert (answer.checks.retried, answer.checks.mended) == (1, 1)
    assert marked == 5  # the first try and the four candidates, all asked for at once
    assert sorted(aborted) == ["candidate", "candidate", "candidate", "plain"]


async def test_standin_a_burst_of_markup_requests_sends_one_in_ten_whole(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    """A pair whose units with emphasis start without it (`checks.markup_skip_limit`) still
    sends one request with such units in 10 whole (the probes, tolk.translation.watch),
    also when 20 arrive at once: each takes its turn as it decides, not once its plan is made
    (they wait side by side for the preparation, and would all see the same turn: all whole
    or none). A plain request among them takes no probe's turn."""
    from tolk.translation.watch import MIN_SEEN

    script = standin_script["checked"]
    for _ in range(MIN_SEEN):  # its units sent whole never kept their emphasis
        standin_translator.markup_whole.record("checked", "en", "de", True, 0.8)
    whole = 0

    def reply(prompt: str, n: int) -> str:
        nonlocal whole
        if "](1)" in prompt.rsplit("<|im_start|>user", 1)[-1]:
            whole += 1
            return "Das [Museum](1) öffnet um neun."
        return "Das Museum öffnet um neun."

    script.reply = reply
    bold = _request("checked", format="markdown")
    texts = [["The **museum** opens at nine."]] * 9 + [[SOURCE]] + [["The **museum** opens."]] * 11
    answers = await asyncio.gather(
        *(
            standin_translator.translate(t, bold if "**" in t[0] else _request("checked"))
            for t in texts
        )
    )
    assert whole == 2  # the 10th and the 20th of the 20 with emphasis
    assert sum(a.texts[0].count("**") == 2 for a in answers) == 2  # the probes kept it
    assert sum(any(w.code == "markup_dropped" for w in a.warnings) for a in answers) == 18


async def test_standin_markup_twins_only_where_a_segment_has_enough_pairs(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    """`candidates.markup_twin_pairs` 2: a segment with one pair (and a line break,
    unpaired) gets its greedy first try alone, retried when that loses the pair; one with two
    pairs gets the twin beside it, which keeps them when the greedy output does not."""
    script = standin_script["paired"]
    html = _request("paired", format="html")
    script.reply = lambda prompt, n: "Guten Morgen `2`." if n == 0 else "Guten [Morgen](1) `2`."
    one = await standin_translator.translate(["Good <b>morning</b> <br>."], html)
    assert one.texts == ["Guten <b>Morgen</b> <br>."]
    assert one.checks.retried == 1  # the second engine request: its markup retry, no twin
    script.prompts.clear()
    script.reply = lambda prompt, n: "Guten Morgen." if n == 0 else "[Guten](1) [Morgen](2)."
    two = await standin_translator.translate(["<i>Good</i> <b>morning</b>."], html)
    assert two.texts == ["<i>Guten</i> <b>Morgen</b>."]
    assert two.checks.retried == 0  # the twin kept them
    assert len(script.prompts) == 2


async def test_standin_a_retry_no_better_keeps_the_first_and_warns(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    script = standin_script["checked"]
    script.reply = lambda prompt, n: SOURCE  # an echo, twice
    answer = await standin_translator.translate([SOURCE], _request("checked"))
    assert answer.texts == [SOURCE]
    assert len(script.prompts) == 2
    assert (answer.checks.retried, answer.checks.mended) == (1, 0)
    codes = {w.code for w in answer.warnings}
    assert "echo" in codes
    assert {w.text for w in answer.warnings} == {0}


async def test_standin_no_retry_where_the_checks_are_off(
    standin_translator: Translator, standin_script: dict[str, Script]
) -> None:
    script = standin_script["plain"]
    script.reply = lambda prompt, n: SOURCE
    answer = await standin_translator.translate([SOURCE], _request("plain"))
    assert answer.texts == [SOURCE]
    assert len(script.prompts) == 1
    assert answer.warnings == ()
    assert answer.checks.retried == 0


async def test_standin_translation_memory_exact_and_close_matches(
    standin_pool: tuple[ModelPool, FakeEngines], standin_script: dict[str, Script]
) -> None:
    memories = TranslationMemories(Database(None))
    info = memories.import_tmx(REPO / "tests" / "data" / "memory.tmx", "docs")
    translator = Translator(standin_pool[0], LIMITS, memories=memories)
    saved = "Die Stapelgröße wird vom Server abgestimmt."
    script = standin_script["plain"]
    try:
        # An exact match (whitespace aside) is the translation, without the engine.
        exact = await translator.translate(
            [" The batch size is  tuned by the server. "],
            _request(translation_memory=MemoryRequest(info.id, 80)),
        )
        assert exact.texts == [f" {saved} "]
        assert exact.usage.translation_memory_segments == 1
        assert (exact.usage.prompt_tokens, exact.lengths) == (0, [])
        assert script.prompts == []

        # A close one is the model's reference, in its prompt; below the threshold, nothing.
        close = "The batch size is tuned by each server."
        for threshold, referenced in ((80, True), (99, False)):
            script.prompts.clear()
            answer = await translator.translate(
                [close], _request(translation_memory=MemoryRequest(info.id, threshold))
            )
            assert answer.texts == [GERMAN]
            assert answer.usage.translation_memory_segments == 0
            (prompt,) = script.prompts
            assert (saved in prompt) is referenced, (threshold, prompt)

        with pytest.raises(UnknownTranslationMemory):
            await translator.translate([close], _request(translation_memory=MemoryRequest("x", 80)))
    finally:
        translator.close()


async def test_standin_engine_failure_fails_the_request_and_cancels_the_rest(
    standin_pool: tuple[ModelPool, FakeEngines],
    standin_translator: Translator,
    standin_script: dict[str, Script],
) -> None:
    from vllm.v1.engine.exceptions import EngineDeadError

    script = standin_script["plain"]
    waiting: list[str] = []
    cancelled: list[str] = []
    both_waiting = asyncio.Event()

    async def hold(prompt: str) -> None:
        if "Second line." in prompt:
            await both_waiting.wait()
            raise EngineDeadError("scripted: the engine died")
        waiting.append(prompt)
        if len(waiting) == 2:
            both_waiting.set()
        try:
            await asyncio.Event().wait()  # never answered: cancelled with the request
        except asyncio.CancelledError:
            cancelled.append(prompt)
            raise

    script.hold = hold
    engine = _engine(standin_pool, "plain")
    with pytest.raises(EngineUnavailable, match="died"):
        await standin_translator.translate(["First line.\nSecond line.\nThird line."], _request())
    assert len(cancelled) == 2
    assert engine.admission.held == 0  # the request's places are given back
    assert engine.in_flight == 0


async def test_standin_requests_refused_before_the_engine(
    standin_pool: tuple[ModelPool, FakeEngines],
    standin_translator: Translator,
    standin_script: dict[str, Script],
) -> None:
    script = standin_script["plain"]
    with pytest.raises(UnknownGlossary):
        await standin_translator.translate(
            [SOURCE], _request(glossary=GlossaryRequest(ids=["nope"]))
        )
    with pytest.raises(UnsupportedLanguagePair):
        await standin_translator.translate(
            [SOURCE], TranslationRequest(target_lang="ne", deadline=60, source_lang="en")
        )
    # A segment whose prompt leaves no room for its translation in the model's context.
    engine = _engine(standin_pool, "plain")
    long = "Good morning, everyone. " * engine.max_model_len
    with pytest.raises(PayloadTooLarge) as refused:
        await standin_translator.translate([long], _request(split="none"))
    assert refused.value.details["max_model_len"] == engine.max_model_len
    assert script.prompts == []
    assert engine.admission.held == 0


async def test_standin_small_requests_are_prepared_on_the_loop_large_ones_in_the_threads(
    standin_pool: tuple[ModelPool, FakeEngines],
    standin_script: dict[str, Script],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Up to `inline_chars` characters and no glossary: parsed, planned, put back and
    rendered on the event loop's thread; more, or with a glossary, in the preparation pool."""
    import threading

    from tolk.translation import service

    translator = Translator(standin_pool[0], dataclasses.replace(LIMITS, inline_chars=40))
    where: list[tuple[str, str]] = []  # (step, thread name)
    plan, rendered = translator._plan, service._rendered

    def planned(*args: Any) -> Any:
        where.append(("plan", threading.current_thread().name))
        return plan(*args)

    def rendering(*args: Any) -> Any:
        where.append(("render", threading.current_thread().name))
        return rendered(*args)

    monkeypatch.setattr(translator, "_plan", planned)
    monkeypatch.setattr(service, "_rendered", rendering)
    turns = translator.preparing.turn

    async def turn() -> None:  # each step on the loop in a turn of the preparation's pacer
        where.append(("turn", threading.current_thread().name))
        await turns()

    monkeypatch.setattr(translator.preparing, "turn", turn)
    loop_thread = threading.current_thread().name
    try:
        small = "Good morning."
        large = "Good morning. " * 3  # 42 characters
        answers = [
            await translator.translate([small], _request()),
            await translator.translate([large], _request()),
            await translator.translate([small], _request(glossary=GlossaryRequest({"a": "b"}))),
            await translator.translate([small, small, small, small], _request()),  # 52 in all
            # One of several translations of a request run side by side (DeepL Write's).
            await translator.translate([small], _request(), alone=False),
        ]
    finally:
        translator.close()
    assert [a.texts[0].strip() for a in answers] == [GERMAN] * 5
    # (plan, put back, render: the second's turn is the one before the third's)
    steps = ["turn", "plan", "turn", "turn", "render"] + ["plan", "render"] * 4
    assert [step for step, _ in where] == steps
    on_loop = [name == loop_thread for _, name in where]
    assert on_loop == [True] * 5 + [False] * 8
    assert all(name.startswith("tolk-prepare") for _, name in where[5:])
