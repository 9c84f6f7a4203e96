"""`tolk bench proxy`: what the proxy costs, and what a second upstream buys.

Two upstreams U1 and U2 serving the same pair, and two proxies: P1 in front of U1 alone, P2
in front of both. Each round drives, at the same concurrency with the same requests: U1
directly, P1, and P2. Overhead is P1 against direct (requests/s ratio, p95 latency
difference, and the proxy's own added time per request from its Server-Timing header); scale
is P2 against P1.

Upstreams are either stand-ins of fixed capacity (`tolk.proxy.standin`: each holds a request
a fixed time under a fixed concurrency cap; two real engines cannot each get a core on a
2-core machine) or real tolk servers of a configured model.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.report import write_json
from tolk.bench.run import progress_callback
from tolk.bench.stats import summarize
from tolk.bench.workloads import Workload
from tolk.config import load_config
from tolk.local.processes import LocalServer, start_proxy, start_standin, start_tolk

SCHEMA = "tolk.bench.proxy/1"
PATHS = ("direct", "proxy-1", "proxy-2")


def run_proxy_bench(
    workload: Workload,
    *,
    workdir: Path,
    concurrency: int,
    requests: int,
    rounds: int,
    warmup: int,
    standin: tuple[int, float] | None = None,
    config_path: Path | None = None,
    model: str | None = None,
    rate: float | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Start the upstreams and proxies, drive every path `rounds` times, stop everything.
    Closed loop at `concurrency` by default; with `rate`, open loop (Poisson arrivals), where
    completions are spread the way real traffic spreads them."""
    workdir = workdir.resolve()
    servers: list[LocalServer] = []
    try:
        if standin is not None:
            capacity, hold = standin
            upstream_kind = f"stand-in (capacity {capacity}, hold {hold * 1000:g} ms)"
            for name in ("u1", "u2"):
                servers.append(start_standin(workdir, name, capacity, hold))
        else:
            if config_path is None or model is None:
                raise ValueError("real upstreams need a config and a model")
            config = load_config(config_path)
            settings = next(m for m in config.models if m.name == model)
            upstream_kind = f"tolk server, model {model} ({config_path})"
            for name in ("u1", "u2"):
                servers.append(start_tolk(config, settings, workdir, name))
        u1, u2 = servers[0].url, servers[1].url
        servers.append(start_proxy(workdir, "proxy-1", [u1]))
        servers.append(start_proxy(workdir, "proxy-2", [u1, u2]))
        urls = {"direct": u1, "proxy-1": servers[2].url, "proxy-2": servers[3].url}
        measured = asyncio.run(
            _drive(urls, workload, concurrency, requests, rounds, warmup, rate, progress)
        )
    finally:
        for server in reversed(servers):
            server.stop()
    return _results(measured, upstream_kind, workload, concurrency, requests, rate)


async def _drive(
    urls: dict[str, str],
    workload: Workload,
    concurrency: int,
    requests: int,
    rounds: int,
    warmup: int,
    rate: float | None,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    measured = []
    for number in range(1, rounds + 1):
        for path in PATHS:
            advance = progress_callback(progress, f"round {number}: {path}", requests)
            async with loadgen.make_client(urls[path], concurrency + 4) as client:
                items = workload.stream()
                if warmup:
                    await loadgen.closed_loop(client, items, concurrency, requests=warmup)
                if rate is not None:
                    records, duration = await loadgen.open_loop(
                        client, items, rate, requests=requests, seed=number, progress=advance
                    )
                else:
                    records, duration = await loadgen.closed_loop(
                        client, items, concurrency, requests=requests, progress=advance
                    )
            summary = summarize(records, duration).to_json()
            measured.append({"round": number, "path": path, "summary": summary})
    return measured


def _results(
    measured: list[dict[str, Any]],
    upstream_kind: str,
    workload: Workload,
    concurrency: int,
    requests: int,
    rate: float | None,
) -> dict[str, Any]:
    def total_rps(path: str) -> float:
        runs = [m["summary"] for m in measured if m["path"] == path]
        return float(sum(r["ok"] for r in runs) / sum(r["duration_s"] for r in runs))

    def worst(path: str, key: str, stat: str) -> float:
        values = [m["summary"][key].get(stat, float("nan")) for m in measured if m["path"] == path]
        return float(max(values))

    rps = {path: total_rps(path) for path in PATHS}
    return {
        "schema": SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "upstreams": upstream_kind,
        "workload": workload.describe(),
        "mode": "closed" if rate is None else "open",
        "concurrency": concurrency if rate is None else None,
        "rate": rate,
        "requests_per_round": requests,
        "rounds": measured,
        "rps": rps,
        "overhead_ratio": rps["proxy-1"] / rps["direct"],
        "p95_latency_added_ms": (
            worst("proxy-1", "latency_s", "p95") - worst("direct", "latency_s", "p95")
        )
        * 1000,
        "proxy_added_ms_p50": worst("proxy-1", "proxy_added_ms", "p50"),
        "proxy_added_ms_p95": worst("proxy-1", "proxy_added_ms", "p95"),
        "scale_ratio": rps["proxy-2"] / rps["proxy-1"],
    }


def table(results: dict[str, Any]) -> Table:
    load = (
        f"concurrency {results['concurrency']}"
        if results["mode"] == "closed"
        else f"Poisson arrivals at {results['rate']:g}/s"
    )
    out = Table(title=f"tolk proxy: {results['upstreams']}, {load}")
    for header in ("round", "path", "req/s", "errors", "p50 ms", "p95 ms", "proxy added p95 ms"):
        out.add_column(header, justify="right")
    for m in results["rounds"]:
        s = m["summary"]
        errors = ", ".join(f"{k}:{v}" for k, v in s["errors"].items()) or "0"
        out.add_row(
            str(m["round"]),
            m["path"],
            f"{s['rps']:.1f}",
            errors,
            f"{s['latency_s']['p50'] * 1000:.1f}",
            f"{s['latency_s']['p95'] * 1000:.1f}",
            f"{s['proxy_added_ms'].get('p95', float('nan')):.2f}",
        )
    out.caption = caption(results)
    return out


def caption(results: dict[str, Any]) -> str:
    rps = results["rps"]
    return (
        f"overhead: proxy-1 {rps['proxy-1']:.1f} vs direct {rps['direct']:.1f} req/s = "
        f"{results['overhead_ratio']:.3f}x; p95 latency {results['p95_latency_added_ms']:+.1f} "
        f"ms; the proxy's own added time p50 {results['proxy_added_ms_p50']:.2f} / p95 "
        f"{results['proxy_added_ms_p95']:.2f} ms. scale: proxy-2 {rps['proxy-2']:.1f} vs "
        f"proxy-1 {rps['proxy-1']:.1f} req/s = {results['scale_ratio']:.2f}x"
    )


def write(results: dict[str, Any], out_dir: Path) -> Path:
    return write_json(results, out_dir, "proxy.json")
