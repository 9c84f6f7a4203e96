"""The decisions `tolk tune` makes, as plain functions over measured points: when to stop the
sweep, which setting to recommend under an SLO, and what the evidence says is wasted.

The sweep follows the case study's procedure: raise max_num_seqs step by step while watching
throughput and tail latency, and stop once throughput has stopped improving and latency is
rising.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MiB = 2**20


@dataclass(frozen=True)
class Point:
    """One measured setting. `rps`, `p50` and `p95` are what the sweep ranks and the SLO
    reads, in the traffic's terms (`TRAFFIC`): requests for sentences, documents for
    documents; for mixed traffic the throughput is output tokens/s of both kinds together and
    the latency is the sentences' (while documents run). The other traffic's figures beside."""

    max_num_seqs: int
    max_num_batched_tokens: int
    rps: float
    p50: float
    p95: float
    errors: int = 0
    ttft_p95: float | None = None
    inter_token_mean: float | None = None
    preemptions: float = 0.0
    kv_peak: float = float("nan")  # fraction of the KV cache in use at the peak
    seconds: float = 0.0  # wall time to measure it, engine start-up included
    phase: str = "sweep"  # sweep | batched_tokens | scheduling | full
    scheduling: str = "fcfs"  # the engine's scheduling policy (EngineSettings.scheduling)
    failed: str | None = None  # why the setting could not be measured (e.g. engine refused it)
    documents_per_s: float | None = None  # documents and mixed traffic
    segments_per_s: float | None = None
    document_p95: float | None = None
    segments_per_document: int | None = None  # the most segments one document brought
    overloaded_retries: int = 0  # documents refused (503) and sent again after Retry-After
    sentence_rps: float | None = None  # mixed traffic: the sentences' requests/s with documents
    sentence_p95_alone: float | None = None  # ... and their p95 before documents arrived

    @property
    def setting(self) -> tuple[int, int]:
        return (self.max_num_seqs, self.max_num_batched_tokens)


@dataclass(frozen=True)
class StopRule:
    """When the sweep has seen enough.

    Upwards (`order="up"`, the case study's literal procedure, 1, 2, 4, ...): stop when
    throughput has not improved by `min_gain` since the best setting so far and the last
    point's p95 is `latency_rise` above that setting's; or, whatever latency does, after
    `patience` settings without improvement. Once max_num_seqs reaches `concurrency` (the
    texts in flight being tuned for), larger values schedule exactly the same batches (there
    is never more to run) and only reserve more, so the sweep ends there too.

    Downwards (`order="down"`, the default): the sweep starts at the smallest setting that
    covers `concurrency` and halves. A smaller setting that is as fast is better (less KV
    cache and scheduler work), so it goes on while throughput holds, and stops once it has
    fallen by `min_gain` below the best with p95 risen by `latency_rise` (smaller settings
    only queue more), or after `patience` settings in a row below the best.
    """

    min_gain: float = 0.03
    latency_rise: float = 0.05
    patience: int = 2
    concurrency: int | None = None
    order: str = "up"
    unit: str = "req/s"  # the throughput's unit, for the reasons given

    def sequence(self, candidates: Sequence[int]) -> list[int]:
        """The candidates in the order this rule sweeps them."""
        ascending = sorted(set(candidates))
        if self.order == "up":
            return ascending
        covering = [c for c in ascending if self.concurrency is None or c >= self.concurrency]
        start = covering[0] if covering else ascending[-1]
        return [c for c in reversed(ascending) if c <= start]

    def _decide_down(self, measured: Sequence[Point]) -> str | None:
        best = max(measured, key=lambda p: p.rps)
        floor = best.rps * (1 - self.min_gain)
        worse = 0
        for point in reversed(measured):
            if point.rps >= floor:
                break
            worse += 1
        if worse == 0:
            return None
        last = measured[-1]
        if last.p95 > best.p95 * (1 + self.latency_rise):
            return (
                f"throughput fell below max_num_seqs {best.max_num_seqs}'s ({best.rps:.2f} -> "
                f"{last.rps:.2f} {self.unit} at {last.max_num_seqs}) and p95 rose "
                f"{(last.p95 / best.p95 - 1) * 100:.0f}% ({best.p95:.2f} -> {last.p95:.2f} s); "
                "smaller settings only queue more"
            )
        if worse >= self.patience:
            return (
                f"{worse} settings in a row below max_num_seqs {best.max_num_seqs}'s "
                f"{best.rps:.2f} {self.unit}"
            )
        return None

    def reference(self, points: Sequence[Point]) -> int:
        """Index of the last point that improved on its predecessor best by min_gain."""
        ref = 0
        for i in range(1, len(points)):
            if points[i].rps > points[ref].rps * (1 + self.min_gain):
                ref = i
        return ref

    def decide(self, points: Sequence[Point]) -> str | None:
        """Why the sweep should stop after `points` (in sweep order), or None to go on."""
        measured = [p for p in points if p.failed is None]
        if not measured:
            return None
        if self.order == "down":
            return self._decide_down(measured)
        last = measured[-1]
        if self.concurrency is not None and last.max_num_seqs >= self.concurrency:
            return (
                f"max_num_seqs {last.max_num_seqs} already covers the {self.concurrency} texts "
                "in flight; larger values run the same batches and only reserve more"
            )
        ref = self.reference(measured)
        since = len(measured) - 1 - ref
        if since == 0:
            return None
        best = measured[ref]
        if last.p95 > best.p95 * (1 + self.latency_rise):
            return (
                f"throughput stopped improving after max_num_seqs {best.max_num_seqs} "
                f"({best.rps:.2f} {self.unit}; {last.rps:.2f} at {last.max_num_seqs}) and p95 rose "
                f"{(last.p95 / best.p95 - 1) * 100:.0f}% ({best.p95:.2f} -> {last.p95:.2f} s)"
            )
        if since >= self.patience:
            return (
                f"throughput has not improved by {self.min_gain:.0%} in {since} settings after "
                f"max_num_seqs {best.max_num_seqs} ({best.rps:.2f} {self.unit})"
            )
        return None


# What each kind of traffic ranks by and which latency its SLO reads.
TRAFFIC = {
    "sentences": ("req/s", "request p95"),
    "documents": ("documents/s", "document p95"),
    "mixed": ("output tokens/s", "sentence p95 beside documents"),
}


@dataclass(frozen=True)
class Slo:
    p95: float | None = None
    ttft: float | None = None
    document_p95: float | None = None  # mixed traffic: the documents' own p95

    def met_by(self, point: Point) -> bool:
        if point.failed is not None or point.errors > 0:
            return False
        if self.p95 is not None and not point.p95 <= self.p95:
            return False
        if self.document_p95 is not None and not (
            point.document_p95 is not None and point.document_p95 <= self.document_p95
        ):
            return False
        if self.ttft is not None:
            return point.ttft_p95 is not None and point.ttft_p95 <= self.ttft
        return True

    def describe(self) -> str:
        parts = []
        if self.p95 is not None:
            parts.append(f"p95 <= {self.p95:g} s")
        if self.ttft is not None:
            parts.append(f"TTFT p95 <= {self.ttft:g} s")
        if self.document_p95 is not None:
            parts.append(f"document p95 <= {self.document_p95:g} s")
        return ", ".join(parts) or "none (no errors)"


@dataclass(frozen=True)
class Choice:
    point: Point
    met_slo: bool
    reason: str


def choose(points: Sequence[Point], slo: Slo, tie: float = 0.03, unit: str = "req/s") -> Choice:
    """The highest-throughput setting that meets the SLO. Settings within `tie` of the best
    count as equal (the machine's noise), and among them the smallest wins: the same
    throughput for less KV cache and scheduler work, the case study's 16 over 64. Without any
    setting meeting the SLO: the one with the lowest p95, flagged."""
    measured = [p for p in points if p.failed is None]
    if not measured:
        raise ValueError("no setting could be measured")
    ok = [p for p in measured if slo.met_by(p)]
    if not ok:
        best = min(measured, key=lambda p: (p.errors, p.p95))
        return Choice(
            best,
            False,
            f"no setting met the SLO ({slo.describe()}); this one came closest "
            f"(p95 {best.p95:.2f} s, {best.errors} errors)",
        )
    top = max(ok, key=lambda p: p.rps)
    near = [p for p in ok if p.rps >= top.rps * (1 - tie)]
    chosen = min(near, key=lambda p: p.setting)
    reason = (
        f"highest throughput meeting the SLO ({slo.describe()}): {chosen.rps:.2f} {unit}, "
        f"p95 {chosen.p95:.2f} s"
    )
    if chosen is not top:
        reason += (
            f"; max_num_seqs {top.max_num_seqs}/batched tokens {top.max_num_batched_tokens} "
            f"measured {top.rps:.2f} {unit}, within {tie:.0%} (noise), so the smaller setting wins"
        )
    return Choice(chosen, True, reason)


@dataclass(frozen=True)
class Waste:
    kind: str  # kv_cache_unused | preemptions
    message: str
    kv_cache_bytes: int | None = None  # a suggested KV cache size, where one can be given


def waste(point: Point, kv_cache_bytes: int | None, *, headroom: float = 1.5) -> list[Waste]:
    """What the chosen setting's evidence says about memory: KV cache that stays mostly empty
    (give it back) and preemptions (too little of it). `kv_cache_bytes`: the configured size,
    or None where vLLM sizes it from gpu_memory_utilization."""
    out: list[Waste] = []
    if point.preemptions > 0:
        out.append(
            Waste(
                "preemptions",
                f"{point.preemptions:.0f} preemptions at max_num_seqs {point.max_num_seqs}: the "
                "KV cache is too small for this setting; raise kv_cache_memory_bytes (or "
                "gpu_memory_utilization) or lower max_num_seqs",
            )
        )
    elif not math.isnan(point.kv_peak) and point.kv_peak < 0.5:
        if kv_cache_bytes is not None:
            suggested = max(
                64 * MiB,
                math.ceil(point.kv_peak * headroom * kv_cache_bytes / (64 * MiB)) * 64 * MiB,
            )
            out.append(
                Waste(
                    "kv_cache_unused",
                    f"the KV cache peaked at {point.kv_peak:.0%} of {kv_cache_bytes / MiB:.0f} "
                    f"MiB; {suggested / MiB:.0f} MiB holds this load with {headroom:g}x headroom "
                    f"and gives back {(kv_cache_bytes - suggested) / MiB:.0f} MiB",
                    suggested if suggested < kv_cache_bytes else None,
                )
            )
        else:
            out.append(
                Waste(
                    "kv_cache_unused",
                    f"the KV cache peaked at {point.kv_peak:.0%}: a lower "
                    "gpu_memory_utilization would serve this load and free GPU memory",
                )
            )
    return out
