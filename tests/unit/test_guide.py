"""The markup retry's guiding expression (tolk.translation.guide): what it lets through and
what it refuses, checked with Python's `re` for its meaning and with llguidance (the engine's
structured-outputs backend tolk configures) for its syntax."""

from __future__ import annotations

import re

import llguidance
import pytest

from tolk.translation.document import from_model
from tolk.translation.fidelity import lost_placeholders
from tolk.translation.guide import placeholder_regex, run_limit

SENTENCE = "Run <g1>make serve</g1> to start the <g2>server</g2>. Then call <x3/> with your text."


def matches(masked: str, output: str, syntax: str = "links") -> bool:
    regex = placeholder_regex(masked, syntax)  # type: ignore[arg-type]
    assert regex is not None
    return re.fullmatch(regex, output) is not None


def test_the_engine_backend_accepts_every_expression() -> None:
    for masked, syntax in [
        (SENTENCE, "links"),
        (SENTENCE, "tags"),
        ("a <g1>b <g2>c</g2> d</g1> e<x3/>", "links"),
        ("<g1>a</g1><g2>b</g2><g3>c</g3><g4>d</g4>", "links"),
        ("line one<x1/>\nline two", "tags"),
    ]:
        regex = placeholder_regex(masked, syntax)  # type: ignore[arg-type]
        assert regex is not None
        grammar = llguidance.LLMatcher.grammar_from_regex(regex)
        assert llguidance.LLMatcher.validate_grammar(grammar) == "", (masked, syntax)


def test_a_translation_with_every_placeholder_once_matches() -> None:
    assert matches(
        SENTENCE,
        "Führen Sie [make serve](1) aus, um den [Server](2) zu starten. Dann rufen Sie `3` auf.",
    )
    tagged = "Führen Sie <g1>make serve</g1> aus ... <g2>Server</g2> <x3/>."
    assert matches(SENTENCE, tagged, "tags")


def test_words_may_move_across_placeholders_but_not_the_placeholders() -> None:
    # Words move across placeholders: more text before the first than the source has.
    assert matches(
        SENTENCE,
        "Bitte führen Sie zuerst [make serve](1) aus, um den [Server](2) zu starten. Dann `3`.",
    )
    # The placeholders keep the source's order (so nesting holds).
    assert not matches(SENTENCE, "Um den [Server](2) zu starten, [make serve](1). Dann `3`.")


def test_a_lost_doubled_or_empty_placeholder_does_not_match() -> None:
    assert not matches(SENTENCE, "Um den Server zu starten, [make serve](1). Dann `3`.")
    assert not matches(SENTENCE, "[make serve](1) [make serve](1) [Server](2) `3`")
    assert not matches(SENTENCE, "[](1) [Server](2) `3`")  # a pair's content is words
    assert not matches(SENTENCE, "[make serve](1) [Server](2) `3` [extra](4)")
    assert not matches(SENTENCE, "[make serve](1)\n[Server](2) `3`")  # a line stays one line


def test_nesting_is_kept() -> None:
    masked = "a <g1>b <g2>c</g2> d</g1> e"
    assert matches(masked, "A [B [C](2) D](1) E")
    assert not matches(masked, "A [B](1) [C](2) E")  # no longer nested
    assert not matches(masked, "A [C](2) [B](1) E")


def test_each_run_of_text_is_bounded() -> None:
    """A model that will not write the next placeholder cannot ramble on until it may, nor
    write past the last one."""
    masked = "Click <g1>Save</g1> now."
    slack = len("Click Save now.") // 2 + 8
    assert run_limit("Click ", slack) == 12 + slack
    before = "x" * run_limit("Click ", slack)
    assert matches(masked, before + "[Speichern](1) jetzt.")
    assert not matches(masked, before + "x[Speichern](1) jetzt.")
    after = "y" * run_limit(" now.", slack)
    assert matches(masked, "[Speichern](1)" + after)
    assert not matches(masked, "[Speichern](1)" + after + "y")


def test_segments_without_placeholders_or_with_their_syntax_get_none() -> None:
    assert placeholder_regex("no markup here") is None
    # A '<' of the text's own cannot be told from a tag: no guide.
    assert placeholder_regex("if a <x1/> b then a < b", "tags") is None


@pytest.mark.parametrize("syntax", ["links", "tags"])
def test_what_matches_restores(syntax: str) -> None:
    """An output the expression lets through has every placeholder back exactly once."""
    output = (
        "Führen Sie [make serve](1) aus, um den [Server](2) zu starten. Dann `3`."
        if syntax == "links"
        else "Führen Sie <g1>make serve</g1> aus, um den <g2>Server</g2> zu starten. Dann <x3/>."
    )
    assert matches(SENTENCE, output, syntax)
    assert not lost_placeholders(SENTENCE, from_model(SENTENCE, output, syntax))  # type: ignore[arg-type]
