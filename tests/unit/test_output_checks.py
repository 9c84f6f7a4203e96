"""Output checks and per-pair budgets, on plain data (outputs the real 0.5B model wrote)."""

from __future__ import annotations

import pytest

from tolk.budget import DEFAULT_RATIO, MIN_RATIO, Budgets, sample
from tolk.languages import lang
from tolk.translation.checks import OutputChecks, is_echo, is_loop, loop_span, strip_cut_characters

CHECKS = OutputChecks(["en", "de", "fr", "es", "pt", "zh", "ne"])
SOURCE = "The museum opens at nine in the morning and closes at six in the evening."


def test_a_german_translation_passes() -> None:
    out = "Das Museum öffnet um neun Uhr morgens und schließt um sechs Uhr abends."
    assert not CHECKS.check(SOURCE, out, "en", "de")


def test_english_back_is_off_target_and_an_echo() -> None:
    verdict = CHECKS.check(SOURCE, SOURCE, "en", "de")
    assert set(verdict.problems) == {"off_target", "echo"}
    assert verdict.language == "en"
    assert verdict.retryable
    paraphrase = "The museum is open at nine in the morning and it closes at six in the evening."
    assert "echo" in CHECKS.check(SOURCE, paraphrase, "en", "de").problems


def test_a_target_in_the_wrong_script_is_off_target() -> None:
    """Nepali in Latin letters (the 0.5B Qwen wrote it; the detector calls it unreliable)."""
    romanized = "Karo kuma 4 miliyo gurta nai te hoon jana tariya."
    verdict = CHECKS.check(SOURCE, romanized, "en", "ne")
    assert "off_target" in verdict.problems
    assert (
        "off_target"
        in CHECKS.check(SOURCE, "Bówùguǎn zǎoshang jiǔ diǎn kāimén.", "en", "zh").problems
    )
    # In its script, with names in Latin letters: no problem of script.
    nepali = "संग्रहालय बिहान नौ बजे खुल्छ र Swedish Academy साँझ छ बजे बन्द हुन्छ।"
    assert "off_target" not in CHECKS.check(SOURCE, nepali, "en", "ne").problems
    chinese = "使用 Kubernetes 和 Docker 部署 API 服务。"
    assert (
        "off_target"
        not in CHECKS.check(
            "Deploy the API with Kubernetes and Docker.", chinese, "en", "zh"
        ).problems
    )
    # A target that shares the source's script is the detector's to judge.
    assert not CHECKS.check(SOURCE, "Das Museum öffnet um neun Uhr morgens.", "en", "de")


@pytest.mark.parametrize(
    ("source", "output", "target"),
    [
        # Real outputs of the 0.5B model (docs/benchmarks/quality-h100): Chinese inside German,
        # Arabic inside Nepali.
        (
            "Like some other experts, he noted these findings have no relevance to people "
            "who already have Type 1 diabetes.",
            "Wie andere Experten sagte er, diese Ergebnisse sind nicht relevant, wenn die "
            "Menschen 已经有 Type 1 diabetes haben.",
            "de",
        ),
        (
            "Nepal's main problems are: large administration, distance, and film-like views.",
            "नेपाल को मुख्य समस्या: बड़ा प्रशालन, दूरी, र फلم-आध्याशन हो।",
            "ne",
        ),
    ],
)
def test_words_in_a_third_script_are_flagged(source: str, output: str, target: str) -> None:
    verdict = CHECKS.check(source, output, "en", target)
    assert verdict.language == target  # the detector alone would pass it
    assert verdict.problems == ("foreign_script",)
    assert verdict.retryable


@pytest.mark.parametrize(
    ("source", "output", "target"),
    [
        # Latin names and terms in Chinese or Nepali come from the source's script.
        ("The CEO of Ring spoke on QVC.", "Ring 的 CEO 在 QVC 上发言。", "zh"),
        ("Call the API now.", "अहिले API लाई कल गर्नुहोस्।", "ne"),
        # A Cyrillic name the source has; a lone symbol.
        ("Москва is a big city, bigger than Berlin.", "Москва ist eine große Stadt.", "de"),
        ("The ratio pi is about three.", "Das Verhältnis π ist etwa drei.", "de"),
        # Japanese is written in three scripts.
        ("Good morning, world.", "おはようございます、世界。カタカナ", "ja"),
    ],
)
def test_a_script_the_target_or_source_uses_is_not_foreign(
    source: str, output: str, target: str
) -> None:
    assert "foreign_script" not in CHECKS.check(source, output, "en", target).problems


def test_a_name_or_a_short_text_is_no_echo() -> None:
    assert not CHECKS.check("Qwen", "Qwen", "en", "de")
    assert not CHECKS.check("OK, thanks!", "OK, thanks!", "en", "de")
    # Spanish and Portuguese share most words: only an exact copy counts between them.
    assert not is_echo(
        "O museu abre às nove da manhã.", "El museo abre a las nueve.", same_script_ok=True
    )


@pytest.mark.parametrize(
    "output",
    [
        "लान्या लान्या लान्या लान्या लान्या लान्या लान्या लान्या",
        "Das Museum kala kala kala kala kala kala kala kala kala",
        "Das Museum öffnet!!!!!!!!!!!!!!!!!!!!!!!!",
    ],
)
def test_loops_are_found(output: str) -> None:
    assert is_loop(SOURCE, output)
    assert "loop" in CHECKS.check(SOURCE, output, "en", "de").problems or "ne" in output


def test_a_repeating_source_may_repeat() -> None:
    assert loop_span("ha ha ha ha ha ha ha ha") > 0
    assert not is_loop("ha ha ha ha ha ha ha ha", "ha ha ha ha ha ha ha ha")
    assert not is_loop(SOURCE, "Das Museum öffnet um neun Uhr.")


def test_a_cut_character_is_removed_and_said() -> None:
    text, cut = strip_cut_characters("संग्रहालय बिहान नौ बजे खुल्छ र\ufffd\ufffd")
    assert cut
    assert "\ufffd" not in text
    verdict = CHECKS.check(SOURCE, text, "en", "ne", finish_reason="length", cut_character=cut)
    assert {"truncated", "cut_character"} <= set(verdict.problems)
    assert strip_cut_characters("नमस्ते") == ("नमस्ते", False)
    # Inside the text too (a byte sequence that is no character), unless the source has one.
    assert strip_cut_characters("औ\ufffdनि लड़ना") == ("औनि लड़ना", True)
    assert strip_cut_characters("a \ufffd b", "x \ufffd y") == ("a \ufffd b", False)


def test_a_generation_vllm_ended_as_a_loop_is_one() -> None:
    out = "Das Museum öffnet um neun Uhr"
    assert "loop" in CHECKS.check(SOURCE, out, "en", "de", finish_reason="repetition").problems


def test_empty_output_for_words_is_a_problem() -> None:
    assert CHECKS.check(SOURCE, "  ", "en", "de").problems == ("empty",)
    assert not CHECKS.check("42", "", "en", "de")


def test_lost_placeholders_are_retried_but_are_no_warning_of_their_own() -> None:
    out = "Das Museum öffnet um neun Uhr morgens und schließt um sechs Uhr abends."
    verdict = CHECKS.check(SOURCE, out, "en", "de", lost_placeholders=True)
    assert verdict.problems == ("placeholders",)
    assert verdict.retryable


def test_the_retry_names_tags_but_not_links() -> None:
    from types import SimpleNamespace
    from typing import cast

    from tolk.engine import ModelEngine
    from tolk.translation.checks import Verdict
    from tolk.translation.fidelity import firmer
    from tolk.translation.prompts import NO_INSTRUCTIONS

    settings = SimpleNamespace(prompt_format="chat", placeholders="links")
    engine = cast(ModelEngine, SimpleNamespace(settings=settings))
    lost = Verdict(("placeholders",))
    en, de = lang("en"), lang("de")
    as_links = firmer(engine, NO_INSTRUCTIONS, "Run <g1>it</g1> with <x2/>.", en, de, lost)
    # Links are not named (a line the model may copy into its answer); tags are.
    assert as_links.custom == ("Write the translation in German only, not in English",)
    as_tags = firmer(engine, NO_INSTRUCTIONS, "See [1]: <g1>it</g1> and <x2/>.", en, de, lost)
    assert any("<g1> </g1> <x2/>" in line for line in as_tags.custom), as_tags
    assert as_tags.custom[0] == "Write the translation in German only, not in English"
    settings.placeholders = "tags"  # a model configured to see tags is told of tags
    told = firmer(engine, NO_INSTRUCTIONS, "Run <g1>it</g1> with <x2/>.", en, de, lost)
    assert any("<g1> </g1> <x2/>" in line for line in told.custom), told


def test_budgets_follow_the_script_of_the_target() -> None:
    # Characters stand in for a tokenizer here: Nepali spends more of them than German.
    budgets = Budgets(len)
    assert len(sample("ne") or ()) == 100
    to_ne, to_en = budgets.ratio(lang("en"), lang("ne")), budgets.ratio(lang("ne"), lang("en"))
    assert to_ne >= MIN_RATIO
    assert to_en >= MIN_RATIO
    # Outside the sample, and for a configured ratio, one number for all.
    assert budgets.ratio(lang("en"), lang("ko")) == DEFAULT_RATIO
    assert Budgets(len, fixed=3.0).ratio(lang("en"), lang("ne")) == 3.0
    assert set(budgets.table(["en", "de"])) == {"en>de", "de>en"}


def test_budgets_with_a_real_tokenizer_give_nepali_several_times_the_room() -> None:
    from pathlib import Path

    path = Path("models/qwen2.5-coder-0.5b-instruct")
    if not (path / "tokenizer.json").exists():
        pytest.skip("the real model is fetched by tests/engine/test_real_model.py")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    budgets = Budgets(lambda text: len(tokenizer.encode(text, add_special_tokens=False)))
    to_ne = budgets.ratio(lang("en"), lang("ne"))
    to_de = budgets.ratio(lang("en"), lang("de"))
    assert to_ne > 2 * to_de, budgets.table(["en", "de", "ne"])


def test_script_checks_count_letters_only_never_a_scripts_marks_or_numerals() -> None:
    """Devanagari's vowel signs and Han's ideographic zero belong to their scripts but are no
    letters: they neither make a romanized output Nepali nor a German one foreign."""
    from tolk.translation.checks import foreign_letters, outside_target_script

    marks = "\u093e \u093f \u094d \u093e \u093f "  # five vowel signs and viramas, no letter
    assert outside_target_script("Hello there, friend.", marks + "Karo kuma miliyo", "ne")
    assert not outside_target_script("Hello there, friend.", "नमस्ते साथी, Karo", "ne")
    assert foreign_letters("Good.", "Das ist \u3007\u3007\u3007 gut.", "de") == 0
    assert foreign_letters("Good.", "die 已经有 Type", "de") == 3
    assert foreign_letters("已经 good.", "die 已经有 Type", "de") == 0  # the source's script
    assert outside_target_script("\u3007 zero", "zero zero zero zero", "zh")  # (no letter)
