"""Prometheus as every tolk HTTP process speaks it: the histogram buckets the server and the
proxy share (so their latencies can be compared bucket for bucket), and the exposition text
read back into values (prometheus_client's parser), as the proxy reads its upstreams' and the
benchmarks read a server's."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


@dataclass
class Snapshot:
    """Sample values summed over every model and engine, by (name, bucket bound or None)."""

    values: dict[tuple[str, str | None], float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # label sets summed per name

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        values: dict[tuple[str, str | None], float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = (sample.name, sample.labels.get("le"))
                values[key] += float(sample.value)
                counts[sample.name] += 1
        return cls(dict(values), dict(counts))

    def get(self, name: str, le: str | None = None) -> float:
        return self.values.get((name, le), 0.0)

    def mean(self, name: str) -> float | None:
        """The mean over a gauge's label sets (e.g. one per GPU), or None when absent."""
        found = self.counts.get(name, 0)
        return self.values[(name, None)] / found if found else None

    def buckets(self, name: str) -> list[tuple[float, str, float]]:
        """(upper bound, its `le` label as written, cumulative count), by bound."""
        out = [
            (float(le), le, v)
            for (n, le), v in self.values.items()
            if n == f"{name}_bucket" and le is not None
        ]
        return sorted(out)
