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

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.overhead import prepare
from tolk.bench.quality_speed import engine_counters, engine_figures
from tolk.bench.report import write_json
from tolk.bench.run import alternate_rounds, pooled, rounds_report
from tolk.bench.stats import summarize
from tolk.bench.workloads import WorkItem, Workload
from tolk.config import ModelSettings, TolkConfig, load_config
from tolk.local.fleet import Fleet
from tolk.local.processes import LocalServer, free_port, start_tolk
from tolk.translation.jobs import EngineJob

SCHEMA = "tolk.bench.versus/1"
PATHS = ("vllm", "tolk")


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


async def _round(
    path: str,
    config: TolkConfig,
    settings: ModelSettings,
    workload: Workload,
    prepared: dict[WorkItem, EngineJob],
    *,
    concurrency: int,
    requests: int,
    warmup: int,
    workdir: Path,
    advance: loadgen.Progress,
    data_parallel: int = 1,
) -> dict[str, Any]:
    stop: Callable[[], None]
    if path == "vllm":
        server = start_vllm(settings, workdir, data_parallel)
        url, stop = server.url, server.stop
        url_path = "/v1/completions"

        def encode(item: WorkItem) -> dict[str, Any]:
            job = prepared[item]
            return {
                "model": settings.name,
                "prompt": job.prompt_ids,
                "max_tokens": job.max_tokens,
                "temperature": 0.0,
                **settings.sampling.model_dump(exclude_none=True),
            }

        encoder: loadgen.Encode | None = encode
    elif data_parallel > 1:
        fleet = start_tolk_fleet(config, settings, workdir, data_parallel)
        url, stop = fleet.proxy.url, fleet.stop
        url_path, encoder = "/translate", WorkItem.whole_body
    else:
        server = start_tolk(config, settings, workdir, "versus-tolk")
        url, stop = server.url, server.stop
        url_path, encoder = "/translate", WorkItem.whole_body
    try:
        async with loadgen.make_client(url, concurrency + 4) as client:
            items = workload.stream()
            if warmup:
                await loadgen.closed_loop(
                    client, items, concurrency, requests=warmup, path=url_path, encode=encoder
                )
            before = await engine_counters(url)
            records, duration = await loadgen.closed_loop(
                client,
                items,
                concurrency,
                requests=requests,
                path=url_path,
                encode=encoder,
                progress=advance,
            )
            engine = engine_figures(before, await engine_counters(url), duration)
    finally:
        stop()
    return {"path": path, "summary": summarize(records, duration).to_json(), "engine": engine}


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
) -> dict[str, Any]:
    config = load_config(config_path)
    settings = next(m for m in config.models if m.name == model)
    prepared = tolk_requests(settings, workload.items)

    async def one(path: str, advance: loadgen.Progress) -> dict[str, Any]:
        return await _round(
            path,
            config,
            settings,
            workload,
            prepared,
            concurrency=concurrency,
            requests=requests,
            warmup=warmup,
            workdir=workdir,
            advance=advance,
            data_parallel=data_parallel,
        )

    measured = await alternate_rounds(PATHS, rounds, requests, progress, one)
    totals = {path: pooled(measured, path) for path in PATHS}
    return {
        **rounds_report(SCHEMA, config_path, model, workload, concurrency, requests, measured),
        "data_parallel": data_parallel,
        "totals": totals,
        "ratio_rps": totals["tolk"]["rps"] / totals["vllm"]["rps"],
        "ratio_output_tps": totals["tolk"]["output_tps"] / totals["vllm"]["output_tps"],
        "same_token_counts": totals["tolk"]["output_tokens"] == totals["vllm"]["output_tokens"],
    }


def table(results: dict[str, Any]) -> Table:
    n = results.get("data_parallel", 1)
    who = (
        f"a tolk fleet of {n} behind the proxy vs vLLM's OpenAI server, --data-parallel-size {n}"
        if n > 1
        else "tolk vs vLLM's OpenAI server"
    )
    out = Table(title=f"{who}, concurrency {results['concurrency']}, {results['workload']['name']}")
    headers = ("round", "server", "req/s", "out tok/s", "output tokens", "p50 s", "p95 s")
    for header in (*headers, "ms a step", "tokens a step"):
        out.add_column(header, justify="right")
    for m in results["rounds"]:
        s = m["summary"]
        engine = m.get("engine") or {}
        out.add_row(
            str(m["round"]),
            m["path"],
            f"{s['rps']:.2f}",
            f"{s['output_tokens_per_s']:,.0f}",
            f"{s['completion_tokens']:,}",
            f"{s['latency_s']['p50']:.2f}",
            f"{s['latency_s']['p95']:.2f}",
            _figure(engine.get("step_ms")),
            _figure(engine.get("tokens_per_step")),
        )
    out.caption = (
        f"tolk / vLLM: {results['ratio_rps']:.3f} in req/s, {results['ratio_output_tps']:.3f} in "
        f"output tok/s; same output token counts: {results['same_token_counts']}"
    )
    return out


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def write(results: dict[str, Any], out_dir: Path) -> Path:
    return write_json(results, out_dir, "versus.json")
