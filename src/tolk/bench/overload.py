"""`tolk bench overload`: how a server (or proxy) sheds a burst, side by side with the same
load without the excess.

Waves, alternating: a *baseline* wave of `capacity` requests sent at once (what the server
admits: max_num_seqs + max_waiting one-segment texts), then a *burst* wave of
`factor x capacity` requests sent at once, then a *floor* wave: `capacity` translations and
the excess as GET /health at the same moment (the cheapest answer the server gives under
that load: what no refusal can beat, client and machine included).

The waves go out through a lean HTTP/1.1 client (tolk.bench.burst: connections opened
before each wave, requests encoded before it starts), so that a burst's timings are the
server's, not the client's; `client="aiohttp"` sends them through the load generator's
aiohttp session instead, for comparison.

Reported: how fast the refusals of the burst waves answer (p50/p95), and the admitted
requests' latency in burst waves against baseline waves (p50/p95 and their ratio).
Alternating the waves in one run keeps the comparison fair on a noisy machine.

Then, optionally, the event loop's stalls under a documents workload: the server samples
its loop's lag every 10 ms into `tolk_event_loop_stall_seconds`; the histogram's change
over the phase gives the longest stall (as the bucket it fell in) and the p99.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.table import Table

from tolk.bench import report
from tolk.bench.burst import Answer, Burst
from tolk.bench.loadgen import closed_loop, get_text, make_client, send
from tolk.bench.stats import RequestRecord, percentile
from tolk.bench.workloads import WorkItem, Workload
from tolk.wire.prometheus import Snapshot

Progress = Callable[[str], None]
STALL_METRIC = "tolk_event_loop_stall_seconds"


def _p(values: Sequence[float], q: float) -> float | None:
    return round(percentile(values, q), 4) if values else None


Client = Literal["lean", "aiohttp"]


class _Lean:
    """Waves through tolk.bench.burst (the default)."""

    def __init__(self, url: str) -> None:
        self.burst = Burst(url)

    async def wave(self, items: list[WorkItem]) -> list[RequestRecord]:
        return (await self.burst.translations(items))[0]

    async def floor(self, items: list[WorkItem], excess: int) -> list[float]:
        _, probes = await self.burst.translations(items, [self.burst.get("/health")] * excess)
        return [latency for latency, answer in probes if isinstance(answer, Answer)]


class _Pooled:
    """Waves through the load generator's aiohttp session, for comparison."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def wave(self, items: list[WorkItem]) -> list[RequestRecord]:
        t0 = time.monotonic()
        return list(await asyncio.gather(*(send(self.session, "/translate", i, t0) for i in items)))

    async def floor(self, items: list[WorkItem], excess: int) -> list[float]:
        t0 = time.monotonic()

        async def health() -> float:
            started = time.monotonic()
            async with self.session.get("/health") as response:
                await response.read()
            return time.monotonic() - started

        translations = [send(self.session, "/translate", item, t0) for item in items]
        answers = await asyncio.gather(*translations, *(health() for _ in range(excess)))
        return [a for a in answers if isinstance(a, float)]


async def _stalls(client: Any) -> dict[float, float]:
    """The loop-stall histogram's cumulative bucket counts, by upper bound."""
    status, text = await get_text(client, "/metrics", **{"name[]": STALL_METRIC})
    if status != 200:
        return {}
    return {bound: count for bound, _, count in Snapshot.parse(text).buckets(STALL_METRIC)}


def stall_summary(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Samples per bucket over a phase: the longest stall's bucket and the p99 bound."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if not total:
        return {"samples": 0}
    per_bucket = [c - (counts[i - 1] if i else 0.0) for i, c in enumerate(counts)]
    longest = max(i for i, c in enumerate(per_bucket) if c > 0)
    p99 = next(b for b, c in zip(bounds, counts, strict=True) if c >= 0.99 * total)
    lower = bounds[longest - 1] if longest else 0.0
    return {
        "samples": int(total),
        "longest_stall_between_s": [lower, bounds[longest]],
        "p99_stall_at_most_s": p99,
        "over_10ms": int(total - next(c for b, c in zip(bounds, counts, strict=True) if b >= 0.01)),
    }


@dataclass(frozen=True)
class DocumentsLoad:
    """Whole documents in a closed loop after the waves, for the event loop's stalls."""

    workload: Workload
    seconds: float
    concurrency: int


@dataclass(frozen=True)
class OverloadPlan:
    url: str
    workload: Workload
    capacity: int
    factor: float
    waves: int
    documents: DocumentsLoad | None = None
    client: Client = "lean"

    @property
    def burst(self) -> int:
        return math.ceil(self.capacity * self.factor)


@dataclass
class _Waves:
    baseline: list[RequestRecord]
    bursts: list[RequestRecord]
    floor: list[float]


async def _waves(plan: OverloadPlan, session: Any, progress: Progress) -> _Waves:
    """Each wave: `capacity` requests, then `burst`, then `capacity` beside the excess as
    GET /health (the cheapest answer the server gives under the same load, a refusal's
    floor); one wave of `capacity` first, to fill caches."""
    items = itertools.cycle(plan.workload.items)
    found = _Waves([], [], [])

    def take(n: int) -> list[WorkItem]:
        return [next(items) for _ in range(n)]

    sender = _Lean(plan.url) if plan.client == "lean" else _Pooled(session)
    await sender.wave(take(plan.capacity))  # warm-up: caches filled
    for number in range(plan.waves):
        progress(f"wave {number + 1}/{plan.waves}: {plan.capacity} requests, then {plan.burst}")
        found.baseline += await sender.wave(take(plan.capacity))
        found.bursts += await sender.wave(take(plan.burst))
        found.floor += await sender.floor(take(plan.capacity), plan.burst - plan.capacity)
    return found


async def _document_stalls(docs: DocumentsLoad, session: Any, progress: Progress) -> dict[str, Any]:
    progress(f"documents workload for {docs.seconds:g} s: loop stalls")
    before = await _stalls(session)
    records, seconds = await closed_loop(
        session, itertools.cycle(docs.workload.items), docs.concurrency, duration=docs.seconds
    )
    after = await _stalls(session)
    return {
        "workload": docs.workload.describe(),
        "concurrency": docs.concurrency,
        "seconds": round(seconds, 1),
        "requests": len(records),
        "ok": sum(r.ok for r in records),
        # Two large documents can together hold more places than the capacity.
        "refused": sum(r.status == 503 for r in records),
        **stall_summary(before, after),
    }


def _latencies(records: list[RequestRecord], refused: bool = False) -> list[float]:
    if refused:
        return [r.latency for r in records if r.status in (503, 429)]
    return [r.latency for r in records if r.ok]


def _summary(plan: OverloadPlan, found: _Waves) -> dict[str, Any]:
    refused = _latencies(found.bursts, refused=True)
    admitted_burst, admitted_base = _latencies(found.bursts), _latencies(found.baseline)
    other = sorted(
        {
            f"{r.status} {r.error_code or ''}".strip()
            for r in found.baseline + found.bursts
            if not r.ok and r.status not in (503, 429)
        }
    )
    result: dict[str, Any] = {
        "url": plan.url,
        "client": plan.client,
        "workload": plan.workload.describe(),
        "capacity": plan.capacity,
        "factor": plan.factor,
        "waves": plan.waves,
        "baseline": {
            "requests": len(found.baseline),
            "admitted": len(admitted_base),
            "admitted_p50_s": _p(admitted_base, 50),
            "admitted_p95_s": _p(admitted_base, 95),
        },
        "burst": {
            "requests": len(found.bursts),
            "admitted": len(admitted_burst),
            "refused": len(refused),
            "refused_p50_s": _p(refused, 50),
            "refused_p95_s": _p(refused, 95),
            "refused_max_s": _p(refused, 100),
            "admitted_p50_s": _p(admitted_burst, 50),
            "admitted_p95_s": _p(admitted_burst, 95),
        },
        "health_floor": {
            "requests": len(found.floor),
            "p50_s": _p(found.floor, 50),
            "p95_s": _p(found.floor, 95),
        },
        "other_failures": other,
    }
    base_p50, burst_p50 = result["baseline"]["admitted_p50_s"], result["burst"]["admitted_p50_s"]
    base_p95, burst_p95 = result["baseline"]["admitted_p95_s"], result["burst"]["admitted_p95_s"]
    if base_p50 and burst_p50 and base_p95 and burst_p95:
        result["admitted_ratio_p50"] = round(burst_p50 / base_p50, 3)
        result["admitted_ratio_p95"] = round(burst_p95 / base_p95, 3)
    return result


async def measure(plan: OverloadPlan, progress: Progress) -> dict[str, Any]:
    """The waves, then the documents' stalls if asked: the report's figures."""
    async with make_client(plan.url, connections=plan.burst, timeout=600) as session:
        found = await _waves(plan, session, progress)
        stalls = await _document_stalls(plan.documents, session, progress) if plan.documents else {}
    result = _summary(plan, found)
    if stalls:
        result["documents_loop_stalls"] = stalls
    return result


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def table(result: dict[str, Any]) -> Table:
    b, x = result["baseline"], result["burst"]
    t = Table(
        title=f"Overload: waves of {result['capacity']} vs {x['requests'] // result['waves']}"
    )
    for column in (
        "wave",
        "requests",
        "admitted",
        "refused",
        "refused p50/p95 ms",
        "admitted p50/p95 ms",
    ):
        t.add_column(column)
    t.add_row(
        "baseline",
        str(b["requests"]),
        str(b["admitted"]),
        "0",
        "-",
        f"{_ms(b['admitted_p50_s'])} / {_ms(b['admitted_p95_s'])}",
    )
    t.add_row(
        "burst",
        str(x["requests"]),
        str(x["admitted"]),
        str(x["refused"]),
        f"{_ms(x['refused_p50_s'])} / {_ms(x['refused_p95_s'])}",
        f"{_ms(x['admitted_p50_s'])} / {_ms(x['admitted_p95_s'])}",
    )
    f = result["health_floor"]
    t.add_row(
        "floor (/health)",
        str(f["requests"]),
        "-",
        "-",
        f"{_ms(f['p50_s'])} / {_ms(f['p95_s'])}",
        "-",
    )
    return t


def write(result: dict[str, Any], out_dir: Path) -> list[Path]:
    paths = [report.write_json(result, out_dir, "overload.json")]
    lines = [
        f"# Overload: {result['url']}",
        "",
        f"capacity {result['capacity']}, burst x{result['factor']:g}, {result['waves']} waves each",
        "",
        "| wave | requests | admitted | refused | refused p50 / p95 (ms) "
        "| admitted p50 / p95 (ms) |",
        "|---|---|---|---|---|---|",
    ]
    b, x = result["baseline"], result["burst"]
    lines.append(
        f"| baseline | {b['requests']} | {b['admitted']} | 0 | - | "
        f"{_ms(b['admitted_p50_s'])} / {_ms(b['admitted_p95_s'])} |"
    )
    lines.append(
        f"| burst | {x['requests']} | {x['admitted']} | {x['refused']} | "
        f"{_ms(x['refused_p50_s'])} / {_ms(x['refused_p95_s'])} | "
        f"{_ms(x['admitted_p50_s'])} / {_ms(x['admitted_p95_s'])} |"
    )
    f = result["health_floor"]
    lines.append(
        f"| floor: GET /health beside {result['capacity']} translations | "
        f"{f['requests']} | - | - | {_ms(f['p50_s'])} / {_ms(f['p95_s'])} | - |"
    )
    if "admitted_ratio_p50" in result:
        lines += [
            "",
            f"admitted latency, burst / baseline: p50 x{result['admitted_ratio_p50']}, "
            f"p95 x{result['admitted_ratio_p95']}",
        ]
    stalls = result.get("documents_loop_stalls")
    if stalls and stalls.get("samples"):
        low, high = stalls["longest_stall_between_s"]
        lines += [
            "",
            f"event loop under the documents workload ({stalls['requests']} requests, "
            f"{stalls['seconds']} s): longest stall {low * 1000:g}-{high * 1000:g} ms, "
            f"p99 <= {stalls['p99_stall_at_most_s'] * 1000:g} ms, "
            f"{stalls['over_10ms']} of {stalls['samples']} samples over 10 ms",
        ]
    path = out_dir / "overload.md"
    path.write_text("\n".join(lines) + "\n")
    paths.append(path)
    return paths
