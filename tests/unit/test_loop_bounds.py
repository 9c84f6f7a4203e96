"""Work per request is bounded (issue 35), without a server: the parsers' cost counted (not
timed) to be linear in the input, every format parsing any text, the document store bounded
per key, and a step that holds the event loop logged with its stack."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.samples.loop_bounds import HOSTILE_TEXT
from tolk.errors import InvalidRequest, TolkError
from tolk.translation.document import Tag, edges
from tolk.translation.formats import parse
from tolk.translation.glossary import Glossary
from tolk.translation.segment import segment


def _counted(count: Callable[[str], int]) -> tuple[Callable[[str], int], list[int]]:
    seen = [0]

    def counting(piece: str) -> int:
        seen[0] += len(piece)
        return count(piece)

    return counting, seen


@pytest.mark.parametrize(
    "text",
    ["x" * 60_000, "漢" * 30_000, "a. " * 20_000, "word " * 12_000, "[X1X]" * 12_000],
    ids=["no spaces", "CJK", "tiny sentences", "one long line", "brackets"],
)
def test_segmenting_counts_each_character_a_bounded_number_of_times(text: str) -> None:
    """Counting tokens is the segmenter's cost: every character is counted at most a few
    dozen times (log of the budget), however long the line (it was once per cut: quadratic)."""
    count, seen = _counted(lambda s: max(1, len(s) // 4))  # four characters a token
    doc = segment(text, max_tokens=200, count=count)
    assert "".join(g + s for g, s in zip(doc.gaps, (*doc.segments, ""), strict=True)) == text
    assert all(count(s) <= 200 for s in doc.segments)
    assert seen[0] <= 40 * len(text), f"{seen[0] / len(text):.0f} counts per character"


def test_edges_and_markup_parsers_are_linear() -> None:
    """The inputs that backtracked or rescanned: same answers, at any size."""
    assert edges("." * 50_000 + "a" + "!" * 5) == ("." * 50_000, "a", "!" * 5)
    assert edges(" ,; ") == (" ,; ", "", "")
    cut = lambda t: segment(t)  # noqa: E731
    for source in ("<a " * 8_000, "<!--" * 20_000, "</a" * 20_000, "<?" * 20_000):
        doc = parse("html", source, cut)
        assert doc.render({i: u.original() for i, u in enumerate(doc.units)}) == source
    nested = "<b>" * 2_000 + "word" + "</b>" * 2_000
    doc = parse("html", nested, cut)
    assert doc.render({i: u.original() for i, u in enumerate(doc.units)}) == nested


def test_glossary_matching_keeps_the_regex_semantics() -> None:
    """Longest term first, case-insensitively, whole words where a term starts or ends with
    a word character; a longer term that is not a whole word gives way to a shorter one."""
    glossary = Glossary(
        {"batch": "Stapel", "batch size": "Batchgröße", "GPU": "Grafikkarte", "C++": "C++"},
        ["tolk"],
    )
    assert glossary.terms("The Batch Size of a batch on the gpu, batches, C++.") == (
        ("Batch Size", "Batchgröße"),
        ("batch", "Stapel"),
        ("gpu", "Grafikkarte"),
        ("C++", "C++"),
    )
    assert glossary.terms("batch sizes") == (("batch", "Stapel"),)
    assert glossary.terms("microbatch") == ()
    assert glossary.terms("C++C++ and a batch size") == (
        ("C++", "C++"),
        ("batch size", "Batchgröße"),
    )
    long_word = Glossary({}, ["a" * 1_024, "aa"])
    assert list(long_word._protected.finditer("a" * 110_000)) == []
    assert list(long_word._protected.finditer("a" * 5_000 + " aa")) == [(5_001, 5_003)]
    with pytest.raises(InvalidRequest, match="at most 1024"):
        Glossary({"x" * 1_025: "y"})
    many = Glossary({f"term {i}": f"Begriff {i}" for i in range(100_000)})
    assert many.terms("a term 99999 and term 5, not term 1000000") == (
        ("term 99999", "Begriff 99999"),
        ("term 5", "Begriff 5"),
    )


def test_gettext_catalogues_are_read_in_bounded_linear_work() -> None:
    """A PO file's worst cases (tolk.translation.gettext, run in the preparation pool): runs
    of characters that begin placeholders and never end one, an entry of a whole file's
    length, more entries than MAX_ENTRIES; same answers at any size, the count refused."""
    from tolk.errors import PayloadTooLarge
    from tolk.translation import gettext

    hostile = "%(" * 200_000 + "{" * 200_000 + "%1$" * 100_000 + " word"
    (unit,) = gettext.document(hostile).units
    assert not [p for p in unit.pieces if isinstance(p, Tag)]
    catalogue = gettext.open_catalogue("big.po", f'msgid "{hostile}"\nmsgstr ""\n')
    assert catalogue.sources == [hostile]
    many = "".join(f'msgid "e{i}"\nmsgstr ""\n\n' for i in range(gettext.MAX_ENTRIES + 1))
    with pytest.raises(PayloadTooLarge, match="at most 50000 are accepted"):
        gettext.open_catalogue("many.po", many)


async def test_one_key_cannot_fill_the_document_store() -> None:
    """Per caller at most `per_owner` documents (its oldest finished one makes room; all of
    them still translating: refused), and at most `max_bytes` of results held in all."""
    from tolk.errors import Overloaded
    from tolk.server.documents import DocumentStore
    from tolk.translation.files import FILE_TYPES, TranslatedFile

    def result(size: int) -> TranslatedFile:
        return TranslatedFile(b"x" * size, FILE_TYPES[".txt"], None)  # type: ignore[arg-type]

    store = DocumentStore(capacity=100, per_owner=3, max_bytes=10_000)
    first = store.put("a", "1.txt", result(10))
    for n in range(2, 5):
        store.put("a", f"{n}.txt", result(10))
    assert store.get(first.id) is None  # a's oldest made room
    assert sum(d.owner == "a" for d in store._documents.values()) == 3
    stop = asyncio.Event()

    async def running() -> TranslatedFile:
        await stop.wait()
        return result(10)

    for n in range(3):
        store.start("b", f"{n}.txt", running())
    work = running()
    with pytest.raises(Overloaded):
        store.start("b", "one too many.txt", work)
    assert store.put("c", "c.txt", result(10)).status == "done"  # others are not refused
    big = [store.put(owner, "big.txt", result(4_000)) for owner in ("d", "e", "f")]
    assert store.held_bytes() <= 10_000
    assert store.get(big[-1].id) is not None  # the newest kept, the oldest finished dropped
    stop.set()
    await store.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE_TEXT, st.sampled_from(["text", "markdown", "html", "srt", "vtt"]))
def test_every_format_parses_any_text_and_gives_it_back(text: str, fmt: str) -> None:
    """Parsing never fails but with tolk's own error (a 4xx), and a document put back with
    its units untranslated is the text, byte for byte."""
    try:
        doc = parse(fmt, text, lambda t: segment(t, max_tokens=50))  # type: ignore[arg-type]
    except TolkError as exc:
        status = exc.status
        assert 400 <= status < 500
        return
    assert doc.render({i: u.original() for i, u in enumerate(doc.units)}) == text


async def test_a_step_that_holds_the_loop_is_logged_with_its_stack(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The watch thread names the step: the loop's stack while it is held, once per stall."""
    from prometheus_client import CollectorRegistry, Counter

    from tolk.server.loopwatch import StallWatch

    stalls = Counter("stalls", "test", registry=CollectorRegistry())
    lags: list[float] = []
    watch = asyncio.create_task(StallWatch(0.05, stalls, 0.01).run(lags.append))
    await asyncio.sleep(0.1)  # the watch thread is up, nothing held the loop yet
    assert stalls._value.get() == 0

    def hold_the_loop_on_purpose() -> None:
        time.sleep(0.4)

    with caplog.at_level("WARNING", logger="tolk.server"):
        hold_the_loop_on_purpose()
        await asyncio.sleep(0.1)
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    assert stalls._value.get() == 1  # one stall, reported once
    assert max(lags) >= 0.3  # and the lag sampled on the loop saw it
    (record,) = [r for r in caplog.records if "without yielding" in r.getMessage()]
    assert "hold_the_loop_on_purpose" in record.getMessage()


async def test_the_heartbeat_counts_the_loop_threads_cpu_not_its_waits() -> None:
    """tolk_event_loop_cpu_seconds_total: work on the loop counts, a wait that holds the loop
    without using a core (a blocking sleep) and other threads' work do not."""
    from prometheus_client import CollectorRegistry, Counter

    from tolk.server.loopwatch import StallWatch

    stalls = Counter("stalls", "test", registry=CollectorRegistry())
    used: list[float] = []
    watch = asyncio.create_task(StallWatch(5.0, stalls, 0.01).run(None, used.append))
    await asyncio.sleep(0.05)

    def spin(seconds: float) -> None:
        until = time.thread_time() + seconds
        while time.thread_time() < until:
            pass

    def wait_holding_the_loop() -> None:
        time.sleep(0.3)  # holds the loop, uses no CPU

    before = sum(used)
    wait_holding_the_loop()
    await asyncio.to_thread(spin, 0.3)  # another thread's CPU
    await asyncio.sleep(0.05)
    waited = sum(used) - before
    spin(0.3)  # the loop's own
    await asyncio.sleep(0.05)
    worked = sum(used) - before - waited
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    assert waited < 0.1
    assert 0.29 <= worked < 0.5


def test_foreign_letters_names_each_distinct_letter_once_however_long_the_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An output of 200,000 letters in another script than the target's (the random model
    asked for German from a Chinese wall of text) costs a Unicode lookup per distinct
    letter, not per letter: the count is done by regex and a Counter."""
    from tolk.translation import checks

    looked_up: list[str] = []
    script_word = checks._script_word

    def counting(letter: str) -> str:
        looked_up.append(letter)
        return script_word(letter)

    monkeypatch.setattr(checks, "_script_word", counting)
    output = "漢字かな" * 50_000
    assert checks.foreign_letters("Plain English.", output, "de") == len(output)
    assert len(looked_up) <= len(set("PlainEnglish")) + 4
    assert not checks.outside_target_script("Plain English.", "Deutsch " * 20_000, "de")
