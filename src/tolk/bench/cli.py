"""`tolk bench ...` commands."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.progress import Progress

from tolk.bench import report
from tolk.bench.run import RunPlan, progress_bar, run
from tolk.bench.workloads import load
from tolk.local import DEMO_CONFIG

app = typer.Typer(
    help="Load tests, the architecture journey, and overhead checks.", no_args_is_help=True
)
# Off a terminal rich assumes 80 columns, too narrow for the report table.
console = Console(width=None if sys.stdout.isatty() else 170)


# Options several commands share (bench run/journey/overhead/proxy, tune).
ConfigOption = Annotated[Path, typer.Option(help="tolk config holding the model.")]
ModelOption = Annotated[str, typer.Option(help="The model, by its name in the config.")]
WorkloadOption = Annotated[
    str,
    typer.Option(
        help="uniform, variable, articles, documents, a JSONL file, or a directory of your own "
        "documents (.txt .md .html .srt .vtt; en to de)."
    ),
]
ItemsOption = Annotated[int, typer.Option(help="Distinct texts generated.")]
SeedOption = Annotated[int, typer.Option(help="Seed of the generated workload.")]
OutOption = Annotated[Path | None, typer.Option(help="Output directory.")]


def levels(text: str | None, kind: type[float] | type[int]) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        values = tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"'{text}' is not a comma-separated list of numbers") from exc
    if not values or min(values) <= 0:
        raise typer.BadParameter(f"'{text}': levels must be positive")
    return values


def default_out(kind: str) -> Path:
    return Path("results") / f"{kind}-{dt.datetime.now():%Y%m%d-%H%M%S}"


def out_dir_for(out: Path | None, kind: str) -> Path:
    """The output directory (given, or results/KIND-TIMESTAMP), created."""
    folder = out or default_out(kind)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def measured(
    kind: str,
    out: Path | None,
    start: Callable[[Path, Progress], Coroutine[Any, Any, dict[str, Any]]],
    table: Callable[[dict[str, Any]], RenderableType],
    write: Callable[[dict[str, Any], Path], Path | Sequence[Path]],
) -> None:
    """A measurement's common frame: its output directory, a progress bar while
    `start(out_dir, progress)` runs, then its table and the files it wrote."""
    out_dir = out_dir_for(out, kind)
    with progress_bar() as progress:
        results = asyncio.run(start(out_dir, progress))
    show(table(results), write(results, out_dir))


def show(table: RenderableType, written: Path | Sequence[Path]) -> None:
    """A command's report table, then the files it wrote."""
    console.print(table)
    paths = [written] if isinstance(written, Path) else written
    console.print("wrote " + ", ".join(str(p) for p in paths))


@app.command("run")
def run_command(
    url: Annotated[str, typer.Option(help="The tolk server (or proxy) to load.")],
    workload: WorkloadOption = "variable",
    concurrency: Annotated[
        str | None, typer.Option(help="Closed loop: concurrency levels, e.g. 1,5,10,25,50.")
    ] = None,
    rate: Annotated[
        str | None, typer.Option(help="Open loop: Poisson arrival rates per second, e.g. 5,10.")
    ] = None,
    requests: Annotated[int | None, typer.Option(help="Requests per level.")] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds per level.")] = None,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests before each level.")] = 5,
    items: ItemsOption = 200,
    source: Annotated[str, typer.Option(help="Source language (uniform/variable).")] = "en",
    target: Annotated[str, typer.Option(help="Target language (uniform/variable).")] = "de",
    seed: SeedOption = 0,
    timeline_interval: Annotated[
        float, typer.Option(help="Seconds between samples of the server's gauges.")
    ] = 0.25,
    api: Annotated[
        str,
        typer.Option(
            help="Which API to drive: tolk, deepl (/v2/translate), libretranslate, openai "
            "(/v1/chat/completions, the pair in the model name)."
        ),
    ] = "tolk",
    key: Annotated[
        str | None, typer.Option(help="An API key, sent as the API's clients do.")
    ] = None,
    out: OutOption = None,
) -> None:
    """Drive a server at each load level; write results.json, report.md and charts."""
    if api not in ("tolk", "deepl", "libretranslate", "openai"):
        raise typer.BadParameter("tolk, deepl, libretranslate or openai", param_hint="--api")
    if concurrency and rate:
        raise typer.BadParameter("give --concurrency or --rate, not both")
    if requests is None and duration is None:
        requests = 100
    if requests is not None and duration is not None:
        raise typer.BadParameter("give --requests or --duration, not both")
    default_levels = concurrency or ("" if rate else "1,5,10,25,50")
    plan = RunPlan(
        url=url.rstrip("/"),
        workload=load(workload, items, seed, source, target),
        concurrency=tuple(int(c) for c in levels(default_levels, int)),
        rates=levels(rate, float),
        requests=requests,
        duration=duration,
        warmup=warmup,
        seed=seed,
        timeline_interval=timeline_interval,
        api=api,
        key=key,
    )
    with progress_bar() as progress:
        results = asyncio.run(run(plan, progress))
    out_dir = out or default_out("bench")
    written = report.write(results, out_dir)
    console.print(report.table(results))
    for warning in results["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    console.print("wrote " + ", ".join(str(p) for p in written))


@app.command("apis")
def apis_command(
    url: Annotated[str, typer.Option(help="The tolk server to measure (otherwise idle).")],
    workload: WorkloadOption = "variable",
    concurrency: Annotated[int, typer.Option(help="Concurrent requests.")] = 16,
    requests: Annotated[int, typer.Option(help="Requests per round and API.")] = 200,
    rounds: Annotated[int, typer.Option(help="Alternating rounds over the three APIs.")] = 2,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests first.")] = 5,
    key: Annotated[
        str | None, typer.Option(help="Send this API key (keys, rates and quotas measured).")
    ] = None,
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """tolk's API, DeepL's and LibreTranslate's on the same texts: throughput ratios, added
    p95 overhead, and language detection's cost per text."""
    from tolk.bench import apis

    measured(
        "apis",
        out,
        lambda out_dir, progress: apis.run_apis(
            url.rstrip("/"),
            load(workload, items, seed),
            concurrency=concurrency,
            requests=requests,
            rounds=rounds,
            warmup=warmup,
            key=key,
            progress=progress,
        ),
        apis.table,
        apis.write,
    )


@app.command("journey")
def journey_command(
    config: ConfigOption = DEMO_CONFIG,
    model: ModelOption = "demo",
    workloads: Annotated[str, typer.Option(help="Comma-separated workloads.")] = "uniform,variable",
    concurrency: Annotated[int, typer.Option(help="Concurrent clients.")] = 25,
    requests: Annotated[
        int | None, typer.Option(help="Requests per architecture and workload.")
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(help="Or: seconds per architecture and workload (fast engines, e.g. GPUs)."),
    ] = None,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests first.")] = 5,
    architectures: Annotated[
        str | None, typer.Option(help="Comma-separated subset (default: all five).")
    ] = None,
    items: ItemsOption = 200,
    timeout: Annotated[
        float, typer.Option(help="Per-request deadline on every architecture, seconds.")
    ] = 300.0,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """Reproduce the case study's journey: baseline, static batching, continuous batching."""
    from tolk.bench import journey

    if requests is not None and duration is not None:
        raise typer.BadParameter("give --requests or --duration, not both")
    if requests is None and duration is None:
        requests = 100
    chosen = journey.select(architectures.split(",") if architectures else None)
    loads = [load(w.strip(), items, seed) for w in workloads.split(",") if w.strip()]
    measured(
        "journey",
        out,
        lambda out_dir, progress: journey.run_journey(
            config,
            model,
            loads,
            chosen,
            concurrency=concurrency,
            requests=requests,
            duration=duration,
            warmup=warmup,
            workdir=out_dir,
            request_timeout=timeout,
            progress=progress,
        ),
        journey.table,
        journey.write,
    )


@app.command("overhead")
def overhead_command(
    config: ConfigOption = DEMO_CONFIG,
    model: ModelOption = "demo",
    workload: WorkloadOption = "variable",
    concurrency: Annotated[int, typer.Option(help="Concurrent requests.")] = 25,
    requests: Annotated[int, typer.Option(help="Requests per round and path.")] = 200,
    rounds: Annotated[int, typer.Option(help="Alternating direct/HTTP rounds.")] = 2,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests first.")] = 5,
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """The same requests directly on AsyncLLM in-process and through tolk's HTTP API."""
    from tolk.bench import overhead

    measured(
        "overhead",
        out,
        lambda out_dir, progress: overhead.run_overhead(
            config,
            model,
            load(workload, items, seed),
            concurrency=concurrency,
            requests=requests,
            rounds=rounds,
            warmup=warmup,
            workdir=out_dir,
            progress=progress,
        ),
        overhead.table,
        overhead.write,
    )


@app.command("versus-vllm")
def versus_command(
    config: ConfigOption = DEMO_CONFIG,
    model: ModelOption = "demo",
    workload: WorkloadOption = "variable",
    concurrency: Annotated[int, typer.Option(help="Concurrent requests.")] = 25,
    requests: Annotated[int, typer.Option(help="Requests per round and server.")] = 200,
    rounds: Annotated[int, typer.Option(help="Alternating vLLM/tolk rounds.")] = 2,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests first.")] = 10,
    data_parallel: Annotated[
        int,
        typer.Option(
            min=1,
            help="N > 1: vLLM's server with --data-parallel-size N against a tolk fleet of N "
            "servers (one GPU each where there are GPUs) behind tolk's proxy.",
        ),
    ] = 1,
    systems: Annotated[
        str,
        typer.Option(
            help="The systems measured, comma-separated, in the rounds' order: vllm and tolk, "
            "and direct (tolk's engine awaited in this process: vLLM's AsyncLLM without HTTP "
            "or tolk's service). All are started first and stay up.",
        ),
    ] = "vllm,tolk",
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """tolk against vLLM's own OpenAI server: same model, settings, prompts and token counts."""
    from tolk.bench import versus

    measured(
        "versus",
        out,
        lambda out_dir, progress: versus.run_versus(
            config,
            model,
            load(workload, items, seed),
            concurrency=concurrency,
            requests=requests,
            rounds=rounds,
            warmup=warmup,
            workdir=out_dir,
            progress=progress,
            data_parallel=data_parallel,
            paths=[name.strip() for name in systems.split(",") if name.strip()],
        ),
        versus.table,
        versus.write,
    )


@app.command("documents")
def documents_command(
    url: Annotated[str, typer.Option(help="The tolk server to measure (otherwise idle).")],
    concurrency: Annotated[int, typer.Option(help="Documents at once in the load phase.")] = 8,
    documents: Annotated[int, typer.Option(help="Documents sent in the load phase.")] = 24,
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="Model directory whose tokenizer counts tokens for the cost figure."),
    ] = Path("models/demo"),
    files: Annotated[
        bool,
        typer.Option(help="Also a sample file of each kind, alone and all at once."),
    ] = True,
    target: Annotated[str, typer.Option(help="The files' target language.")] = "de",
    only_files: Annotated[
        bool, typer.Option(help="Only the files (no idle, load and cost measurements).")
    ] = False,
    out: OutOption = None,
) -> None:
    """Whole documents: split vs its floor when idle, documents/s under load, segmenting cost,
    and a file of each kind (its translation kept beside the report, in translated/)."""
    from tolk.bench import documents as bench_documents

    has_tokenizer = tokenizer is not None and (tokenizer / "tokenizer.json").exists()
    measured(
        "documents",
        out,
        lambda out_dir, progress: bench_documents.run_documents(
            url.rstrip("/"),
            load("documents"),
            concurrency,
            documents,
            tokenizer if has_tokenizer else None,
            progress,
            file_target=target if files or only_files else None,
            keep=out_dir / "translated",
            only_files=only_files,
        ),
        bench_documents.table,
        bench_documents.write,
    )


@app.command("segment-cache")
def segment_cache_command(
    url: Annotated[
        str, typer.Option(help="The tolk server to measure (its segment cache enabled).")
    ],
    requests: Annotated[int, typer.Option(help="Requests in the Weblate-like stream.")] = 300,
    strings: Annotated[int, typer.Option(help="Distinct strings the stream draws from.")] = 60,
    concurrency: Annotated[int, typer.Option(help="Stream requests at once.")] = 4,
    targets: Annotated[
        str, typer.Option(help="Target languages (from English); the article goes to the first.")
    ] = "de,fr,es",
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """The segment cache: an article re-translated after 10% of it was edited, and a
    stream of repeated strings with the cache off, cold and warm (engine tokens, time)."""
    from tolk.bench import segment_cache as bench_cache

    chosen = [t.strip() for t in targets.split(",") if t.strip()]
    if requests < 1 or strings < 1 or concurrency < 1 or not chosen:
        raise typer.BadParameter("--requests, --strings, --concurrency and --targets are needed")
    measured(
        "segment-cache",
        out,
        lambda out_dir, progress: bench_cache.run_segment_cache(
            url.rstrip("/"), requests, strings, concurrency, seed, progress, chosen
        ),
        bench_cache.table,
        bench_cache.write,
    )


# The command's name before the segment memory was renamed the segment cache: still run, not
# listed.
app.command("memory", hidden=True)(segment_cache_command)


@app.command("gpu-compare")
def gpu_compare_command(
    run: Annotated[
        list[str],
        typer.Option(help="LABEL=DIR of a `tolk bench run` (its results.json); repeat."),
    ],
    level: Annotated[float, typer.Option(help="The concurrency (or rate) level to compare.")],
    out: OutOption = None,
) -> None:
    """GPU utilisation over time at one level, side by side (spiky vs steady)."""
    import json

    from tolk.bench import gpu_compare

    runs = []
    for spec in run:
        label, sep, folder = spec.partition("=")
        if not sep:
            raise typer.BadParameter(f"'{spec}': write LABEL=DIR")
        runs.append((label, json.loads((Path(folder) / "results.json").read_text())))
    try:
        comparison = gpu_compare.compare(runs, level)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    show(
        gpu_compare.table(comparison),
        gpu_compare.write(comparison, out or default_out("gpu-compare")),
    )


@app.command("proxy")
def proxy_command(
    standin: Annotated[
        bool,
        typer.Option(
            help="Stand-in upstreams of fixed capacity (default); --no-standin starts two "
            "real tolk servers of --model instead."
        ),
    ] = True,
    capacity: Annotated[int, typer.Option(help="Stand-ins: requests held at once.")] = 8,
    hold: Annotated[float, typer.Option(help="Stand-ins: seconds each request is held.")] = 0.05,
    config: ConfigOption = DEMO_CONFIG,
    model: ModelOption = "demo",
    workload: WorkloadOption = "variable",
    concurrency: Annotated[int, typer.Option(help="Concurrent requests.")] = 32,
    rate: Annotated[
        float | None,
        typer.Option(help="Open loop instead: Poisson arrivals per second (for latency)."),
    ] = None,
    requests: Annotated[int, typer.Option(help="Requests per round and path.")] = 2000,
    rounds: Annotated[int, typer.Option(help="Rounds of direct, proxy-1, proxy-2.")] = 2,
    warmup: Annotated[int, typer.Option(help="Unrecorded requests first.")] = 50,
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """The proxy's overhead (one upstream, direct vs proxied) and scaling (two upstreams)."""
    from tolk.bench import proxy

    out_dir = out_dir_for(out, "proxy")
    with progress_bar() as progress:
        results = proxy.run_proxy_bench(
            load(workload, items, seed),
            workdir=out_dir,
            concurrency=concurrency,
            requests=requests,
            rounds=rounds,
            warmup=warmup,
            standin=(capacity, hold) if standin else None,
            config_path=None if standin else config,
            model=None if standin else model,
            rate=rate,
            progress=progress,
        )
    show(proxy.table(results), proxy.write(results, out_dir))


@app.command("overload")
def overload_command(
    url: Annotated[str, typer.Option(help="The tolk server (or proxy) to overload.")],
    capacity: Annotated[
        int, typer.Option(help="The model's max_num_seqs + max_waiting: what it admits at once.")
    ],
    factor: Annotated[float, typer.Option(help="Burst size as a multiple of capacity.")] = 4.0,
    waves: Annotated[int, typer.Option(help="Baseline and burst waves, alternating.")] = 5,
    workload: WorkloadOption = "uniform",
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    documents_seconds: Annotated[
        float,
        typer.Option(help="Then the documents workload for this long (0: skip): loop stalls."),
    ] = 30.0,
    documents_concurrency: Annotated[
        int, typer.Option(help="Concurrent documents in that phase.")
    ] = 2,
    client: Annotated[
        str,
        typer.Option(help="lean (a minimal HTTP/1.1 client: the default) or aiohttp."),
    ] = "lean",
    out: OutOption = None,
) -> None:
    """A burst of FACTOR x capacity against waves of capacity: how fast refusals answer,
    what the excess costs the admitted requests, and the event loop's stalls."""
    from tolk.bench import overload

    if client not in ("lean", "aiohttp"):
        raise typer.BadParameter("lean or aiohttp", param_hint="--client")
    chosen: overload.Client = "lean" if client == "lean" else "aiohttp"

    async def start(out_dir: Path, progress: Progress) -> dict[str, Any]:
        documents = None
        if documents_seconds > 0:
            documents = overload.DocumentsLoad(
                load("documents", items, seed), documents_seconds, documents_concurrency
            )
        plan = overload.OverloadPlan(
            url, load(workload, items, seed), capacity, factor, waves, documents, chosen
        )
        return await overload.measure(plan, progress.console.log)

    measured("overload", out, start, overload.table, overload.write)


@app.command("soak")
def soak_command(
    url: Annotated[str, typer.Option(help="The tolk server to soak.")],
    pid: Annotated[int, typer.Option(help="The server's process id (its RSS is sampled).")],
    concurrency: Annotated[
        int, typer.Option(help="Concurrent clients: 2x the server's capacity overloads it.")
    ] = 160,
    minutes: Annotated[float, typer.Option(help="How long.")] = 10.0,
    interval: Annotated[float, typer.Option(help="Seconds between RSS samples.")] = 5.0,
    workload: WorkloadOption = "variable",
    items: ItemsOption = 200,
    seed: SeedOption = 0,
    out: OutOption = None,
) -> None:
    """A long overload; the RSS of the server and its engine processes over time."""
    from tolk.bench import soak

    async def start(out_dir: Path, progress: Progress) -> dict[str, Any]:
        return await soak.measure(
            url,
            pid,
            load(workload, items, seed),
            concurrency,
            minutes,
            interval,
            progress=progress.console.log,
        )

    measured("soak", out, start, soak.table, soak.write)


def _quality_json(path: Path) -> dict[str, Any]:
    import json

    file = path / "quality.json" if path.is_dir() else path
    try:
        return dict(json.loads(file.read_text()))
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{file}: {exc}") from exc


def _quality_compare(a: Path, b: Path, out: Path | None) -> None:
    from tolk.bench import quality_report

    comparison = quality_report.compare(_quality_json(a), _quality_json(b))
    out_dir = out_dir_for(out, "quality-compare")
    written = quality_report.write_compare(comparison, out_dir)
    show(quality_report.compare_table(comparison), written)


def _quality_systems(
    url: str | None, config: Path | None, openai: str | None, openai_start: Path | None
) -> None:
    """One tolk (a server or a config) and at most one baseline, or BadParameter."""
    if url and config:
        raise typer.BadParameter("give --url or --config, not both")
    if openai and openai_start:
        raise typer.BadParameter("give --openai or --openai-start, not both")
    if not (url or config or openai or openai_start):
        raise typer.BadParameter(
            "nothing to measure: give --url, --config, --openai or --openai-start"
        )


def _quality_apis(apis: str, alternatives: int) -> list[str]:
    """The --apis list, checked against quality.APIS (and --alternatives' needs)."""
    from tolk.bench import quality

    chosen = [a.strip() for a in apis.split(",") if a.strip()]
    if not chosen or set(chosen) - set(quality.APIS):
        raise typer.BadParameter(f"'{apis}': any of {','.join(quality.APIS)}", param_hint="--apis")
    if alternatives and not set(chosen) & set(quality.ALTERNATIVE_APIS):
        raise typer.BadParameter("--alternatives needs --apis tolk or libretranslate")
    return chosen


def _quality_variants(variants: str, config: Path | None) -> list[str]:
    """--variants as a list: known names, each once, and only where tolk is started here."""
    from tolk.bench import quality_speed

    chosen = [v.strip() for v in variants.split(",") if v.strip()]
    if not all(map(quality_speed.known, chosen)) or len(set(chosen)) < len(chosen):
        raise typer.BadParameter(
            f"'{variants}': any of {','.join(quality_speed.VARIANTS)}, each once, or "
            "several joined by '+' (all their changes at once)",
            param_hint="--variants",
        )
    if chosen and not config:
        raise typer.BadParameter("--variants starts tolk itself: give --config, not --url")
    return chosen


def _profiler_ready(config: Path | None, openai_start: Path | None) -> None:
    """--profile records servers started here, with py-spy: both must be so."""
    from tolk.bench import profile

    if config is None and openai_start is None:
        raise typer.BadParameter(
            "--profile records servers started here: give --config or --openai-start"
        )
    try:
        profile.py_spy()
    except profile.ProfilerMissing as exc:
        raise typer.BadParameter(str(exc), param_hint="--profile") from exc


def _quality_units(
    folder: Path,
    pairs: str,
    sentences: int,
    offset: int,
    markup_sentences: int,
    document_chars: int | bool | None,
) -> tuple[list[Any], list[tuple[str, str]], set[str]]:
    """The units measured (sentences, then markup units per format and en-X pair when
    `markup_sentences`, then the articles unless `document_chars` is False), the pairs and
    the languages the data has."""
    from tolk.bench import quality_data

    try:
        chosen_pairs = quality_data.parse_pairs(pairs)
        units = quality_data.sentences(folder, chosen_pairs, sentences, offset)
        languages = set(quality_data.language_files(folder))
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    if markup_sentences:
        targets = [t for s, t in chosen_pairs if s == "en"]
        if not targets or "en" not in languages:
            raise typer.BadParameter("--markup is made from English: give an en-X pair")
        english = quality_data.read_lines(quality_data.language_files(folder)["en"])
        units += quality_data.markup_units(english, targets, markup_sentences, offset)
    if document_chars is not False:
        units += quality_data.documents(document_chars or None)
    return units, chosen_pairs, languages


@app.command("quality")
def quality_command(
    url: Annotated[str | None, typer.Option(help="A running tolk server to measure.")] = None,
    config: Annotated[
        Path | None, typer.Option(help="Or: start tolk from this config (stopped at the end).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="With --config: only this model (its engine for --openai-start too)."),
    ] = None,
    apis: Annotated[
        str,
        typer.Option(
            help="tolk's APIs measured: any of tolk,deepl,libretranslate,chat (its OpenAI "
            "chat completions, the pair in the model's name),chat-prompt (the same sent "
            "Pot's prompt, which tolk recognises)."
        ),
    ] = "tolk",
    openai: Annotated[
        str | None,
        typer.Option(
            help="The baseline: an OpenAI-compatible server (raw `vllm serve`), sent "
            "'Translate the following {Source} text into {Target}...', greedy, 512 tokens."
        ),
    ] = None,
    openai_model: Annotated[
        str | None, typer.Option(help="The model asked of --openai (default: its first).")
    ] = None,
    openai_start: Annotated[
        Path | None,
        typer.Option(
            help="Or: start vLLM's own OpenAI server on this model directory, with tolk's "
            "engine arguments (--config's model's, else tolk's defaults); stopped at the end."
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="A directory of aligned files, one sentence a line, named by "
            "language (eng.txt, cmn_Hans.txt or en.txt). Default: $TOLK_QUALITY_DATA; one of "
            "them is needed (FLORES-101 is not shipped; in the development checkout: "
            "../shared/quality/flores101)."
        ),
    ] = None,
    pairs: Annotated[str, typer.Option(help="Language pairs, e.g. en-de,de-en.")] = (
        "en-de,en-fr,en-es,en-zh,en-ne,de-en"
    ),
    sentences: Annotated[
        int,
        typer.Option(
            help="The first N lines per pair. Size every run: a real 0.5B model on a "
            "2-core CPU makes ~10-15 output tokens/s in all, so 40 sentences x 6 pairs take about "
            "20 minutes per system; on a GPU, give 400."
        ),
    ] = 40,
    offset: Annotated[int, typer.Option(help="Skip this many lines first.")] = 0,
    markup: Annotated[
        bool, typer.Option(help="Also markdown and HTML units made from the English (en-X).")
    ] = False,
    markup_sentences: Annotated[
        int, typer.Option(help="Markup units per format and en-X pair.")
    ] = 12,
    documents: Annotated[
        bool,
        typer.Option(help="Also the case-study articles en>ne at each split mode (tolk API)."),
    ] = False,
    document_chars: Annotated[
        int,
        typer.Option(
            help="The first N characters' worth of each article's lines (0: whole "
            "articles of 12,000 and 8,600 characters: long on a CPU)."
        ),
    ] = 1000,
    concurrency: Annotated[
        int,
        typer.Option(
            help="Requests at once per system. To compare speed at saturation as a user "
            "would, give the engine's batch or more (e.g. 256 on the H100)."
        ),
    ] = 8,
    rounds: Annotated[
        int,
        typer.Option(
            help="Passes over the units per system, the systems alternating (the first pass "
            "is scored; every pass is timed, with the GPU and the engine sampled)."
        ),
    ] = 1,
    variants: Annotated[
        str,
        typer.Option(
            help="With --config: tolk again with a feature off or a setting changed, each a "
            "system of its own alternating with the baseline: names of "
            "tolk.bench.quality_speed.VARIANTS (examples-off, checks-off, retry-off, "
            "gather-25, cudagraph-1024, ...; a wrong name lists them all), or several joined "
            "by '+' (gather-25+cudagraph-1024: all their changes at once)."
        ),
    ] = "",
    profile: Annotated[
        bool,
        typer.Option(
            help="py-spy (on PATH) on each server started here during its first pass, its "
            "engine's processes too: each busy thread and its hottest functions in the report."
        ),
    ] = False,
    alternatives: Annotated[
        int,
        typer.Option(
            help="Also ask tolk's and LibreTranslate's APIs for N alternatives per sentence (a "
            "system of its own, '+altN', in the same run): their cost and their scores."
        ),
    ] = 0,
    translation_memory: Annotated[
        str | None,
        typer.Option(
            help="Also measure tolk's and DeepL's APIs naming this translation memory (a "
            "system of its own, '+tm', in the same run): what its references do to quality."
        ),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(help="Compare two runs instead (quality.json or their directories)."),
    ] = None,
    out: OutOption = None,
) -> None:
    """Translation quality on human references: chrF++ and BLEU with 95% intervals, failure
    rates (off-target, echo, loop, cut, truncated, empty), tolk's flags, latency and tokens."""
    from tolk.bench import quality, quality_data, quality_report

    if compare is not None:
        _quality_compare(*compare, out)
        return
    _quality_systems(url, config, openai, openai_start)
    chosen_apis = _quality_apis(apis, alternatives)
    if sentences < 1 or offset < 0 or concurrency < 1 or alternatives < 0 or rounds < 1:
        raise typer.BadParameter(
            "--sentences, --concurrency and --rounds are positive, --offset and --alternatives >= 0"
        )
    chosen_variants = _quality_variants(variants, config)
    if profile:
        _profiler_ready(config, openai_start)
    folder = data or quality_data.default_data()
    if folder is None:
        raise typer.BadParameter(quality_data.DATA_HINT, param_hint="--data")
    units, chosen_pairs, languages = _quality_units(
        folder, pairs, sentences, offset, markup_sentences if markup else 0,
        (document_chars or None) if documents else False,
    )  # fmt: skip
    warnings = []
    if data is None and offset + sentences > quality.BUDGET_SAMPLE_FROM:
        warnings.append(
            f"lines past {quality.BUDGET_SAMPLE_FROM} are the sample tolk sizes output budgets "
            "on (src/tolk/data/parallel): not independent test data"
        )
    # The languages the output checks tell apart, recorded so that a compare judges alike.
    judged = sorted(languages | {t for p in chosen_pairs for t in p} | {"en", "ne"})
    plan = quality.Plan(
        units=units,
        concurrency=concurrency,
        url=url,
        config=config,
        model=model,
        apis=chosen_apis,
        openai=openai,
        openai_model=openai_model,
        openai_start=openai_start,
        languages=judged,
        alternatives=alternatives,
        translation_memory=translation_memory,
        rounds=rounds,
        variants=chosen_variants,
        profile=profile,
        settings={
            "languages": judged,
            "data": str(folder),
            "pairs": [f"{s}-{t}" for s, t in chosen_pairs],
            "sentences_per_pair": sentences,
            "offset": offset,
            "concurrency": concurrency,
            "alternatives": alternatives,
            "translation_memory": translation_memory,
            "markup_sentences": markup_sentences if markup else 0,
            "document_chars": (document_chars or None) if documents else None,
            "warnings": warnings,
        },
    )
    measured(
        "quality",
        out,
        lambda out_dir, progress: quality.run_quality(plan, out_dir, progress),
        quality_report.table,
        quality_report.write,
    )


@app.command("quality-compare")
def quality_compare_command(
    a: Annotated[Path, typer.Argument(help="Run A: its quality.json or directory.")],
    b: Annotated[Path, typer.Argument(help="Run B, compared with A.")],
    out: OutOption = None,
) -> None:
    """Two `bench quality` runs: score and failure-rate differences, paired bootstrap tests."""
    _quality_compare(a, b, out)
