"""A pair whose first tries are mostly replaced by their retry's output gets its first tries as
its retries are (`checks.first_as_retry_limit`, tolk.translation.watch): in-process over a
stand-in engine (named so) scripted as the 0.5B Qwen writes Nepali, looping whenever it
decodes greedily without the retry's repetition penalty. The real model's figures
are `tolk bench quality`'s (docs/benchmarks.md, section 23)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import metric_samples
from tests.support.prompt_examples import SOURCE, TRANSLATION, scripted_server, translated
from tests.support.servers import InProcessServer
from tolk.languages import lang
from tolk.testing.fake_engine import FakeLLM, FakeOutput
from tolk.translation.examples import examples
from tolk.translation.watch import MIN_SEEN, PROBE_EVERY

LOOP = "Das Museum öffnet " * 12


def _looper(
    test_model: Path, **settings: Any
) -> Iterator[tuple[InProcessServer, FakeLLM, list[Any]]]:
    """A stand-in that loops when it decodes greedily without a repetition penalty; `asked`
    keeps each request's (prompt text, sampling params)."""
    asked: list[Any] = []

    def reply(prompt: str, sampling_params: Any) -> str:
        asked.append((prompt, sampling_params))
        penalised = (sampling_params.repetition_penalty or 1.0) > 1.0
        return TRANSLATION if penalised or sampling_params.temperature > 0 else LOOP

    scripted = scripted_server(test_model, "looper", reply, **settings)
    server, llm = next(scripted)
    try:
        yield server, llm, asked
    finally:
        scripted.close()


@pytest.fixture
def looping(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM, list[Any]]]:
    # Placeholders as tags: a retry told of lost tags names them (tolk.translation.fidelity).
    yield from _looper(test_model, prompt_examples=2, placeholders="tags")


def test_first_tries_their_retries_replace_go_as_retries(
    looping: tuple[InProcessServer, FakeLLM, list[Any]],
) -> None:
    """Until MIN_SEEN first tries have been replaced, each text costs two engine requests (the
    greedy loop, the penalised retry that mends it); then one, the first try going as the retry
    went: without the examples, told to translate each sentence once, with the retry's
    repetition penalty; one in PROBE_EVERY still goes as usual and is retried. Every answer is
    the mended translation, unflagged. A segment with placeholders goes as usual; a first try
    going as a retry that fails is flagged, not sent twice. (One server for all of it: each
    start is seconds of the suite's time.)"""
    server, llm, asked = looping

    def translate() -> None:
        answer = translated(server, SOURCE)
        assert answer["translation"] == TRANSLATION, answer
        assert answer.get("warnings", []) == [], answer

    for _ in range(MIN_SEEN):
        translate()
    assert llm.requests == 2 * MIN_SEEN
    for _ in range(2 * PROBE_EVERY):
        translate()
    assert llm.requests == 2 * MIN_SEEN + 2 * PROBE_EVERY + 2
    # The last was a probe: its usual first try (greedy, the examples shown) and its retry;
    # the one before went as a retry.
    shown = examples(lang("en"), lang("de"), 2)
    (up_front, up_sampling), (probe, probe_sampling) = asked[-3], asked[-2]
    assert up_sampling.repetition_penalty == 1.2
    assert up_sampling.n == 1
    assert not any(t in up_front for _, t in shown)
    assert "Write the translation in German only" in up_front
    assert "Translate each sentence once, without repeating words" in up_front
    assert SOURCE in up_front
    assert probe_sampling.repetition_penalty == 1.0
    assert all(t in probe for _, t in shown)
    assert asked[-1][1].repetition_penalty == 1.2  # the probe's retry
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    labels = {"model": "looper", "pair": "en>de", "step": "first_try"}
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_skipping")
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_waste_share")
    # A markup unit's first try still goes as usual: the penalty, counting the prompt's
    # tokens, steers the model away from writing its placeholders back. (A link: a unit
    # with emphasis starts without it in a pair such as this, checks.markup_skip_unwritten.)
    before = len(asked)
    translated(server, "The [museum](https://example.com/) opens at nine.", format="markdown")
    assert asked[before][1].repetition_penalty == 1.0
    assert "<g1>" in asked[before][0].rsplit("<|im_start|>user", 1)[-1]
    # Whatever replaced its first try (which lost its placeholders too), the next plain
    # text, going as a retry, is told of the loop, not of placeholders it does not have: a
    # markup unit is not the first-tries watch's.
    before = len(asked)
    translated(server, SOURCE)
    (prompt, sampling) = asked[before]
    assert sampling.repetition_penalty == 1.2
    assert "Translate each sentence once" in prompt
    assert "Keep each of these tags" not in prompt
    # A first try going as a retry whose output still has a problem is returned flagged,
    # not sent again: its retry would be the same request (greedy `retry_sampling`).
    before = llm.requests
    generate = llm.generate

    async def always_loops(
        prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[FakeOutput]:
        sampling_params.repetition_penalty = 1.0  # what it writes is the loop
        async for out in generate(prompt, sampling_params, request_id, priority=priority):
            yield out

    llm.generate = always_loops  # type: ignore[method-assign]
    answer = translated(server, SOURCE)
    assert llm.requests == before + 1
    assert "loop" in [w["code"] for w in answer["warnings"]], answer


@pytest.fixture
def looping_split(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM, list[Any]]]:
    yield from _looper(
        test_model, checks={"enabled": True, "markup_split_unwritten": True}, placeholders="tags"
    )


def test_markup_units_can_go_run_by_run_from_the_start(
    looping_split: tuple[InProcessServer, FakeLLM, list[Any]],
) -> None:
    """`markup_split_unwritten: true`: once the pair's first tries go as retries, a markup
    unit goes run by run from the start, each text run a plain text going as a retry (no
    placeholders, the retry's penalty), the link kept where it was and the answer flagged
    markup_split; a text without markup is unchanged."""
    server, _, asked = looping_split
    for _ in range(MIN_SEEN + 1):
        assert translated(server, SOURCE)["translation"] == TRANSLATION
    before = len(asked)
    assert translated(server, SOURCE)["translation"] == TRANSLATION
    assert len(asked) == before + 1  # a text without markup: one request, as before
    assert asked[before][1].repetition_penalty == 1.2
    before = len(asked)
    answer = translated(
        server, "The [museum](https://example.com/) opens at nine.", format="markdown"
    )
    runs = [prompt.rsplit("<|im_start|>user", 1)[-1] for prompt, _ in asked[before:]]
    assert len(runs) == 3, runs
    assert not any("<g1>" in run for run in runs)
    assert all(sampling.repetition_penalty == 1.2 for _, sampling in asked[before:])
    assert answer["translation"].count("](https://example.com/)") == 1, answer
    assert [w["code"] for w in answer["warnings"]] == ["markup_split"], answer


@pytest.fixture
def looping_as_usual(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM, list[Any]]]:
    yield from _looper(test_model, checks={"enabled": True, "first_as_retry_limit": 1})


def test_a_limit_of_one_keeps_first_tries_as_usual(
    looping_as_usual: tuple[InProcessServer, FakeLLM, list[Any]],
) -> None:
    """`first_as_retry_limit: 1`: every first try goes greedy and is retried, however often
    its retry replaces it."""
    server, llm, asked = looping_as_usual
    for _ in range(MIN_SEEN + PROBE_EVERY):
        assert translated(server, SOURCE)["translation"] == TRANSLATION
    assert llm.requests == 2 * (MIN_SEEN + PROBE_EVERY)
    assert [s.repetition_penalty for _, s in asked[-2:]] == [1.0, 1.2]
