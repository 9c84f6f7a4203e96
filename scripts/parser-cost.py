"""The cost of tolk's per-request parsers on worst-case inputs (docs/benchmarks.md, section
14): segmenting one long line with the real model's tokenizer, parsing HTML that never
closes its constructs, and building and using large glossaries. One core, best of one run;
prints JSON. Run it from any checkout to compare two: from a worktree of the older one with
its own `src` first on the path:

    .venv/bin/python scripts/parser-cost.py                     # this checkout
    PYTHONPATH=/tmp/old/src .venv/bin/python scripts/parser-cost.py   # another
(`make real-model` first: the tokenizer is Qwen2.5-Coder-0.5B-Instruct's.)
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from collections.abc import Callable
from typing import Any

from transformers import AutoTokenizer

from tolk.translation.formats import parse
from tolk.translation.glossary import Glossary
from tolk.translation.segment import segment

TOKENIZER = "models/qwen2.5-coder-0.5b-instruct"


def timed(work: Callable[[], Any]) -> float:
    began = time.perf_counter()
    work()
    return round(time.perf_counter() - began, 3)


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    try:  # this stop's service counts through the tokenizer's Rust core, in batches
        from tolk.translation.service import token_counters

        count, many = token_counters(tokenizer)
        counters: dict[str, Any] = {"count": count, "count_many": many}
    except ImportError:  # the older service counted through the wrapper, one at a time
        counters = {"count": lambda p: len(tokenizer.encode(p, add_special_tokens=False))}
    lines = {
        "120,000 x, one line": "x" * 120_000,
        "40,000 CJK": "漢" * 40_000,
        "a. x 40,000": "a. " * 40_000,
        "word x 24,000, one line": "word " * 24_000,
        "[X1X] x 20,000": "[X1X]" * 20_000,
    }
    out: dict[str, float] = {}
    for name, text in lines.items():
        out[f"segment: {name}"] = timed(lambda t=text: segment(t, max_tokens=200, **counters))
    pages = {
        "8,000 unclosed <a": "<a " * 8_000,
        "x <a href=' x 8,000": "x <a href='" * 8_000,
        "20,000 <!--": "<!--" * 20_000,
    }
    for name, page in pages.items():
        out[f"html: {name}"] = timed(lambda p=page: parse("html", p, lambda t: segment(t)))
    rng = random.Random(0)
    entries = {
        f"term{i} {''.join(rng.choices(string.ascii_lowercase, k=6))}": "x" for i in range(100_000)
    }
    built: list[Glossary] = []
    out["glossary: build 100,000 entries"] = timed(lambda: built.append(Glossary(entries)))
    line = "The quick brown fox jumps over the lazy dog and term5 is here. " * 3
    out["glossary: 30 lines"] = timed(lambda: [built[0].terms(line) for _ in range(30)])
    words = Glossary({}, [f"word{i}" for i in range(5_500)])
    page = parse("text", "Some normal text with word12 words in it. " * 250, lambda t: segment(t))
    out["do_not_translate: 5,500 terms over 10 KB"] = timed(lambda: words.protect(page))
    sys.stdout.write(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
