"""What the server's /metrics says about a load level: engine-side latencies from histogram
differences before and after, and a timeline of running/waiting requests sampled during it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import aiohttp

from tolk.bench.stats import histogram_quantile
from tolk.wire.prometheus import Snapshot

# Engine histograms reported per level: name -> short key in the report.
ENGINE_HISTOGRAMS = {
    "vllm:request_queue_time_seconds": "queue_time_s",
    "vllm:time_to_first_token_seconds": "ttft_s",
    "vllm:inter_token_latency_seconds": "inter_token_s",
    "vllm:e2e_request_latency_seconds": "e2e_s",
}


def engine_summary(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """Engine-side figures for what happened between two snapshots."""
    out: dict[str, float] = {}
    for name, key in ENGINE_HISTOGRAMS.items():
        count = after.get(f"{name}_count") - before.get(f"{name}_count")
        total = after.get(f"{name}_sum") - before.get(f"{name}_sum")
        if count <= 0:
            continue
        deltas = [
            (bound, value - before.get(f"{name}_bucket", le))
            for bound, le, value in after.buckets(name)
        ]
        out[f"{key}_mean"] = total / count
        out[f"{key}_p50"] = histogram_quantile(0.5, deltas)
        out[f"{key}_p95"] = histogram_quantile(0.95, deltas)
    out["preemptions"] = after.get("vllm:num_preemptions_total") - before.get(
        "vllm:num_preemptions_total"
    )
    return out


# Only these are fetched while a level runs: a full exposition costs the server milliseconds
# of event-loop time, which would show up as overhead in the very latencies being measured.
GPU_UTILIZATION = "tolk_gpu_utilization_percent"  # present only where the server has a GPU
TIMELINE = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    GPU_UTILIZATION,
]
TIMELINE_QUERY = [("name[]", name) for name in TIMELINE]


@dataclass(frozen=True)
class TimelinePoint:
    t: float
    running: float
    waiting: float
    kv_cache: float
    gpu_util: float | None = None  # mean over the server's GPUs, percent; None without NVML


class TimelineSampler:
    """Samples running/waiting requests and KV cache usage every `interval` seconds."""

    def __init__(self, client: aiohttp.ClientSession, interval: float = 0.25) -> None:
        self.client = client
        self.interval = interval
        self.points: list[TimelinePoint] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0

    async def _run(self) -> None:
        while True:
            try:
                async with self.client.get("/metrics", params=TIMELINE_QUERY) as response:
                    snap = Snapshot.parse(await response.text())
                self.points.append(
                    TimelinePoint(
                        round(time.monotonic() - self._t0, 3),
                        snap.get("vllm:num_requests_running"),
                        snap.get("vllm:num_requests_waiting"),
                        snap.get("vllm:kv_cache_usage_perc"),
                        snap.mean(GPU_UTILIZATION),
                    )
                )
            except (aiohttp.ClientError, TimeoutError):
                pass  # a missed sample is a gap in the chart, not a failed benchmark
            await asyncio.sleep(self.interval)

    def start(self, t0: float) -> None:
        self._t0 = t0
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> list[TimelinePoint]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.points


async def snapshot(client: aiohttp.ClientSession) -> Snapshot:
    async with client.get("/metrics") as response:
        return Snapshot.parse(await response.text())
