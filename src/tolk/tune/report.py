"""tune.json beside tune.md, tune.png and recommended.yaml.

tune.json (schema "tolk.tune/1"): schema, started_at, config, model, concurrency, source
{kind: "given" | "server", ...profile}, workload {...}, slo {p95_s, ttft_s}, rule {min_gain,
latency_rise, patience, concurrency}, candidates, per_point {duration_s, requests},
points [{max_num_seqs, max_num_batched_tokens, rps, p50, p95, errors, ttft_p95,
inter_token_mean, preemptions, kv_peak, seconds, phase, failed}],
sweep {measured, skipped, stop_reason, seconds}, choice {max_num_seqs, max_num_batched_tokens,
rps, p95_s, met_slo, reason}, waste [{kind, message, kv_cache_bytes}], recommended_engine {...},
comparison (null, or {full_choice, full_best_rps, early_choice_max_num_seqs,
early_choice_rps_in_full, ratio_to_full_best, early_seconds, full_seconds, early_points,
full_points}).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from tolk.bench.report import json_safe, save_figure

HEADERS = [
    "phase",
    "max_num_seqs",
    "batched tokens",
    "req/s",
    "p50 s",
    "p95 s",
    "errors",
    "TTFT p95 s",
    "ITL mean ms",
    "preempt",
    "KV peak %",
    "time s",
    "",
]


def _f(value: Any, digits: int = 2, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value * scale:.{digits}f}"


# Beside the sentence columns, for documents and mixed traffic.
DOCUMENT_HEADERS = ["sched", "docs/s", "segments/s", "doc p95 s", "retries"]
MIXED_HEADERS = ["sentence p95 alone s"]


def headers(results: dict[str, Any]) -> list[str]:
    traffic = results.get("traffic", "sentences")
    unit = results.get("unit", "req/s")
    out = [unit if h == "req/s" else h for h in HEADERS[:-1]]
    if traffic != "sentences":
        out += DOCUMENT_HEADERS
    if traffic == "mixed":
        out += MIXED_HEADERS
    return [*out, ""]


def row(results: dict[str, Any], point: dict[str, Any]) -> list[str]:
    cells = point_row(point, results["choice"])
    traffic = results.get("traffic", "sentences")
    extra = []
    if traffic != "sentences":
        extra += [
            point.get("scheduling", "fcfs"),
            _f(point.get("documents_per_s")),
            _f(point.get("segments_per_s"), 1),
            _f(point.get("document_p95")),
            str(point.get("overloaded_retries", 0)),
        ]
    if traffic == "mixed":
        extra.append(_f(point.get("sentence_p95_alone")))
    return cells[:-1] + extra + cells[-1:]


def point_row(point: dict[str, Any], choice: dict[str, Any] | None = None) -> list[str]:
    chosen = (
        choice is not None
        and point["phase"] != "full"
        and point["max_num_seqs"] == choice["max_num_seqs"]
        and point["max_num_batched_tokens"] == choice["max_num_batched_tokens"]
        and point.get("scheduling", "fcfs") == choice.get("scheduling", "fcfs")
    )
    note = "failed: " + point["failed"] if point.get("failed") else ("<- chosen" if chosen else "")
    return [
        point["phase"],
        str(point["max_num_seqs"]),
        str(point["max_num_batched_tokens"]),
        _f(point["rps"]),
        _f(point["p50"]),
        _f(point["p95"]),
        str(point["errors"]),
        _f(point["ttft_p95"]),
        _f(point["inter_token_mean"], 1, 1000),
        _f(point["preemptions"], 0),
        _f(point["kv_peak"], 1, 100),
        _f(point["seconds"], 0),
        note,
    ]


def table(results: dict[str, Any]) -> Table:
    out = Table(title=title(results))
    for header in headers(results):
        out.add_column(header, justify="right" if header not in ("phase", "sched", "") else "left")
    for point in results["points"]:
        out.add_row(*row(results, point))
    out.caption = summary_lines(results)[0]
    return out


def title(results: dict[str, Any]) -> str:
    traffic = results.get("traffic", "sentences")
    text = f"tolk tune: {results['model']}, {traffic} traffic, "
    if traffic == "documents":
        return text + f"{results['concurrency']} {results['workload']['name']} at once"
    text += f"{results['workload']['name']} workload at concurrency {results['concurrency']}"
    if traffic == "mixed":
        text += f" beside {results['document_concurrency']} {results['documents']['name']} at once"
    return text


def snippet(results: dict[str, Any]) -> str:
    """The recommended settings as YAML to merge into the server config."""
    head = [
        f"# {title(results)} ({results['started_at']})",
        f"# {results['choice']['reason']}",
        "# Merge into the server config's entry for this model.",
    ]
    body = {"models": [{"name": results["model"], "engine": results["recommended_engine"]}]}
    return "\n".join(head) + "\n" + yaml.safe_dump(body, sort_keys=False)


def slo_text(slo: dict[str, Any]) -> str:
    parts = [
        f"{label} <= {slo[key]:g} s"
        for key, label in (
            ("p95_s", "p95"),
            ("ttft_s", "TTFT p95"),
            ("document_p95_s", "document p95"),
        )
        if slo.get(key) is not None
    ]
    return ", ".join(parts) or "none (any setting without errors)"


def summary_lines(results: dict[str, Any]) -> list[str]:
    c = results["choice"]
    lines = [
        f"recommended: max_num_seqs {c['max_num_seqs']}, max_num_batched_tokens "
        f"{c['max_num_batched_tokens']}: {c['reason']}"
    ]
    if not c["met_slo"]:
        lines.append("WARNING: no measured setting met the SLO")
    sweep = results["sweep"]
    if sweep["stop_reason"]:
        skipped = f", never ran {sweep['skipped']}" if sweep["skipped"] else ""
        lines.append(
            f"sweep stopped after max_num_seqs {sweep['measured'][-1]}{skipped}: "
            f"{sweep['stop_reason']}"
        )
    if results.get("scheduling"):
        lines.append(results["scheduling"]["reason"])
    lines += [f"WARNING: {w}" for w in results.get("warnings", [])]
    lines += [f"{w['kind']}: {w['message']}" for w in results["waste"]]
    cmp = results.get("comparison")
    if cmp:
        lines.append(
            f"full sweep check: the early sweep's choice (max_num_seqs "
            f"{cmp['early_choice_max_num_seqs']}) measured {cmp['early_choice_rps_in_full']:.2f}"
            f" req/s in the full sweep, {cmp['ratio_to_full_best']:.1%} of the full sweep's best"
            f" under the SLO ({cmp['full_best_rps']:.2f}); the early-stopping sweep measured "
            f"{cmp['early_points']} settings in {cmp['early_seconds']:.0f} s, the full sweep "
            f"{cmp['full_points']} in {cmp['full_seconds']:.0f} s "
            f"({cmp['early_seconds'] / cmp['full_seconds']:.0%} of the time)"
        )
    return lines


def markdown(results: dict[str, Any]) -> str:
    columns = headers(results)
    lines = [
        f"# {title(results)}",
        "",
        f"- started: {results['started_at']}",
        f"- config: {results['config']}",
        f"- concurrency: {results['concurrency']} ({results['source'].get('kind', 'given')})",
        f"- workload: {json.dumps(results['workload'])}",
    ]
    if results.get("documents"):
        lines.append(
            f"- documents beside: {json.dumps(results['documents'])}, "
            f"{results['document_concurrency']} at once"
        )
    lines += [
        f"- ranked by: {results.get('unit', 'req/s')}; latency: "
        f"{results.get('latency', 'request p95')}",
        f"- SLO: {slo_text(results['slo'])}",
        f"- per point: {json.dumps(results['per_point'])}",
        "",
        "| " + " | ".join(h or "note" for h in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(row(results, p)) + " |" for p in results["points"]]
    lines += ["", *[f"- {line}" for line in summary_lines(results)], ""]
    lines += ["```yaml", snippet(results).rstrip(), "```", "", "Chart: tune.png.", ""]
    return "\n".join(lines)


def chart(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rps, ax_p95) = plt.subplots(1, 2, figsize=(11, 4))
    for phase, style in (("sweep", "o-"), ("full", "s--")):
        pts = [p for p in results["points"] if p["phase"] == phase and not p.get("failed")]
        if not pts:
            continue
        xs = [p["max_num_seqs"] for p in pts]
        label = "early-stopping sweep" if phase == "sweep" else "full sweep"
        ax_rps.plot(xs, [p["rps"] for p in pts], style, label=label)
        ax_p95.plot(xs, [p["p95"] for p in pts], style, label=label)
    c = results["choice"]
    ax_rps.plot([c["max_num_seqs"]], [c["rps"]], "*", markersize=16, color="gold", label="chosen")
    slo = results["slo"]["p95_s"]
    if slo is not None:
        ax_p95.axhline(slo, color="red", linestyle=":", label=f"SLO p95 {slo:g} s")
    ticks = sorted({p["max_num_seqs"] for p in results["points"]})
    unit, latency = results.get("unit", "requests/s"), results.get("latency", "p95 latency")
    for ax, ylabel in ((ax_rps, unit), (ax_p95, f"{latency} (s)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("max_num_seqs")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title(results), fontsize=10)
    return save_figure(fig, path)


def write(results: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "tune.json", out_dir / "tune.md", out_dir / "recommended.yaml"]
    written[0].write_text(json.dumps(json_safe(results), indent=1))
    written[1].write_text(markdown(results))
    written[2].write_text(snippet(results))
    written.append(chart(results, out_dir / "tune.png"))
    return written
