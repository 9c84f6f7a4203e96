"""`tolk bench documents`: whole documents against a running server.

Three measurements, each in the issue's terms:

1. **Idle**: each document of the `documents` workload alone, split (the default), against
   the floor of sending its longest segments alone (`split: none`): their slowest latency is
   what the document would take if every segment ran in parallel at no cost. Also the
   document with `split: none` where it fits the model's context, for the speed-up (plain
   text only: markup is always cut at its blocks).
2. **Load**: a closed loop of `concurrency` documents; documents and segments per second,
   and the engine's running/waiting timeline (is the engine kept full?). A 503 `overloaded`
   is retried after its Retry-After, as a client should, and counted.
3. **Cost**: segmenting and reassembling (parse, plan, render, with the model's tokenizer
   counting tokens as the server does) in this process, per 10 KB of text.
4. **Files**: a file of each kind tolk translates (src/tolk/data/samples, made by
   scripts/make-samples.py: office files, OpenDocument, EPUB, PDF, XLIFF, gettext, locale
   files, subtitles, markdown, HTML) through `/translate/file`, each alone, then all at once:
   each kind's time, and whether they batch (all at once well under the sum of their times
   alone). The translated files are written beside the report (`translated/`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from importlib import resources
from pathlib import Path, PurePath
from typing import Any

import aiohttp
from rich.progress import Progress
from rich.table import Table

from tolk import sse
from tolk.bench.loadgen import BYPASS_MEMORY
from tolk.bench.run import progress_callback
from tolk.bench.scrape import TimelineSampler, engine_summary, snapshot
from tolk.bench.stats import percentile
from tolk.bench.workloads import WorkItem, Workload

SCHEMA = "tolk.bench.documents/1"
FLOOR_SEGMENTS = 3  # the longest segments sent alone for the floor


async def _post(session: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    async with session.post("/translate", json=body) as response:
        data = await response.json()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {json.dumps(data)[:300]}")
    return time.perf_counter() - started, data


async def _segments(session: aiohttp.ClientSession, item: WorkItem) -> tuple[float, list[str]]:
    """The document's latency split, and its segments (from the stream's events)."""
    started = time.perf_counter()
    segments: list[str] = []
    async with session.post("/translate", json={**item.body(), "stream": True}) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {(await response.text())[:300]}")
        lines = (raw.decode() async for raw in response.content)
        async for name, data in sse.events(lines):
            if name == "segment":
                segments.append(data["text"])
    return time.perf_counter() - started, segments


async def idle(
    session: aiohttp.ClientSession, workload: Workload, progress: Progress | None
) -> list[dict[str, Any]]:
    advance = progress_callback(progress, "idle: documents alone", len(workload.items))
    rows = []
    for item in workload.items:
        await _post(session, item.body())  # warm: the prefix cache holds the instruction
        split_s, segments = await _segments(session, item)
        longest = sorted(set(segments), key=len, reverse=True)[:FLOOR_SEGMENTS]
        alone = [
            (await _post(session, {**item.body(), "text": s, "split": "none"}))[0] for s in longest
        ]
        none_s: float | None = None
        if item.format == "text":  # markup is always cut at its blocks: no "whole" to send
            try:
                none_s = (await _post(session, item.whole_body()))[0]
            except RuntimeError:  # 413: the whole document does not fit the model's context
                none_s = None
        rows.append(
            {
                "document": _label(item),
                "bytes": len(item.text.encode()),
                "segments": len(segments),
                "split_s": split_s,
                "floor_s": max(alone),
                "split_over_floor": split_s / max(alone),
                "none_s": none_s,
                "speedup_vs_none": None if none_s is None else none_s / split_s,
            }
        )
        advance(1)
    return rows


async def load(
    session: aiohttp.ClientSession,
    workload: Workload,
    concurrency: int,
    documents: int | None,
    progress: Progress | None,
    *,
    stop: asyncio.Event | None = None,
    warmup: int = 0,
) -> dict[str, Any]:
    """A closed loop of `concurrency` documents: `documents` of them, or (None) until `stop`
    is set; each in flight finishes. `warmup` documents run first, unrecorded."""
    if documents is None and stop is None:
        raise ValueError("give a number of documents or a stop event")
    stream = workload.stream()
    if warmup:
        await asyncio.gather(*(_document(session, next(stream)) for _ in range(warmup)))
    total = documents
    advance = progress_callback(progress, f"load: {concurrency} documents at once", total)
    latencies: list[float] = []
    segments: list[int] = []
    output_tokens = 0
    retries = 0
    remaining = documents

    async def client() -> None:
        nonlocal output_tokens, retries, remaining
        while (remaining is None or remaining > 0) and not (stop is not None and stop.is_set()):
            if remaining is not None:
                remaining -= 1
            started = time.perf_counter()
            data, tried = await _document(session, next(stream))
            latencies.append(time.perf_counter() - started)
            segments.append(data["usage"]["segments"])
            output_tokens += data["usage"]["completion_tokens"]
            retries += tried
            advance(1)

    before = await snapshot(session)
    sampler = TimelineSampler(session, interval=0.5)
    started = time.monotonic()
    sampler.start(started)
    await asyncio.gather(*(client() for _ in range(concurrency)))
    seconds = time.monotonic() - started
    timeline = await sampler.stop()
    engine = engine_summary(before, await snapshot(session))
    busy = [p for p in timeline if p.running + p.waiting > 0]
    done = len(latencies)
    return {
        "concurrency": concurrency,
        "documents": done,
        "seconds": seconds,
        "documents_per_s": done / seconds,
        "segments_per_s": sum(segments) / seconds,
        "output_tokens_per_s": output_tokens / seconds,
        "segments_per_document_max": max(segments, default=0),
        "latency_p50_s": percentile(latencies, 50),
        "latency_p95_s": percentile(latencies, 95),
        "overloaded_retries": retries,
        "mean_running": sum(p.running for p in busy) / max(1, len(busy)),
        "mean_waiting": sum(p.waiting for p in busy) / max(1, len(busy)),
        "kv_cache_peak": max((p.kv_cache for p in timeline), default=float("nan")),
        "engine": engine,
        "timeline": [
            {"t": p.t, "running": p.running, "waiting": p.waiting, "kv_cache": p.kv_cache}
            for p in timeline
        ],
    }


async def _document(session: aiohttp.ClientSession, item: WorkItem) -> tuple[Any, int]:
    """One document translated, and how many times a 503 `overloaded` was retried after its
    Retry-After, as a client should."""
    retries = 0
    while True:
        async with session.post("/translate", json=item.body()) as response:
            data = await response.json()
            if response.status == 503 and data["error"]["code"] == "overloaded":
                retries += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {json.dumps(data)[:300]}")
            return data, retries


def cost(workload: Workload, tokenizer_path: Path | None, rounds: int = 5) -> list[dict[str, Any]]:
    """Segmenting and reassembling, per 10 KB: parse, plan, render with an echo for the
    model, best of `rounds` (the machine is noisy; the best run is the code's cost)."""
    from tolk.translation.formats import parse
    from tolk.translation.plan import DocumentPlan, Done
    from tolk.translation.segment import approximate_tokens, segment

    count = approximate_tokens
    if tokenizer_path is not None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path / "tokenizer.json"))

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

    def cut(text: str) -> Any:
        return segment(text, "sentences", max_tokens=200, count=count)

    rows = []
    for item in workload.items:
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            plan = DocumentPlan([parse(item.format, item.text, cut)], cut, lambda m: True)
            done = {s: Done(s, 0, 0, 0) for s in plan.first}
            done |= {s: Done(s, 0, 0, 0) for s in plan.restore(done)}
            plan.render(done)
            best = min(best, time.perf_counter() - started)
        size = len(item.text.encode())
        rows.append(
            {
                "document": _label(item),
                "bytes": size,
                "ms": best * 1000,
                "ms_per_10kb": best * 1000 * 10_000 / size,
            }
        )
    return rows


def samples() -> dict[str, bytes]:
    """The sample files shipped with tolk, by name."""
    folder = resources.files("tolk") / "data" / "samples"
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir(), key=lambda f: f.name)}


# How long one file's 503 `overloaded` answers are retried (after each one's Retry-After)
# before it counts as failed: a file's work on a CPU takes minutes, and a client that sends
# many at once waits its turn for as long.
RETRY_SECONDS = 600.0


async def _file(
    session: aiohttp.ClientSession, name: str, data: bytes, target: str
) -> tuple[float, int, str, bytes, int, list[str]]:
    """The file through /translate/file: seconds (its retries' waits included), status, the
    translated file's name and bytes, how many 503 `overloaded` were retried after their
    Retry-After (as a client should), and the codes of the translations tolk flagged."""
    started = time.perf_counter()
    retries = 0
    while True:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name)
        form.add_field("source_lang", "en")
        form.add_field("target_lang", target)
        async with session.post("/translate/file", data=form) as response:
            body = await response.read()
            disposition = response.headers.get("Content-Disposition", "")
            wait = float(response.headers.get("Retry-After", "1"))
            flagged = json.loads(response.headers.get("X-Tolk-Warnings", "[]"))
        overloaded = response.status == 503 and b'"overloaded"' in body
        if not overloaded or time.perf_counter() - started + wait > RETRY_SECONDS:
            break
        retries += 1
        await asyncio.sleep(wait)
    elapsed = time.perf_counter() - started
    named = disposition.rpartition("''")[2] or name
    return elapsed, response.status, named, body, retries, [str(w["code"]) for w in flagged]


def _keep(folder: Path, translated: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in translated.items():
        (folder / name).write_bytes(content)


async def files(
    session: aiohttp.ClientSession,
    target: str,
    keep: Path | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Each sample file alone, then all of them at once; the translations kept in `keep`."""
    found = samples()
    advance = progress_callback(progress, "files", 2 * len(found))
    rows: dict[str, dict[str, Any]] = {}
    translated: dict[str, bytes] = {}
    for name, data in found.items():
        seconds, status, named, body, _, flagged = await _file(session, name, data, target)
        rows[name] = {"file": name, "bytes": len(data), "status": status, "alone_s": seconds}
        rows[name]["flagged"] = flagged
        if status == 200:
            stem, suffix = PurePath(name).stem, PurePath(named).suffix
            translated[f"{stem}.{target}{suffix}"] = body
        else:
            rows[name]["error"] = body[:300].decode("utf-8", "replace")
        advance(1)
    if keep is not None:
        await asyncio.to_thread(_keep, keep, translated)

    async def together(name: str, data: bytes) -> None:
        seconds, status, _, _, retries, _ = await _file(session, name, data, target)
        rows[name]["together_s"], rows[name]["together_status"] = seconds, status
        rows[name]["overloaded_retries"] = retries
        advance(1)

    started = time.perf_counter()
    await asyncio.gather(*(together(name, data) for name, data in found.items()))
    wall = time.perf_counter() - started
    alone = sum(r["alone_s"] for r in rows.values())
    return {
        "target": target,
        "rows": list(rows.values()),
        "alone_sum_s": alone,
        "together_wall_s": wall,
        "together_over_alone": wall / alone if alone else None,
        "errors": sum(r["status"] != 200 or r["together_status"] != 200 for r in rows.values()),
        "overloaded_retries": sum(r["overloaded_retries"] for r in rows.values()),
    }


def _label(item: WorkItem) -> str:
    return (
        f"{item.source_lang}>{item.target_lang} {item.format} {len(item.text.encode()) // 1000} KB"
    )


async def run_documents(
    url: str,
    workload: Workload,
    concurrency: int,
    documents: int,
    tokenizer_path: Path | None,
    progress: Progress | None = None,
    *,
    file_target: str | None = "de",
    keep: Path | None = None,
    only_files: bool = False,
) -> dict[str, Any]:
    """The three measurements (not with `only_files`), and the files' where `file_target` is
    given (their translations kept in `keep`)."""
    timeout = aiohttp.ClientTimeout(total=3600)
    results: dict[str, Any] = {
        "schema": SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "url": url,
    }
    async with aiohttp.ClientSession(
        base_url=url, timeout=timeout, headers=BYPASS_MEMORY
    ) as session:
        if not only_files:
            results["idle"] = await idle(session, workload, progress)
            results["load"] = await load(session, workload, concurrency, documents, progress)
        if file_target is not None:
            results["files"] = await files(session, file_target, keep, progress)
    if not only_files:
        results["cost"] = cost(workload, tokenizer_path)
    return results


def table(results: dict[str, Any]) -> Table:
    out = Table(title="tolk bench documents")
    for column in ("measure", "document", "figures"):
        out.add_column(column)
    for row in results.get("idle", ()):
        none = f"{row['none_s']:.2f} s" if row["none_s"] is not None else "n/a"
        if row["none_s"] is None and row["document"].split()[1] == "text":
            none = "does not fit the context"
        out.add_row(
            "idle",
            row["document"],
            f"{row['segments']} segments: {row['split_s']:.2f} s split, floor "
            f"{row['floor_s']:.2f} s, ratio {row['split_over_floor']:.2f}; split none {none}",
        )
    loaded = results.get("load")
    if loaded:
        out.add_row(
            "load",
            f"{loaded['concurrency']} at once, {loaded['documents']} documents",
            f"{loaded['documents_per_s']:.2f} documents/s, {loaded['segments_per_s']:.1f} "
            f"segments/s, p50 {loaded['latency_p50_s']:.1f} s, p95 {loaded['latency_p95_s']:.1f} "
            f"s, running {loaded['mean_running']:.1f} waiting {loaded['mean_waiting']:.1f} (mean "
            f"while busy), {loaded['overloaded_retries']} overloaded retries",
        )
    for row in results.get("cost", ()):
        out.add_row(
            "cost", row["document"], f"{row['ms']:.2f} ms, {row['ms_per_10kb']:.2f} ms per 10 KB"
        )
    by_file = results.get("files")
    if by_file:
        for row in by_file["rows"]:
            figures = (
                f"{row['bytes']:,} bytes: {row['alone_s']:.2f} s alone, "
                f"{row.get('together_s', float('nan')):.2f} s with the others; "
                f"{len(row.get('flagged', ()))} flagged"
            )
            if row["status"] != 200:
                figures = f"HTTP {row['status']}: {row.get('error', '')[:120]}"
            out.add_row("file", row["file"], figures)
        out.add_row(
            "files",
            f"{len(by_file['rows'])} at once, into {by_file['target']}",
            f"{by_file['together_wall_s']:.2f} s, against {by_file['alone_sum_s']:.2f} s one "
            f"after another ({by_file['together_over_alone']:.2f}); {by_file['errors']} errors, "
            f"{by_file['overloaded_retries']} overloaded retries",
        )
    return out


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    from tolk.bench.report import save_figure

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "documents.json"
    path.write_text(json.dumps(results, indent=2))
    if "load" not in results:
        return [path]
    points = results["load"]["timeline"]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot([p["t"] for p in points], [p["running"] for p in points], label="running")
    ax.plot([p["t"] for p in points], [p["waiting"] for p in points], label="waiting")
    ax.set_xlabel("seconds")
    ax.set_ylabel("engine requests")
    ax.set_title(f"{results['load']['concurrency']} documents at once: the engine's batch")
    ax.legend()
    return [path, save_figure(fig, out_dir / "documents-timeline.png")]
