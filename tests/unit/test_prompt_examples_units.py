"""Example translations in the prompt (tolk.translation.examples) and the check that an
output did not copy them, on given strings; the pair watch's skipping and resuming. (The
markup fallback beside its retry, on an in-process server: tests/edge/test_prompt_examples.py.)"""

from __future__ import annotations

from tests.support.prompt_examples import SOURCE, TRANSLATION
from tolk.translation.checks import OutputChecks, Verdict, copied_example

SHOWN = "Obwohl alle Länder „skandinavisch“ waren, gab es viele Unterschiede zwischen den Menschen."


def test_an_output_holding_an_examples_words_copied_them() -> None:
    assert copied_example(f"Das Museum, {SHOWN[8:40]} öffnet.", [SHOWN])
    assert copied_example(SHOWN.upper(), [SHOWN])  # case and spacing do not hide it
    assert not copied_example(TRANSLATION, [SHOWN])
    assert not copied_example(SHOWN, [])  # no examples shown: nothing to copy
    # A run of the example's words that the source has too (a name, a quoted title) is no copy.
    title = "„Das Vermächtnis der Tempelritter“"
    assert copied_example(f"Der Film {title} lief.", [f"Im Film {title} sieht man"])
    assert not copied_example(
        f"Der Film {title} lief.", [f"Im Film {title} sieht man"], [f"The film {title} ran."]
    )


def test_the_checks_say_copied_example_and_a_copy_weighs_more_than_other_problems() -> None:
    checks = OutputChecks(["en", "de"])
    verdict = checks.check(SOURCE, SHOWN, "en", "de", examples=[SHOWN])
    assert "copied_example" in verdict.problems
    assert verdict.retryable
    assert not checks.check(SOURCE, TRANSLATION, "en", "de", examples=[SHOWN])
    # An echo of the source says what it says; a copy of an example says another thing.
    assert Verdict(("copied_example",)).severity > Verdict(("off_target", "echo")).severity


def test_the_watch_skips_past_the_limit_and_does_it_again_when_the_waste_stops() -> None:
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY, WINDOW, PairWatch

    watch = PairWatch("first tries shown examples")
    pair = ("m", "en", "ne")
    for _ in range(MIN_SEEN - 1):
        watch.record(*pair, wasted=True, limit=0.5)
    assert watch.do(*pair)  # too few seen yet
    watch.record(*pair, wasted=True, limit=0.5)
    assert watch.skipping(*pair)
    done = [watch.do(*pair) for _ in range(3 * PROBE_EVERY)]
    assert done.count(True) == 3  # the probes
    assert watch.skipping("m", "en", "de") is False  # per pair
    # The probes find no more waste: once it is HYSTERESIS under the limit, the step is
    # done again (at the limit itself it is still skipped).
    for _ in range(MIN_SEEN):
        watch.record(*pair, wasted=False, limit=0.5)
    assert watch.waste_rate(*pair) == 0.5
    assert watch.skipping(*pair)
    for _ in range(MIN_SEEN // 2):
        watch.record(*pair, wasted=False, limit=0.5)
    assert watch.waste_rate(*pair) == 0.4
    assert not watch.skipping(*pair)
    assert watch.do(*pair)
    # The window slides: only the last WINDOW outcomes count.
    for _ in range(WINDOW):
        watch.record(*pair, wasted=False, limit=0.5)
    assert watch.waste_rate(*pair) == 0.0
    # A limit of 1 never skips (the markup retry's `markup_retry_min_mended: 0`).
    never = PairWatch("markup retries")
    for _ in range(WINDOW):
        never.record(*pair, wasted=True, limit=1.0)
    assert never.do(*pair)


def test_a_step_presumed_waste_is_skipped_until_the_pairs_own_outcomes_decide() -> None:
    """`presumed` (the markup steps of a pair the model does not write,
    `checks.markup_skip_unwritten`): skipped from the first time, save the probes, and shown
    as skipping with no waste share yet; once the pair has MIN_SEEN outcomes of its own they
    decide, whatever is presumed."""
    from tolk.translation.watch import MIN_SEEN, PROBE_EVERY, PairWatch

    watch = PairWatch("markup units sent whole")
    pair = ("m", "en", "ne")
    assert watch.states() == []
    assert not watch.next_does(*pair, presumed=True)
    assert watch.next_does(*pair)  # not presumed: done
    done = [watch.do(*pair, presumed=True) for _ in range(2 * PROBE_EVERY)]
    assert done.count(True) == 2, done  # the probes
    assert done[PROBE_EVERY - 1], done
    assert watch.states() == [("m", "en>ne", None, True)]
    assert not watch.skipping(*pair)  # its own outcomes say nothing yet
    for _ in range(MIN_SEEN - 1):  # the probes' outcomes: none was waste
        watch.record(*pair, wasted=False, limit=0.8)
    assert not watch.do(*pair, presumed=True)  # too few of its own yet: still presumed
    watch.record(*pair, wasted=False, limit=0.8)
    assert all(watch.do(*pair, presumed=True) for _ in range(PROBE_EVERY))  # they decide
    assert watch.states() == [("m", "en>ne", 0.0, False)]
    # A presumption that ends before the pair is measured is done again, and shown so.
    other = ("m", "en", "zh")
    assert not watch.do(*other, presumed=True)
    assert watch.do(*other, presumed=False)
    assert ("m", "en>zh", None, False) in watch.states()
    # Presumed, then measured at the limit's edge: still skipped until HYSTERESIS under it,
    # as a pair that learnt it would be (0.75 is under 0.8, over 0.7).
    third = ("m", "en", "ja")
    watch.do(*third, presumed=True)
    for i in range(MIN_SEEN):
        watch.record(*third, wasted=i % 4 != 0, limit=0.8)
    assert watch.waste_rate(*third) == 0.75
    assert watch.skipping(*third)
    assert not watch.next_does(*third, presumed=False)  # its own outcomes decide now
