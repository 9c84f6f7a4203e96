"""What the output checks' script counts cost an output, on the event loop where they run:
`foreign_letters` and `outside_target_script` over sentence-like pairs and over 30,000 mixed
(Latin, Han, Devanagari with its vowel signs, Cyrillic, kana, Hangul, Arabic, digits) made
from a fixed seed, microseconds an output, best of 5. With --dump FILE, also every verdict as
JSON, so that two checkouts can be compared case by case (docs/benchmarks.md section 27).

    .venv/bin/python scripts/check-cost.py [--dump FILE]
"""

from __future__ import annotations

import json
import random
import sys
import time

from tolk.translation.checks import foreign_letters, outside_target_script

PAIRS = [
    (
        "The weather is lovely in the mountains today, and we will go hiking tomorrow.",
        "Das Wetter ist heute in den Bergen herrlich, und wir wandern morgen früh.",
        "de",
    ),
    (
        "The weather is lovely in the mountains today, and we will go hiking tomorrow.",
        "आज पहाडमा मौसम राम्रो छ, र हामी भोलि बिहान हिँड्न जानेछौं।",
        "ne",
    ),
    (
        "The weather is lovely in the mountains today, and we will go hiking tomorrow.",
        "今天山里天气很好，我们明天早上去远足。 iPhone 15 Pro",  # noqa: RUF001 (Chinese commas)
        "zh",
    ),
    (
        "Das Wetter ist heute in den Bergen herrlich, und wir wandern morgen früh.",
        "The weather is lovely in the mountains today, and we will go hiking tomorrow.",
        "en",
    ),
]
PIECES = [
    *(text for pair in PAIRS for text in pair[:2]),
    "die 已经有 Type 1 Diabetes und 2 Kinder مرحبا",
    "Karo kuma 4 miliyo gurta nai te hoon",
    "Привет мир",
    "ab",
    "",
    "1234 !!",
    "\u3007\u3007 \u3005 \u093e \u093f \u094d \u0950",
    "カタカナ ひらがな 한국어",
]
TARGETS = ["de", "fr", "en", "zh", "ne", "ja", "ko", "ru"]


def mixed(count: int) -> list[tuple[str, str, str]]:
    rng = random.Random(7)
    cases = []
    for _ in range(count):
        source = "".join(rng.choice(PIECES) for _ in range(2))[: rng.randint(0, 120)]
        output = "".join(rng.choice(PIECES)[: rng.randint(0, 40)] for _ in range(rng.randint(1, 5)))
        cases.append((source, output, rng.choice(TARGETS)))
    return cases


def per_output(cases: list[tuple[str, str, str]], repeat: int) -> float:
    """Microseconds an output for both counts, best of 5."""
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(repeat):
            for source, output, target in cases:
                foreign_letters(source, output, target)
                outside_target_script(source, output, target)
        best = min(best, time.perf_counter() - began)
    return 1e6 * best / (repeat * len(cases))


def main() -> None:
    cases = mixed(30_000)
    sentences = per_output(PAIRS, 2_000)
    everything = per_output(cases, 1)
    sys.stdout.write(f"sentence pairs: {sentences:.1f} us an output\n")
    sys.stdout.write(f"30,000 mixed cases: {everything:.1f} us an output\n")
    if len(sys.argv) == 3 and sys.argv[1] == "--dump":
        verdicts = [(foreign_letters(*c), outside_target_script(*c)) for c in cases]
        with open(sys.argv[2], "w", encoding="utf-8") as out:
            json.dump(verdicts, out)


if __name__ == "__main__":
    main()
