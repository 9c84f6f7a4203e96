"""What preparing a request of texts costs the event loop where tolk does it there
(`server.inline_chars`, tolk.translation.service `_prepared`): parsing, segmenting and
planning the texts, putting the translations back and rendering them, timed per request for
plain text, markdown and HTML of growing size, with the shipped real-model config
(configs/gpu-qwen2.5-coder-0.5b.yaml, its real tokenizer) over the stand-in engine
(tolk.testing.fake_engine: what is timed is tolk's own work, not the engine's). FLORES
sentences as `tolk bench quality` uses them, its markup units joined to the sizes named.
Then hostile texts of 1,000 characters (the default `server.inline_chars`): markup that
makes the parsers work hardest per character. Milliseconds a request, best of 5 passes;
docs/benchmarks.md section 28.

    .venv/bin/python scripts/prepare-cost.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tolk.bench.quality_data import markup_units, read_lines
from tolk.config import load_config
from tolk.engine import EngineMetrics, ModelPool
from tolk.testing.fake_engine import FakeEngines
from tolk.translation.policy import Limits
from tolk.translation.request import TranslationRequest
from tolk.translation.service import Translator

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs/gpu-qwen2.5-coder-0.5b.yaml"
MODEL = ROOT / "models/qwen2.5-coder-0.5b-instruct"
DATA = ROOT.parent / "shared/quality/flores101/eng.txt"
SIZES = (150, 500, 1000, 2000, 4000)
PASSES = 5
REQUESTS = 20  # a pass: this many requests of each kind and size
HOSTILE = {  # 1,000 characters each
    "text: line breaks": ("text", "x\n" * 500),
    "text: one word": ("text", "x" * 1000),
    "markdown: emphasis": ("markdown", "*a " * 333 + "a"),
    "markdown: nested lists": ("markdown", "- a\n  " * 166 + "a" * 4),
    "markdown: links": ("markdown", "[a](b) " * 142 + "aaaaaa"),
    "html: nested <b>": ("html", "<b>" * 333 + "a"),
    "html: unclosed <a": ("html", "<a " * 333 + "a"),
    "html: links": ("html", '<a href="u">a</a> ' * 55 + "a" * 10),
}


def texts_of(kind: str, pieces: list[str], size: int, start: int) -> str:
    """Pieces joined (blank lines between: paragraphs) from `start` until `size` characters."""
    out: list[str] = []
    n = start
    while sum(len(p) + 2 for p in out) < size:
        out.append(pieces[n % len(pieces)])
        n += 1
    return "\n\n".join(out)


async def measure() -> dict[tuple[str, int], float]:
    config = load_config(CONFIG)
    model = config.models[0].model_copy(update={"path": str(MODEL)})
    config = config.model_copy(update={"models": [model]})
    pool = ModelPool.start(config.models, EngineMetrics(), FakeEngines())
    limits = Limits(max_request_chars=100_000, max_texts=50, inline_chars=10**9)
    translator = Translator(pool, limits)
    spent: list[float] = []
    prepared = translator._prepared

    async def timed(inline: bool, fn: Callable[..., Any], *args: Any) -> Any:
        def work(*given: Any) -> Any:  # the work alone, not a wait for its turn
            started = time.perf_counter()
            try:
                return fn(*given)
            finally:
                spent.append(time.perf_counter() - started)

        return await prepared(inline, work, *args)

    translator._prepared = timed  # type: ignore[method-assign]
    english = read_lines(DATA)
    units = markup_units(english, ["de"], 200)
    pieces = {
        "text": english,
        "markdown": [u.source for u in units if u.kind == "markdown"],
        "html": [u.source for u in units if u.kind == "html"],
    }

    async def ms_a_request(kind: str, texts: list[str]) -> float:
        """The preparation's milliseconds a request, over requests of `texts` in `kind`."""
        spent.clear()
        request = TranslationRequest(
            target_lang="de",
            source_lang="en",
            deadline=600,
            format=kind,  # type: ignore[arg-type]
        )
        for text in texts:
            await translator.translate([text], request)
        return 1000 * sum(spent) / len(texts)

    best: dict[tuple[str, int], float] = {}
    try:
        for n in range(PASSES):
            timed_now: dict[tuple[str, int], float] = {}
            for kind, made in pieces.items():
                for size in SIZES:
                    starts = [(n * REQUESTS + r) * 7 for r in range(REQUESTS)]
                    texts = [texts_of(kind, made, size, start) for start in starts]
                    timed_now[(kind, size)] = await ms_a_request(kind, texts)
            for name, (kind, text) in HOSTILE.items():
                timed_now[(name, len(text))] = await ms_a_request(kind, [text] * REQUESTS)
            for key, ms in timed_now.items():
                best[key] = min(ms, best.get(key, ms))
            sys.stderr.write(f"pass {n + 1}/{PASSES}\n")
    finally:
        translator.close()
        pool.shutdown()
    return best


def main() -> None:
    best = asyncio.run(measure())
    kinds = ("text", "markdown", "html")
    out = [f"ms a request (parse + plan, put back, render), best of {PASSES}"]
    out.append(f"{'chars':>6} " + " ".join(f"{k:>9}" for k in kinds))
    for size in SIZES:
        out.append(f"{size:>6} " + " ".join(f"{best[(k, size)]:9.3f}" for k in kinds))
    per = {k: statistics.mean(1000 * best[(k, s)] / s for s in SIZES[2:]) for k in kinds}
    rounded = {k: round(v, 3) for k, v in per.items()}
    out.append(f"ms per 1,000 characters (1,000 and up): {rounded}")
    for name, (_, text) in HOSTILE.items():
        out.append(f"{name:>24} ({len(text)} characters): {best[(name, len(text))]:.3f}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
