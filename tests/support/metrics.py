"""Reading a server's Prometheus metrics."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out.append((dict(sample.labels), float(sample.value)))
    return out


async def metric_value(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    response = await client.get("/metrics")
    total = 0.0
    for sample_labels, value in metric_samples(response.text, name):
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            total += value
    return total
