"""Segmentation on plain data: per-language sentences, structure kept, byte-exact joins."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tolk.translation.segment import SPLIT_MODES, SplitMode, segment

ARTICLE = """# Scaling a translation service

We started with FastAPI and a pool of worker processes. It worked in staging.

  - Requests waited in a queue.
  - Workers loaded the model once each.
1. First, measure.
2) Then change one thing.

> Latency was 97% queueing.

---
"""


def test_lines_and_structure_stay_in_the_gaps() -> None:
    doc = segment(ARTICLE, "sentences", max_tokens=1000)
    assert doc.segments == (
        "Scaling a translation service",
        "We started with FastAPI and a pool of worker processes. It worked in staging.",
        "Requests waited in a queue.",
        "Workers loaded the model once each.",
        "First, measure.",
        "Then change one thing.",
        "Latency was 97% queueing.",
    )
    assert doc.gaps[0] == "# "
    assert doc.gaps[2] == "\n\n  - "
    assert doc.gaps[4] == "\n1. "
    assert doc.gaps[-1] == "\n\n---\n"  # a rule has no words: never sent to a model
    assert doc.join(list(doc.segments)) == ARTICLE
    upper = doc.join([s.upper() for s in doc.segments])
    assert upper.startswith("# SCALING A TRANSLATION SERVICE\n\nWE STARTED")
    assert "\n  - REQUESTS WAITED IN A QUEUE.\n  - WORKERS" in upper


def test_paragraphs_keep_single_newlines_inside_and_split_items() -> None:
    text = "A hard-wrapped\nparagraph of prose.\n\n- one item\n- another\n\nEnd."
    doc = segment(text, "paragraphs")
    assert doc.segments == ("A hard-wrapped\nparagraph of prose.", "one item", "another", "End.")
    assert doc.join(list(doc.segments)) == text


def test_none_is_the_whole_text_less_its_outer_whitespace() -> None:
    doc = segment("\n  One. Two.\n\nThree.  \n", "none")
    assert doc.segments == ("One. Two.\n\nThree.",)
    assert doc.gaps == ("\n  ", "  \n")


def test_long_lines_are_cut_at_sentences_per_language() -> None:
    # A sentence over the budget is cut further at whitespace; sentences that fit together
    # are packed into one segment.
    doc = segment("Dr. Smith arrived at 3 p.m. today. He left!  Why?", max_tokens=20)
    assert doc.segments == ("Dr. Smith arrived at", "3 p.m. today.", "He left!  Why?")
    assert doc.gaps == ("", " ", " ", "")
    # Real sentences, abbreviations included; the budget is the longest sentence, so every
    # segment holds whole sentences (packed where two fit) and no sentence is cut.
    cases = {
        "en": ["Dr. Smith arrived at 3 p.m. today.", "He left!", "Why?"],
        "de": ["Das ist gut.", "Hr. Meier kam z. B. am Montag an!", "Wirklich?"],
        "fr": ["Bonjour.", "M. Dupont est là !", "Vraiment ?"],
        "es": ["¿Qué tal?", "Muy bien.", "¡Gracias!"],
        "ne": ["म घर जान्छु।", "तिमी कहाँ जान्छौ?", "ठिक छ।"],
        "zh": ["我很好。", "你呢？", "谢谢！"],
        "ja": ["今日は晴れです。", "明日は雨です！"],
    }
    for language, sentences in cases.items():
        text = ("" if language in ("zh", "ja") else " ").join(sentences)
        budget = max(len(s.encode()) for s in sentences)
        doc = segment(text, "sentences", language=language, max_tokens=budget)
        assert len(doc.segments) >= 2, language
        for sentence in sentences:
            assert any(sentence in piece for piece in doc.segments), (language, doc.segments)
        assert doc.join(list(doc.segments)) == text
        whole = segment(text, "sentences", language=language, max_tokens=1000)
        assert whole.segments == (text,), language  # within budget: never cut


def test_sentences_are_packed_up_to_the_budget() -> None:
    text = "One two. Three four. Five six. Seven eight."
    doc = segment(text, max_tokens=len("Five six. Seven eight."))
    assert doc.segments == ("One two. Three four.", "Five six. Seven eight.")


def test_thai_and_unpunctuated_text_is_cut_at_whitespace_or_the_budget() -> None:
    thai = "สวัสดีครับ วันนี้อากาศดีมาก เราจะไปเที่ยวทะเลกัน"
    doc = segment(thai, language="th", max_tokens=40)
    assert len(doc.segments) > 1
    assert all(len(s.encode()) <= 40 for s in doc.segments)
    assert doc.join(list(doc.segments)) == thai
    chinese = "这是一个没有标点符号的很长的句子" * 4
    doc = segment(chinese, language="zh", max_tokens=30)
    assert all(len(s.encode()) <= 30 for s in doc.segments)
    assert "".join(doc.segments) == chinese


def test_a_tokenizer_decides_the_budget() -> None:
    words = " ".join(f"w{i}" for i in range(30))  # 30 "tokens" by a whitespace count
    doc = segment(words, max_tokens=10, count=lambda s: len(s.split()))
    assert [len(s.split()) for s in doc.segments] == [10, 10, 10]


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(
        st.one_of(
            st.text(max_size=12),  # any unicode
            st.sampled_from(["\n", "\n\n", " ", "\t", "\r\n", "- ", "1. ", "> ", ". ", "। ", "。"]),
            st.sampled_from(["Hello world.", "Das ist gut.", "म घर जान्छु।", "我很好。"]),
        ),
        max_size=40,
    ).map("".join),
    mode=st.sampled_from(SPLIT_MODES),
    max_tokens=st.integers(min_value=1, max_value=64),
)
def test_joining_untranslated_segments_gives_the_input(
    text: str, mode: SplitMode, max_tokens: int
) -> None:
    doc = segment(text, mode, max_tokens=max_tokens)
    assert doc.join(list(doc.segments)) == text
    assert len(doc.gaps) == len(doc.segments) + 1
    for piece in doc.segments:
        assert piece
        assert piece == piece.strip()
