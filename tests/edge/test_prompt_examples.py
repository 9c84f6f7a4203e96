"""What a server does with example translations in the prompt (`prompt_examples`) and with
outputs that copy them, in-process over stand-in engines (named so) scripted to copy the
examples whenever the prompt shows them (the 0.5B Qwen did so in most en->ne outputs): a copy
is retried without examples and counted; tolk.translation.watch gives a pair whose first tries
copy them no examples, and stops the retries that never mend. The real model with examples is
measured by `tolk bench quality` (docs/benchmarks.md "Quality")."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.metrics import metric_samples
from tests.support.prompt_examples import SOURCE, TRANSLATION, scripted_server, translated
from tests.support.servers import InProcessServer
from tolk.languages import lang
from tolk.testing.fake_engine import FakeCompletion, FakeLLM, FakeOutput
from tolk.translation.examples import examples


def _reply(prompt: str, sampling_params: Any) -> str:
    """The scripted model: copies the first example's translation where its prompt shows
    one, translates otherwise."""
    shown = re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", prompt, re.S)
    return shown[0] if shown else TRANSLATION


@pytest.fixture(scope="module")
def copying(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    yield from _copier(test_model)


@pytest.fixture
def copying_again(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    """A server of its own: what it learns about a pair's copies is its own."""
    yield from _copier(test_model)


def _copier(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    yield from scripted_server(test_model, "copier", _reply, prompt_examples=2)


def test_a_copied_example_is_retried_without_examples_and_counted(
    copying: tuple[InProcessServer, FakeLLM], test_model: Path
) -> None:
    server, llm = copying
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(test_model))
    before = len(llm.prompts)
    answer = httpx.post(
        f"{server.url}/translate",
        json={"text": SOURCE, "source_lang": "en", "target_lang": "de"},
        timeout=60,
    ).json()
    assert answer["translation"] == TRANSLATION, answer
    assert answer["warnings"] == [], answer
    first, retry = (tokenizer.decode(p) for p in list(llm.prompts)[before:])
    shown = examples(lang("en"), lang("de"), 2)
    assert all(s in first and t in first for s, t in shown)  # the examples, then the text
    assert not any(t in retry for _, t in shown)  # the retry shows none
    assert SOURCE in retry
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = metric_samples(metrics, "tolk_output_problems_total")
    assert ({"model": "copier", "problem": "copied_example"}, 1.0) in found, found
    retries = metric_samples(metrics, "tolk_output_retries_total")
    assert ({"model": "copier", "result": "mended"}, 1.0) in retries, retries


def test_a_pair_whose_first_tries_copy_gets_them_without_examples(
    copying_again: tuple[InProcessServer, FakeLLM], test_model: Path
) -> None:
    """tolk.translation.watch: once a pair's first tries have copied an example in most of
    them, its first tries go without examples (no first try wasted, no retry), save one in
    PROBE_EVERY, which still shows them and is retried when it copies."""
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY

    server, llm = copying_again

    def translate() -> dict[str, Any]:
        body = {"text": SOURCE, "source_lang": "en", "target_lang": "de"}
        answer: dict[str, Any] = httpx.post(
            f"{server.url}/translate", json=body, headers={"Cache-Control": "no-store"},
            timeout=60,
        ).json()  # fmt: skip
        assert answer["translation"] == TRANSLATION, answer
        assert answer["warnings"] == [], answer
        return answer

    for _ in range(MIN_SEEN):  # each copied its examples: a first try and a retry
        translate()
    assert llm.requests == 2 * MIN_SEEN
    for _ in range(2 * PROBE_EVERY):  # now one engine request each, and two per probe
        translate()
    assert llm.requests == 2 * MIN_SEEN + 2 * PROBE_EVERY + 2
    # The last was a probe (its first try and its retry); the one before went without
    # examples, told what a retry is told.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(test_model))
    withheld = str(tokenizer.decode(list(llm.prompts)[-3]))
    shown = examples(lang("en"), lang("de"), 2)
    assert not any(t in withheld for _, t in shown)
    assert SOURCE in withheld
    assert "Write the translation in German only" in withheld
    probe = str(tokenizer.decode(list(llm.prompts)[-2]))
    assert all(t in probe for _, t in shown)
    # What the probes keep measuring: every first try that showed examples copied them.
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = metric_samples(metrics, "tolk_output_problems_total")
    assert ({"model": "copier", "problem": "copied_example"}, MIN_SEEN + 2.0) in found, found
    labels = {"model": "copier", "pair": "en>de", "step": "examples"}
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_skipping")
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_waste_share")


@pytest.fixture
def dropping(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    """A stand-in model that always answers the plain translation: every placeholder of a
    unit with markup is lost, and no markup retry brings one back. Every unit sent whole
    (`markup_skip_limit` 1: the markup retry's watch alone is this fixture's subject)."""
    checks = {"enabled": True, "markup_skip_limit": 1.0}
    yield from scripted_server(test_model, "dropper", lambda prompt, _: TRANSLATION, checks=checks)


def test_a_pair_whose_markup_retries_never_mend_falls_back_at_once(
    dropping: tuple[InProcessServer, FakeLLM],
) -> None:
    """tolk.translation.watch: a unit whose placeholders did not come back is retried (one
    engine request of `markup_candidates` outputs), then falls back to its plain text; once a
    pair's markup retries have brought none back in MIN_SEEN, its units fall back at once,
    save one in PROBE_EVERY."""
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY

    server, llm = dropping

    def translate() -> None:
        text = "The **museum** opens at nine in the morning and closes at six."
        answer = translated(server, text, format="markdown")
        assert answer["translation"] == TRANSLATION, answer  # the plain text's translation
        assert [w["code"] for w in answer["warnings"]] == ["markup_dropped"], answer

    for _ in range(MIN_SEEN):  # the first try, its markup retry, the plain text
        translate()
    assert llm.requests == 3 * MIN_SEEN
    for _ in range(2 * PROBE_EVERY):  # the first try and the plain text; three per probe
        translate()
    assert llm.requests == 3 * MIN_SEEN + 2 * (2 * PROBE_EVERY) + 2
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    labels = {"model": "dropper", "pair": "en>de", "step": "markup_retry"}
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_skipping")
    named = httpx.get(
        f"{server.url}/metrics", params={"name[]": "tolk_pair_skipping"}, timeout=30
    ).text
    # The plain texts' first tries are watched too (none replaced by a retry: not skipping).
    first_tries = {"model": "dropper", "pair": "en>de", "step": "first_try"}
    skipping = metric_samples(named, "tolk_pair_skipping")
    assert sorted(skipping, key=str) == sorted([(labels, 1.0), (first_tries, 0.0)], key=str)


@pytest.fixture
def losing(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    """The same stand-in (the plain translation, whatever it is asked) with the shipped
    markup settings: a unit with emphasis keeps it never, its plain text always."""
    yield from scripted_server(test_model, "loser", lambda prompt, _: TRANSLATION)


def test_a_pair_whose_units_never_keep_their_markup_starts_them_without_emphasis(
    losing: tuple[InProcessServer, FakeLLM],
) -> None:
    """tolk.translation.watch: a unit with markup goes whole (and is retried), then without
    its emphasis; once a pair's units sent whole have kept their markup in none of MIN_SEEN,
    its requests' units with emphasis start without it (`checks.markup_skip_limit`): one
    engine request each, save one such request in PROBE_EVERY still sent whole (requests
    without emphasis take no turn). Nothing is hidden: each answer says `markup_dropped`."""
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY

    server, llm = losing
    text = "The **museum** opens at nine in the morning and closes at six."

    def translate() -> int:
        before = llm.requests
        answer = translated(server, text, format="markdown")
        assert answer["translation"] == TRANSLATION, answer
        assert [w["code"] for w in answer["warnings"]] == ["markup_dropped"], answer
        return llm.requests - before

    learning = [translate() for _ in range(MIN_SEEN)]
    assert min(learning) >= 2  # the whole unit's first try, then its plain text
    skipping = []
    for _ in range(2 * PROBE_EVERY):
        # A plain text between them takes no probe's turn: the decision is not about it.
        assert translated(server, SOURCE)["translation"] == TRANSLATION
        skipping.append(translate())
    assert sorted(skipping)[: 2 * PROBE_EVERY - 2] == [1] * (2 * PROBE_EVERY - 2), skipping
    assert min(skipping[PROBE_EVERY - 1 :: PROBE_EVERY]) >= 2, skipping  # the probes
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    labels = {"model": "loser", "pair": "en>de", "step": "markup_whole"}
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_skipping")


def _unwritten(
    test_model: Path, checks: dict[str, Any]
) -> Iterator[tuple[InProcessServer, FakeLLM, list[int]]]:
    """A stand-in model that does not write the target language: a plain text's usual first
    try echoes the source and its retry (told which language to answer in) translates, so
    the pair's first tries go as retries once learnt; a segment with placeholders loses
    them, however asked. `checks`: the model's, beside `enabled`. `asked`: the `n` of each
    engine request."""
    asked: list[int] = []

    def reply(prompt: str, sampling_params: Any) -> str:
        asked.append(sampling_params.n)
        text = prompt.rsplit("<|im_start|>user", 1)[-1]
        if "](1)" in text or "Write the translation in German only" in text:
            return TRANSLATION
        return SOURCE

    settings = {"enabled": True, **checks}
    for server, llm in scripted_server(test_model, "unwritten", reply, checks=settings):
        yield server, llm, asked


@pytest.mark.parametrize(
    ("checks", "presume"),
    [
        ({"markup_skip_unwritten": True}, True),
        ({"markup_skip_unwritten": False}, False),
        # Only where the steps' own watches are on: with them off, nothing is presumed.
        ({"markup_skip_limit": 1.0, "markup_retry_min_mended": 0.0}, False),
    ],
)
def test_a_pair_the_model_does_not_write_skips_the_markup_steps_from_its_first_unit(
    test_model: Path, checks: dict[str, Any], presume: bool
) -> None:
    """`checks.markup_skip_unwritten`: once a pair's plain first tries go as retries (the
    model does not write the language), its first markup units skip the steps the markup
    watches skip once learnt: a unit with emphasis starts without it (one engine request,
    not its whole first try, markup retry and plain text), and a unit whose link was lost
    goes run by run without a markup retry (no request of several outputs). Off, the same
    units take every step until the watches have 20 outcomes of their own."""
    from tolk.translation.watch import MIN_SEEN

    for server, llm, asked in _unwritten(test_model, checks):
        for _ in range(MIN_SEEN):  # the first try echoes, its retry replaces it
            assert translated(server, SOURCE)["translation"] == TRANSLATION
        assert llm.requests == 2 * MIN_SEEN
        asked.clear()
        bold = "The **museum** opens at nine in the morning and closes at six."
        answer = translated(server, bold, format="markdown")
        assert answer["translation"] == TRANSLATION, answer
        assert [w["code"] for w in answer["warnings"]] == ["markup_dropped"], answer
        assert (asked == [1]) is presume, asked  # its plain text alone, as a retry is asked
        asked.clear()
        link = "Visit the [museum](https://example.com/) today."
        answer = translated(server, link, format="markdown")
        assert "[" + TRANSLATION + "](https://example.com/)" in answer["translation"], answer
        assert (max(asked) == 1) is presume, asked  # the markup retry samples several
        # A first try that lost its placeholders and has another problem (here English, off
        # target) is retried as a markup retry all the same (several sampled outputs), so
        # it is presumed waste too: the unit goes on to its runs.
        asked.clear()
        code = "Run `make` before the museum opens."
        answer = translated(server, code, format="markdown")
        assert "`make`" in answer["translation"], answer
        assert (max(asked) == 1) is presume, asked
        metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
        skipping = metric_samples(metrics, "tolk_pair_skipping")
        for step in ("markup_whole", "markup_retry"):
            labels = {"model": "unwritten", "pair": "en>de", "step": step}
            assert ((labels, 1.0) in skipping) is presume, skipping
            # Presumed, not measured: no share of waste to show yet; measured where the
            # step's watch is on (the third case turns both off: nothing to measure).
            measured = [s for s, _ in metric_samples(metrics, "tolk_pair_waste_share")]
            off = {"markup_whole": "markup_skip_limit", "markup_retry": "markup_retry_min_mended"}
            assert (labels in measured) is (not presume and off[step] not in checks), measured


def test_a_document_whose_only_unit_goes_run_by_run_is_translated(
    losing: tuple[InProcessServer, FakeLLM],
) -> None:
    """A unit over `max_segment_tokens` goes run by run from the start: with no unit sent
    whole beside it, its runs are the first pass, not left untranslated."""
    server, _ = losing
    text = "The museum opens at nine in the morning and closes at six. " * 30
    answer = translated(server, text.strip(), format="markdown")
    assert answer["warnings"] == [], answer
    assert answer["translation"].count(TRANSLATION) >= 2, answer


@pytest.fixture
def echoing(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    """A stand-in model that answers the English source whatever it is asked: every output
    is an echo, off target, and so is every retry."""

    def reply(prompt: str, sampling_params: Any) -> str:
        return SOURCE if "retry me" not in prompt else TRANSLATION

    yield from scripted_server(test_model, "echoer", reply)


def test_a_pair_whose_retries_never_mend_keeps_its_first_tries_flagged(
    echoing: tuple[InProcessServer, FakeLLM],
) -> None:
    """tolk.translation.watch: a text whose output has a problem is tried again; once a
    pair's retries have given nothing less bad in MIN_SEEN (`checks.retry_min_mended`), its
    first tries are returned flagged at once, save one in PROBE_EVERY; the pair's other
    texts, and other pairs, are not affected."""
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY

    server, llm = echoing

    def translate(text: str = SOURCE) -> dict[str, Any]:
        return translated(server, text)

    for _ in range(MIN_SEEN):  # the first try and its retry, both echoes
        answer = translate()
        assert answer["translation"] == SOURCE
        assert "echo" in [w["code"] for w in answer["warnings"]], answer
    assert llm.requests == 2 * MIN_SEEN
    for _ in range(2 * PROBE_EVERY):  # the first try alone, still flagged; two per probe
        answer = translate()
        assert "echo" in [w["code"] for w in answer["warnings"]], answer
    assert llm.requests == 2 * MIN_SEEN + 2 * PROBE_EVERY + 2
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    labels = {"model": "echoer", "pair": "en>de", "step": "retry"}
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_skipping")
    assert (labels, 1.0) in metric_samples(metrics, "tolk_pair_waste_share")
    # A text that translates needs no retry and is unaffected.
    before = llm.requests
    assert translate("Please retry me.")["translation"] == TRANSLATION
    assert llm.requests == before + 1


def _fallback_scripted(
    test_model: Path, retry_mends: bool
) -> Iterator[tuple[InProcessServer, FakeLLM, list[str]]]:
    """A stand-in model for a markdown unit with bold: its first try loses the bold; its
    markup retry (`n` > 1) waits until the unit's plain text has been asked for, then brings
    the bold back if `retry_mends` (else loses it again); the plain text's request answers at
    once if the retry does not mend, else waits until it is aborted. `events` says what was
    asked, answered and aborted, in order."""
    import asyncio

    events: list[str] = []
    scripted = scripted_server(test_model, "fallback", lambda prompt, _: TRANSLATION)
    server, llm = next(scripted)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(test_model))
    plain_asked = asyncio.Event()

    async def generate(
        prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[FakeOutput]:
        text = str(tokenizer.decode(list(prompt["prompt_token_ids"])))
        llm.requests += 1
        if sampling_params.n > 1:  # the markup retry
            events.append("retry asked")
            await asyncio.wait_for(plain_asked.wait(), 30)
            reply = "Das [Museum](1) öffnet um neun." if retry_mends else TRANSLATION
            events.append("retry answered")
        elif "](1)" in text.rsplit("<|im_start|>user", 1)[-1]:  # the first try
            reply = TRANSLATION
        else:  # the plain text
            events.append("plain asked")
            plain_asked.set()
            if retry_mends:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    events.append("plain aborted")
                    raise
            events.append("plain answered")
            reply = TRANSLATION
        out = [*tokenizer.encode(reply, add_special_tokens=False), tokenizer.eos_token_id]
        yield FakeOutput([FakeCompletion(out, "stop") for _ in range(sampling_params.n)])

    llm.generate = generate  # type: ignore[method-assign]
    try:
        yield server, llm, events
    finally:
        scripted.close()


@pytest.mark.parametrize("retry_mends", [False, True])
def test_a_markup_units_fallback_goes_beside_its_retry(test_model: Path, retry_mends: bool) -> None:
    """`checks.markup_fallback_early`: once a unit's first try lost its placeholders, its
    plain text is asked for beside the markup retry, not after it (the stand-in's retry
    answers only once the plain text has been asked for); a retry that brings them back
    aborts the plain text's request; one that does not leaves its answer to be used."""
    for server, llm, events in _fallback_scripted(test_model, retry_mends):
        answer = translated(server, "The **museum** opens at nine.", format="markdown")
        assert "translation" in answer, (answer, events)
        if retry_mends:
            assert answer["translation"] == "Das **Museum** öffnet um neun."
            assert answer.get("warnings", []) == []
            assert events == ["retry asked", "plain asked", "retry answered", "plain aborted"]
        else:
            assert answer["translation"] == TRANSLATION
            assert [w["code"] for w in answer["warnings"]] == ["markup_dropped"]
            assert events[:2] == ["retry asked", "plain asked"]
            assert sorted(events[2:]) == ["plain answered", "retry answered"]
        assert llm.requests == 3  # the first try, the retry, the plain text: once each
