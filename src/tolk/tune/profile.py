"""The workload a running tolk server has seen, read from its /metrics: how many texts were in
flight at once (tolk_concurrent_texts, sampled continuously) and how long the texts were
(tolk_source_tokens per language pair). `tolk tune --from-server` tunes for that."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tolk.bench.stats import histogram_quantile
from tolk.bench.workloads import WorkItem, Workload, english_span, english_words

FAMILIES = ("tolk_concurrent_texts", "tolk_source_tokens", "tolk_output_tokens")

Buckets = list[tuple[float, float]]  # cumulative (upper bound, count), by bound


@dataclass(frozen=True)
class Profile:
    model: str
    url: str
    quantile: float
    concurrency: int  # the quantile of in-flight texts while busy, rounded up
    busy_fraction: float  # share of samples with anything in flight
    samples: int
    texts: int
    source_tokens: dict[str, Buckets] = field(default_factory=dict)  # by pair
    source_tokens_mean: float = float("nan")
    output_tokens_mean: float = float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "url": self.url,
            "quantile": self.quantile,
            "concurrency": self.concurrency,
            "busy_fraction": self.busy_fraction,
            "samples": self.samples,
            "texts": self.texts,
            "pairs": {pair: b[-1][1] for pair, b in self.source_tokens.items()},
            "source_tokens_mean": self.source_tokens_mean,
            "output_tokens_mean": self.output_tokens_mean,
        }

    def workload(self, n: int = 200, seed: int = 0) -> Workload:
        """Texts whose lengths follow the served distribution, pair by pair in proportion.
        The text is case-study English prose cut to length (tolk never keeps what it
        translated), labelled with each pair's languages."""
        rng = random.Random(seed)
        words = english_words()
        cells: list[tuple[str, float, float, float]] = []  # pair, low, high, count
        for pair, buckets in self.source_tokens.items():
            low, below = 0.0, 0.0
            for bound, count in buckets:
                high = low * 2 if math.isinf(bound) else bound
                if count > below:
                    cells.append((pair, low, max(high, low + 1), count - below))
                low, below = (low if math.isinf(bound) else bound), count
        if not cells:
            raise ValueError(f"{self.url} has served no texts for model '{self.model}' yet")
        weights = [c[3] for c in cells]
        items = []
        for _ in range(n):
            pair, low, high, _count = rng.choices(cells, weights)[0]
            source, target = pair.split(">")
            tokens = rng.randint(int(low) + 1, max(int(low) + 1, int(high)))
            items.append(WorkItem(english_span(words, tokens, rng), source, target))
        return Workload(f"measured:{self.model}", tuple(items))


def _histograms(text: str, name: str, model: str, by: str | None) -> dict[str, Buckets]:
    """Cumulative buckets of histogram `name` for `model`, keyed by label `by` (or "")."""
    out: dict[str, dict[float, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            labels = sample.labels
            if sample.name != f"{name}_bucket" or labels.get("model") != model:
                continue
            out[labels.get(by, "") if by else ""][float(labels["le"])] = float(sample.value)
    return {key: sorted(b.items()) for key, b in out.items()}


def _mean(text: str, name: str, model: str) -> float:
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.labels.get("model") != model:
                continue
            if sample.name == f"{name}_sum":
                total += sample.value
            elif sample.name == f"{name}_count":
                count += sample.value
    return total / count if count else float("nan")


def busy_quantile(buckets: Buckets, q: float) -> tuple[float, float, float]:
    """(quantile of the samples with something in flight, busy share, samples in all).
    Idle samples (the le=0 bucket) are left out: a server idle at night still needs the
    batch size of its busy hours."""
    if not buckets:
        return float("nan"), 0.0, 0.0
    total = buckets[-1][1]
    idle = next((count for bound, count in buckets if bound == 0), 0.0)
    busy = [(bound, count - idle) for bound, count in buckets if bound > 0]
    if total <= idle:
        return float("nan"), 0.0, total
    return histogram_quantile(q, busy), (total - idle) / total, total


def read_profile(url: str, model: str | None = None, quantile: float = 0.95) -> Profile:
    base = url.rstrip("/")
    with httpx.Client(base_url=base, timeout=10) as client:
        languages = client.get("/models").raise_for_status().json()
        models = [m["model"] for m in languages["models"]]
        if model is None:
            model = models[0]
        elif model not in models:
            raise ValueError(f"{base} does not serve model '{model}'; it serves {models}")
        params = {"name[]": list(FAMILIES)}
        text = client.get("/metrics", params=params).raise_for_status().text
    concurrency_buckets = _histograms(text, "tolk_concurrent_texts", model, None).get("", [])
    value, busy, samples = busy_quantile(concurrency_buckets, quantile)
    if math.isnan(value):
        raise ValueError(
            f"{base} has recorded no texts in flight for model '{model}' yet; serve real "
            "traffic first, or give --concurrency and --workload"
        )
    sources = _histograms(text, "tolk_source_tokens", model, "pair")
    return Profile(
        model=model,
        url=base,
        quantile=quantile,
        concurrency=max(1, math.ceil(value - 1e-9)),
        busy_fraction=busy,
        samples=int(samples),
        texts=int(sum(b[-1][1] for b in sources.values())),
        source_tokens=sources,
        source_tokens_mean=_mean(text, "tolk_source_tokens", model),
        output_tokens_mean=_mean(text, "tolk_output_tokens", model),
    )
