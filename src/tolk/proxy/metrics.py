"""The proxy's Prometheus metrics: requests and latency, retries, ejections, and each
upstream's health, circuit and load (read from the pool at scrape time)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from tolk.proxy.upstream import Circuit, Upstream
from tolk.proxy.upstreams import UpstreamPool
from tolk.wire.prometheus import LATENCY_BUCKETS, OVERHEAD_BUCKETS

CIRCUIT_VALUES = {Circuit.CLOSED: 0, Circuit.HALF_OPEN: 1, Circuit.OPEN: 2}


class ProxyMetrics:
    def __init__(self, pool: UpstreamPool) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "tolk_proxy_requests",
            "Requests answered by the proxy, by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "tolk_proxy_request_duration_seconds",
            "Time from request received to response sent, retries included.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.added = Histogram(
            "tolk_proxy_added_seconds",
            "Time a forwarded request spent in the proxy rather than waiting on upstreams.",
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.upstream_requests = Counter(
            "tolk_proxy_upstream_requests",
            "Attempts sent to each upstream, by outcome (HTTP status, or the connection error).",
            ["upstream", "outcome"],
            registry=r,
        )
        self.upstream_latency = Histogram(
            "tolk_proxy_upstream_duration_seconds",
            "Round trip of each attempt to an upstream.",
            ["upstream"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.retries = Counter(
            "tolk_proxy_retries",
            "Attempts retried on another upstream, by reason.",
            ["reason"],
            registry=r,
        )
        self.ejections = Counter(
            "tolk_proxy_ejections",
            "Times an upstream was taken out of rotation, by reason (health_check, "
            "circuit_open, shutting_down, overloaded).",
            ["upstream", "reason"],
            registry=r,
        )
        r.register(_UpstreamState(pool))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _UpstreamState:
    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        families = {
            "up": GaugeMetricFamily(
                "tolk_proxy_upstream_healthy", "1 while active checks pass.", labels=["upstream"]
            ),
            "circuit": GaugeMetricFamily(
                "tolk_proxy_upstream_circuit",
                "Circuit breaker: 0 closed, 1 half-open, 2 open.",
                labels=["upstream"],
            ),
            "outstanding": GaugeMetricFamily(
                "tolk_proxy_upstream_outstanding",
                "Requests this proxy has in flight there.",
                labels=["upstream"],
            ),
            "waiting": GaugeMetricFamily(
                "tolk_proxy_upstream_queue_waiting",
                "Its engines' waiting requests, as last scraped.",
                labels=["upstream"],
            ),
            "kv": GaugeMetricFamily(
                "tolk_proxy_upstream_kv_cache_usage",
                "Its engines' KV cache use (0-1), as last scraped.",
                labels=["upstream"],
            ),
        }
        pairs = GaugeMetricFamily(
            "tolk_proxy_pair_upstreams_healthy",
            "Healthy upstreams serving each language pair (source>target) that some known "
            "upstream serves: 0 means that pair's requests fail here.",
            labels=["pair"],
        )
        healthy: dict[str, int] = {}
        upstream: Upstream
        for upstream in list(self.pool.upstreams.values()):
            label = [upstream.url]
            families["up"].add_metric(label, 1.0 if upstream.up else 0.0)
            families["circuit"].add_metric(label, CIRCUIT_VALUES[upstream.breaker.state])
            families["outstanding"].add_metric(label, upstream.outstanding)
            families["waiting"].add_metric(label, upstream.waiting)
            families["kv"].add_metric(label, upstream.kv_usage)
            for pair in {p for m in upstream.models.values() for p in m.pairs}:
                healthy[pair] = healthy.get(pair, 0) + (1 if upstream.up else 0)
        for pair, count in sorted(healthy.items()):
            pairs.add_metric([pair], count)
        yield from families.values()
        yield pairs
