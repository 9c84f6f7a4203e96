"""Source texts of exact token lengths for the test model's tokenizer."""

from __future__ import annotations

import random
from pathlib import Path

from tests.support.paths import REPO


class TextMaker:
    """Source texts of exact token lengths for the test model's tokenizer."""

    def __init__(self, model_dir: Path, seed: int = 0) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        corpus = (REPO / "src/tolk/data/case_study/part1.en.txt").read_text()
        self.ids: list[int] = self.tokenizer.encode(" ".join(corpus.split()))
        self.rng = random.Random(seed)

    def text(self, tokens: int) -> str:
        while True:
            start = self.rng.randrange(0, len(self.ids) - tokens)
            text = str(self.tokenizer.decode(self.ids[start : start + tokens])).strip()
            if text and len(self.tokenizer.encode(text)) == tokens:
                return text

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text))
