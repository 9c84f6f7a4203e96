"""`tolk bench overhead`: what tolk's HTTP layer costs, measured against the engine itself.

The same requests at the same concurrency, once awaited directly on vLLM's AsyncLLM in this
process (prompts rendered beforehand, so only generation is timed) and once through a tolk
server over HTTP; rounds alternate so that drift on a noisy machine hits both alike. This is
one of the places the bench deliberately uses the engine directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.report import write_json
from tolk.bench.run import alternate_rounds, pooled, rounds_report
from tolk.bench.stats import RequestRecord, summarize
from tolk.bench.workloads import WorkItem, Workload
from tolk.budget import Budgets, counting
from tolk.config import ModelSettings, load_config
from tolk.engine import EngineMetrics, ModelEngine, Tokenizer
from tolk.languages import lang
from tolk.local.processes import start_tolk
from tolk.translation.jobs import EngineJob, plan_job

SCHEMA = "tolk.bench.overhead/1"


def prepare(
    settings: ModelSettings, tokenizer: Tokenizer, max_model_len: int, items: Sequence[WorkItem]
) -> list[EngineJob]:
    """The engine requests tolk makes of `items` (each sent whole, as with `split: none`),
    with the output budgets tolk's engine gives each pair."""
    budgets = Budgets(counting(tokenizer), settings.max_tokens_ratio)
    return [
        plan_job(
            settings,
            tokenizer,
            max_model_len,
            i,
            item.text,
            (lang(item.source_lang), lang(item.target_lang)),
            budgets,
        )
        for i, item in enumerate(items)
    ]


async def direct_loop(
    engine: ModelEngine,
    jobs: Iterator[EngineJob],
    concurrency: int,
    requests: int,
    progress: loadgen.Progress | None = None,
) -> tuple[list[RequestRecord], float]:
    """loadgen.closed_loop's counterpart without HTTP: `concurrency` coroutines awaiting
    `engine` (vLLM's AsyncLLM in this process) with the next of `jobs` until `requests` are
    sent; the records and the wall time."""
    records: list[RequestRecord] = []
    t0 = time.monotonic()
    budget = [requests]

    async def worker() -> None:
        while budget[0] > 0:
            budget[0] -= 1
            job = next(jobs)
            started = time.monotonic()
            generation = await engine.generate(job.prompt_ids, job.max_tokens)
            records.append(
                RequestRecord(
                    started - t0,
                    time.monotonic() - started,
                    200,
                    prompt_tokens=generation.prompt_tokens,
                    completion_tokens=generation.completion_tokens,
                )
            )
            if progress:
                progress(1)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sorted(records, key=lambda r: r.start), time.monotonic() - t0


async def _direct_round(
    settings: ModelSettings,
    workload: Workload,
    concurrency: int,
    requests: int,
    warmup: int,
    advance: loadgen.Progress,
) -> dict[str, Any]:
    engine = ModelEngine.start(settings, EngineMetrics())
    try:
        prepared = prepare(settings, engine.tokenizer, engine.max_model_len, workload.items)
        stream = (prepared[i % len(prepared)] for i in range(10**9))
        await direct_loop(engine, stream, 1, warmup)
        records, duration = await direct_loop(engine, stream, concurrency, requests, advance)
    finally:
        engine.shutdown()
    return {"path": "direct", "summary": summarize(records, duration).to_json()}


async def _http_round(
    config_path: Path,
    settings: ModelSettings,
    workload: Workload,
    concurrency: int,
    requests: int,
    warmup: int,
    workdir: Path,
    advance: Any,
) -> dict[str, Any]:
    server = start_tolk(load_config(config_path), settings, workdir, "overhead-server")
    try:
        async with loadgen.make_client(server.url, concurrency + 4) as client:
            items = workload.stream()
            if warmup:
                await loadgen.closed_loop(
                    client, items, 1, requests=warmup, encode=WorkItem.whole_body
                )
            records, duration = await loadgen.closed_loop(
                client,
                items,
                concurrency,
                requests=requests,
                progress=advance,
                encode=WorkItem.whole_body,  # one engine request per text, as on the direct path
            )
    finally:
        server.stop()
    return {"path": "http", "summary": summarize(records, duration, concurrency).to_json()}


async def run_overhead(
    config_path: Path,
    model: str,
    workload: Workload,
    *,
    concurrency: int,
    requests: int,
    rounds: int,
    warmup: int,
    workdir: Path,
    progress: Progress | None = None,
) -> dict[str, Any]:
    settings = next(m for m in load_config(config_path).models if m.name == model)

    async def one(path: str, advance: loadgen.Progress) -> dict[str, Any]:
        if path == "direct":
            return await _direct_round(settings, workload, concurrency, requests, warmup, advance)
        return await _http_round(
            config_path, settings, workload, concurrency, requests, warmup, workdir, advance
        )

    measured = await alternate_rounds(("direct", "http"), rounds, requests, progress, one)
    direct_rps, http_rps = (pooled(measured, path)["rps"] for path in ("direct", "http"))
    http = [m["summary"] for m in measured if m["path"] == "http"]
    return {
        **rounds_report(SCHEMA, config_path, model, workload, concurrency, requests, measured),
        "direct_rps": direct_rps,
        "http_rps": http_rps,
        "ratio": http_rps / direct_rps,
        # Service overhead: client latency minus the engine time the server reports.
        "overhead_ms_p50": max(r["overhead_ms"].get("p50", float("nan")) for r in http),
        "overhead_ms_p95": max(r["overhead_ms"].get("p95", float("nan")) for r in http),
        "overhead_steady_ms_p95": max(
            r["overhead_steady_ms"].get("p95", float("nan")) for r in http
        ),
    }


def table(results: dict[str, Any]) -> Table:
    out = Table(title=f"HTTP vs direct AsyncLLM, concurrency {results['concurrency']}")
    for header in (
        "round",
        "path",
        "req/s",
        "p50 s",
        "p95 s",
        "overhead p50 ms",
        "overhead p95 ms",
        "steady p95 ms",
    ):
        out.add_column(header, justify="right")
    for m in results["rounds"]:
        s = m["summary"]
        out.add_row(
            str(m["round"]),
            m["path"],
            f"{s['rps']:.2f}",
            f"{s['latency_s']['p50']:.2f}",
            f"{s['latency_s']['p95']:.2f}",
            f"{s['overhead_ms'].get('p50', float('nan')):.1f}",
            f"{s['overhead_ms'].get('p95', float('nan')):.1f}",
            f"{s['overhead_steady_ms'].get('p95', float('nan')):.1f}",
        )
    out.caption = (
        f"direct {results['direct_rps']:.2f} req/s, HTTP {results['http_rps']:.2f} "
        f"req/s, ratio {results['ratio']:.3f}; service overhead p95 "
        f"{results['overhead_ms_p95']:.1f} ms, after the opening burst "
        f"{results['overhead_steady_ms_p95']:.1f} ms"
    )
    return out


def write(results: dict[str, Any], out_dir: Path) -> Path:
    return write_json(results, out_dir, "overhead.json")
