"""`tolk tune`: right-size max_num_seqs and max_num_batched_tokens for a workload."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from tolk.bench.cli import (
    ConfigOption,
    ItemsOption,
    ModelOption,
    OutOption,
    SeedOption,
    console,
    default_out,
    levels,
)
from tolk.bench.run import progress_bar
from tolk.bench.workloads import Workload, load
from tolk.local import DEMO_CONFIG
from tolk.tune import report
from tolk.tune.profile import read_profile
from tolk.tune.rules import TRAFFIC, Point, Slo, StopRule
from tolk.tune.sweep import DEFAULT_CANDIDATES, DOCUMENT_CANDIDATES, Sweep, TunePlan

CANDIDATES_TEXT = ",".join(map(str, DEFAULT_CANDIDATES))
DOCUMENT_CANDIDATES_TEXT = ",".join(map(str, DOCUMENT_CANDIDATES))


def tune_command(
    config: ConfigOption = DEMO_CONFIG,
    model: ModelOption = "demo",
    from_server: Annotated[
        str | None,
        typer.Option(
            help="A running tolk server whose /metrics give the concurrency and text lengths "
            "to tune for (instead of --concurrency and --workload)."
        ),
    ] = None,
    quantile: Annotated[
        float, typer.Option(help="With --from-server: tune for this quantile of busy concurrency.")
    ] = 0.95,
    concurrency: Annotated[
        int | None,
        typer.Option(
            help="Concurrent requests to tune for (default 20; with --traffic documents, "
            "documents at once, default 8; with mixed, the sentences)."
        ),
    ] = None,
    traffic: Annotated[
        str,
        typer.Option(
            help="sentences: single texts (the case study's traffic); documents: whole "
            "documents, ranked by documents/s, the SLO on the document p95; mixed: sentences "
            "while documents run, ranked by output tokens/s of both, the SLO on the sentences' "
            "p95, and the chosen setting measured under both scheduling policies."
        ),
    ] = "sentences",
    workload: Annotated[
        str | None,
        typer.Option(
            help="What is sent: uniform, variable, articles, documents, a JSONL file, or a "
            "directory of your own documents (.txt .md .html .srt .vtt; en to de). Default: "
            "variable; documents for --traffic documents. With --traffic mixed, the sentences."
        ),
    ] = None,
    documents: Annotated[
        str,
        typer.Option(
            help="--traffic mixed: the documents (documents, a JSONL file or a directory)."
        ),
    ] = "documents",
    document_concurrency: Annotated[
        int, typer.Option(help="--traffic mixed: documents in flight beside the sentences.")
    ] = 4,
    candidates: Annotated[
        str | None,
        typer.Option(
            help=f"max_num_seqs values, swept in this order (default {CANDIDATES_TEXT}; "
            f"{DOCUMENT_CANDIDATES_TEXT} for documents and mixed traffic)."
        ),
    ] = None,
    batched_tokens: Annotated[
        str | None,
        typer.Option(
            help="max_num_batched_tokens values tried at the chosen max_num_seqs "
            "(default: 1/4, 1/2, 1x and 2x the configured value)."
        ),
    ] = None,
    slo_p95: Annotated[
        float | None,
        typer.Option(
            help="Latency SLO: p95 seconds a setting must meet (a request's; with --traffic "
            "documents a document's; with mixed the sentences' beside the documents)."
        ),
    ] = None,
    slo_ttft: Annotated[
        float | None, typer.Option(help="Time-to-first-token SLO: engine p95 seconds.")
    ] = None,
    slo_document_p95: Annotated[
        float | None,
        typer.Option(help="--traffic mixed: the documents' p95 seconds a setting must meet."),
    ] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds of load per setting.")] = None,
    requests: Annotated[int | None, typer.Option(help="Requests per setting, instead.")] = None,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests per setting.")] = 4,
    full: Annotated[bool, typer.Option(help="Measure every candidate: no early stop.")] = False,
    compare_full: Annotated[
        bool,
        typer.Option(help="After tuning, also run the full grid to check what the stop missed."),
    ] = False,
    order: Annotated[
        str | None,
        typer.Option(
            help="down: from the setting that covers the concurrency, halving (the default "
            "for sentences); up: from the smallest, doubling, as the case study did by hand "
            "(the default for documents and mixed traffic, where no setting 'covers' the "
            "segments in flight)."
        ),
    ] = None,
    min_gain: Annotated[
        float, typer.Option(help="Stopping rule: the throughput gain that counts.")
    ] = 0.03,
    patience: Annotated[
        int, typer.Option(help="Stopping rule: settings without gain before stopping anyway.")
    ] = 2,
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """Sweep max_num_seqs (then max_num_batched_tokens) on the model, each setting a fresh
    server driven at the target concurrency; recommend the fastest setting within the SLO."""
    if traffic not in TRAFFIC:
        raise typer.BadParameter(f"--traffic is one of {', '.join(TRAFFIC)}")
    sentences = traffic == "sentences"
    order = order or ("down" if sentences else "up")
    if order not in ("down", "up"):
        raise typer.BadParameter("--order is 'down' or 'up'")
    if from_server and traffic == "documents":
        raise typer.BadParameter("--from-server measures sentence traffic; use --workload")
    workload = workload or ("documents" if traffic == "documents" else "variable")
    candidates = candidates or (CANDIDATES_TEXT if sentences else DOCUMENT_CANDIDATES_TEXT)
    if requests is not None and duration is not None:
        raise typer.BadParameter("give --requests or --duration, not both")
    if requests is None and duration is None:
        duration = 20.0
    if from_server:
        if concurrency is not None:
            raise typer.BadParameter("--from-server measures the concurrency; drop --concurrency")
        load_, target, source = _from_server(from_server, model, quantile, items, seed)
    else:
        target = concurrency or (8 if traffic == "documents" else 20)
        try:
            load_ = load(workload, items, seed)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        source = {"kind": "given"}
    try:
        docs = load(documents, items, seed) if traffic == "mixed" else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    plan = TunePlan(
        config_path=config,
        model=model,
        workload=load_,
        concurrency=target,
        workdir=(out or default_out("tune")),
        slo=Slo(slo_p95, slo_ttft, slo_document_p95),
        rule=StopRule(
            min_gain=min_gain,
            patience=patience,
            # documents: the engine sees segments, hundreds per document; no setting covers them
            concurrency=target if sentences else None,
            order=order,
            unit=TRAFFIC[traffic][0],
        ),
        candidates=tuple(int(c) for c in levels(candidates, int)),
        batched_tokens=tuple(int(t) for t in levels(batched_tokens, int)) or None,
        duration=duration,
        requests=requests,
        warmup=warmup,
        full=full,
        compare_full=compare_full,
        source=source,
        traffic=traffic,
        documents=docs,
        document_concurrency=document_concurrency,
    )
    plan.workdir.mkdir(parents=True, exist_ok=True)
    with progress_bar() as progress:
        try:
            sweep = Sweep(plan, progress)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        sweep.on_point = lambda p: progress.console.print(_point_line(p, plan.unit))
        results = asyncio.run(sweep.run())
    written = report.write(results, plan.workdir)
    console.print(report.table(results))
    for line in report.summary_lines(results)[1:]:
        console.print(line)
    console.print(report.snippet(results))
    console.print("wrote " + ", ".join(str(p) for p in written))


def _from_server(
    url: str, model: str | None, quantile: float, items: int, seed: int
) -> tuple[Workload, int, dict[str, object]]:
    """The workload, concurrency and source a running server's metrics measured."""
    try:
        profile = read_profile(url, model, quantile)
        workload = profile.workload(items, seed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    console.print(
        f"measured on {url}: {profile.concurrency} texts in flight at the "
        f"p{quantile * 100:g} of busy time (busy {profile.busy_fraction:.0%} of "
        f"{profile.samples} samples); {profile.texts} texts, mean "
        f"{profile.source_tokens_mean:.0f} source tokens"
    )
    return workload, profile.concurrency, {"kind": "server", **profile.to_json()}


def _point_line(p: Point, unit: str) -> str:
    head = f"{p.phase}: max_num_seqs {p.max_num_seqs}, batched tokens {p.max_num_batched_tokens}"
    if p.scheduling != "fcfs":
        head += f", scheduling {p.scheduling}"
    if p.failed:
        return f"{head}: could not be measured: {p.failed}"
    line = f"{head}: {p.rps:.2f} {unit}, p95 {p.p95:.2f} s, {p.errors} errors"
    if p.sentence_p95_alone is not None:
        line += f" (alone {p.sentence_p95_alone:.2f} s)"
    if p.segments_per_s is not None:
        line += f"; documents {p.documents_per_s:.2f}/s, {p.segments_per_s:.1f} segments/s"
        line += f", document p95 {p.document_p95:.2f} s, {p.overloaded_retries} retries"
    return line + f", KV peak {p.kv_peak:.0%}, {p.seconds:.0f} s"
