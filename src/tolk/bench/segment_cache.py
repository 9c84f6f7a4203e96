"""`tolk bench segment-cache` (formerly `tolk bench memory`, still accepted): what the segment
cache (tolk.store.segment_cache) saves, on traffic that repeats.

Two workloads against a running tolk server, each measured side by side in one run:

- **An edited document.** The case study's first article (82 paragraphs), translated with
  the cache refreshed (every segment through the engine: the cold cost), then again after
  10% of its paragraphs were edited (a sentence added to every tenth), with the cache in
  use, and once more unchanged. Engine tokens (usage's prompt and completion tokens) and
  wall time of each pass, and their ratios to the first. Sent in requests of
  PARAGRAPHS_PER_REQUEST paragraphs (a list of texts), one after the other.
- **A Weblate-like stream.** Single UI-sized strings (the case study's sentences), drawn with
  Zipf-like repeats (a few strings often, most rarely) for three target languages, as a
  translation platform's machine-translation calls arrive; sent at a fixed concurrency. Three
  passes over the same stream: the cache off (every string through the engine), cold (each
  first occurrence of a string and language refreshed, as into an empty cache, repeats
  used) and warm (the cache holding the whole stream). Engine tokens, hits, wall time and
  latency percentiles of each.

Every request says how it uses the cache (`memory` in tolk's API), so what the server held
before the run does not change the figures. The results keep the names they had before the
segment memory was renamed the segment cache, for comparison with earlier runs: memory.json
and memory.png, schema tolk.bench.memory/1, `memory_segments` (the API's field: segments
answered from the cache).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from rich.progress import Progress
from rich.table import Table

from tolk.bench.run import progress_callback
from tolk.bench.stats import percentile
from tolk.bench.workloads import _article

PARAGRAPHS_PER_REQUEST = 20
EDIT_EVERY = 10  # one paragraph in ten is edited
EDIT = " This sentence was added in an edit."
STREAM_TARGETS = ("de", "fr", "es")  # the default targets (the document goes to the first)
TIMEOUT = aiohttp.ClientTimeout(total=900)


def article() -> list[str]:
    """The case study's first article, one paragraph a text (blank-line separated)."""
    return [p.strip() for p in re.split(r"\n\s*\n", _article("part1.en.txt")) if p.strip()]


def edited(paragraphs: Sequence[str]) -> list[str]:
    """The article with a sentence added to every EDIT_EVERY-th paragraph (10%)."""
    return [p + EDIT if i % EDIT_EVERY == EDIT_EVERY // 2 else p for i, p in enumerate(paragraphs)]


def catalogue(size: int) -> list[str]:
    """UI-sized strings: the case study's sentences of 3 to 25 words, first `size`."""
    text = " ".join(_article(n) for n in ("part1.en.txt", "part2.en.txt"))
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    return [s for s in sentences if 3 <= len(s.split()) <= 25][:size]


def stream(
    strings: Sequence[str], requests: int, seed: int, targets: Sequence[str] = STREAM_TARGETS
) -> list[tuple[str, str]]:
    """(string, target) per request: strings by Zipf-like weights (1/rank), targets at
    random."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(strings))]
    chosen = rng.choices(range(len(strings)), weights=weights, k=requests)
    return [(strings[i], rng.choice(targets)) for i in chosen]


async def _translate(
    session: aiohttp.ClientSession, texts: list[str], target: str, memory: str
) -> dict[str, Any]:
    body = {"text": texts, "source_lang": "en", "target_lang": target, "memory": memory}
    started = time.perf_counter()
    async with session.post("/translate", json=body) as response:
        answer = await response.json(content_type=None)
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {json.dumps(answer)[:300]}")
    usage = answer["usage"]
    return {
        "seconds": time.perf_counter() - started,
        "tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        "segments": usage["segments"],
        "memory_segments": usage.get("memory_segments", 0),
    }


async def document_pass(
    session: aiohttp.ClientSession, name: str, paragraphs: Sequence[str], target: str, memory: str
) -> dict[str, Any]:
    started = time.perf_counter()
    parts = []
    for i in range(0, len(paragraphs), PARAGRAPHS_PER_REQUEST):
        chunk = list(paragraphs[i : i + PARAGRAPHS_PER_REQUEST])
        parts.append(await _translate(session, chunk, target, memory))
    return {
        "pass": name,
        "memory": memory,
        "seconds": time.perf_counter() - started,
        "tokens": sum(p["tokens"] for p in parts),
        "segments": sum(p["segments"] for p in parts),
        "memory_segments": sum(p["memory_segments"] for p in parts),
    }


async def stream_pass(
    session: aiohttp.ClientSession,
    name: str,
    calls: Sequence[tuple[str, str]],
    concurrency: int,
    progress: Progress | None,
) -> dict[str, Any]:
    seen: set[tuple[str, str]] = set()
    modes = []
    for call in calls:
        if name == "off":
            modes.append("off")
        elif name == "cold":
            modes.append("use" if call in seen else "refresh")
            seen.add(call)
        else:
            modes.append("use")
    advance = progress_callback(progress, f"stream, cache {name}", len(calls))
    gate = asyncio.Semaphore(concurrency)

    async def one(call: tuple[str, str], mode: str) -> dict[str, Any]:
        async with gate:
            done = await _translate(session, [call[0]], call[1], mode)
        advance(1)
        return done

    started = time.perf_counter()
    done = await asyncio.gather(*(one(c, m) for c, m in zip(calls, modes, strict=True)))
    latencies = [d["seconds"] for d in done]
    return {
        "pass": name,
        "requests": len(calls),
        "seconds": time.perf_counter() - started,
        "tokens": sum(d["tokens"] for d in done),
        "memory_segments": sum(d["memory_segments"] for d in done),
        "latency_p50_s": percentile(latencies, 50),
        "latency_p95_s": percentile(latencies, 95),
    }


def _ratios(rows: list[dict[str, Any]]) -> None:
    first = rows[0]
    for row in rows:
        row["tokens_ratio"] = row["tokens"] / first["tokens"] if first["tokens"] else None
        row["seconds_ratio"] = row["seconds"] / first["seconds"]


async def run_segment_cache(
    url: str,
    requests: int,
    strings: int,
    concurrency: int,
    seed: int,
    progress: Progress | None = None,
    targets: Sequence[str] = STREAM_TARGETS,
) -> dict[str, Any]:
    paragraphs = article()
    changed = edited(paragraphs)
    calls = stream(catalogue(strings), requests, seed, targets)
    async with aiohttp.ClientSession(
        base_url=url, timeout=TIMEOUT, connector=aiohttp.TCPConnector(limit=concurrency + 2)
    ) as session:
        advance = progress_callback(progress, "document passes", 3)
        document = []
        for name, texts, memory in (
            ("first (cache refreshed)", paragraphs, "refresh"),
            ("10% of paragraphs edited", changed, "use"),
            ("unchanged", paragraphs, "use"),
        ):
            document.append(await document_pass(session, name, texts, targets[0], memory))
            advance(1)
        _ratios(document)
        passes = [
            await stream_pass(session, name, calls, concurrency, progress)
            for name in ("off", "cold", "warm")
        ]
        _ratios(passes)
    return {
        "schema": "tolk.bench.memory/1",
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "url": url,
        "document": {
            "paragraphs": len(paragraphs),
            "edited": sum(a != b for a, b in zip(paragraphs, changed, strict=True)),
            "characters": sum(len(p) for p in paragraphs),
            "passes": document,
        },
        "stream": {
            "requests": requests,
            "distinct": len(set(calls)),
            "strings": strings,
            "targets": list(targets),
            "concurrency": concurrency,
            "seed": seed,
            "passes": passes,
        },
    }


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(results: dict[str, Any]) -> Table:
    doc, st = results["document"], results["stream"]
    out = Table(
        title="tolk bench segment-cache",
        caption=f"document: {doc['paragraphs']} paragraphs, {doc['edited']} edited; stream: "
        f"{st['requests']} requests, {st['distinct']} distinct (string, language), "
        f"concurrency {st['concurrency']}",
    )
    for column in (
        "workload", "pass", "engine tokens", "x first", "from cache", "seconds", "x first",
        "p50 s", "p95 s",
    ):  # fmt: skip
        out.add_column(column)
    for row in doc["passes"]:
        out.add_row(
            "document", row["pass"], str(row["tokens"]), _ratio(row["tokens_ratio"]),
            f"{row['memory_segments']}/{row['segments']} segments", f"{row['seconds']:.2f}",
            _ratio(row["seconds_ratio"]), "-", "-",
        )  # fmt: skip
    for row in st["passes"]:
        out.add_row(
            "stream", f"cache {row['pass']}", str(row["tokens"]), _ratio(row["tokens_ratio"]),
            f"{row['memory_segments']}/{row['requests']} requests", f"{row['seconds']:.2f}",
            _ratio(row["seconds_ratio"]), f"{row['latency_p50_s']:.3f}",
            f"{row['latency_p95_s']:.3f}",
        )  # fmt: skip
    return out


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    from tolk.bench.report import save_figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "memory.json"
    path.write_text(json.dumps(results, indent=2))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (name, rows) in zip(
        axes,
        (("document", results["document"]["passes"]), ("stream", results["stream"]["passes"])),
        strict=True,
    ):
        labels = [r["pass"].split(" (")[0] for r in rows]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], [r["tokens_ratio"] or 0 for r in rows], 0.4, label="tokens")
        ax.bar([i + 0.2 for i in x], [r["seconds_ratio"] for r in rows], 0.4, label="time")
        ax.set_xticks(list(x), labels, fontsize=8)
        ax.set_ylabel("x the first pass")
        ax.set_title(name)
        ax.legend()
    return [path, save_figure(fig, out_dir / "memory.png")]
