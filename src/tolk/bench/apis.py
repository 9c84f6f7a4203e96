"""`tolk bench apis`: the drop-in APIs against tolk's own, on the same texts in one run.

Rounds alternate between the APIs (tolk, DeepL, LibreTranslate, OpenAI's chat completions
with the pair in the model name) so that drift on a noisy
machine hits each alike. Per API: requests per second, and the service overhead (client
latency minus the engine time the server reports in Server-Timing) at p50/p95; then each
drop-in API's throughput as a ratio of tolk's and its added p95 overhead in milliseconds.
With `--key`, every request carries the key where that API's clients put it, so keys,
rate limits and quotas are on the measured path. Also: language detection's cost per text.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tolk.bench import loadgen
from tolk.bench.report import write_json
from tolk.bench.run import alternate_rounds, pooled
from tolk.bench.stats import summarize
from tolk.bench.workloads import Workload

SCHEMA = "tolk.bench.apis/1"
APIS = ("tolk", "deepl", "libretranslate", "openai")


def detection_cost(workload: Workload, languages: list[str], repeat: int = 3) -> dict[str, Any]:
    """Microseconds per text for tolk.detect on the workload's texts (in this process, as
    the server runs it: restricted to the languages served)."""
    from tolk.detect import Detector

    detector = Detector(languages)
    texts = [item.text for item in workload.items]
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        for text in texts:
            detector.detect(text)
        timings.append((time.perf_counter() - started) / len(texts))
    chars = statistics.mean(len(t) for t in texts)
    return {"texts": len(texts), "mean_chars": chars, "us_per_text": min(timings) * 1e6}


async def run_apis(
    url: str,
    workload: Workload,
    *,
    concurrency: int,
    requests: int,
    rounds: int,
    warmup: int,
    key: str | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    async def one(name: str, advance: loadgen.Progress) -> dict[str, Any]:
        api = loadgen.with_key(loadgen.APIS[name], key)
        headers = api.key_header(key) if key else {}
        async with loadgen.make_client(url, concurrency + 4, headers=headers) as client:
            items = workload.stream()  # the same texts, in the same order, for every API
            if warmup:
                await loadgen.closed_loop(
                    client, items, 1, requests=warmup, path=api.path, encode=api.encode
                )
            records, duration = await loadgen.closed_loop(
                client,
                items,
                concurrency,
                requests=requests,
                progress=advance,
                path=api.path,
                encode=api.encode,
            )
        return {"path": name, "summary": summarize(records, duration, concurrency).to_json()}

    measured = await alternate_rounds(APIS, rounds, requests, progress, one)
    per_api = {}
    for name in APIS:
        runs = [m["summary"] for m in measured if m["path"] == name]
        per_api[name] = {
            **pooled(measured, name),
            "overhead_ms_p50": max(r["overhead_ms"].get("p50", float("nan")) for r in runs),
            "overhead_ms_p95": max(r["overhead_ms"].get("p95", float("nan")) for r in runs),
            # After the opening burst (every client's first request at once): the steady state.
            "steady_overhead_ms_p95": max(
                r["overhead_steady_ms"].get("p95", float("nan")) for r in runs
            ),
        }
    base = per_api["tolk"]
    for name in APIS:
        per_api[name]["throughput_ratio"] = per_api[name]["rps"] / base["rps"]
        per_api[name]["added_p95_ms"] = per_api[name]["overhead_ms_p95"] - base["overhead_ms_p95"]
        per_api[name]["added_steady_p95_ms"] = (
            per_api[name]["steady_overhead_ms_p95"] - base["steady_overhead_ms_p95"]
        )
    languages = sorted(
        {i.source_lang for i in workload.items} | {i.target_lang for i in workload.items}
    )
    return {
        "schema": SCHEMA,
        "url": url,
        "workload": workload.describe(),
        "concurrency": concurrency,
        "requests_per_round": requests,
        "keys": key is not None,
        "rounds": measured,
        "apis": per_api,
        "detection": {
            **(cost := detection_cost(workload, languages)),
            # Of a request's time through tolk's API (its p50 latency).
            "share_of_request": cost["us_per_text"] / 1e6 / base["p50_s"],
        },
    }


def table(results: dict[str, Any]) -> Table:
    keyed = ", with a key" if results["keys"] else ""
    concurrency = results["concurrency"]
    out = Table(
        title=f"tolk, DeepL, LibreTranslate and OpenAI APIs, concurrency {concurrency}{keyed}"
    )
    for header in (
        "api",
        "req/s",
        "x tolk",
        "p95 s",
        "overhead p50 ms",
        "overhead p95 ms",
        "added p95 ms",
        "steady p95 ms",
        "added steady p95 ms",
        "errors",
    ):
        out.add_column(header, justify="right")
    for name, a in results["apis"].items():
        out.add_row(
            name,
            f"{a['rps']:.2f}",
            f"{a['throughput_ratio']:.3f}",
            f"{a['p95_s']:.2f}",
            f"{a['overhead_ms_p50']:.2f}",
            f"{a['overhead_ms_p95']:.2f}",
            f"{a['added_p95_ms']:+.2f}",
            f"{a['steady_overhead_ms_p95']:.2f}",
            f"{a['added_steady_p95_ms']:+.2f}",
            str(a["errors"]),
        )
    d = results["detection"]
    out.caption = (
        f"detection: {d['us_per_text']:.0f} µs per text ({d['mean_chars']:.0f} characters "
        f"on average, {d['texts']} texts), {d['share_of_request']:.4%} of a request's time"
    )
    return out


def write(results: dict[str, Any], out_dir: Path) -> Path:
    return write_json(results, out_dir, "apis.json")
