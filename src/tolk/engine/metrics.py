"""Keeping every engine's `vllm:*` metrics when one process holds several engines.

vLLM registers its metrics in prometheus_client's default REGISTRY, and each new AsyncLLM
first unregisters whatever `vllm:*` collectors are there, so a second engine hides the
first one's metrics. The first engine's stat logger still holds and updates its metric
objects, though; they are only no longer registered. So right after each engine starts,
tolk takes the `vllm:*` collectors it registered out of the default registry and keeps them
per model, and exposes them all through one collector that merges samples of the same name
into one metric family (Prometheus forbids a family appearing twice).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

VLLM_PREFIX = "vllm:"


def _registered_vllm_collectors() -> list[Collector]:
    # prometheus_client has no public way to list collectors; vLLM itself reads this
    # attribute (vllm/v1/metrics/prometheus.py) for the same purpose.
    return [
        collector
        for collector in list(REGISTRY._collector_to_names)
        if str(getattr(collector, "_name", "")).startswith(VLLM_PREFIX)
    ]


class EngineMetrics(Collector):
    """The `vllm:*` metrics of every engine in this process, each sample labelled by model."""

    def __init__(self) -> None:
        self._by_model: dict[str, list[Collector]] = {}

    def adopt(self, model_name: str) -> int:
        """Take the collectors the engine for `model_name` just registered; returns how many."""
        found = _registered_vllm_collectors()
        for collector in found:
            REGISTRY.unregister(collector)
        self._by_model[model_name] = found
        return len(found)

    def forget(self, model_name: str) -> None:
        self._by_model.pop(model_name, None)

    def collect(self) -> Iterator[Metric]:
        return self.collect_only(None)

    def collect_only(self, names: Collection[str] | None) -> Iterator[Metric]:
        """The merged families; with `names`, only those (the rest are never collected,
        which matters: collecting every vLLM histogram takes milliseconds)."""
        families: dict[str, Metric] = {}
        for model, collectors in self._by_model.items():
            for collector in collectors:
                if names is not None and str(getattr(collector, "_name", "")) not in names:
                    continue
                for family in collector.collect():
                    merged = families.get(family.name)
                    if merged is None:
                        merged = Metric(family.name, family.documentation, family.type, family.unit)
                        families[family.name] = merged
                    for sample in family.samples:
                        if sample.labels.get("model_name") != model:
                            sample = sample._replace(labels={**sample.labels, "model_name": model})
                        merged.samples.append(sample)
        yield from families.values()
