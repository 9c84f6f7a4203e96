"""`tolk bench soak`: a long overload, and whether the server's memory stays flat under it.

A closed loop at `concurrency` (2x the server's capacity, say: half the requests are refused
all along) for `minutes`, while the resident memory of the server process and of every
process under it (the engine's) is sampled every `interval` seconds with psutil. Reported:
the samples, the mean of the first and of the last minute, and the growth between them, per
process and in total; a PNG chart of RSS over time.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from rich.table import Table

from tolk.bench import report
from tolk.bench.loadgen import make_client, send
from tolk.bench.stats import RequestRecord
from tolk.bench.workloads import Workload

MIB = 1 << 20


def _family(pid: int) -> dict[str, float]:
    """RSS in MiB of the server and each process under it, by a stable name."""
    root = psutil.Process(pid)
    out: dict[str, float] = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            cmdline = " ".join(process.cmdline())
            rss = process.memory_info().rss / MIB
        except psutil.NoSuchProcess:
            continue
        name = "server" if process.pid == pid else _role(cmdline)
        out[name] = out.get(name, 0.0) + rss
    return out


def _role(cmdline: str) -> str:
    for role in ("EngineCore", "Worker", "resource_tracker"):
        if role in cmdline:
            return role
    return "other"


async def measure(
    url: str,
    pid: int,
    workload: Workload,
    concurrency: int,
    minutes: float,
    interval: float,
    progress: Any = print,
) -> dict[str, Any]:
    items = itertools.cycle(workload.items)
    records: list[RequestRecord] = []
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    end = t0 + minutes * 60
    async with make_client(url, connections=concurrency, timeout=600) as client:

        async def worker() -> None:
            while time.monotonic() < end:
                record = await send(client, "/translate", next(items), t0)
                records.append(record)
                if record.status in (503, 429):
                    # A refused client waits as told (Retry-After: 1) before it tries again.
                    await asyncio.sleep(1.0)

        async def sampler() -> None:
            next_report = t0
            while time.monotonic() < end:
                now = time.monotonic()
                rss = _family(pid)
                samples.append(
                    {
                        "t": round(now - t0, 1),
                        "rss_mib": rss,
                        "total_mib": round(sum(rss.values()), 1),
                        "requests": len(records),
                        "ok": sum(r.ok for r in records),
                    }
                )
                if now >= next_report:
                    progress(
                        f"{(now - t0) / 60:.1f} min: {len(records)} requests, "
                        f"RSS {sum(rss.values()):.0f} MiB"
                    )
                    next_report = now + 60
                await asyncio.sleep(interval)

        await asyncio.gather(sampler(), *(worker() for _ in range(concurrency)))
    return summarize(url, workload, concurrency, minutes, interval, records, samples)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


def summarize(
    url: str,
    workload: Workload,
    concurrency: int,
    minutes: float,
    interval: float,
    records: list[RequestRecord],
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    last_t = samples[-1]["t"] if samples else 0.0
    names = sorted({n for s in samples for n in s["rss_mib"]})
    series = {name: [s["rss_mib"].get(name, 0.0) for s in samples] for name in names}
    series["total"] = [s["total_mib"] for s in samples]
    first = [i for i, s in enumerate(samples) if s["t"] <= 60]
    last = [i for i, s in enumerate(samples) if s["t"] >= last_t - 60]
    growth: dict[str, Any] = {}
    for name, rss in series.items():
        start, finish = _mean([rss[i] for i in first]), _mean([rss[i] for i in last])
        growth[name] = {
            "first_minute_mib": start,
            "last_minute_mib": finish,
            "growth_mib": round(finish - start, 1),
            "growth_percent": round(100 * (finish - start) / start, 2) if start else None,
            "max_mib": round(max(rss, default=0.0), 1),
        }
    statuses = Counter(
        str(r.status) if r.status else (r.error_code or "no response") for r in records
    )
    return {
        "url": url,
        "workload": workload.describe(),
        "concurrency": concurrency,
        "minutes": minutes,
        "interval_s": interval,
        "requests": len(records),
        "statuses": dict(statuses),
        "memory": growth,
        "samples": samples,
    }


def table(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"Soak: {result['minutes']:g} min at concurrency {result['concurrency']}, "
        f"{result['requests']} requests {result['statuses']}"
    )
    for column in (
        "process",
        "first minute MiB",
        "last minute MiB",
        "growth MiB",
        "growth %",
        "max MiB",
    ):
        t.add_column(column)
    for name, g in result["memory"].items():
        t.add_row(
            name,
            str(g["first_minute_mib"]),
            str(g["last_minute_mib"]),
            str(g["growth_mib"]),
            str(g["growth_percent"]),
            str(g["max_mib"]),
        )
    return t


def write(result: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [report.write_json(result, out_dir, "soak.json")]
    lines = [
        f"# Soak: {result['url']}",
        "",
        f"{result['minutes']:g} min, concurrency {result['concurrency']}, "
        f"{result['requests']} requests: {result['statuses']}",
        "",
        "| process | first minute MiB | last minute MiB | growth MiB | growth % | max MiB |",
        "|---|---|---|---|---|---|",
    ]
    for name, g in result["memory"].items():
        lines.append(
            f"| {name} | {g['first_minute_mib']} | {g['last_minute_mib']} | "
            f"{g['growth_mib']} | {g['growth_percent']} | {g['max_mib']} |"
        )
    md = out_dir / "soak.md"
    md.write_text("\n".join(lines) + "\n")
    paths.append(md)
    fig, ax = plt.subplots(figsize=(9, 4))
    samples = result["samples"]
    minutes = [s["t"] / 60 for s in samples]
    for name in sorted({n for s in samples for n in s["rss_mib"]}):
        ax.plot(minutes, [s["rss_mib"].get(name, 0.0) for s in samples], label=name)
    ax.plot(minutes, [s["total_mib"] for s in samples], label="total", linewidth=2)
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title(f"RSS under overload (concurrency {result['concurrency']})")
    ax.legend()
    paths.append(report.save_figure(fig, out_dir / "soak.png"))
    return paths
