"""Subtitles in context (tolk.translation.subtitles) without a server: which cues one
sentence joins, how a group's translation goes back into its cues (placeholders kept, or cut
by the cues' shares), and that numbers and timings come back byte for byte."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.samples.subtitles import cue_text, heads, sizes, srt
from tolk.translation.document import Document, Rendered, Tag, Unit
from tolk.translation.plan import DocumentPlan, Done
from tolk.translation.segment import Segmented, segment
from tolk.translation.subtitles import (
    MAX_GROUP_CHARS,
    MAX_GROUP_CUES,
    CueGroup,
    _Cue,
    _groups,
    _parsed_cue,
    escape_srt,
    has_text,
    parse_srt,
    parse_vtt,
    split_by_shares,
    unspaced,
)


def render(doc: Document, unit: int, rendered: Rendered) -> str:
    outputs = {i: u.original() for i, u in enumerate(doc.units)}
    outputs[unit] = rendered
    return doc.render(outputs)


def test_a_sentence_across_cues_is_one_unit_up_to_its_end() -> None:
    doc = parse_srt(srt("I went to", "the store <i>today</i>", "and bought bread.", "Then I left."))
    assert sizes(doc) == [3, 1]
    assert doc.units[0].masked == (
        "I went to <x1/> the store <g2>today</g2> <x3/> and bought bread."
    )
    assert doc.units[1].masked == "Then I left."
    assert sizes(parse_srt(srt("I went to", "the store."), in_context=False)) == [1, 1]


def test_sentence_ends_that_stop_a_group() -> None:
    for end in ("Stop.", "Really?", "Go!", "Well…", 'He said "no."', "He said “no!”", "好。"):
        assert sizes(parse_srt(srt(end, "next words"))) == [1, 1], end
    for open_end in ("Well,", "and then", "he said:", "so -", "我们"):
        assert sizes(parse_srt(srt(open_end, "next words"))) == [2], open_end
    # Dots that go on in the next cue, as subtitlers mark a sentence that continues.
    assert sizes(parse_srt(srt("I was going...", "...to the store."))) == [2]
    assert sizes(parse_srt(srt("I was going...", "To the store."))) == [1, 1]


def test_groups_stop_at_blocks_speakers_dialogue_and_cues_without_words() -> None:
    vtt = (
        "WEBVTT\n\n00:01.000 --> 00:02.000\nI went to\n\nNOTE a note\n\n"
        "00:03.000 --> 00:04.000\nthe store\n\nid\n00:05.000 --> 00:06.000\nwith you\n"
    )
    assert sizes(parse_vtt(vtt)) == [1, 2]  # not across the NOTE, across an identifier
    empty_cue = (
        "1\n00:00:01,000 --> 00:00:02,000\nI went to\n\n2\n00:00:03,000 --> 00:00:04,000\n\n"
        "3\n00:00:05,000 --> 00:00:06,000\nthe store.\n"
    )
    assert sizes(parse_srt(empty_cue)) == [1, 1]
    assert sizes(parse_srt(srt("Where are you", "- Home."))) == [1, 1]
    assert sizes(parse_srt(srt("I went to", "♪ ♪", "the store."))) == [1, 1]  # ♪: no unit
    voices = parse_vtt(
        "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Ann>I went to\n\n"
        "00:03.000 --> 00:04.000\nthe store and\n\n"
        "00:05.000 --> 00:06.000\n<v Ann>then\n\n"
        "00:07.000 --> 00:08.000\n<v Bob>home\n"
    )
    assert sizes(voices) == [3, 1]  # Ann, no voice tag, Ann again; Bob is a new speaker


def test_groups_keep_their_caps() -> None:
    assert sizes(parse_srt(srt(*["word"] * 12))) == [5, 5, 2]
    long = "x" * 180
    assert sizes(parse_srt(srt(long, long, long))) == [2, 1]
    alone = "y" * (MAX_GROUP_CHARS + 50)
    assert sizes(parse_srt(srt(alone, "and more"))) == [1, 1]


def test_grouping_is_linear_and_bounded_over_100000_cues() -> None:
    """100,000 one-word cues without punctuation: groups of at most MAX_GROUP_CUES, in one
    pass (the cues' own parsing, unchanged, is left out: it is what it always was)."""
    cue = _parsed_cue("word", escape_srt)
    gap = "\n\n1\n00:00:01,000 --> 00:00:02,000\n"
    count = 100_000
    started = time.perf_counter()
    groups = _groups([cue] * count, [gap] * (count + 1))
    assert time.perf_counter() - started < 5
    assert [i for g in groups for i in g] == list(range(count))
    assert len(groups) == count // MAX_GROUP_CUES
    assert max(len(g) for g in groups) == MAX_GROUP_CUES
    # A cue of the most text a group may hold stays alone: no group past the character cap.
    # A cue with the most text a group holds: every group around it is of one cue.
    full = _Cue(cue.doc, "w" * MAX_GROUP_CHARS, None)
    groups = _groups([full, cue] * 1000, [gap] * 2001)
    assert len(groups) == 2000


THREE = srt("I went to the", "<i>big old store</i>", "and bought some bread.")


def test_placeholders_kept_put_the_translation_in_the_cues_where_the_model_put_them() -> None:
    doc = parse_srt(THREE)
    unit = doc.units[0]
    assert isinstance(unit, CueGroup)
    rendered = unit.restore("Ich ging in den <x1/> <g2>großen alten Laden</g2> <x3/> und Brot.")
    assert rendered is not None
    out = render(doc, 0, rendered)
    assert cue_text(out) == ["Ich ging in den", "<i>großen alten Laden</i>", "und Brot."]
    assert heads(out) == heads(THREE)
    # Markup moved into another cue is refused even where the unit is restored as a plain
    # Unit (a glossary's protected terms rebuild it): its check sees each cue's tags.
    across = Unit.restore(unit, "Ich ging <g2>in den <x1/> großen</g2> alten Laden <x3/> und Brot.")
    assert across is not None
    assert not unit.valid(across)
    assert unit.valid(rendered)
    # Markup moved into another cue is not kept: its cue's markup goes back around the text
    # the boundaries give it.
    moved = unit.restore("Ich <g2>ging</g2> in den <x1/> großen alten Laden <x3/> und Brot.")
    assert moved is not None
    assert cue_text(render(doc, 0, moved)) == [
        "Ich ging in den",
        "<i>großen alten Laden</i>",
        "und Brot.",
    ]


def test_without_placeholders_the_translation_is_cut_by_the_cues_shares() -> None:
    doc = parse_srt(THREE)
    unit = doc.units[0]
    # Source shares: 13, 13 and 22 characters of 48; cut near 13.5 and 27.1 of 50.
    rendered = unit.restore("Ich ging in den großen Laden und kaufte dort Brot.")
    assert rendered is not None
    out = render(doc, 0, rendered)
    assert cue_text(out) == [
        "Ich ging in den",
        "<i>großen Laden</i>",
        "und kaufte dort Brot.",
    ]
    assert heads(out) == heads(THREE)
    # One boundary lost: the rest is not trusted either, the cut is by shares.
    half = unit.restore("Ich ging in den <x1/> großen Laden und kaufte dort Brot.")
    assert half == rendered
    # Too few words for three cues: not cut (the unit goes on cue by cue).
    assert unit.restore("Brot kaufen") is None


def test_a_cut_prefers_punctuation_near_its_share() -> None:
    # The even cut is after "war" (20 of 40 characters); the comma is 4 before it.
    assert split_by_shares("Als wir ankamen, war der Laden schon zu.", [10, 10]) == [
        "Als wir ankamen,",
        "war der Laden schon zu.",
    ]
    assert split_by_shares("Als wir ankamen war der Laden schon zu.", [10, 10]) == [
        "Als wir ankamen war",
        "der Laden schon zu.",
    ]
    assert split_by_shares("eins zwei drei vier", [1, 1, 1, 1]) == ["eins", "zwei", "drei", "vier"]
    assert split_by_shares("eins zwei", [1, 1, 1]) is None
    assert split_by_shares("   ", [1]) is None


def test_text_without_spaces_is_cut_between_characters() -> None:
    comma, bang = "\uff0c", "\uff01"  # full-width
    text = f"我今天去商店{comma}买了一些面包然后回家了。"
    assert unspaced(text)
    assert unspaced("今日は店に行った。")
    assert not unspaced("Ich ging heim.")
    # The even cut is at 9.5 of 19 characters; the comma 2.5 before it.
    assert split_by_shares(text, [1, 1]) == [f"我今天去商店{comma}", "买了一些面包然后回家了。"]
    parts = split_by_shares("我去商店买面包然后回家", [1, 1, 1])
    assert parts == ["我去商店", "买面包", "然后回家"]  # near 11/3 and 22/3
    # Never a cue that starts with closing punctuation.
    for pieces in range(2, 6):
        cut = split_by_shares(f"好{comma}我们走吧{bang}快点。", [1] * pieces)
        assert cut is not None
        assert not any(p[0] in f"{comma}{bang}。" for p in cut), cut
    # Chinese through a group: the source is English, the cut follows the translation.
    doc = parse_srt(srt("I went to the store", "and bought bread."))
    rendered = doc.units[0].restore("我去商店买了面包。")
    assert rendered is not None
    assert "".join(cue_text(render(doc, 0, rendered))) == "我去商店买了面包。"
    assert all(cue_text(render(doc, 0, rendered)))


def test_markup_inside_a_cue_is_not_cut_blind() -> None:
    doc = parse_srt(srt("<i>Hi</i> there my", "friend, how are you?"))
    unit = doc.units[0]
    assert isinstance(unit, CueGroup)
    assert unit.restore("Hallo mein Freund, wie geht es dir?") is None  # paired: cannot place <i>
    plain = unit.restore("Hallo mein Freund, wie geht es dir?", paired=False)
    assert plain is not None  # without emphasis it can
    assert not any(isinstance(p, Tag) and p.source in ("<i>", "</i>") for p in plain)
    voiced = parse_vtt(
        "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Ann>I went to the\n\n"
        "00:03.000 --> 00:04.000\nstore &amp; then home.\n"
    )
    rendered = voiced.units[0].restore("Ich ging in den Laden & dann heim.")
    assert rendered is not None
    assert cue_text(render(voiced, 0, rendered)) == [
        "<v Ann>Ich ging in den",
        "Laden &amp; dann heim.",
    ]


WORDS = st.text("abcé ,", min_size=1, max_size=12).filter(lambda t: any(c.isalpha() for c in t))


@settings(max_examples=300, deadline=None)
@given(
    cues=st.lists(st.tuples(WORDS, st.booleans()), min_size=2, max_size=5),
    translation=st.lists(
        st.sampled_from(
            ["Wort", "ß", " ", "\uff0c", "。", "面包", "<x1/>", "<x3/>", "<g2>", "</g2>"]
        )
        | st.text("ab <>/é", max_size=4),
        max_size=30,
    ),
)
def test_a_restored_group_never_leaves_a_cue_empty(
    cues: list[tuple[str, bool]], translation: list[str]
) -> None:
    source = srt(*[f"<i>{t}</i>" if italic else t for t, italic in cues])
    doc = parse_srt(source)
    assert sizes(doc) == [len(cues)]
    unit = doc.units[0]
    for paired in (True, False):
        rendered = unit.restore("".join(translation), paired)
        if rendered is None:
            continue
        # The plan takes it as it is; but a `<` the model wrote next to a tag reads as part
        # of it (`x<</i>`): that unit is refused and goes on cue by cue.
        stray = any("<" in p for p in rendered if isinstance(p, str))
        assert unit.valid(rendered, paired) or stray
        out = render(doc, 0, rendered)
        assert heads(out) == heads(source)
        assert all(has_text(t) for t in cue_text(out)), out
        for (_, italic), text in zip(cues, cue_text(out), strict=True):
            # A cue's own markup, whole or (without emphasis) none.
            assert text.count("<i>") == text.count("</i>") <= int(italic)


def cut(text: str) -> Segmented:
    return segment(text, "sentences", max_tokens=200)


def translated(doc: Document, model: Callable[[str], str]) -> str:
    """The document through the service's passes (tolk.translation.plan), `model` as the
    engine."""
    plan = DocumentPlan([doc], cut, lambda masked: True)
    done = {s: Done(model(s), 0, 0, 0) for s in plan.first}
    while pending := plan.restore(done):
        done |= {s: Done(model(s), 0, 0, 0) for s in pending}
    return plan.render(done)[0]


def test_the_plan_keeps_timings_with_and_without_placeholders() -> None:
    source = srt("I went to the", "<i>big old store</i>", "and bought some bread.", "Then I left.")

    def keeping(segment_text: str) -> str:  # upper-cased, placeholders where they were
        parts = re.split(r"(</?g\d+>|<x\d+/>)", segment_text)
        return "".join(p if i % 2 else p.upper() for i, p in enumerate(parts))

    def dropping(segment_text: str) -> str:  # the placeholders lost
        return re.sub(r"<[^>]*>", "", segment_text).upper()

    kept = translated(parse_srt(source), keeping)
    assert heads(kept) == heads(source)
    assert cue_text(kept) == [
        "I WENT TO THE",
        "<i>BIG OLD STORE</i>",
        "AND BOUGHT SOME BREAD.",
        "THEN I LEFT.",
    ]
    lost = translated(parse_srt(source), dropping)
    assert heads(lost) == heads(source)
    assert all(has_text(t) for t in cue_text(lost))
    assert "".join(cue_text(lost)).replace("<i>", "").replace("</i>", "") == (
        "I WENT TO THEBIG OLD STOREAND BOUGHT SOME BREAD.THEN I LEFT."
    )
    # Cue by cue, as before: the same cues, each its own segment.
    assert translated(parse_srt(source, in_context=False), keeping) == kept
