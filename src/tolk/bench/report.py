"""Reports: results.json beside a readable report.md and PNG charts.

results.json (schema "tolk.bench.run/1"):
  schema, started_at (ISO 8601), url, mode ("closed" | "open"), workload {name, items,
  approx_tokens_min/max/mean, pairs}, generator_ceiling_rps, warnings [str],
  levels: [{
    level (concurrency, or arrivals per second in open mode),
    summary {requests, ok, errors {status: count}, duration_s, rps, output_tokens_per_s,
             latency_s {p50, p95, p99, mean}, completion_tokens, overhead_ms {p50, p95},
             overhead_steady_ms {p50, p95} (closed loop: without the level's opening burst),
             proxy_added_ms {p50, p95} (through a tolk proxy: latency minus its upstream time)},
    engine {queue_time_s_*, ttft_s_*, inter_token_s_*, e2e_s_* (mean, p50, p95),
            preemptions, kv_cache_peak, running_peak, waiting_peak,
            gpu_util_mean, gpu_util_peak (percent; only where the server reports NVML)},
    timeline [{t, running, waiting, kv_cache, gpu_util (percent or null)}],
    records [{start, latency, status, error_code, chars_in, chars_out, prompt_tokens,
              completion_tokens, engine_seconds}]
  }]
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.table import Table

SCHEMA = "tolk.bench.run/1"


def _fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def level_rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for level in results["levels"]:
        s, e = level["summary"], level["engine"]
        errors = ", ".join(f"{k}:{v}" for k, v in s["errors"].items()) or "0"
        rows.append(
            [
                f"{level['level']:g}",
                str(s["requests"]),
                errors,
                _fmt(s["rps"]),
                _fmt(s["output_tokens_per_s"], 0),
                _fmt(s["latency_s"]["p50"]),
                _fmt(s["latency_s"]["p95"]),
                _fmt(s["latency_s"]["p99"]),
                _fmt(s["overhead_ms"].get("p50", float("nan")), 1),
                _fmt(s["overhead_ms"].get("p95", float("nan")), 1),
                _fmt(s.get("overhead_steady_ms", {}).get("p95", float("nan")), 1),
                _fmt(e.get("ttft_s_p50", float("nan"))),
                _fmt(e.get("inter_token_s_mean", float("nan")) * 1000, 1),
                _fmt(e.get("queue_time_s_mean", float("nan"))),
                _fmt(e.get("preemptions", 0.0), 0),
                _fmt(e.get("kv_cache_peak", float("nan")) * 100, 1),
                _fmt(e.get("running_peak", 0.0), 0),
                _fmt(e.get("gpu_util_mean", float("nan")), 0),
            ]
        )
    return rows


HEADERS = [
    "level",
    "requests",
    "errors",
    "req/s",
    "out tok/s",
    "p50 s",
    "p95 s",
    "p99 s",
    "overhead p50 ms",
    "overhead p95 ms",
    "steady p95 ms",
    "TTFT p50 s",
    "ITL mean ms",
    "queue mean s",
    "preempt",
    "KV peak %",
    "running peak",
    "GPU util %",
]


def table(results: dict[str, Any]) -> Table:
    level_name = "concurrency" if results["mode"] == "closed" else "arrivals/s"
    out = Table(title=f"tolk bench: {results['workload']['name']} against {results['url']}")
    for header in [level_name, *HEADERS[1:]]:
        out.add_column(header, justify="right")
    for row in level_rows(results):
        out.add_row(*row)
    return out


def markdown(results: dict[str, Any]) -> str:
    level_name = "concurrency" if results["mode"] == "closed" else "arrivals/s"
    headers = [level_name, *HEADERS[1:]]
    lines = [
        f"# tolk bench: {results['workload']['name']}",
        "",
        f"- server: {results['url']}",
        f"- started: {results['started_at']}",
        f"- mode: {results['mode']} loop",
        f"- workload: {json.dumps(results['workload'])}",
        f"- load generator ceiling: {results['generator_ceiling_rps']:.0f} req/s (GET /health)",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in level_rows(results)]
    if results["warnings"]:
        lines += ["", "Warnings:", *[f"- {w}" for w in results["warnings"]]]
    lines += ["", "Charts: levels.png, latency_over_time.png, timeline.png.", ""]
    return "\n".join(lines)


def charts(results: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    level_name = "concurrency" if results["mode"] == "closed" else "arrivals per second"
    levels = results["levels"]
    xs = [lv["level"] for lv in levels]
    written = []

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, [lv["summary"]["rps"] for lv in levels], "o-", color="tab:blue")
    ax.set_xlabel(level_name)
    ax.set_ylabel("requests/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(xs, [lv["summary"]["latency_s"]["p95"] for lv in levels], "s--", color="tab:red")
    ax2.set_ylabel("p95 latency (s)", color="tab:red")
    ax.set_title(f"Throughput and p95 latency: {results['workload']['name']}")
    written.append(save_figure(fig, out_dir / "levels.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    offset = 0.0
    for lv in levels:
        records = [r for r in lv["records"] if r["status"] == 200]
        ax.scatter(
            [offset + r["start"] + r["latency"] for r in records],
            [r["latency"] for r in records],
            s=6,
            label=f"{lv['level']}",
        )
        offset += lv["summary"]["duration_s"]
    ax.set_xlabel("time into the run (s), levels one after another")
    ax.set_ylabel("response time (s)")
    ax.set_title("Response time over the run")
    ax.legend(title=level_name, fontsize=7, markerscale=2)
    written.append(save_figure(fig, out_dir / "latency_over_time.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    offset = 0.0
    for i, lv in enumerate(levels):
        points = lv["timeline"]
        ts = [offset + p["t"] for p in points]
        ax.plot(
            ts,
            [p["running"] for p in points],
            color="tab:green",
            label="running" if i == 0 else None,
        )
        ax.plot(
            ts,
            [p["waiting"] for p in points],
            color="tab:orange",
            label="waiting" if i == 0 else None,
        )
        offset += lv["summary"]["duration_s"]
        ax.axvline(offset, color="grey", linewidth=0.5)
    ax.set_xlabel("time into the run (s), levels one after another")
    ax.set_ylabel("engine requests")
    ax.set_title("Engine utilisation: running and waiting requests")
    ax.legend(loc="upper left")
    _plot_gpu(ax, levels)
    written.append(save_figure(fig, out_dir / "timeline.png"))
    return written


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write as PNG and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_gpu(ax: Any, levels: list[dict[str, Any]]) -> None:
    """GPU utilisation on a second axis, where the server reported it."""
    ts: list[float] = []
    util: list[float] = []
    offset = 0.0
    for lv in levels:
        for p in lv["timeline"]:
            if p.get("gpu_util") is not None:
                ts.append(offset + p["t"])
                util.append(p["gpu_util"])
        offset += lv["summary"]["duration_s"]
    if not util:
        return
    gpu_ax = ax.twinx()
    gpu_ax.plot(ts, util, color="tab:purple", linewidth=0.8, label="GPU util %")
    gpu_ax.set_ylim(0, 100)
    gpu_ax.set_ylabel("GPU utilisation (%)")
    gpu_ax.legend(loc="upper right")


def json_safe(value: Any) -> Any:
    """JSON has no NaN: write null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def write_json(results: dict[str, Any], out_dir: Path, name: str) -> Path:
    """A measurement's results as `out_dir/name` (the directory made if needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(json.dumps(json_safe(results), indent=1))
    return path


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(json_safe(results), indent=1))
    (out_dir / "report.md").write_text(markdown(results))
    return [out_dir / "results.json", out_dir / "report.md", *charts(results, out_dir)]
