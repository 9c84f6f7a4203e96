"""`tolk bench run`: load levels one after another against a server, measured from both sides."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tolk.bench import loadgen
from tolk.bench.scrape import TimelineSampler, engine_summary, snapshot
from tolk.bench.stats import summarize
from tolk.bench.workloads import Workload

CEILING_MARGIN = 5.0  # warn when a level comes within 5x of the generator's own ceiling


@dataclass(frozen=True)
class RunPlan:
    url: str
    workload: Workload
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    requests: int | None = None
    duration: float | None = None
    warmup: int = 0
    seed: int = 0
    timeline_interval: float = 0.25
    api: str = "tolk"  # tolk | deepl | libretranslate: which of the server's APIs is driven
    key: str | None = None  # an API key, sent as that API's clients send it

    @property
    def driven(self) -> loadgen.Api:
        return loadgen.with_key(loadgen.APIS[self.api], self.key)

    @property
    def mode(self) -> str:
        return "open" if self.rates else "closed"

    @property
    def levels(self) -> tuple[float, ...]:
        return self.rates if self.rates else tuple(float(c) for c in self.concurrency)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    )


def progress_callback(
    progress: Progress | None, description: str, total: int | None
) -> loadgen.Progress:
    """A callback that advances a new bar of `progress` (or does nothing without one).
    Where the console is no terminal (a log file, CI) rich draws no bar until the end, so a
    plain line says how far it is every tenth of the way."""
    if progress is None:
        return lambda n: None
    task = progress.add_task(description, total=total)
    if progress.console.is_terminal:
        return lambda n: progress.advance(task, n)
    step = max(1, (total or 10) // 10)
    counts = {"done": 0, "said": 0}

    def advance(n: int) -> None:
        progress.advance(task, n)
        counts["done"] += n
        if counts["done"] - counts["said"] >= step or counts["done"] == total:
            counts["said"] = counts["done"]
            progress.console.print(f"{description}: {counts['done']}/{total or '?'}")

    return advance


async def alternate_rounds(
    paths: Sequence[str],
    rounds: int,
    requests: int,
    progress: Progress | None,
    one: Callable[[str, loadgen.Progress], Awaitable[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """`rounds` rounds of `one(path, advance)` for each path in turn (so drift on a noisy
    machine hits every path alike); each result gets its round number."""
    measured: list[dict[str, Any]] = []
    for number in range(1, rounds + 1):
        for path in paths:
            result = await one(
                path, progress_callback(progress, f"round {number}: {path}", requests)
            )
            result["round"] = number
            measured.append(result)
    return measured


def rounds_report(
    schema: str,
    config_path: Path,
    model: str,
    workload: Workload,
    concurrency: int,
    requests: int,
    measured: list[dict[str, Any]],
) -> dict[str, Any]:
    """What every alternating-rounds report (overhead, versus-vllm) starts with."""
    return {
        "schema": schema,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": model,
        "config": str(config_path),
        "workload": workload.describe(),
        "concurrency": concurrency,
        "requests_per_round": requests,
        "rounds": measured,
    }


def pooled(measured: Sequence[dict[str, Any]], path: str) -> dict[str, float]:
    """One path's rounds taken together: requests and output tokens per second of all its
    rounds' time, output tokens, the worst round's p50/p95, errors."""
    runs = [m["summary"] for m in measured if m["path"] == path]
    seconds = sum(r["duration_s"] for r in runs)
    tokens = sum(r["completion_tokens"] for r in runs)
    return {
        "rps": sum(r["ok"] for r in runs) / seconds,
        "output_tokens": tokens,
        "output_tps": tokens / seconds,
        "p50_s": max(r["latency_s"]["p50"] for r in runs),
        "p95_s": max(r["latency_s"]["p95"] for r in runs),
        "errors": sum(r["requests"] - r["ok"] for r in runs),
    }


async def run(plan: RunPlan, progress: Progress | None = None) -> dict[str, Any]:
    if not plan.levels:
        raise ValueError("give --concurrency levels or --rate levels")
    peak = int(max(plan.concurrency, default=0)) or 256
    headers = plan.driven.key_header(plan.key) if plan.key else {}
    async with loadgen.make_client(plan.url, connections=peak + 4, headers=headers) as client:
        status, text = await loadgen.get_text(client, "/ready")
        if status != 200:
            raise RuntimeError(f"{plan.url}/ready answered {status}: {text}")
        ceiling = await loadgen.ceiling(client, concurrency=min(max(peak, 8), 64))
        results: dict[str, Any] = {
            "schema": "tolk.bench.run/1",
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "url": plan.url,
            "mode": plan.mode,
            "api": plan.api,
            "workload": plan.workload.describe(),
            "generator_ceiling_rps": ceiling,
            "warnings": [],
            "levels": [],
        }
        for level in plan.levels:
            results["levels"].append(await measure_level(client, plan, level, progress))
            rps = results["levels"][-1]["summary"]["rps"]
            if rps * CEILING_MARGIN > ceiling:
                results["warnings"].append(
                    f"level {level:g}: {rps:.1f} req/s is within {CEILING_MARGIN:g}x of the load "
                    f"generator's own ceiling ({ceiling:.0f} req/s); the generator may be the "
                    "bottleneck"
                )
        return results


async def measure_level(
    client: Any, plan: RunPlan, level: float, progress: Progress | None
) -> dict[str, Any]:
    items = plan.workload.stream()
    name = f"{'rate' if plan.mode == 'open' else 'concurrency'} {level:g}"
    api = plan.driven
    if plan.warmup:
        await loadgen.closed_loop(
            client,
            items,
            max(1, int(level)),
            requests=plan.warmup,
            path=api.path,
            encode=api.encode,
        )
    advance = progress_callback(progress, name, plan.requests)
    before = await snapshot(client)
    sampler = TimelineSampler(client, plan.timeline_interval)
    sampler.start(time.monotonic())
    if plan.mode == "open":
        records, duration = await loadgen.open_loop(
            client,
            items,
            level,
            requests=plan.requests,
            duration=plan.duration,
            seed=plan.seed,
            progress=advance,
            path=api.path,
            encode=api.encode,
        )
    else:
        records, duration = await loadgen.closed_loop(
            client,
            items,
            int(level),
            requests=plan.requests,
            duration=plan.duration,
            progress=advance,
            path=api.path,
            encode=api.encode,
        )
    timeline = await sampler.stop()
    after = await snapshot(client)
    engine = engine_summary(before, after)
    engine["kv_cache_peak"] = max((p.kv_cache for p in timeline), default=float("nan"))
    engine["running_peak"] = max((p.running for p in timeline), default=0.0)
    engine["waiting_peak"] = max((p.waiting for p in timeline), default=0.0)
    gpu = [p.gpu_util for p in timeline if p.gpu_util is not None]
    if gpu:  # only where the server has NVIDIA GPUs (NVML)
        engine["gpu_util_mean"] = sum(gpu) / len(gpu)
        engine["gpu_util_peak"] = max(gpu)
    return {
        "level": level,
        "summary": summarize(
            records, duration, burst=0 if plan.mode == "open" else int(level)
        ).to_json(),
        "engine": engine,
        "timeline": [dataclasses.asdict(p) for p in timeline],
        "records": [dataclasses.asdict(r) for r in records],
    }
