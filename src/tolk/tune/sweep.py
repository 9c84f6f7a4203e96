"""Running the sweep: each candidate setting is a fresh `tolk serve` of the model (vLLM fixes
max_num_seqs and max_num_batched_tokens at engine start), driven by `tolk bench`'s load
generator at the target concurrency, measured from both sides, and stopped."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from rich.progress import Progress

from tolk.bench import documents, loadgen
from tolk.bench.run import RunPlan, measure_level
from tolk.bench.workloads import Workload
from tolk.config import ModelSettings, TolkConfig, load_config
from tolk.engine.engine import CPU_DEFAULT_KV_CACHE_BYTES, on_cpu
from tolk.local.processes import start_tolk
from tolk.tune.rules import TRAFFIC, Choice, Point, Slo, StopRule, Waste, choose, waste

SCHEMA = "tolk.tune/1"
DEFAULT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
# Documents bring hundreds of segments at once: the batch that serves them is larger than any
# sentence traffic's (on an H100 the tuner chose 256 for the 1B shape: 4x the documents/s of
# the case study's 16; docs/benchmarks.md section 12).
DOCUMENT_CANDIDATES = (16, 32, 64, 128, 256)
# Slow settings (max_num_seqs 1 at concurrency 20) must show up as latency, not as 504s.
TUNE_REQUEST_TIMEOUT = 900.0
# Documents in flight bring hundreds of segments each; the queue must admit them all, or
# the sweep measures 503s and retries rather than the engine (the case study's articles are
# 30-245 segments).
SEGMENTS_PER_DOCUMENT = 512


@dataclass(frozen=True)
class TunePlan:
    config_path: Path
    model: str
    workload: Workload
    concurrency: int
    workdir: Path
    slo: Slo = field(default_factory=Slo)
    rule: StopRule = field(default_factory=StopRule)
    candidates: tuple[int, ...] = DEFAULT_CANDIDATES
    batched_tokens: tuple[int, ...] | None = None  # None: around the configured value
    duration: float | None = 20.0
    requests: int | None = None
    warmup: int = 4
    full: bool = False  # measure every candidate, no early stop
    compare_full: bool = False  # also run the full grid, to check what early stopping missed
    source: dict[str, Any] = field(default_factory=dict)  # where concurrency/workload came from
    # sentences: `workload` at `concurrency`. documents: `workload`'s documents, `concurrency`
    # at once (`requests`: documents per setting). mixed: `workload`'s sentences at
    # `concurrency` while `documents` run, `document_concurrency` at once.
    traffic: str = "sentences"
    documents: Workload | None = None
    document_concurrency: int = 4

    @property
    def unit(self) -> str:
        return TRAFFIC[self.traffic][0]

    def documents_in_flight(self) -> int:
        return {"sentences": 0, "documents": self.concurrency, "mixed": self.document_concurrency}[
            self.traffic
        ]


def batched_tokens_around(configured: int, max_num_seqs: int) -> tuple[int, ...]:
    """A quarter, half, the same and twice the configured budget; never below max_num_seqs
    (vLLM requires room for one token per running sequence)."""
    values = {max(max_num_seqs, configured * f // 4) for f in (1, 2, 4, 8)}
    return tuple(sorted(values))


def kv_cache_bytes(settings: ModelSettings, on_cpu: bool) -> int | None:
    configured = settings.engine.kv_cache_memory_bytes
    if configured is not None:
        return int(configured)
    return CPU_DEFAULT_KV_CACHE_BYTES if on_cpu else None


class Sweep:
    def __init__(self, plan: TunePlan, progress: Progress | None = None) -> None:
        self.plan = plan
        self.progress = progress
        self.config: TolkConfig = load_config(plan.config_path)
        matches = [m for m in self.config.models if m.name == plan.model]
        if not matches:
            names = [m.name for m in self.config.models]
            raise ValueError(f"{plan.config_path} has no model '{plan.model}'; it has {names}")
        self.settings = matches[0]
        self.points: list[Point] = []
        self.on_point: Callable[[Point], None] = lambda p: None
        self._task = (
            progress.add_task("tune", total=len(plan.candidates)) if progress is not None else None
        )

    def _server_config(self) -> TolkConfig:
        server = self.config.server.model_copy(
            update={
                "request_timeout": max(self.config.server.request_timeout, TUNE_REQUEST_TIMEOUT)
            }
        )
        return self.config.model_copy(update={"server": server})

    async def measure(
        self, max_num_seqs: int, batched_tokens: int, phase: str, scheduling: str | None = None
    ) -> Point:
        plan = self.plan
        scheduling = scheduling or self.settings.engine.scheduling
        engine = self.settings.engine.model_copy(
            update={
                "scheduling": scheduling,
                "max_num_seqs": max_num_seqs,
                "max_num_batched_tokens": batched_tokens,
                # everything the load generator sends is admitted: overload is not measured here
                "max_waiting": max(
                    self.settings.engine.max_waiting,
                    2 * plan.concurrency + SEGMENTS_PER_DOCUMENT * plan.documents_in_flight(),
                ),
            }
        )
        settings = self.settings.model_copy(update={"engine": engine})
        label = f"{phase} max_num_seqs={max_num_seqs} batched_tokens={batched_tokens}"
        if scheduling != "fcfs":
            label += f" scheduling={scheduling}"
        if self.progress is not None and self._task is not None:
            self.progress.update(self._task, description=f"tune: {label} (starting)")
        started = time.monotonic()
        name = f"tune-{phase}-{max_num_seqs}-{batched_tokens}-{scheduling}"
        try:
            server = await asyncio.to_thread(
                start_tolk, self._server_config(), settings, plan.workdir, name
            )
        except RuntimeError as exc:
            point = Point(
                max_num_seqs,
                batched_tokens,
                0.0,
                math.nan,
                math.nan,
                seconds=time.monotonic() - started,
                phase=phase,
                scheduling=scheduling,
                failed=str(exc).splitlines()[0][:300] + f" (log: {plan.workdir / name}.log)",
            )
            return self._record(point)
        connections = plan.concurrency + plan.documents_in_flight() + 4
        try:
            async with loadgen.make_client(
                server.url, connections, timeout=TUNE_REQUEST_TIMEOUT
            ) as client:
                figures = await self._drive(client, server.url)
        except (RuntimeError, aiohttp.ClientError, TimeoutError) as exc:
            figures = {"failed": f"{type(exc).__name__}: {str(exc)[:300]}"}
            figures |= {"rps": 0.0, "p50": math.nan, "p95": math.nan}
        finally:
            await asyncio.to_thread(server.stop)
        point = Point(
            max_num_seqs,
            batched_tokens,
            seconds=time.monotonic() - started,
            phase=phase,
            scheduling=scheduling,
            **figures,
        )
        return self._record(point)

    async def _drive(self, client: aiohttp.ClientSession, url: str) -> dict[str, Any]:
        """The plan's traffic against a started server: the point's figures."""
        plan = self.plan
        if plan.traffic == "documents":
            docs = await self._documents(client, plan.workload, plan.concurrency, plan.warmup)
            return {
                **_engine_figures(docs["engine"], docs["kv_cache_peak"]),
                **_document_rank(docs),
            }
        run_plan = RunPlan(
            url=url,
            workload=plan.workload,
            concurrency=(plan.concurrency,),
            requests=plan.requests,
            duration=plan.duration,
            warmup=plan.warmup,
        )
        level = await measure_level(client, run_plan, plan.concurrency, self.progress)
        if plan.traffic == "sentences":
            return _sentence_figures(level)
        # mixed: the sentences alone, then again while documents keep arriving
        assert plan.documents is not None
        stop = asyncio.Event()
        running = asyncio.create_task(
            documents.load(
                client,
                plan.documents,
                plan.document_concurrency,
                None,
                self.progress,
                stop=stop,
            )
        )
        try:
            beside = await measure_level(client, run_plan, plan.concurrency, self.progress)
        finally:
            stop.set()
        docs = await running
        sentences = beside["summary"]
        seconds = sentences["duration_s"]
        tokens = sentences["completion_tokens"] / seconds + docs["output_tokens_per_s"]
        return {
            **_sentence_figures(beside),
            "rps": tokens,
            "sentence_rps": sentences["rps"],
            "sentence_p95_alone": level["summary"]["latency_s"].get("p95", math.nan),
            "documents_per_s": docs["documents_per_s"],
            "segments_per_s": docs["segments_per_s"],
            "document_p95": docs["latency_p95_s"],
            "segments_per_document": docs["segments_per_document_max"],
            "overloaded_retries": docs["overloaded_retries"],
        }

    async def _documents(
        self, client: aiohttp.ClientSession, workload: Workload, concurrency: int, warmup: int
    ) -> dict[str, Any]:
        """A closed loop of documents for `requests` documents, or for `duration` seconds."""
        plan = self.plan
        if plan.requests is not None:
            return await documents.load(
                client, workload, concurrency, plan.requests, self.progress, warmup=warmup
            )
        stop = asyncio.Event()
        timer = asyncio.get_running_loop().call_later(plan.duration or 20.0, stop.set)
        try:
            return await documents.load(
                client, workload, concurrency, None, self.progress, stop=stop, warmup=warmup
            )
        finally:
            timer.cancel()

    def _record(self, point: Point) -> Point:
        self.points.append(point)
        if self.progress is not None and self._task is not None:
            self.progress.advance(self._task)
        self.on_point(point)
        return point

    def _grow(self, extra: int) -> None:
        if self.progress is not None and self._task is not None:
            total = self.progress.tasks[self._task].total or 0
            self.progress.update(self._task, total=total + extra)

    async def run(self) -> dict[str, Any]:
        plan = self.plan
        base_tokens = self.settings.engine.max_num_batched_tokens
        stop_reason = None
        sweep: list[Point] = []
        order = sorted(plan.candidates) if plan.full else plan.rule.sequence(plan.candidates)
        for max_num_seqs in order:
            sweep.append(await self.measure(max_num_seqs, base_tokens, "sweep"))
            if not plan.full and (stop_reason := plan.rule.decide(sweep)) is not None:
                break
        skipped = [c for c in plan.candidates if c not in {p.max_num_seqs for p in sweep}]
        first = choose(sweep, plan.slo, unit=plan.unit)

        tokens = plan.batched_tokens or batched_tokens_around(base_tokens, first.point.max_num_seqs)
        extra = [t for t in tokens if t != first.point.max_num_batched_tokens]
        self._grow(len(extra) - len(skipped))
        for value in extra:
            await self.measure(first.point.max_num_seqs, value, "batched_tokens")
        tuned = [p for p in self.points if p.phase in ("sweep", "batched_tokens")]
        final = choose(tuned, plan.slo, unit=plan.unit)
        scheduling = None
        if plan.traffic == "mixed":  # the chosen setting under the other scheduling policy
            chosen = final.point
            other = "shortest_first" if chosen.scheduling == "fcfs" else "fcfs"
            self._grow(1)
            alt = await self.measure(
                chosen.max_num_seqs, chosen.max_num_batched_tokens, "scheduling", other
            )
            scheduling = scheduling_verdict(chosen, alt, plan.slo, plan.rule.min_gain)
            if scheduling["better"] == other:
                final = Choice(alt, plan.slo.met_by(alt), scheduling["reason"])

        comparison = None
        if plan.compare_full:
            self._grow(len(plan.candidates))
            full = [await self.measure(c, base_tokens, "full") for c in sorted(plan.candidates)]
            comparison = compare(sweep, full, first, plan.slo, plan.unit)

        kv_bytes = kv_cache_bytes(self.settings, on_cpu())
        flags = waste(final.point, kv_bytes)
        warnings = edge_warnings(sweep, final, plan.candidates, plan.unit)
        return {
            "schema": SCHEMA,
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "config": str(plan.config_path),
            "model": plan.model,
            "concurrency": plan.concurrency,
            "traffic": plan.traffic,
            "unit": plan.unit,
            "latency": TRAFFIC[plan.traffic][1],
            "source": plan.source,
            "workload": plan.workload.describe(),
            "documents": plan.documents.describe() if plan.documents else None,
            "document_concurrency": plan.document_concurrency if plan.documents else None,
            "slo": {
                "p95_s": plan.slo.p95,
                "ttft_s": plan.slo.ttft,
                "document_p95_s": plan.slo.document_p95,
            },
            "rule": asdict(plan.rule),
            "candidates": list(plan.candidates),
            "per_point": {"duration_s": plan.duration, "requests": plan.requests},
            "points": [asdict(p) for p in self.points],
            "sweep": {
                "measured": [p.max_num_seqs for p in sweep],
                "skipped": skipped,
                "stop_reason": stop_reason,
                "seconds": sum(p.seconds for p in sweep),
            },
            "choice": choice_json(final),
            "waste": [asdict(w) for w in flags],
            "warnings": warnings,
            "recommended_engine": recommended_engine(
                final.point, flags, plan.documents_in_flight(), self.settings.engine.max_waiting
            ),
            "scheduling": scheduling,
            "comparison": comparison,
        }


def _engine_figures(engine: dict[str, float], kv_peak: float) -> dict[str, Any]:
    return {
        "ttft_p95": engine.get("ttft_s_p95"),
        "inter_token_mean": engine.get("inter_token_s_mean"),
        "preemptions": engine.get("preemptions", 0.0),
        "kv_peak": kv_peak,
    }


def _sentence_figures(level: dict[str, Any]) -> dict[str, Any]:
    summary, engine = level["summary"], level["engine"]
    return {
        "rps": summary["rps"],
        "p50": summary["latency_s"].get("p50", math.nan),
        "p95": summary["latency_s"].get("p95", math.nan),
        "errors": sum(summary["errors"].values()),
        **_engine_figures(engine, engine.get("kv_cache_peak", math.nan)),
    }


def _document_rank(docs: dict[str, Any]) -> dict[str, Any]:
    """A documents-only point: ranked by documents/s, its SLO read on the document p95."""
    return {
        "rps": docs["documents_per_s"],
        "p50": docs["latency_p50_s"],
        "p95": docs["latency_p95_s"],
        "documents_per_s": docs["documents_per_s"],
        "segments_per_s": docs["segments_per_s"],
        "document_p95": docs["latency_p95_s"],
        "segments_per_document": docs["segments_per_document_max"],
        "overloaded_retries": docs["overloaded_retries"],
    }


def edge_warnings(
    sweep: list[Point], final: Choice, candidates: tuple[int, ...], unit: str
) -> list[str]:
    """What the grid could not show: the choice at its largest candidate while throughput
    was still rising there (a larger one may be faster still)."""
    measured = sorted((p for p in sweep if p.failed is None), key=lambda p: p.max_num_seqs)
    if len(measured) < 2 or not final.met_slo:
        return []
    chosen = final.point.max_num_seqs
    below, top = measured[-2], measured[-1]
    if chosen == max(candidates) == top.max_num_seqs and top.rps > below.rps * 1.03:
        return [
            f"throughput was still rising at the largest candidate, max_num_seqs {chosen} "
            f"({below.rps:.2f} -> {top.rps:.2f} {unit} from {below.max_num_seqs}): larger "
            "values were not tried; add them to --candidates"
        ]
    return []


def choice_json(choice: Choice) -> dict[str, Any]:
    return {
        "max_num_seqs": choice.point.max_num_seqs,
        "max_num_batched_tokens": choice.point.max_num_batched_tokens,
        "scheduling": choice.point.scheduling,
        "rps": choice.point.rps,
        "p95_s": choice.point.p95,
        "met_slo": choice.met_slo,
        "reason": choice.reason,
    }


def recommended_engine(
    point: Point, flags: list[Waste], documents_in_flight: int = 0, max_waiting: int = 0
) -> dict[str, Any]:
    """The engine settings to merge: the chosen setting; a KV cache size where it was
    mostly empty; with documents, a queue (`max_waiting`) that admits the documents in flight
    whole, from the most segments one brought (else each is refused, 503, and retried); and
    the scheduling policy where it is not the default."""
    out: dict[str, Any] = {
        "max_num_seqs": point.max_num_seqs,
        "max_num_batched_tokens": point.max_num_batched_tokens,
    }
    if documents_in_flight and point.segments_per_document:
        needed = documents_in_flight * point.segments_per_document
        queue = max(0, math.ceil(needed / 64) * 64 - point.max_num_seqs)
        if queue > max_waiting:
            out["max_waiting"] = queue
    if point.scheduling != "fcfs":
        out["scheduling"] = point.scheduling
    for flag in flags:
        if flag.kv_cache_bytes is not None:
            out["kv_cache_memory_bytes"] = f"{flag.kv_cache_bytes // 2**20}MiB"
    return out


def scheduling_verdict(chosen: Point, alt: Point, slo: Slo, min_gain: float) -> dict[str, Any]:
    """Which policy to run for mixed traffic, from the chosen setting measured under both:
    the other one wins if it meets the SLO where the chosen one did not, or if it lowers the
    sentences' p95 by more than `min_gain` without costing more than that of the throughput
    (a fair share for sentences must not starve documents)."""

    def said(p: Point) -> str:
        return (
            f"{p.scheduling}: sentence p95 {p.p95:.2f} s (alone {p.sentence_p95_alone or 0:.2f}"
            f" s), documents p95 {p.document_p95 or math.nan:.2f} s, {p.rps:.0f} output "
            "tokens/s"
        )

    better = chosen.scheduling
    if alt.failed is None and alt.errors == 0:
        rescues = slo.met_by(alt) and not slo.met_by(chosen)
        faster = alt.p95 < chosen.p95 * (1 - min_gain) and alt.rps >= chosen.rps * (1 - min_gain)
        if rescues or (faster and slo.met_by(alt) == slo.met_by(chosen)):
            better = alt.scheduling
    winner, loser = (alt, chosen) if better == alt.scheduling else (chosen, alt)
    return {
        "measured": [chosen.scheduling, alt.scheduling],
        "better": better,
        "reason": f"scheduling {better} for mixed traffic: {said(winner)}; {said(loser)}",
    }


def compare(
    sweep: list[Point], full: list[Point], first: Choice, slo: Slo, unit: str = "req/s"
) -> dict[str, Any]:
    """What the early stop cost: the early sweep's choice against the full grid's best, both
    as measured in the full sweep (same conditions), and the time each sweep took."""
    best = choose(full, slo, unit=unit)
    under_slo = [p.rps for p in full if slo.met_by(p)]
    top = max(under_slo, default=best.point.rps)
    same = next(p for p in full if p.max_num_seqs == first.point.max_num_seqs)
    return {
        "full_choice": choice_json(best),
        "full_best_rps": top,
        "early_choice_max_num_seqs": first.point.max_num_seqs,
        "early_choice_rps_in_full": same.rps,
        "ratio_to_full_best": same.rps / top if top else math.nan,
        "early_seconds": sum(p.seconds for p in sweep),
        "full_seconds": sum(p.seconds for p in full),
        "early_points": len(sweep),
        "full_points": len(full),
    }
