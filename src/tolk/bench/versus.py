"""`tolk bench versus-vllm`: tolk against vLLM's own OpenAI-compatible server.

Both serve the same model with the same engine settings (tolk's `engine_args`, turned into
the server's command-line flags), and both get the same requests at the same concurrency:
tolk its /translate bodies, vLLM's server the very prompts tolk would build from them (token
ids through the model's chat template) with the same output budgets, on /v1/completions. So
the token counts are equal and the ratio is the price (or gain) of tolk's service layer
against `python -m vllm.entrypoints.openai.api_server`. Rounds alternate, so drift on a noisy
machine hits both alike.

With `data_parallel` N > 1 the comparison is the case study's scale-out against vLLM's own:
one vLLM server with `--data-parallel-size N` (N engines, vLLM balancing among them) against
a `tolk fleet` of N servers, each on its own GPU where there are GPUs, behind tolk's proxy.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.overhead import direct_loop, prepare
from tolk.bench.quality_speed import (
    PassSampler,
    counters_of,
    engine_counters,
    engine_figures,
    saturated,
)
from tolk.bench.report import write_json
from tolk.bench.run import alternate_rounds, pooled, rounds_report
from tolk.bench.stats import RequestRecord, summarize
from tolk.bench.workloads import WorkItem, Workload
from tolk.config import ModelSettings, TolkConfig, load_config
from tolk.engine import EngineMetrics, ModelEngine
from tolk.engine.engine import on_cpu
from tolk.local.fleet import Fleet
from tolk.local.processes import LocalServer, free_port, start_tolk
from tolk.translation.jobs import EngineJob
from tolk.wire.prometheus import Snapshot

SCHEMA = "tolk.bench.versus/1"
# One closed loop's records and wall time (loadgen.closed_loop, overhead.direct_loop).
Loop = Coroutine[Any, Any, tuple[list[RequestRecord], float]]
PATHS = ("vllm", "tolk")
ALL_PATHS = ("vllm", "tolk", "direct")


def server_flags(args: dict[str, Any]) -> list[str]:
    """vLLM's server flags for AsyncEngineArgs fields `args` (booleans as --x / --no-x)."""
    flags: list[str] = []
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        if name == "disable_log_stats":  # a plain switch there; off (stats on) as in tolk
            flags += [flag] if value else []
        elif isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, dict | list):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def vllm_command(settings: ModelSettings, port: int, data_parallel: int = 1) -> list[str]:
    from tolk.engine.engine import engine_args, on_cpu
    from tolk.engine.vllm_compat import VllmRelease

    args = VllmRelease.installed().check_engine_args(
        engine_args(settings, cpu=on_cpu()), settings.name
    )
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *server_flags(args),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--disable-uvicorn-access-log",
        *(["--data-parallel-size", str(data_parallel)] if data_parallel > 1 else []),
    ]


def start_vllm(settings: ModelSettings, workdir: Path, data_parallel: int = 1) -> LocalServer:
    port = free_port()
    return LocalServer.start(
        vllm_command(settings, port, data_parallel),
        port,
        workdir.resolve() / "vllm-server.log",
        cwd=workdir.resolve(),
        ready_path="/health",
    )


def tolk_requests(settings: ModelSettings, items: Sequence[WorkItem]) -> dict[WorkItem, EngineJob]:
    """What tolk will send its engine for each item, built the way tolk builds it."""
    from transformers import AutoConfig

    from tolk.engine.engine import load_tokenizer

    max_model_len = settings.engine.max_model_len or int(
        AutoConfig.from_pretrained(settings.path).max_position_embeddings
    )
    prepared = prepare(settings, load_tokenizer(settings), max_model_len, items)
    return dict(zip(items, prepared, strict=True))


@dataclass
class System:
    """One system under test, started once and up for the whole run (idle while another is
    measured): its name in the report, and how to load it and read its engine's metrics."""

    path: str
    stop: Callable[[], None]
    url: str | None = None  # an HTTP server's; None for "direct"
    url_path: str = "/translate"
    encode: loadgen.Encode | None = None
    engine: ModelEngine | None = None  # "direct": tolk's engine in this process
    metrics: EngineMetrics | None = None

    def read_metrics(self) -> str:
        """The in-process engine's Prometheus text ("direct" only)."""
        registry = CollectorRegistry(auto_describe=False)
        if self.metrics is not None:
            registry.register(self.metrics)
        return generate_latest(registry).decode()

    async def counters(self) -> dict[str, float] | None:
        if self.url is not None:
            return await engine_counters(self.url)
        return counters_of(Snapshot.parse(self.read_metrics()))


def memory_share(settings: ModelSettings, systems: int) -> ModelSettings:
    """`settings` with a GPU memory share that lets `systems` engines of it be up at once on
    one GPU (the configured share where it already fits)."""
    fits = round(0.85 / systems, 2)
    configured = settings.engine.gpu_memory_utilization
    if configured is not None and configured <= fits:
        return settings
    engine = settings.engine.model_copy(update={"gpu_memory_utilization": fits})
    return settings.model_copy(update={"engine": engine})


def start_system(
    path: str,
    config: TolkConfig,
    settings: ModelSettings,
    prepared: dict[WorkItem, EngineJob],
    workdir: Path,
    data_parallel: int = 1,
) -> System:
    """Start `path` ("vllm", "tolk" or "direct") and wait until it is ready."""
    if path == "vllm":
        server = start_vllm(settings, workdir, data_parallel)

        def encode(item: WorkItem) -> dict[str, Any]:
            job = prepared[item]
            return {
                "model": settings.name,
                "prompt": job.prompt_ids,
                "max_tokens": job.max_tokens,
                "temperature": 0.0,
                **settings.sampling.model_dump(exclude_none=True),
            }

        return System(path, server.stop, server.url, "/v1/completions", encode)
    if path == "direct":
        metrics = EngineMetrics()
        engine = ModelEngine.start(settings, metrics)
        return System(path, engine.shutdown, engine=engine, metrics=metrics)
    if data_parallel > 1:
        fleet = start_tolk_fleet(config, settings, workdir, data_parallel)
        return System(path, fleet.stop, fleet.proxy.url, encode=WorkItem.whole_body)
    server = start_tolk(config, settings, workdir, "versus-tolk")
    return System(path, server.stop, server.url, encode=WorkItem.whole_body)


async def _round(
    system: System,
    workload: Workload,
    prepared: dict[WorkItem, EngineJob],
    *,
    concurrency: int,
    requests: int,
    warmup: int,
    advance: loadgen.Progress,
) -> dict[str, Any]:
    """One measured round of `system`: `warmup` requests unrecorded, then `requests` at
    `concurrency`, its engine's counters read before and after, its running and waiting
    requests and the GPU's utilisation sampled meanwhile."""
    items = workload.stream()
    sampler = PassSampler(system.url, read=system.read_metrics if system.url is None else None)
    async with contextlib.AsyncExitStack() as stack:
        if system.engine is not None:
            engine, jobs = system.engine, (prepared[item] for item in items)

            def run(count: int, progress: loadgen.Progress | None = None) -> Loop:
                return direct_loop(engine, jobs, concurrency, count, progress)
        else:
            assert system.url is not None
            client = await stack.enter_async_context(
                loadgen.make_client(system.url, concurrency + 4)
            )

            def run(count: int, progress: loadgen.Progress | None = None) -> Loop:
                return loadgen.closed_loop(
                    client, items, concurrency, requests=count, path=system.url_path,
                    encode=system.encode, progress=progress,
                )  # fmt: skip

        if warmup:
            await run(warmup)
        before = await system.counters()
        sampler.start()
        try:
            records, duration = await run(requests, advance)
        finally:
            await sampler.stop()
    return {
        "path": system.path,
        "summary": summarize(records, duration).to_json(),
        "saturated_rps": _saturated_rps(records, concurrency),
        "engine": engine_figures(before, await system.counters(), duration),
        "sampled": {
            "gpu_util_mean": _mean(sampler.gpu),
            "running_mean": _mean(sampler.running),
            "waiting_mean": _mean(sampler.waiting),
        },
    }


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def _saturated_rps(records: Sequence[RequestRecord], concurrency: int) -> float | None:
    """Requests a second while every client was busy (quality_speed.saturated): the round's
    drain, where clients run out of work, left out."""
    found = saturated(
        [
            {"sent_s": r.start, "latency_s": r.latency, "error": None if r.ok else r.status}
            for r in records
        ],
        concurrency,
    )
    return found[0] / found[1] if found else None


def start_tolk_fleet(
    config: TolkConfig, settings: ModelSettings, workdir: Path, servers: int
) -> Fleet:
    """`servers` tolk servers of `settings`, one GPU each where there are GPUs (as `tolk
    fleet --gpus auto` places them), behind the proxy; no Prometheus."""
    from tolk.local.fleet import start_fleet, visible_gpus

    gpus = visible_gpus("auto")
    if gpus and len(gpus) < servers:
        raise RuntimeError(
            f"{servers} servers need {servers} GPUs, as vLLM's --data-parallel-size {servers} "
            f"does; {len(gpus)} visible"
        )
    return start_fleet(
        config.model_copy(update={"models": (settings,)}),
        servers,
        workdir.resolve() / "versus-fleet",
        gpus=gpus[:servers],
        prometheus=False,
    )


async def run_versus(
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
    data_parallel: int = 1,
    paths: Sequence[str] = PATHS,
) -> dict[str, Any]:
    """Every system of `paths` started once, one after the other (on a GPU with a memory
    share that lets all be up at once: memory_share), then `rounds` rounds of each in turn,
    each idle while another is measured; the report compares "tolk" with "vllm" and, where
    measured, "direct" (tolk's engine awaited in this process, no HTTP) with both."""
    if unknown := set(paths) - set(ALL_PATHS):
        raise ValueError(f"unknown systems {sorted(unknown)}; choose among {ALL_PATHS}")
    if not {"tolk", "vllm"} <= set(paths):
        raise ValueError("the comparison needs both tolk and vllm among the systems")
    if "direct" in paths and data_parallel > 1:
        raise ValueError("direct is one engine in this process: not with --data-parallel")
    config = load_config(config_path)
    settings = next(m for m in config.models if m.name == model)
    if not on_cpu():
        settings = memory_share(settings, len(paths))
    prepared = tolk_requests(settings, workload.items)
    systems: dict[str, System] = {}
    try:
        for path in paths:
            systems[path] = start_system(path, config, settings, prepared, workdir, data_parallel)

        async def one(path: str, advance: loadgen.Progress) -> dict[str, Any]:
            return await _round(
                systems[path],
                workload,
                prepared,
                concurrency=concurrency,
                requests=requests,
                warmup=warmup,
                advance=advance,
            )

        measured = await alternate_rounds(paths, rounds, requests, progress, one)
    finally:
        for system in systems.values():
            system.stop()
    totals = {path: pooled(measured, path) for path in paths}
    report = {
        **rounds_report(SCHEMA, config_path, model, workload, concurrency, requests, measured),
        "data_parallel": data_parallel,
        "systems": list(paths),
        "totals": totals,
        "ratio_rps": totals["tolk"]["rps"] / totals["vllm"]["rps"],
        "ratio_output_tps": totals["tolk"]["output_tps"] / totals["vllm"]["output_tps"],
        "same_token_counts": totals["tolk"]["output_tokens"] == totals["vllm"]["output_tokens"],
    }
    if "direct" in totals:
        report["ratio_rps_direct_to_vllm"] = totals["direct"]["rps"] / totals["vllm"]["rps"]
        report["ratio_rps_tolk_to_direct"] = totals["tolk"]["rps"] / totals["direct"]["rps"]
    return report


def table(results: dict[str, Any]) -> Table:
    n = results.get("data_parallel", 1)
    who = (
        f"a tolk fleet of {n} behind the proxy vs vLLM's OpenAI server, --data-parallel-size {n}"
        if n > 1
        else "tolk vs vLLM's OpenAI server"
    )
    if "direct" in results.get("systems", ()):
        who += " vs tolk's engine awaited directly"
    out = Table(title=f"{who}, concurrency {results['concurrency']}, {results['workload']['name']}")
    headers = ("round", "system", "req/s", "busy req/s", "out tok/s", "output tokens", "p50 s")
    for header in (
        *headers,
        "p95 s",
        "ms a step",
        "tokens a step",
        "ITL ms",
        "queue ms",
        "running",
    ):
        out.add_column(header, justify="right")
    for m in results["rounds"]:
        s = m["summary"]
        engine = m.get("engine") or {}
        out.add_row(
            str(m["round"]),
            m["path"],
            f"{s['rps']:.2f}",
            _figure(m.get("saturated_rps")),
            f"{s['output_tokens_per_s']:,.0f}",
            f"{s['completion_tokens']:,}",
            f"{s['latency_s']['p50']:.2f}",
            f"{s['latency_s']['p95']:.2f}",
            _figure(engine.get("step_ms")),
            _figure(engine.get("tokens_per_step")),
            _figure(engine.get("itl_ms")),
            _figure(engine.get("queue_ms")),
            _figure((m.get("sampled") or {}).get("running_mean")),
        )
    out.caption = (
        f"tolk / vLLM: {results['ratio_rps']:.3f} in req/s, {results['ratio_output_tps']:.3f} in "
        f"output tok/s; same output token counts: {results['same_token_counts']}"
    )
    if "ratio_rps_direct_to_vllm" in results:
        out.caption += (
            f"; direct / vLLM {results['ratio_rps_direct_to_vllm']:.3f}, tolk / direct "
            f"{results['ratio_rps_tolk_to_direct']:.3f} in req/s"
        )
    return out


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def write(results: dict[str, Any], out_dir: Path) -> Path:
    return write_json(results, out_dir, "versus.json")
