"""Statistics over request records: throughput, latency percentiles, errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass(frozen=True)
class RequestRecord:
    start: float  # seconds since the level began
    latency: float  # seconds, as the client saw it
    status: int  # HTTP status; 0 when no response arrived (connection error)
    error_code: str | None = None
    chars_in: int = 0
    chars_out: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    engine_seconds: float | None = None  # from the server's Server-Timing header
    upstream_seconds: float | None = None  # through a tolk proxy: its round trip upstream

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def overhead(self) -> float | None:
        """Client-side latency not spent in the engine: HTTP, parsing, tolk's own work."""
        if self.engine_seconds is None:
            return None
        return max(0.0, self.latency - self.engine_seconds)

    @property
    def proxy_added(self) -> float | None:
        """Through a proxy: client-side latency not spent waiting on the upstream."""
        if self.upstream_seconds is None:
            return None
        return max(0.0, self.latency - self.upstream_seconds)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


@dataclass(frozen=True)
class Latency:
    p50: float
    p95: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Latency:
        mean = float(np.mean(values)) if values else float("nan")
        return cls(percentile(values, 50), percentile(values, 95), percentile(values, 99), mean)


@dataclass(frozen=True)
class LevelSummary:
    requests: int
    ok: int
    errors: dict[str, int]
    duration_s: float
    rps: float  # successful requests per second
    output_tokens_per_s: float
    latency_s: Latency
    completion_tokens: int = 0  # output tokens of the successful requests
    overhead_ms: dict[str, float] = field(default_factory=dict)
    # The same without a closed loop's opening burst (its first `concurrency` requests, sent
    # at the same instant and so queued behind each other in the server's event loop).
    overhead_steady_ms: dict[str, float] = field(default_factory=dict)
    proxy_added_ms: dict[str, float] = field(default_factory=dict)  # only through a proxy

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def summarize(records: Sequence[RequestRecord], duration: float, burst: int = 0) -> LevelSummary:
    """Statistics of one level; `burst` is how many requests opened it at once (a closed
    loop's concurrency), left out of `overhead_steady_ms`."""
    ok = [r for r in records if r.ok]
    after_burst = sorted(ok, key=lambda r: r.start)[burst:]
    steady = [o * 1000 for r in after_burst if (o := r.overhead) is not None]
    errors = Counter(str(r.status) if r.status else "connection" for r in records if not r.ok)
    overheads = [o * 1000 for r in ok if (o := r.overhead) is not None]
    added = [a * 1000 for r in ok if (a := r.proxy_added) is not None]
    return LevelSummary(
        requests=len(records),
        ok=len(ok),
        errors=dict(sorted(errors.items())),
        duration_s=duration,
        rps=len(ok) / duration if duration > 0 else 0.0,
        output_tokens_per_s=sum(r.completion_tokens for r in ok) / duration if duration else 0.0,
        latency_s=Latency.of([r.latency for r in ok]),
        completion_tokens=sum(r.completion_tokens for r in ok),
        overhead_ms=_p50_p95(overheads),
        overhead_steady_ms=_p50_p95(steady),
        proxy_added_ms=_p50_p95(added),
    )


def _p50_p95(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)} if values else {}


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets: the
    quantile q (0-1) by linear interpolation inside the bucket that holds it."""
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound
