"""tolk's own Prometheus metrics, in a registry of the app's (not the process-global one)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tolk.engine import EngineMetrics, ModelEngine
from tolk.engine.engine import EngineState
from tolk.server.gpu import GpuCollector
from tolk.translation.watch import PairWatch
from tolk.wire.prometheus import LATENCY_BUCKETS, OVERHEAD_BUCKETS

# Fine at small counts, where the right max_num_seqs is decided.
CONCURRENCY_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128, 192, 256, 512)
CONCURRENCY_SAMPLE_INTERVAL = 0.1
LOOP_SAMPLE_INTERVAL = 0.01
STALL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
LENGTH_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 160, 200, 256, 384, 512, 768, 1024, 2048, 4096)


class ServiceMetrics:
    """tolk's own metrics, every engine's (`engine_metrics`) and the GPUs', in one registry."""

    def __init__(self, engine_metrics: EngineMetrics, gpu: GpuCollector | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._http(self.registry)
        self._workload(self.registry)
        self._checks(self.registry)
        self.engines = EngineStates()
        self.registry.register(self.engines)
        self.pairs = PairStates()
        self.registry.register(self.pairs)
        self.own = (
            self.requests,
            self.latency,
            self.in_flight,
            self.overhead,
            self.texts,
            self.characters,
            self.concurrency,
            self.source_tokens,
            self.output_tokens,
            self.rejections,
            self.engines,
            self.pairs,
            self.loop_stall,
            self.loop_cpu,
            self.loop_stalls,
        )
        self.engine_metrics = engine_metrics
        self.registry.register(engine_metrics)
        self.gpu = gpu if gpu is not None else GpuCollector()
        self.registry.register(self.gpu)

    def _http(self, r: CollectorRegistry) -> None:
        """Requests, their latency and overhead, the event loop's stalls."""
        self.requests = Counter(
            "tolk_requests", "HTTP requests by route and status.", ["route", "status"], registry=r
        )
        self.latency = Histogram(
            "tolk_request_duration_seconds",
            "HTTP request latency, from the first byte received to the response sent.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "tolk_requests_in_flight", "HTTP requests being handled.", registry=r
        )
        self.overhead = Histogram(
            "tolk_overhead_seconds",
            "Time a /translate request spent outside the engine: parsing, validation, "
            "prompt building, tokenisation, serialisation.",
            ["model"],
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.loop_stall = Histogram(
            "tolk_event_loop_stall_seconds",
            f"How late the event loop woke a {LOOP_SAMPLE_INTERVAL * 1000:g} ms sleep, sampled "
            "continuously: the longest time one piece of work held the loop (every other "
            "request waits that long).",
            buckets=STALL_BUCKETS,
            registry=r,
        )
        self.loop_cpu = Counter(
            "tolk_event_loop_cpu_seconds",
            "CPU seconds the event loop's thread has used since the server started (every "
            "request's work on the loop: HTTP, checks, the engine's outputs); its rate is the "
            "loop's busy share of one core, 1 where the loop is what limits the server.",
            registry=r,
        )
        self.loop_stalls = Counter(
            "tolk_event_loop_stalls",
            "Steps that held the event loop longer than server.loop_stall_warning, each logged "
            "with its stack (tolk.server.loopwatch).",
            registry=r,
        )

    def _workload(self, r: CollectorRegistry) -> None:
        """What was translated, and the workload's shape `tolk tune` reads."""
        self.texts = Counter(
            "tolk_texts_translated", "Texts translated, by model.", ["model"], registry=r
        )
        self.characters = Counter(
            "tolk_characters_translated",
            "Characters of source text translated, by model.",
            ["model"],
            registry=r,
        )
        self.concurrency = Histogram(
            "tolk_concurrent_texts",
            f"Texts in the engine at once (submitted, not finished), sampled every "
            f"{CONCURRENCY_SAMPLE_INTERVAL:g} s whether busy or idle: the workload's "
            "concurrency, read by `tolk tune --from-server`.",
            ["model"],
            buckets=CONCURRENCY_BUCKETS,
            registry=r,
        )
        self.source_tokens = Histogram(
            "tolk_source_tokens",
            "Length of each source text in the model's tokens.",
            ["model", "pair"],
            buckets=LENGTH_BUCKETS,
            registry=r,
        )
        self.output_tokens = Histogram(
            "tolk_output_tokens",
            "Tokens generated for each text.",
            ["model", "pair"],
            buckets=LENGTH_BUCKETS,
            registry=r,
        )
        self.rejections = Counter(
            "tolk_admission_rejections",
            "Translation requests refused with 503 'overloaded' because the model held "
            "max_num_seqs + max_waiting texts (tolk's own admission control).",
            ["model"],
            registry=r,
        )

    def _checks(self, r: CollectorRegistry) -> None:
        """What the output checks found, retried and flagged."""
        self.output_problems = Counter(
            "tolk_output_problems",
            "Segments whose first output the checks found a problem in (off_target, "
            "foreign_script, echo, loop, truncated, cut_character, empty, placeholders, "
            "copied_example): "
            "before any retry.",
            ["model", "problem"],
            registry=r,
        )
        self.output_retries = Counter(
            "tolk_output_retries",
            "Segments tried a second time for a problem in their output; `mended`: the "
            "second try had none left.",
            ["model", "result"],
            registry=r,
        )
        self.memory = Counter(
            "tolk_memory_segments",
            "Segments looked up in the segment cache before the engine, by result: `hit` "
            "(answered from the cache, no engine work) or `miss` (translated, then remembered if "
            "it passed its checks).",
            ["model", "result"],
            registry=r,
        )
        self.flagged = Counter(
            "tolk_flagged_texts",
            "Texts returned with a warning (the `warnings` of tolk's API, X-Tolk-Warnings "
            "elsewhere), by warning code: suspect output never passes silently.",
            ["model", "code"],
            registry=r,
        )

    def start_models(self, engines: Sequence[ModelEngine]) -> None:
        """Watch these engines; every per-model counter gets its series (at 0) now, so
        rate() over it and alerts on it have data from the first scrape, not from the first
        translation or refusal."""
        self.engines.engines = engines
        for engine in engines:
            for counter in (self.texts, self.characters, self.rejections):
                counter.labels(engine.name)

    def exposition(self, names: Collection[str] = ()) -> bytes:
        """Prometheus text; with `names` only those families (`/metrics?name[]=...`, as
        prometheus_client's own handler offers; its restricted_registry cannot see inside
        the engine collector, so the filter is applied here)."""
        if not names:
            return generate_latest(self.registry)
        return generate_latest(_Only(self, set(names)))


class EngineStates(Collector):
    """tolk_engine_up, tolk_engine_state and tolk_engine_restarts_total, read from the
    engines when scraped (so they can never lag behind what the engines say); where an
    engine gathers new requests (engine.gather_ms), tolk_engine_gathered_requests_total,
    tolk_engine_gather_groups_total and tolk_engine_gather_wait_seconds_total."""

    def __init__(self) -> None:
        self.engines: Sequence[ModelEngine] = ()  # set once the engines have started

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "tolk_engine_up", "1 while the model's engine is alive, else 0.", labels=["model"]
        )
        states = GaugeMetricFamily(
            "tolk_engine_state",
            "1 for the state the model's engine is in (ready, dead, restarting, failed), "
            "0 for the others.",
            labels=["model", "state"],
        )
        restarts = CounterMetricFamily(
            "tolk_engine_restarts",
            "Restarts of the model's engine after it died.",
            labels=["model"],
        )
        gathered = CounterMetricFamily(
            "tolk_engine_gathered_requests",
            "Engine requests that waited to be handed to vLLM with their group "
            "(engine.gather_ms; only models that gather).",
            labels=["model"],
        )
        groups = CounterMetricFamily(
            "tolk_engine_gather_groups",
            "Groups of engine requests handed to vLLM together (engine.gather_ms).",
            labels=["model"],
        )
        waited = CounterMetricFamily(
            "tolk_engine_gather_wait_seconds",
            "Seconds engine requests waited for their group before reaching vLLM, all "
            "together (engine.gather_ms): over tolk_engine_gathered_requests_total, the mean "
            "wait.",
            labels=["model"],
        )
        for engine in self.engines:
            now = engine.state
            up.add_metric([engine.name], 1.0 if now == "ready" else 0.0)
            for state in get_args(EngineState):
                states.add_metric([engine.name, state], 1.0 if state == now else 0.0)
            if engine.restarts:  # a series appears with the first restart, as a Counter's
                restarts.add_metric([engine.name], engine.restarts)
            if engine.gather.interval > 0:
                gathered.add_metric([engine.name], engine.gather.gathered)
                groups.add_metric([engine.name], engine.gather.groups)
                waited.add_metric([engine.name], engine.gather.waited)
        yield from (up, states, restarts, gathered, groups, waited)


class PairStates(Collector):
    """What the translator learnt per language pair (tolk.translation.watch), read from its
    watches when scraped: each step's waste share and whether the pair skips it."""

    def __init__(self) -> None:
        self.watches: Mapping[str, PairWatch] = {}  # by step, set once the translator exists

    def collect(self) -> Iterator[Metric]:
        share = GaugeMetricFamily(
            "tolk_pair_waste_share",
            "Of a step's last outcomes for the pair, the share that was waste (examples: a "
            "first try copied one; markup_retry: no placeholder came back; markup_whole: a unit "
            "sent whole did not keep its markup).",
            labels=["model", "pair", "step"],
        )
        skipping = GaugeMetricFamily(
            "tolk_pair_skipping",
            "1 while the pair skips the step (save one time in 10), else 0; a markup step of "
            "a pair the model does not write is skipped before it has outcomes of its own "
            "(checks.markup_skip_unwritten).",
            labels=["model", "pair", "step"],
        )
        for step, watch in self.watches.items():
            for model, pair, waste, skips in watch.states():
                if waste is not None:  # (none before its first outcome: skipped as presumed)
                    share.add_metric([model, pair, step], waste)
                skipping.add_metric([model, pair, step], 1.0 if skips else 0.0)
        yield from (share, skipping)


class _Only:
    """A registry-like view holding only the named metric families."""

    def __init__(self, metrics: ServiceMetrics, names: set[str]) -> None:
        self.metrics = metrics
        self.names = names

    def collect(self) -> Iterator[Metric]:
        for collector in (*self.metrics.own, self.metrics.gpu):
            for family in collector.collect():
                if family.name in self.names:
                    yield family
        yield from self.metrics.engine_metrics.collect_only(self.names)
