"""`tolk bench gpu-compare`: GPU utilisation over time, side by side, from `tolk bench run`s.

The case study's tell-tale picture: its multiprocessing baseline kept the GPU "spiky" (93%,
0%, 93%: waiting for work behind queues and IPC) while continuous batching kept it steady.
Given the results of `tolk bench run` against two servers (say the baseline and tolk, at the
same load), this draws each one's sampled GPU utilisation at one level, one panel each on a
shared time axis, and summarises how steady it was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from tolk.bench.report import save_figure

SCHEMA = "tolk.bench.gpu-compare/1"
IDLE_BELOW = 20.0  # percent: a sample under this is the GPU waiting for work


def steadiness(values: Sequence[float]) -> dict[str, float]:
    """Mean, standard deviation, and the share of samples under IDLE_BELOW percent."""
    if not values:
        return {"samples": 0}
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    idle = sum(1 for v in values if v < IDLE_BELOW) / len(values)
    return {
        "samples": len(values),
        "mean": mean,
        "stdev": spread,
        "idle_share": idle,
        "min": min(values),
        "max": max(values),
    }


def level_of(results: dict[str, Any], level: float) -> dict[str, Any]:
    for entry in results["levels"]:
        if float(entry["level"]) == level:
            return dict(entry)
    known = ", ".join(f"{e['level']:g}" for e in results["levels"])
    raise ValueError(f"{results.get('url')}: no level {level:g} (it has {known})")


def compare(runs: Sequence[tuple[str, dict[str, Any]]], level: float) -> dict[str, Any]:
    out = []
    for label, results in runs:
        measured = level_of(results, level)
        points = [p for p in measured["timeline"] if p.get("gpu_util") is not None]
        out.append(
            {
                "label": label,
                "url": results.get("url"),
                "series": [(p["t"], p["gpu_util"], p.get("running")) for p in points],
                "summary": steadiness([p["gpu_util"] for p in points]),
                "rps": measured["summary"]["rps"],
            }
        )
    return {"schema": SCHEMA, "level": level, "runs": out}


def chart(comparison: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = comparison["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * len(runs)), sharex=True)
    axes = list(axes) if len(runs) > 1 else [axes]
    for ax, run in zip(axes, runs, strict=True):
        ts = [p[0] for p in run["series"]]
        util = [p[1] for p in run["series"]]
        ax.fill_between(ts, util, step="mid", alpha=0.35)
        ax.plot(ts, util, drawstyle="steps-mid", linewidth=0.9)
        s = run["summary"]
        detail = (
            f"mean {s['mean']:.0f}%, sd {s['stdev']:.0f}, {s['idle_share']:.0%} of samples "
            f"< {IDLE_BELOW:g}%, {run['rps']:.2f} req/s"
            if s.get("samples")
            else "no GPU samples"
        )
        ax.set_title(f"{run['label']}: {detail}", fontsize=10, loc="left")
        ax.set_ylim(0, 105)
        ax.set_ylabel("GPU util %")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds into the level")
    fig.suptitle(f"GPU utilisation at concurrency {comparison['level']:g}")
    return save_figure(fig, path)


def table(comparison: dict[str, Any]) -> Table:
    out = Table(title=f"GPU utilisation at level {comparison['level']:g}")
    for header in ("server", "req/s", "samples", "mean %", "sd", f"< {IDLE_BELOW:g}%"):
        out.add_column(header, justify="left" if header == "server" else "right")
    for run in comparison["runs"]:
        s = run["summary"]
        if not s.get("samples"):
            out.add_row(run["label"], f"{run['rps']:.2f}", "0", "-", "-", "-")
            continue
        out.add_row(
            run["label"],
            f"{run['rps']:.2f}",
            str(s["samples"]),
            f"{s['mean']:.0f}",
            f"{s['stdev']:.0f}",
            f"{s['idle_share']:.0%}",
        )
    return out


def write(comparison: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / "gpu-compare.json"
    data.write_text(json.dumps(comparison, indent=1))
    return [data, chart(comparison, out_dir / "gpu-compare.png")]
