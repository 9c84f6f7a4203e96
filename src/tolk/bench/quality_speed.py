"""Speed beside quality in `tolk bench quality`: each system's passes over the same units timed,
with the GPU and the engine sampled through them, and tolk's ratio to the baseline first.

A user moving from raw `vllm serve` to tolk compares two things at once: how good the
translations are and how many of them the GPU gives per second. `--rounds N` sends every unit
to every system N times, the systems alternating (tolk first in odd rounds, the baseline first
in even ones, so neither always meets a warm or a cold GPU); the baseline stays up through the
run. `--variants` adds tolk servers started from the same config with one feature switched
off (`examples-off`, `checks-off`, `retry-off`), one at a time, each alternating with the
baseline: what each feature costs is a measured line, not a guess. Quality is scored on each
system's first pass; every pass counts for speed.

Sampled every SAMPLE_INTERVAL seconds while a pass runs: the GPUs' utilisation through NVML on
this machine (the servers started here run on it; absent without an NVIDIA driver) and the
engine's running and waiting requests from the server's own /metrics (vLLM's gauges, which
both tolk and vLLM's OpenAI server publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tolk.bench.scrape import TIMELINE_QUERY
from tolk.config import ModelSettings, SamplingSettings, TolkConfig
from tolk.wire.prometheus import Snapshot

SAMPLE_INTERVAL = 0.25
BASELINE = "openai"


Variant = Callable[[TolkConfig], TolkConfig]


def _each(change_model: Callable[[ModelSettings], ModelSettings]) -> Variant:
    """The config with every model changed alike."""

    def change(config: TolkConfig) -> TolkConfig:
        return config.model_copy(update={"models": tuple(map(change_model, config.models))})

    return change


def _model(update: Mapping[str, Any]) -> Variant:
    return _each(lambda m: m.model_copy(update=dict(update)))


def _examples(count: int) -> Variant:
    return _model({"prompt_examples": count})


def _part(part: str, update: Mapping[str, Any]) -> Variant:
    """`update` to one part of every model's settings (`checks`, `candidates`, `engine`)."""
    return _each(
        lambda m: m.model_copy(update={part: getattr(m, part).model_copy(update=dict(update))})
    )


def _checks(update: Mapping[str, Any]) -> Variant:
    return _part("checks", update)


def _engine(update: Mapping[str, Any]) -> Variant:
    return _part("engine", update)


def _compiled(update: Mapping[str, Any]) -> Variant:
    """`update` merged into each model's vLLM compilation_config (engine.extra_args)."""

    def change(m: ModelSettings) -> ModelSettings:
        extra = dict(m.engine.extra_args)
        extra["compilation_config"] = {**extra.get("compilation_config", {}), **update}
        return m.model_copy(update={"engine": m.engine.model_copy(update={"extra_args": extra})})

    return _each(change)


def _server(update: Mapping[str, Any]) -> Variant:
    def change(config: TolkConfig) -> TolkConfig:
        return config.model_copy(update={"server": config.server.model_copy(update=dict(update))})

    return change


# The features a variant switches off, every model of the config alike.
VARIANTS: dict[str, Variant] = {
    "examples-off": _examples(0),  # no human translations shown before the text
    # One shown, not two: half the examples' prompt tokens (shorter prompts, faster engine
    # steps: docs/benchmarks.md §24).
    "examples-1": _examples(1),
    # Two examples, each at most 90 characters (about examples-1's prompt tokens).
    "examples-short": _model({"prompt_example_chars": 90}),
    # Two examples, their turns the sentence alone (the instruction once, with the text).
    "examples-bare": _model({"prompt_example_turns": "bare"}),
    # Both: two short examples in bare turns (about 60% of the shipped prompt's tokens).
    "examples-bare-short": _model({"prompt_example_turns": "bare", "prompt_example_chars": 90}),
    "checks-off": _checks({"enabled": False}),  # no output checks, so no retries either
    "retry-off": _checks({"retry": False}),  # checked and flagged, never tried again
    # Retries sampled rather than greedy with a repetition penalty: vLLM applies penalties to
    # a whole engine step's batch once any sequence in it has one (every sequence's output
    # tokens padded into a tensor on the CPU, every step).
    "retry-sampled": _checks({"retry_sampling": SamplingSettings(temperature=0.7, top_p=0.95)}),
    # Markup segments not told in a system message which links and code spans to keep.
    "markup-untold": _model({"placeholders_told": False}),
    # A markup unit whose placeholders did not come back retried once, not as 4 candidates.
    "markup-one-retry": _checks({"markup_candidates": 1}),
    # The markup retry's candidates each an engine request of its own, the first back
    # without a problem kept and the others aborted (checks.markup_first_clean), rather
    # than one request with `n`, all waited for.
    "markup-first-clean": _checks({"markup_first_clean": True}),
    # Retries greedy, without the repetition penalty: while any sequence of a batch has a
    # penalty, vLLM (0.26 on the GPU, async scheduling) waits each step for the previous
    # step's tokens to reach the CPU and pads every sequence's output tokens into a tensor.
    "retry-greedy": _checks({"retry_sampling": SamplingSettings()}),
    # Every retry done, however rarely a pair's retries mend (checks.retry_min_mended).
    "retry-always": _checks({"retry_min_mended": 0.0}),
    # Every first try as usual (greedy, the examples shown where the model does not copy
    # them), however often its pair's retries replace it (checks.first_as_retry_limit).
    "first-as-usual": _checks({"first_as_retry_limit": 1.0}),
    # A sampled twin beside the greedy first try of a segment with placeholders, or none
    # (`candidates.markup_n` 2 or 1: the hedge, tolk.translation.run.SegmentRun._hedged).
    "markup-twin": _part("candidates", {"markup_n": 2}),
    "markup-twin-off": _part("candidates", {"markup_n": 1}),
    # The twin for every segment with placeholders, not only those with enough pairs
    # (`candidates.markup_twin_pairs` 0; the GPU config ships 3).
    "markup-twin-every": _part("candidates", {"markup_twin_pairs": 0}),
    # Two sampled twins beside such a segment's greedy first try, not one (`markup_n` 3): a
    # unit whose greedy output lost a placeholder is done in the first round more often.
    "markup-twins-2": _part("candidates", {"markup_n": 3}),
    # Every markup unit sent whole first, however rarely its pair's units keep their markup
    # so (checks.markup_skip_limit: else those with emphasis start without it).
    "markup-whole-always": _checks({"markup_skip_limit": 1.0}),
    # A pair the model does not write (its plain first tries go as retries) takes every
    # markup step until the markup watches have outcomes of their own, not skipping them
    # from its first unit on (checks.markup_skip_unwritten).
    "markup-unwritten-learnt": _checks({"markup_skip_unwritten": False}),
    # Such a pair's markup units sent run by run from the start, not as whole sentences
    # first (checks.markup_split_unwritten; docs/benchmarks.md §33 measured it as shipped,
    # beside this ladder as `markup-unwritten-whole`).
    "markup-split-unwritten": _checks({"markup_split_unwritten": True}),
    # A markup unit's plain-text fallback asked for after its markup retry, not beside it.
    "fallback-late": _checks({"markup_fallback_early": False}),
    # Whole-step CUDA graphs for steps that read prompts too (GPU with FlashAttention 3), not
    # only for steps that only decode: vLLM's default runs the layers between attention calls
    # as graphs there and pays each call on the CPU. Measured in docs/benchmarks.md §26:
    # steps twice as fast, and wrong translations (vLLM 0.26, H200), so not shipped. (Merged
    # into the config's compilation_config: with the shipped 2,048 captures, not §26's 512.)
    "cudagraph-full": _compiled({"cudagraph_mode": "FULL"}),
    # vLLM's graphs captured for steps of up to 512 (vLLM's default), 1,024 or 2,048 tokens
    # (the real-model GPU config ships 2,048 with `gather-50`, §27): a larger step (a burst of
    # new prompts) runs with no graph at all: 12-14% of the engine core's time in the first
    # passes of §26, 0.1-1.4% of the steps after them (§27).
    "cudagraph-1024": _compiled({"max_cudagraph_capture_size": 1024}),
    "cudagraph-2048": _compiled({"max_cudagraph_capture_size": 2048}),
    "cudagraph-512": _compiled({"max_cudagraph_capture_size": 512}),  # vLLM's default here
    # New engine requests handed to vLLM in groups every 10, 25 or 50 ms while more than
    # engine.gather_above are in flight, so that fewer steps read prompts (tolk.engine.gather);
    # `gather-off`: each at once, as vLLM's own server does. A group's prompts make one larger
    # step, which a larger cudagraph variant beside it keeps in graphs
    # (`gather-50+cudagraph-2048`; `gather-off+cudagraph-512` is vLLM's default throughout).
    "gather-off": _engine({"gather_ms": 0}),
    "gather-10": _engine({"gather_ms": 10}),
    "gather-25": _engine({"gather_ms": 25}),
    "gather-50": _engine({"gather_ms": 50}),
    # Every group waits out its milliseconds, however full (`engine.gather_most` 0; 32 goes
    # at once by default).
    "gather-whole": _engine({"gather_most": 0}),
    # Every request's texts parsed, planned and put back in the preparation threads, however
    # small (`server.inline_chars: 0`): three hand-offs to a thread and back a request.
    "inline-off": _server({"inline_chars": 0}),
}


def known(name: str) -> bool:
    """A variant's name: one of VARIANTS, or several joined by '+' (each once)."""
    parts = name.split("+")
    return len(set(parts)) == len(parts) and all(part in VARIANTS for part in parts)


def variant(name: str) -> Variant:
    """The config change `name` makes: its parts (joined by '+') applied left to right."""

    def change(config: TolkConfig) -> TolkConfig:
        for part in name.split("+"):
            config = VARIANTS[part](config)
        return config

    return change


def variant_name(system: str, variant: str | None) -> str:
    return f"{system}[{variant}]" if variant else system


class _Nvml:
    """Mean utilisation of the GPUs NVML sees (nvidia-ml-py, a dependency of tolk's own
    metrics); None where NVML cannot start (no NVIDIA driver)."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        try:
            import pynvml  # type: ignore[import-untyped]

            pynvml.nvmlInit()
            self.nvml: Any = pynvml
            self.handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
        except Exception:  # ImportError, or NVMLError without a driver
            self.handles = []

    def utilization(self) -> float | None:
        if not self.handles:
            return None
        try:
            values = [self.nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles]
        except Exception:  # a GPU fallen off the bus: no sample, not a failed run
            return None
        return float(sum(values)) / len(values)


_NVML: _Nvml | None = None


def _nvml() -> _Nvml:
    global _NVML
    if _NVML is None:
        _NVML = _Nvml()
    return _NVML


@dataclass
class PassSampler:
    """GPU utilisation and the engine's running/waiting requests, every SAMPLE_INTERVAL
    seconds while one pass runs: from `url`'s /metrics, or from `read` (the metrics text of
    an engine in this process)."""

    url: str | None = None
    interval: float = SAMPLE_INTERVAL
    gpu: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    in_flight: list[float] = field(default_factory=list)  # the server's HTTP requests (tolk)
    read: Callable[[], str] | None = None
    _task: asyncio.Task[None] | None = None

    async def _scrape(self, client: aiohttp.ClientSession | None) -> str:
        if self.read is not None:
            return self.read()
        assert client is not None
        # tolk answers only the names asked for; vLLM's server ignores the query and sends
        # everything: either way the same gauges are read.
        async with client.get("/metrics", params=SAMPLED_QUERY) as response:
            return await response.text()

    async def _run(self) -> None:
        nvml = _nvml()
        timeout = aiohttp.ClientTimeout(total=5)
        async with contextlib.AsyncExitStack() as stack:
            client = None
            if self.url is not None:
                client = await stack.enter_async_context(
                    aiohttp.ClientSession(self.url, timeout=timeout)
                )
            while True:
                util = nvml.utilization()
                if util is not None:
                    self.gpu.append(util)
                try:
                    snap = Snapshot.parse(await self._scrape(client))
                    if "vllm:num_requests_running" in snap.counts:
                        self.running.append(snap.get("vllm:num_requests_running"))
                        self.waiting.append(snap.get("vllm:num_requests_waiting"))
                    if IN_FLIGHT in snap.counts:  # less this scrape, in flight as it is read
                        self.in_flight.append(max(0.0, snap.get(IN_FLIGHT) - 1))
                except (aiohttp.ClientError, TimeoutError, ValueError):
                    pass  # a missed sample is a gap, not a failed benchmark
                await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


# The engine's own counters, read before and after each pass (full /metrics: vLLM's, which
# tolk's server republishes): how many engine steps the pass took, how many tokens each step
# carried, how many engine requests (retries, candidates) and prefix-cache hits it had.
ENGINE_COUNTERS = {
    "steps": ("vllm:iteration_tokens_total_count", None),
    "step_tokens": ("vllm:iteration_tokens_total_sum", None),
    "generation_tokens": ("vllm:generation_tokens_total", None),
    "prompt_tokens": ("vllm:prompt_tokens_total", None),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", None),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", None),
    "engine_requests": ("vllm:request_success_total", None),
    "preemptions": ("vllm:num_preemptions_total", None),
    "tpot_sum": ("vllm:request_time_per_output_token_seconds_sum", None),
    "tpot_count": ("vllm:request_time_per_output_token_seconds_count", None),
    # Where an engine request's time went inside the engine: waiting for a place in the
    # batch, its prefill, its decode, and the time between two of its tokens.
    "queue_sum": ("vllm:request_queue_time_seconds_sum", None),
    "queue_count": ("vllm:request_queue_time_seconds_count", None),
    "prefill_sum": ("vllm:request_prefill_time_seconds_sum", None),
    "prefill_count": ("vllm:request_prefill_time_seconds_count", None),
    "decode_sum": ("vllm:request_decode_time_seconds_sum", None),
    "decode_count": ("vllm:request_decode_time_seconds_count", None),
    "itl_sum": ("vllm:inter_token_latency_seconds_sum", None),
    "itl_count": ("vllm:inter_token_latency_seconds_count", None),
    # From its arrival in vLLM's front end to its last token: its whole time in the engine.
    "e2e_sum": ("vllm:e2e_request_latency_seconds_sum", None),
    "e2e_count": ("vllm:e2e_request_latency_seconds_count", None),
}
# tolk's event loop, where the server publishes it (tolk, not vLLM's server): the CPU its
# thread used, and how late its 10 ms heartbeat woke (the wait of any work queued on it).
LOOP_COUNTERS = {
    "loop_cpu": "tolk_event_loop_cpu_seconds_total",
    "lag_sum": "tolk_event_loop_stall_seconds_sum",
    "lag_count": "tolk_event_loop_stall_seconds_count",
}
# And where its engine gathers new requests (engine.gather_ms): how long they waited for
# their group, all together.
GATHER_COUNTERS = {"gather_wait": "tolk_engine_gather_wait_seconds_total"}
# Sampled beside the engine's gauges where the server publishes it (tolk): the HTTP requests
# it holds, so that Little's law gives a request's mean time inside the server.
IN_FLIGHT = "tolk_requests_in_flight"
SAMPLED_QUERY = [*TIMELINE_QUERY, ("name[]", IN_FLIGHT)]
# The steps by the tokens they carried (vLLM's histogram; its bounds differ by release):
# a step past the largest CUDA-graph size runs without the graph.
STEP_TOKENS = "vllm:iteration_tokens_total"


async def engine_counters(url: str) -> dict[str, float] | None:
    """ENGINE_COUNTERS now, or None where the server does not publish vLLM's metrics."""
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with (
            aiohttp.ClientSession(url, timeout=timeout) as client,
            client.get("/metrics") as response,
        ):
            return counters_of(Snapshot.parse(await response.text()))
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


def counters_of(snap: Snapshot) -> dict[str, float] | None:
    """ENGINE_COUNTERS and the STEP_TOKENS buckets (as "steps_le:<bound>") of one scrape, or
    None where it holds no vLLM metrics."""
    if f"{STEP_TOKENS}_count" not in snap.counts:
        return None
    counters = {key: snap.get(name, le) for key, (name, le) in ENGINE_COUNTERS.items()}
    if LOOP_COUNTERS["loop_cpu"] in snap.counts:
        counters |= {key: snap.get(name) for key, name in LOOP_COUNTERS.items()}
    if GATHER_COUNTERS["gather_wait"] in snap.counts:
        counters |= {key: snap.get(name) for key, name in GATHER_COUNTERS.items()}
    for _, le, count in snap.buckets(STEP_TOKENS):
        counters[f"steps_le:{le}"] = count
    return counters


def engine_figures(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None, wall_s: float
) -> dict[str, Any] | None:
    """What the engine did in one pass: steps, their mean time and tokens, generated tokens
    per step (about the sequences decoding in each), engine requests, prefix-cache hit rate
    and the mean time per output token the engine measured."""
    if before is None or after is None:
        return None
    d = {key: after[key] - before[key] for key in ENGINE_COUNTERS}
    steps = d["steps"]
    return {
        "steps": steps,
        "step_ms": 1000 * wall_s / steps if steps else None,
        "tokens_per_step": d["step_tokens"] / steps if steps else None,
        "generated_per_step": d["generation_tokens"] / steps if steps else None,
        "generation_tokens": d["generation_tokens"],
        "prompt_tokens": d["prompt_tokens"],
        "engine_requests": d["engine_requests"],
        "prefix_cache_hit_rate": (
            d["prefix_cache_hits"] / d["prefix_cache_queries"]
            if d["prefix_cache_queries"]
            else None
        ),
        "preemptions": d["preemptions"],
        **{f"{what}_ms": _per(d, what) for what in ("tpot", "queue", "prefill", "decode", "itl")},
        "steps_by_tokens": _steps_by_tokens(before, after),
        "e2e_s": d["e2e_sum"] if d["e2e_count"] else None,
        **_loop(before, after),
        **(
            {"gather_wait_s": after["gather_wait"] - before["gather_wait"]}
            if "gather_wait" in before and "gather_wait" in after
            else {}
        ),
    }


def _loop(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float | None]:
    """tolk's event loop over one pass: the CPU seconds its thread used and the mean lag of
    its heartbeat in ms; nothing where the server does not publish them."""
    if "loop_cpu" not in before or "loop_cpu" not in after:
        return {}
    beats = after["lag_count"] - before["lag_count"]
    return {
        "loop_cpu_s": after["loop_cpu"] - before["loop_cpu"],
        "loop_lag_ms": 1000 * (after["lag_sum"] - before["lag_sum"]) / beats if beats else None,
    }


def _per(d: Mapping[str, float], what: str) -> float | None:
    """The mean of histogram `what` over the pass, in milliseconds."""
    count = d[f"{what}_count"]
    return 1000 * d[f"{what}_sum"] / count if count else None


def _steps_by_tokens(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """The share of the pass's steps that carried at most each bound of tokens (cumulative,
    as the histogram counts them)."""
    bounds = [key for key in after if key.startswith("steps_le:")]
    steps = after["steps"] - before["steps"]
    if not steps:
        return {}
    return {
        key.removeprefix("steps_le:"): round((after[key] - before.get(key, 0.0)) / steps, 4)
        for key in bounds
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def saturated(records: Sequence[Mapping[str, Any]], concurrency: int) -> tuple[int, float] | None:
    """The requests answered while every client was busy, and for how long: from the start
    until the last request was sent (after it, clients run out of work and the pass drains);
    None if the pass never kept `concurrency` clients busy."""
    sent = [r["sent_s"] for r in records if r.get("sent_s") is not None]
    if len(sent) <= concurrency:
        return None
    until = max(sent)
    answered = sum(
        1
        for r in records
        if r.get("error") is None
        and r.get("latency_s") is not None
        and r["sent_s"] + r["latency_s"] <= until
    )
    return (answered, until) if answered and until > 0 else None


def pass_figures(
    system: str, round_: int, records: Sequence[Mapping[str, Any]], wall_s: float,
    sampler: PassSampler, engine: Mapping[str, float | None] | None = None,
    concurrency: int = 0, client_cpu_s: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One pass of one system: its wall time, throughput (over the whole pass, and while
    every client was busy: `saturated`), the clients it kept busy on average (the sum of the
    latencies over the wall time), what was sampled meanwhile, and how busy the clients'
    own event loop was (`client_cpu_s` over the wall time: near 1, the clients, not the
    server, set the pace)."""
    tokens = [r["output_tokens"] for r in records if r.get("output_tokens") is not None]
    answered = [r for r in records if r.get("error") is None]
    output_tokens = sum(tokens) if tokens else None
    busy = saturated(records, concurrency)
    latencies = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    return {
        "system": system,
        "round": round_,
        "requests": len(records),
        "errors": len(records) - len(answered),
        "wall_s": wall_s,
        "requests_per_s": len(answered) / wall_s if wall_s > 0 else None,
        "saturated_requests": busy[0] if busy else None,
        "saturated_s": busy[1] if busy else None,
        "saturated_requests_per_s": busy[0] / busy[1] if busy else None,
        "clients_mean": sum(latencies) / wall_s if wall_s > 0 else None,
        "output_tokens": output_tokens,
        "output_tokens_per_s": output_tokens / wall_s if output_tokens and wall_s > 0 else None,
        "gpu_util_mean": _mean(sampler.gpu),
        "running_mean": _mean(sampler.running),
        "waiting_mean": _mean(sampler.waiting),
        "waiting_max": max(sampler.waiting) if sampler.waiting else None,
        "server_in_flight_mean": _mean(sampler.in_flight),
        "samples": max(len(sampler.gpu), len(sampler.running)),
        "engine": dict(engine) if engine is not None else None,
        "client_busy": client_cpu_s / wall_s if client_cpu_s is not None and wall_s > 0 else None,
        "unit_latencies_s": unit_latencies(records),
        "unit_tokens": unit_tokens(records),
        "unit_timing": unit_timing(records),
    }


MARKUP_KINDS = ("markdown", "html")


def unit_latencies(records: Sequence[Mapping[str, Any]]) -> dict[str, list[float]] | None:
    """A markup pass's answered units' latencies by "pair format" (None for other passes):
    what tolk learns per pair in one pass (tolk.translation.watch) shows in the next, and
    only the first pass's records are kept."""
    out: dict[str, list[float]] = {}
    for r in records:
        if r.get("kind") in MARKUP_KINDS and r.get("error") is None and r.get("latency_s"):
            out.setdefault(f"{r['pair']} {r['kind']}", []).append(round(r["latency_s"], 4))
    return out or None


def unit_tokens(records: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """A markup pass's output tokens by "pair format" (None for other passes), as the system
    reports them (tolk's usage: every try of a unit, not the aborted twins): which pair's
    units made a pass's tokens, for every pass, not only the first."""
    out: dict[str, int] = {}
    for r in records:
        if r.get("kind") in MARKUP_KINDS and r.get("output_tokens"):
            group = f"{r['pair']} {r['kind']}"
            out[group] = out.get(group, 0) + int(r["output_tokens"])
    return out or None


def unit_timing(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[float]]] | None:
    """A markup pass's units' timing by "pair format" and mark, in the units' order (None
    for other passes and systems that tell none): where each unit's time went and how many
    engine requests it made (a tolk server's Server-Timing, quality.TIMING_MARKS), for every
    pass, not only the first."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if r.get("kind") in MARKUP_KINDS and r.get("error") is None and r.get("timing"):
            marks = out.setdefault(f"{r['pair']} {r['kind']}", {})
            for name, value in r["timing"].items():
                # (engine_requests a count, the marks seconds)
                kept = value if isinstance(value, int) else round(float(value), 4)
                marks.setdefault(name, []).append(kept)
    return out or None


async def timed_pass(
    system: str, url: str, round_: int, run: Awaitable[list[dict[str, Any]]],
    concurrency: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Await one pass (`run` gives its records, `concurrency` clients at once), timed and
    sampled."""
    before = await engine_counters(url)
    sampler = PassSampler(url)
    sampler.start()
    started = time.perf_counter()
    # The clients' loop: this thread (the sampler's scrapes run on it too). The server's loop
    # CPU is read from /metrics before and after, so it also holds those two scrapes.
    cpu = time.thread_time()
    try:
        records = await run
    finally:
        wall = time.perf_counter() - started
        cpu = time.thread_time() - cpu
        await sampler.stop()
    engine = engine_figures(before, await engine_counters(url), wall)
    return records, pass_figures(system, round_, records, wall, sampler, engine, concurrency, cpu)


def _total(passes: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [p[key] for p in passes]
    return None if any(v is None for v in values) else float(sum(values))


def phase_of(p: Mapping[str, Any]) -> str:
    """A pass's phase (quality.PHASES); a run from before passes had phases: "all"."""
    return str(p.get("phase") or "all")


def _system_row(system: str, passes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    wall = sum(p["wall_s"] for p in passes)
    answered = sum(p["requests"] - p["errors"] for p in passes)
    tokens = _total(passes, "output_tokens")
    busy = [p for p in passes if p.get("saturated_s")]
    busy_s = sum(p["saturated_s"] for p in busy)

    def mean_of(key: str) -> float | None:
        values = [p[key] for p in passes if p.get(key) is not None]
        return _mean(values)

    return {
        "system": system,
        "phase": phase_of(passes[0]) if passes else "all",
        "passes": len(passes),
        "requests": sum(p["requests"] for p in passes),
        "errors": sum(p["errors"] for p in passes),
        "wall_s": wall,
        "requests_per_s": answered / wall if wall > 0 else None,
        # Only where every pass kept all its clients busy for a while.
        "saturated_requests_per_s": (
            sum(p["saturated_requests"] for p in busy) / busy_s
            if busy and len(busy) == len(passes)
            else None
        ),
        "clients_mean": mean_of("clients_mean"),
        "per_round_requests_per_s": [p["requests_per_s"] for p in passes],
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / wall if tokens and wall > 0 else None,
        "gpu_util_mean": mean_of("gpu_util_mean"),
        "running_mean": mean_of("running_mean"),
        "waiting_mean": mean_of("waiting_mean"),
        "client_busy": mean_of("client_busy"),
        "engine": _engine_row(passes),
        "time_ms": _time_row(passes),
    }


def _time_row(passes: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Where a request's time went, in ms, means over the passes' answered requests: its
    latency as the clients saw it; inside the server (tolk's HTTP requests in flight over the
    wall time, by Little's law); waiting for its engine requests' group (engine.gather_ms);
    and in the engine (vLLM's own time for each of its engine requests, retries included,
    summed: a request whose engine requests run side by side, a markup unit's, has more of it
    than its latency). None where the server publishes no such figure."""
    answered: int = sum(p["requests"] - p["errors"] for p in passes)

    def per_request(values: list[float | None]) -> float | None:
        known = [float(v) for v in values if v is not None]
        if not answered or not values or len(known) < len(values):
            return None
        return 1000 * sum(known) / answered

    def engine_key(key: str) -> list[float | None]:
        return [(p.get("engine") or {}).get(key) for p in passes]

    def over_wall(key: str) -> list[float | None]:
        """A mean count sampled over each pass (Little's law: x its wall time, seconds)."""
        return [p[key] * p["wall_s"] if p.get(key) is not None else None for p in passes]

    return {
        "latency": per_request(over_wall("clients_mean")),
        "in_server": per_request(over_wall("server_in_flight_mean")),
        "gathering": per_request(engine_key("gather_wait_s")),
        "in_engine": per_request(engine_key("e2e_s")),
    }


def _engine_row(passes: Sequence[Mapping[str, Any]]) -> dict[str, float | None] | None:
    """The passes' engine figures together: counts summed, rates per step over all steps."""
    found = [p["engine"] for p in passes if p.get("engine")]
    if not found:
        return None
    steps = sum(e["steps"] for e in found)
    wall = sum(p["wall_s"] for p in passes if p.get("engine"))
    generated = sum(e["generation_tokens"] for e in found)
    tpots = [e["tpot_ms"] for e in found if e["tpot_ms"] is not None]
    rates = [e["prefix_cache_hit_rate"] for e in found if e["prefix_cache_hit_rate"] is not None]
    # The event loop's CPU: over the passes' wall time (its busy share of one core: 1 where
    # the loop is what limits the server) and per request answered.
    looped = [p for p in passes if p.get("engine") and p["engine"].get("loop_cpu_s") is not None]
    cpu = sum(p["engine"]["loop_cpu_s"] for p in looped)
    loop_wall = sum(p["wall_s"] for p in looped)
    answered = sum(p["requests"] - p["errors"] for p in looped)
    return {
        "steps": steps,
        "step_ms": 1000 * wall / steps if steps else None,
        "generated_per_step": generated / steps if steps else None,
        "generation_tokens": generated,
        "engine_requests": sum(e["engine_requests"] for e in found),
        "prefix_cache_hit_rate": _mean(rates),
        "tpot_ms": _mean(tpots),
        "loop_busy": cpu / loop_wall if looped and loop_wall > 0 else None,
        "loop_ms_per_request": 1000 * cpu / answered if looped and answered else None,
        "loop_lag_ms": _mean(
            [p["engine"]["loop_lag_ms"] for p in looped if p["engine"]["loop_lag_ms"] is not None]
        ),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize(passes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per system and phase (its passes together) and, per tolk system and phase, its ratio
    to the baseline's passes of that phase measured beside it (the baseline passes of the
    same block: the same variant's rounds). Phases in the order they ran, so the sentences'
    come first."""
    systems: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for p in passes:
        systems.setdefault((p["system"], phase_of(p)), []).append(p)
    order = list(dict.fromkeys(phase for _, phase in systems))
    keys = sorted(systems, key=lambda key: order.index(key[1]))
    rows = [_system_row(name, systems[(name, phase)]) for name, phase in keys]
    ratios = []
    for name, phase in keys:
        if name == BASELINE:
            continue
        found = systems[(name, phase)]
        blocks = {p["block"] for p in found}
        beside = [
            p
            for p in passes
            if p["system"] == BASELINE and phase_of(p) == phase and p["block"] in blocks
        ]
        if not beside:
            continue
        mine, theirs = _system_row(name, found), _system_row(BASELINE, beside)
        ratios.append(
            {
                "system": name,
                "phase": phase,
                "requests_per_s": _ratio(mine["requests_per_s"], theirs["requests_per_s"]),
                "saturated_requests_per_s": _ratio(
                    mine["saturated_requests_per_s"], theirs["saturated_requests_per_s"]
                ),
                "output_tokens_per_s": _ratio(
                    mine["output_tokens_per_s"], theirs["output_tokens_per_s"]
                ),
                "baseline_requests_per_s": theirs["requests_per_s"],
            }
        )
    return {"systems": rows, "ratios": ratios, "markup_later": markup_later(passes)}


def markup_later(passes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per system and markup "pair format": the units' p50 latency over the passes after
    each system's first (the first pass's are in the quality table), and each tolk system's
    over the baseline's beside it (the same block's passes)."""
    found: dict[tuple[str, str], list[float]] = {}
    beside: dict[tuple[int, str], list[float]] = {}
    blocks: dict[str, set[int]] = {}
    for p in passes:
        if p["round"] < 2 or not p.get("unit_latencies_s"):
            continue
        blocks.setdefault(p["system"], set()).add(p["block"])
        for group, latencies in p["unit_latencies_s"].items():
            found.setdefault((p["system"], group), []).extend(latencies)
            if p["system"] == BASELINE:
                beside.setdefault((p["block"], group), []).extend(latencies)
    out = []
    for (system, group), latencies in found.items():
        theirs = [x for b in blocks[system] for x in beside.get((b, group), [])]
        p50 = statistics.median(latencies)
        out.append(
            {
                "system": system,
                "group": group,
                "units": len(latencies),
                "p50_s": p50,
                "over_baseline": _ratio(p50, statistics.median(theirs)) if theirs else None,
            }
        )
    return out


MARKUP_LATER_COLUMNS = ("system", "pair format", "units", "p50 s", "÷ baseline")


def markup_later_rows(speed: Mapping[str, Any]) -> list[list[str]]:
    return [
        [m["system"], m["group"], str(m["units"]), _num(m["p50_s"], 2),
         _num(m["over_baseline"], 2)]
        for m in speed.get("markup_later") or []
    ]  # fmt: skip


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio_lines(speed: Mapping[str, Any]) -> list[str]:
    """The report's first lines: each tolk system's throughput over the baseline's beside it,
    phase by phase (the sentences first)."""
    lines = []
    for r in speed["ratios"]:
        phase = f"{r['phase']}: " if r.get("phase", "all") != "all" else ""
        busy = r.get("saturated_requests_per_s")
        busy_text = f" (all clients busy: x{_num(busy, 2)})" if busy is not None else ""
        lines.append(
            f"{phase}{r['system']} / {BASELINE}: requests/s x{_num(r['requests_per_s'], 2)}"
            f"{busy_text}, output tokens/s x{_num(r['output_tokens_per_s'], 2)} (baseline "
            f"{_num(r['baseline_requests_per_s'])} requests/s)"
        )
    return lines


SPEED_COLUMNS = (
    "system", "phase", "passes", "requests", "errors", "wall s", "req/s",
    "req/s all clients busy", "req/s per round", "output tok/s", "clients busy",
    "client loop busy %", "GPU busy %", "running", "waiting", "engine steps", "ms a step",
    "tokens made a step", "TPOT ms", "engine requests", "prefix hit %", "loop busy %",
    "loop ms a request", "loop lag ms", "latency ms", "in server ms", "gathering ms",
    "in engine ms",
)  # fmt: skip


def _engine_cells(engine: Mapping[str, Any] | None) -> list[str]:
    if not engine:
        return ["-"] * 9
    hit = engine["prefix_cache_hit_rate"]
    busy = engine.get("loop_busy")
    return [
        _num(engine["steps"], 0), _num(engine["step_ms"]), _num(engine["generated_per_step"]),
        _num(engine["tpot_ms"]), _num(engine["engine_requests"], 0),
        _num(100 * hit if hit is not None else None, 0),
        _num(100 * busy if busy is not None else None, 0),
        _num(engine.get("loop_ms_per_request"), 2), _num(engine.get("loop_lag_ms"), 1),
    ]  # fmt: skip


def rows(speed: Mapping[str, Any]) -> list[list[str]]:
    return [
        [
            s["system"], s.get("phase", "all"), str(s["passes"]), str(s["requests"]),
            str(s["errors"]), _num(s["wall_s"]), _num(s["requests_per_s"]),
            _num(s.get("saturated_requests_per_s")),
            ", ".join(_num(v) for v in s["per_round_requests_per_s"]),
            _num(s["output_tokens_per_s"], 0), _num(s.get("clients_mean")),
            _num(100 * s["client_busy"] if s.get("client_busy") is not None else None, 0),
            _num(s["gpu_util_mean"], 0),
            _num(s["running_mean"]), _num(s["waiting_mean"]),
            *_engine_cells(s.get("engine")),
            *(_num((s.get("time_ms") or {}).get(key), 0)
              for key in ("latency", "in_server", "gathering", "in_engine")),
        ]
        for s in speed["systems"]
    ]  # fmt: skip
