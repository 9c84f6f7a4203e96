"""Benchmark workloads: what the load generator sends. Deterministic for a given seed.

- `uniform`: texts of nearly equal length (about 100 tokens), the kind of test data that gave
  the case study a misleading 15 requests/s.
- `variable`: 10-200 tokens, short and long mixed (uniformly spread, so the mean matches
  `uniform` and only the spread differs), as in the case study's realistic test.
- `articles`: real paragraphs of the case-study articles: English ones to Nepali, and the
  Nepali translations back to English.
- `documents`: the case-study articles whole (Part 1 and Part 2, English to Nepali and the
  Nepali translations back), each as plain text and as markdown: 8 documents, 4-12 KB.
- a JSONL file: one `{"text", "source_lang", "target_lang"}` object per line (and `format`).
- a directory: each file in it one document (your own: .txt, .md, .html, .srt, .vtt; the format
  from the suffix), translated from `source` to `target`.

Lengths are in approximate tokens: texts are spans of real English prose, sized by words at
0.75 words per token (typical of English under BPE tokenizers). The load generator talks to
servers over HTTP only, so it does not tokenize.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tolk.translation.formats import FORMATS, Format

WORDS_PER_TOKEN = 0.75
BUILTIN = ("uniform", "variable", "articles", "documents")


@dataclass(frozen=True)
class WorkItem:
    text: str
    source_lang: str
    target_lang: str
    format: Format = "text"

    def body(self) -> dict[str, str]:
        body = {"text": self.text, "source_lang": self.source_lang, "target_lang": self.target_lang}
        if self.format != "text":
            body["format"] = self.format
        return body

    def whole_body(self) -> dict[str, str]:
        """The body with `split: none`: one engine request for the text, as a comparison
        against an engine fed the same prompt directly needs."""
        return {**self.body(), "split": "none"}


@dataclass(frozen=True)
class Workload:
    name: str
    items: tuple[WorkItem, ...]

    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError(f"workload '{self.name}' has no items")

    def stream(self) -> Iterator[WorkItem]:
        """The items in order, repeated for as long as asked."""
        while True:
            yield from self.items

    def describe(self) -> dict[str, object]:
        words = [len(i.text.split()) for i in self.items]
        return {
            "name": self.name,
            "items": len(self.items),
            "approx_tokens_min": round(min(words) / WORDS_PER_TOKEN),
            "approx_tokens_max": round(max(words) / WORDS_PER_TOKEN),
            "approx_tokens_mean": round(sum(words) / len(words) / WORDS_PER_TOKEN, 1),
            "pairs": sorted({f"{i.source_lang}>{i.target_lang}" for i in self.items}),
        }


def _article(name: str) -> str:
    folder = resources.files("tolk") / "data" / "case_study"
    return (folder / name).read_text(encoding="utf-8")


def english_words() -> list[str]:
    return " ".join(_article(n) for n in ("part1.en.txt", "part2.en.txt")).split()


def english_span(words: list[str], tokens: int, rng: random.Random) -> str:
    count = max(1, round(tokens * WORDS_PER_TOKEN))
    start = rng.randrange(0, len(words) - count)
    return " ".join(words[start : start + count])


def _english(
    name: str, low: int, high: int, n: int, seed: int, source: str, target: str
) -> Workload:
    """n spans of English prose, each `low`-`high` approximate tokens long."""
    rng = random.Random(seed)
    words = english_words()
    items = [
        WorkItem(english_span(words, rng.randint(low, high), rng), source, target) for _ in range(n)
    ]
    return Workload(name, tuple(items))


def uniform(n: int = 200, seed: int = 0, source: str = "en", target: str = "de") -> Workload:
    return _english("uniform", 96, 104, n, seed, source, target)


def variable(n: int = 200, seed: int = 0, source: str = "en", target: str = "de") -> Workload:
    return _english("variable", 10, 200, n, seed, source, target)


def paragraphs(text: str, min_words: int = 6) -> list[str]:
    """Prose paragraphs of an article: lines of at least `min_words` words."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        if len(line.split()) >= min_words:
            out.append(line)
    return out


def articles(n: int = 200, seed: int = 0) -> Workload:
    rng = random.Random(seed)
    pool = [
        WorkItem(p, "en", "ne")
        for name in ("part1.en.txt", "part2.en.txt")
        for p in paragraphs(_article(name))
    ]
    pool += [
        WorkItem(p, "ne", "en")
        for name in ("part1.ne.txt", "part2.ne.txt")
        for p in paragraphs(_article(name))
    ]
    return Workload("articles", tuple(rng.choice(pool) for _ in range(n)))


def documents() -> Workload:
    items = []
    for fmt in ("text", "markdown"):
        for part in ("part1", "part2"):
            items.append(WorkItem(_article(f"{part}.en.txt"), "en", "ne", fmt))
            items.append(WorkItem(_article(f"{part}.ne.txt"), "ne", "en", fmt))
    return Workload("documents", tuple(items))


def from_jsonl(path: Path) -> Workload:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            fmt = data.get("format", "text")
            if fmt not in FORMATS:
                raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
            items.append(
                WorkItem(str(data["text"]), str(data["source_lang"]), str(data["target_lang"]), fmt)
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f'{path}:{number}: expected {{"text", "source_lang", "target_lang"}} '
                f"(and optionally format): {exc}"
            ) from exc
    return Workload(path.stem, tuple(items))


SUFFIXES: dict[str, Format] = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".srt": "srt",
    ".vtt": "vtt",
}


def from_directory(path: Path, source: str = "en", target: str = "de") -> Workload:
    """Each file of `path` (by name) as one document, its format from its suffix."""
    items = []
    for file in sorted(path.iterdir()):
        fmt = SUFFIXES.get(file.suffix.lower())
        if fmt is None or not file.is_file():
            continue
        items.append(WorkItem(file.read_text(encoding="utf-8"), source, target, fmt))
    if not items:
        raise ValueError(f"{path} holds no documents ({', '.join(SUFFIXES)})")
    return Workload(path.name, tuple(items))


def load(
    spec: str, n: int = 200, seed: int = 0, source: str = "en", target: str = "de"
) -> Workload:
    """A built-in workload by name, or a JSONL file by path."""
    if spec == "uniform":
        return uniform(n, seed, source, target)
    if spec == "variable":
        return variable(n, seed, source, target)
    if spec == "articles":
        return articles(n, seed)
    if spec == "documents":
        return documents()
    path = Path(spec)
    if path.is_dir():
        return from_directory(path, source, target)
    if path.exists():
        return from_jsonl(path)
    raise ValueError(
        f"unknown workload '{spec}': use {', '.join(BUILTIN)}, a JSONL file or a directory of "
        "documents"
    )
