"""`tolk bench journey`: the case study's architectures, one after another, on one engine.

Each architecture is started by the bench itself on the same model and configuration, driven
with the same workloads at the same concurrency, and stopped:
1. the Part 1 baseline (multiprocessing workers, one request at a time), 1 and 2 workers;
2. Part 2's static batching inside that worker (batch of 16, 50 ms collection timeout);
3. tolk itself, continuous batching, with max_num_seqs 64 and 16.
The baselines are comparisons (tolk.bench.baselines) and never used by `tolk serve`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.report import save_figure
from tolk.bench.run import progress_callback
from tolk.bench.stats import summarize
from tolk.bench.workloads import Workload
from tolk.config import load_config
from tolk.local.processes import LocalServer, free_port, start_tolk

SCHEMA = "tolk.bench.journey/1"


@dataclass(frozen=True)
class Architecture:
    key: str
    label: str
    kind: str  # "baseline" or "tolk"
    workers: int = 1
    batch_size: int = 1
    max_num_seqs: int | None = None


ARCHITECTURES = (
    Architecture("baseline-1-worker", "Baseline (multiprocessing, 1 worker)", "baseline"),
    Architecture(
        "baseline-2-workers", "Baseline (multiprocessing, 2 workers)", "baseline", workers=2
    ),
    Architecture("static-batching", "Static batching (16, 50 ms)", "baseline", batch_size=16),
    Architecture("tolk-64", "tolk, continuous batching, max_num_seqs=64", "tolk", max_num_seqs=64),
    Architecture("tolk-16", "tolk, continuous batching, max_num_seqs=16", "tolk", max_num_seqs=16),
)
BASELINE = ARCHITECTURES[0].key


def select(keys: Sequence[str] | None) -> tuple[Architecture, ...]:
    if not keys:
        return ARCHITECTURES
    known = {a.key: a for a in ARCHITECTURES}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"unknown architecture(s) {unknown}; choose from {list(known)}")
    return tuple(a for a in ARCHITECTURES if a.key in keys)


def start(
    arch: Architecture, config_path: Path, model: str, workdir: Path, timeout: float
) -> LocalServer:
    """Start `arch`; every architecture gets the same per-request `timeout`."""
    config = load_config(config_path)
    settings = next(m for m in config.models if m.name == model)
    if arch.kind == "tolk":
        server = config.server.model_copy(update={"request_timeout": timeout})
        config = config.model_copy(update={"server": server})
        engine = settings.engine.model_copy(update={"max_num_seqs": arch.max_num_seqs})
        return start_tolk(config, settings.model_copy(update={"engine": engine}), workdir, arch.key)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "tolk.bench.baselines.mp_server",
        "--config",
        str(config_path.resolve()),
        "--model",
        model,
        "--port",
        str(port),
        "--workers",
        str(arch.workers),
        "--batch-size",
        str(arch.batch_size),
        "--timeout",
        str(timeout),
    ]
    return LocalServer.start(
        command, port, workdir.resolve() / f"{arch.key}.log", cwd=workdir.resolve()
    )


async def run_journey(
    config_path: Path,
    model: str,
    workloads: Sequence[Workload],
    architectures: Sequence[Architecture],
    *,
    concurrency: int,
    requests: int | None,
    warmup: int,
    workdir: Path,
    duration: float | None = None,
    request_timeout: float = 300.0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run every architecture on every workload. `request_timeout` is each request's deadline on
    every architecture: generous by default, so that throughput is measured as capacity.
    (The case study's baseline used 30 s; on a CPU its queue at concurrency 25 exceeds that,
    and since it cannot cancel queued work, timed-out tasks still occupy the worker.)"""
    runs: list[dict[str, Any]] = []
    for arch in architectures:
        server = start(arch, config_path, model, workdir, request_timeout)
        try:
            async with loadgen.make_client(server.url, concurrency + 4) as client:
                for workload in workloads:
                    items = workload.stream()
                    if warmup:
                        await loadgen.closed_loop(client, items, concurrency, requests=warmup)
                    advance = progress_callback(progress, f"{arch.key} / {workload.name}", requests)
                    records, took = await loadgen.closed_loop(
                        client,
                        items,
                        concurrency,
                        requests=requests,
                        duration=duration,
                        progress=advance,
                    )
                    runs.append(
                        {
                            "architecture": arch.key,
                            "label": arch.label,
                            "workload": workload.name,
                            "summary": summarize(records, took, concurrency).to_json(),
                        }
                    )
        finally:
            server.stop()
    for run in runs:
        base = next(
            (r for r in runs if r["architecture"] == BASELINE and r["workload"] == run["workload"]),
            None,
        )
        base_rps = base["summary"]["rps"] if base else 0.0
        run["ratio_to_baseline"] = run["summary"]["rps"] / base_rps if base_rps else None
    return {
        "schema": SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": model,
        "config": str(config_path),
        "concurrency": concurrency,
        "requests_per_run": requests,
        "seconds_per_run": duration,
        "request_timeout_s": request_timeout,
        "workloads": [w.describe() for w in workloads],
        "runs": runs,
    }


def _row(run: dict[str, Any]) -> list[str]:
    s = run["summary"]
    ratio = run["ratio_to_baseline"]
    errors = ", ".join(f"{k}:{v}" for k, v in s["errors"].items()) or "0"
    return [
        run["label"],
        run["workload"],
        f"{s['rps']:.2f}",
        "-" if ratio is None else f"{ratio:.2f}x",
        f"{s['latency_s']['p50']:.2f}",
        f"{s['latency_s']['p95']:.2f}",
        errors,
    ]


HEADERS = ["architecture", "workload", "req/s", "vs baseline", "p50 s", "p95 s", "errors"]


def table(results: dict[str, Any]) -> Table:
    out = Table(title=f"The architecture journey, concurrency {results['concurrency']}")
    for header in HEADERS:
        out.add_column(header, justify="left" if header == "architecture" else "right")
    for run in results["runs"]:
        out.add_row(*_row(run))
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# The architecture journey",
        "",
        f"Model `{results['model']}` from `{results['config']}`, concurrency "
        f"{results['concurrency']}, "
        + (
            f"{results['requests_per_run']} requests per run."
            if results.get("requests_per_run")
            else f"{results['seconds_per_run']:g} s per run."
        ),
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *["| " + " | ".join(_row(run)) + " |" for run in results["runs"]],
        "",
        "![journey](journey.png)",
        "",
    ]
    return "\n".join(lines)


def chart(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["label"] for r in results["runs"]))
    workloads = list(dict.fromkeys(r["workload"] for r in results["runs"]))
    width = 0.8 / max(1, len(workloads))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, workload in enumerate(workloads):
        values = []
        for label in labels:
            run = next(
                (r for r in results["runs"] if r["label"] == label and r["workload"] == workload),
                None,
            )
            values.append(run["summary"]["rps"] if run else 0.0)
        xs = [x + i * width for x in range(len(labels))]
        bars = ax.bar(xs, values, width, label=workload)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks([x + width * (len(workloads) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(
        [label.replace(", ", ",\n").replace(" (", "\n(") for label in labels], fontsize=8
    )
    ax.set_ylabel("requests/s")
    ax.set_title(f"Throughput journey (concurrency {results['concurrency']})")
    ax.legend(title="workload")
    return save_figure(fig, path)


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "journey.json").write_text(json.dumps(results, indent=1))
    (out_dir / "journey.md").write_text(markdown(results))
    return [
        out_dir / "journey.json",
        out_dir / "journey.md",
        chart(results, out_dir / "journey.png"),
    ]
