"""What a real model writes that is not a translation, told from the output alone.

A small instruction model answers plausibly even when it fails: in the wrong language, with
the source copied back, with a word repeated until the output budget ends, or cut inside a
multi-byte character when that budget ends. Each check here is a pure function of the source,
the output (and for the language, a detector restricted to the languages served), used by
the service to retry and flag a segment and by `tolk bench quality` to count failures, so
the server and the benchmark agree on what a failure is.

Written by hand: no library checks model output for these (language identification is
py3langid's, through tolk.detect; a language's script is langcodes', a letter's script the
`regex` module's Unicode tables; similarity is the standard library's difflib).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Literal, get_args

import langcodes
import regex

from tolk.detect import Detector
from tolk.languages import lang

Problem = Literal[
    "off_target",
    "foreign_script",
    "echo",
    "loop",
    "truncated",
    "cut_character",
    "empty",
    "placeholders",
    "copied_example",
]

# Every problem a text can be flagged with, in the order a report lists them (lost
# placeholders are retried, then said by the markup's fallback warnings instead).
PROBLEMS: tuple[Problem, ...] = tuple(p for p in get_args(Problem) if p != "placeholders")

# What each problem means, in the words of an API's `warnings` (and docs/api.md, "Warnings").
DESCRIPTIONS: dict[Problem, str] = {
    "off_target": "the output is not in the target language",
    "foreign_script": "the output holds words in a script that is neither the target "
    "language's nor the source's",
    "echo": "the output repeats the source instead of translating it",
    "loop": "the output repeats itself until it was cut off",
    "truncated": "the output reached its token budget before the model finished",
    "cut_character": "the output held a broken character (removed)",
    "empty": "the model returned no text for a text with words",
    "placeholders": "the output lost or invented markup placeholders",
    "copied_example": "the output copied words from the example translations shown to the model",
}

REPLACEMENT = "\ufffd"

# Below this many letters a language cannot be told reliably (names, numbers, "OK").
MIN_LETTERS_FOR_LANGUAGE = 12
# An output this similar to its source (difflib ratio over words and punctuation, case and
# spacing ignored) is an echo.
ECHO_SIMILARITY = 0.85
# A loop: the output's tail repeats one unit at least this many times...
LOOP_REPEATS = 4
# ...and the repetition covers at least this many characters and this share of the output.
LOOP_MIN_CHARS = 16
LOOP_MIN_SHARE = 0.3
# Longest repeated unit looked for, in characters.
LOOP_MAX_PERIOD = 60


def letters(text: str) -> int:
    return sum(1 for c in text if c.isalpha())


# An output holding this many characters in a row (normalised) of an example translation the
# model was shown, where its source does not have them, copied the example: a model that
# does not know the language well takes the examples' words for the answer (the 0.5B Qwen
# did in most en->ne outputs and 4% of en->de ones: docs/benchmarks.md, Quality).
COPIED_CHARS = 20


@lru_cache(maxsize=1024)
def _windows(text: str) -> frozenset[str]:
    normal = _normal(text)
    return frozenset(normal[i : i + COPIED_CHARS] for i in range(len(normal) - COPIED_CHARS + 1))


@lru_cache(maxsize=256)
def _shown(examples: tuple[str, ...]) -> frozenset[str]:
    """The runs of a prompt's examples (the same few per pair: made once, not per segment)."""
    return frozenset[str]().union(*(_windows(e) for e in examples))


def copied_example(output: str, examples: Sequence[str], allowed: Sequence[str] = ()) -> bool:
    """Whether `output` holds a run of COPIED_CHARS characters of one of `examples` that
    none of `allowed` (the source; for a benchmark, the reference too) holds."""
    shown = _shown(tuple(examples))
    if not shown:
        return False
    normal = _normal(output)
    runs = (normal[i : i + COPIED_CHARS] for i in range(len(normal) - COPIED_CHARS + 1))
    found = {run for run in runs if run in shown}
    if not found:
        return False
    return bool(found - frozenset[str]().union(*(_windows(a) for a in allowed)))


def strip_cut_characters(text: str, source: str = "") -> tuple[str, bool]:
    """The text without the replacement characters a decoder puts where a multi-byte
    character was cut off (at its end: the budget stopped mid-character; inside: a byte-level
    model wrote a byte sequence that is no character), unless the source has them too; True
    if any went."""
    stripped = text.rstrip(REPLACEMENT)
    if REPLACEMENT not in source:
        stripped = stripped.replace(REPLACEMENT, "")
    # A cut can leave a lone combining mark (a Devanagari vowel sign without its consonant
    # is whole, so only the replacement characters go).
    return stripped, len(stripped) != len(text)


_WORDS = re.compile(r"\w+|[^\w\s]")


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def is_echo(source: str, output: str, *, same_script_ok: bool = False) -> bool:
    """Whether `output` is the source copied back (or nearly: a word changed, spacing).
    `same_script_ok`: source and target languages can legitimately look alike, as for a
    name or a product string; then only an exact copy of a longer text counts."""
    if letters(source) < MIN_LETTERS_FOR_LANGUAGE:
        return False
    a, b = _normal(source), _normal(output)
    if same_script_ok:
        return a == b
    # Word by word: an echo copies words, and characters would cost O(n^2) on the event loop
    # (140 ms for a 900-character segment; words: a few ms).
    matcher = difflib.SequenceMatcher(None, _WORDS.findall(a), _WORDS.findall(b), autojunk=False)
    return matcher.quick_ratio() >= ECHO_SIMILARITY and matcher.ratio() >= ECHO_SIMILARITY


def repeating_tail(items: Sequence[object], max_period: int) -> int:
    """How many items at the end of `items` are one unit (of up to `max_period` items)
    repeated LOOP_REPEATS times or more; 0 if none."""
    n = len(items)
    best = 0
    for period in range(1, min(max_period, n // LOOP_REPEATS) + 1):
        # The longest suffix in which every item equals the one `period` before it.
        run = 0
        i = n - 1
        while i - period >= 0 and items[i] == items[i - period]:
            run += 1
            i -= 1
        span = run + period
        if span >= LOOP_REPEATS * period and span > best:
            best = span
    return best


def loop_span(text: str) -> int:
    """How many characters at the end of `text` are one unit repeated LOOP_REPEATS times or
    more (0 if none): "kala kala kala kala kala", "लान्या लान्या लान्या ...", "!!!!!!!!".
    Only the tail is looked at: a budget that ends a loop ends it there."""
    return repeating_tail(text.rstrip(), LOOP_MAX_PERIOD)


# A language's script (ISO 15924, as langcodes gives it) that is written with several of
# Unicode's scripts.
_SCRIPTS_OF = {
    "Hans": ("Hani",),
    "Hant": ("Hani",),
    "Jpan": ("Hani", "Hira", "Kana"),
    "Kore": ("Hang", "Hani"),
}
# Letters of a script other than these are foreign (Common and Inherited are no script).
_LETTER = regex.compile(r"\p{L}")
# Fewer foreign letters than this are let be: a symbol or a name's one letter.
MIN_FOREIGN_LETTERS = 2


def _script_of(tag: str) -> str:
    """A letter of the script(s) `tag` is written in, as a regex alternation."""
    script = langcodes.Language.get(tag).maximize().script or "Latn"
    names = _SCRIPTS_OF.get(script, (script,))
    return "|".join(rf"\p{{Script={name}}}" for name in names)


# Whole patterns, so that an output's letters are sorted by regex's C code rather than one
# Python call a letter (2-3x faster on every output checked, on the event loop). Letters
# only: a script's marks and numerals (Devanagari's vowel signs, Han's ideographic zero)
# are not counted.
@cache
def _target_letter(tag: str) -> regex.Pattern[str]:
    """A letter of the script(s) `tag` is written in."""
    return regex.compile(rf"(?=\p{{L}})(?:{_script_of(tag)})")


@cache
def _foreign_letter(tag: str) -> regex.Pattern[str]:
    """A letter of any other script."""
    return regex.compile(rf"(?!{_script_of(tag)})\p{{L}}")


def foreign_letters(source: str, output: str, target_lang: str) -> int:
    """How many letters of `output` are in a script that is neither the target language's
    nor found in the source: "die 已经有 Type 1" in German, Arabic inside Nepali. (The
    detector takes such a text for its main language, so it is no off-target output.)"""
    foreign = Counter(_foreign_letter(lang(target_lang).tag).findall(output))
    if not foreign:
        return 0
    # A letter of a script the source uses is the source's (a name, a term left as is).
    # Named once per distinct letter of either text, never once per letter.
    source_scripts = {_script_word(c) for c in set(_LETTER.findall(source))}
    return sum(n for c, n in foreign.items() if _script_word(c) not in source_scripts)


# An output whose letters are at most this share in the target's script, where the target
# is written in another script than the source, is not written in the target language:
# Nepali in Latin letters ("Karo kuma 4 miliyo gurta nai te hoon", the 0.5B Qwen), which
# the detector calls unreliable. A Chinese sentence full of English product names still
# has a quarter or more of its letters in Han.
MAX_TARGET_SCRIPT_SHARE_OFF = 0.1


def outside_target_script(source: str, output: str, target_lang: str) -> bool:
    """Whether `output` has (almost) no letters in the target language's script although
    the target is written in a script the source does not use (romanized Nepali, pinyin)."""
    target = _target_letter(lang(target_lang).tag)
    if target.search(source) is not None:
        return False  # source and target share a script: the detector decides
    letters_out = len(_LETTER.findall(output))
    if letters_out < MIN_LETTERS_FOR_LANGUAGE:
        return False
    return len(target.findall(output)) <= MAX_TARGET_SCRIPT_SHARE_OFF * letters_out


def _script_word(letter: str) -> str:
    """A letter's script as the first word of its Unicode name ("LATIN", "CJK", "ARABIC",
    "DEVANAGARI", "HANGUL"): near enough to tell whether the source has letters like it."""
    return unicodedata.name(letter, letter).split(" ", 1)[0]


def is_loop(source: str, output: str) -> bool:
    """Whether the output ends in a repetition its source does not have."""
    span = loop_span(output)
    if span < LOOP_MIN_CHARS or span < LOOP_MIN_SHARE * len(output.strip()):
        return False
    # A source that repeats itself ("ha ha ha ha", a row of dashes) may be translated so.
    return loop_span(source) < LOOP_MIN_CHARS


@dataclass(frozen=True)
class Verdict:
    problems: tuple[Problem, ...]
    language: str | None = None  # what the detector took the output for, when it could tell

    def __bool__(self) -> bool:
        return bool(self.problems)

    @property
    def retryable(self) -> bool:
        """Problems another try may mend (not a cut character, which is removed)."""
        return any(p != "cut_character" for p in self.problems)

    @property
    def severity(self) -> tuple[bool, int]:
        """What a choice between tries minimises: an output that copied the examples is
        worse than any that did not (its words are another sentence's, where an off-target or
        echoed output at least says what the source says), then the fewer problems the
        better."""
        return "copied_example" in self.problems, len(self.problems)


class OutputChecks:
    """The checks for one server: its detector knows every language the models serve."""

    def __init__(self, languages: Sequence[str]) -> None:
        self.detector = Detector(languages)

    def language_of(self, text: str) -> str | None:
        """The served language `text` is in, when it has letters enough to tell."""
        if letters(text) < MIN_LETTERS_FOR_LANGUAGE:
            return None
        detection = self.detector.detect(text)
        return detection.language if detection.reliable else None

    @staticmethod
    def same_language(a: str, b: str) -> bool:
        return lang(a).code == lang(b).code

    def check(
        self,
        source: str,
        output: str,
        source_lang: str,
        target_lang: str,
        *,
        finish_reason: str | None = None,
        cut_character: bool = False,
        lost_placeholders: bool = False,
        examples: Sequence[str] = (),
    ) -> Verdict:
        """Every problem of one segment's output (its cut characters already removed:
        `cut_character` says whether there were any; `lost_placeholders`, whether the
        markup's placeholders came back, for the service's retry; `examples`, the example
        translations its prompt showed: tolk.translation.examples)."""
        problems: list[Problem] = ["placeholders"] if lost_placeholders else []
        if not output.strip():
            if letters(source) > 0:
                problems.append("empty")
            if cut_character:
                problems.append("cut_character")
            return Verdict(tuple(problems))
        detected = self.language_of(output)
        if (
            detected is not None
            and not self.same_language(detected, target_lang)
            and self.detector.tags.get(_code(target_lang)) is not None
        ) or outside_target_script(source, output, target_lang):
            problems.append("off_target")
        # An output the detector takes for the target language is no echo (a name, a
        # product string, a sentence that reads the same in both).
        in_target = detected is not None and self.same_language(detected, target_lang)
        translating = not self.same_language(source_lang, target_lang)
        alike = _alike(source_lang, target_lang)
        if translating and not in_target and is_echo(source, output, same_script_ok=alike):
            problems.append("echo")
        # "repetition": vLLM ended it as a loop (tolk.engine.engine.LOOP_DETECTION).
        if finish_reason == "repetition" or is_loop(source, output):
            problems.append("loop")
        if (
            "off_target" not in problems
            and foreign_letters(source, output, target_lang) >= MIN_FOREIGN_LETTERS
        ):
            problems.append("foreign_script")
        if finish_reason == "length":
            problems.append("truncated")
        if cut_character:
            problems.append("cut_character")
        if copied_example(output, examples, (source,)):
            problems.append("copied_example")
        return Verdict(tuple(problems), detected)


def _code(tag: str) -> str:
    return lang(tag).code


# Pairs whose texts share most words (names, numbers, loanwords): only an exact copy counts.
_ALIKE = {frozenset({"es", "pt"}), frozenset({"es", "ca"}), frozenset({"pt", "gl"})}


def _alike(a: str, b: str) -> bool:
    return frozenset({_code(a), _code(b)}) in _ALIKE


__all__ = [
    "DESCRIPTIONS",
    "PROBLEMS",
    "OutputChecks",
    "Problem",
    "Verdict",
    "foreign_letters",
    "is_echo",
    "is_loop",
    "loop_span",
    "strip_cut_characters",
]
