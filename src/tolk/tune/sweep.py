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

from rich.progress import Progress

from tolk.bench import loadgen
from tolk.bench.run import RunPlan, measure_level
from tolk.bench.workloads import Workload
from tolk.config import ModelSettings, TolkConfig, load_config
from tolk.engine.engine import CPU_DEFAULT_KV_CACHE_BYTES, on_cpu
from tolk.local.processes import start_tolk
from tolk.tune.rules import Choice, Point, Slo, StopRule, Waste, choose, waste

SCHEMA = "tolk.tune/1"
DEFAULT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
# Slow settings (max_num_seqs 1 at concurrency 20) must show up as latency, not as 504s.
TUNE_REQUEST_TIMEOUT = 900.0


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

    async def measure(self, max_num_seqs: int, batched_tokens: int, phase: str) -> Point:
        plan = self.plan
        engine = self.settings.engine.model_copy(
            update={
                "max_num_seqs": max_num_seqs,
                "max_num_batched_tokens": batched_tokens,
                # everything the load generator sends is admitted: overload is not measured here
                "max_waiting": max(self.settings.engine.max_waiting, 2 * plan.concurrency),
            }
        )
        settings = self.settings.model_copy(update={"engine": engine})
        label = f"{phase} max_num_seqs={max_num_seqs} batched_tokens={batched_tokens}"
        if self.progress is not None and self._task is not None:
            self.progress.update(self._task, description=f"tune: {label} (starting)")
        started = time.monotonic()
        name = f"tune-{phase}-{max_num_seqs}-{batched_tokens}"
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
                failed=str(exc).splitlines()[0][:300] + f" (log: {plan.workdir / name}.log)",
            )
            return self._record(point)
        try:
            run_plan = RunPlan(
                url=server.url,
                workload=plan.workload,
                concurrency=(plan.concurrency,),
                requests=plan.requests,
                duration=plan.duration,
                warmup=plan.warmup,
            )
            async with loadgen.make_client(server.url, plan.concurrency + 4) as client:
                level = await measure_level(client, run_plan, plan.concurrency, self.progress)
        finally:
            await asyncio.to_thread(server.stop)
        summary, eng = level["summary"], level["engine"]
        point = Point(
            max_num_seqs,
            batched_tokens,
            rps=summary["rps"],
            p50=summary["latency_s"].get("p50", math.nan),
            p95=summary["latency_s"].get("p95", math.nan),
            errors=sum(summary["errors"].values()),
            ttft_p95=eng.get("ttft_s_p95"),
            inter_token_mean=eng.get("inter_token_s_mean"),
            preemptions=eng.get("preemptions", 0.0),
            kv_peak=eng.get("kv_cache_peak", math.nan),
            seconds=time.monotonic() - started,
            phase=phase,
        )
        return self._record(point)

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
        first = choose(sweep, plan.slo)

        tokens = plan.batched_tokens or batched_tokens_around(base_tokens, first.point.max_num_seqs)
        extra = [t for t in tokens if t != first.point.max_num_batched_tokens]
        self._grow(len(extra) - len(skipped))
        for value in extra:
            await self.measure(first.point.max_num_seqs, value, "batched_tokens")
        tuned = [p for p in self.points if p.phase in ("sweep", "batched_tokens")]
        final = choose(tuned, plan.slo)

        comparison = None
        if plan.compare_full:
            self._grow(len(plan.candidates))
            full = [await self.measure(c, base_tokens, "full") for c in sorted(plan.candidates)]
            comparison = compare(sweep, full, first, plan.slo)

        kv_bytes = kv_cache_bytes(self.settings, on_cpu())
        flags = waste(final.point, kv_bytes)
        return {
            "schema": SCHEMA,
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "config": str(plan.config_path),
            "model": plan.model,
            "concurrency": plan.concurrency,
            "source": plan.source,
            "workload": plan.workload.describe(),
            "slo": {"p95_s": plan.slo.p95, "ttft_s": plan.slo.ttft},
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
            "recommended_engine": recommended_engine(final.point, flags),
            "comparison": comparison,
        }


def choice_json(choice: Choice) -> dict[str, Any]:
    return {
        "max_num_seqs": choice.point.max_num_seqs,
        "max_num_batched_tokens": choice.point.max_num_batched_tokens,
        "rps": choice.point.rps,
        "p95_s": choice.point.p95,
        "met_slo": choice.met_slo,
        "reason": choice.reason,
    }


def recommended_engine(point: Point, flags: list[Waste]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "max_num_seqs": point.max_num_seqs,
        "max_num_batched_tokens": point.max_num_batched_tokens,
    }
    for flag in flags:
        if flag.kv_cache_bytes is not None:
            out["kv_cache_memory_bytes"] = f"{flag.kv_cache_bytes // 2**20}MiB"
    return out


def compare(sweep: list[Point], full: list[Point], first: Choice, slo: Slo) -> dict[str, Any]:
    """What the early stop cost: the early sweep's choice against the full grid's best, both
    as measured in the full sweep (same conditions), and the time each sweep took."""
    best = choose(full, slo)
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
