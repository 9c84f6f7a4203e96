"""The bench's pure parts on plain data: statistics, workloads, arrivals, scraping, reports."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench import run_results
from tests.support.servers import model_config
from tolk.bench import gpu_compare, journey, report
from tolk.bench.loadgen import engine_seconds, poisson_arrivals
from tolk.bench.scrape import engine_summary
from tolk.bench.stats import Latency, RequestRecord, histogram_quantile, percentile, summarize
from tolk.bench.workloads import WORDS_PER_TOKEN, articles, from_jsonl, load, uniform, variable
from tolk.wire.prometheus import Snapshot


def test_percentile_interpolates_linearly() -> None:
    data = [float(x) for x in range(1, 11)]
    assert percentile(data, 50) == 5.5
    assert percentile(data, 95) == pytest.approx(9.55)
    assert percentile(data, 0) == 1.0
    assert percentile(data, 100) == 10.0
    assert percentile([3.0], 99) == 3.0
    assert math.isnan(percentile([], 50))


def test_latency_summary() -> None:
    latency = Latency.of([1.0, 2.0, 3.0, 4.0])
    assert (latency.p50, latency.mean) == (2.5, 2.5)
    assert latency.p99 == pytest.approx(3.97)


def test_summarize_counts_errors_and_overhead() -> None:
    records = [
        RequestRecord(0.0, 1.0, 200, completion_tokens=10, engine_seconds=0.99),
        RequestRecord(0.1, 2.0, 200, completion_tokens=30, engine_seconds=1.97),
        RequestRecord(0.2, 0.01, 503, "overloaded"),
        RequestRecord(0.3, 0.5, 0, "ConnectError"),
    ]
    summary = summarize(records, duration=4.0)
    assert (summary.requests, summary.ok) == (4, 2)
    assert summary.errors == {"503": 1, "connection": 1}
    assert summary.rps == 0.5
    assert summary.output_tokens_per_s == 10.0
    assert summary.latency_s.p50 == 1.5  # successful requests only
    assert summary.overhead_ms["p50"] == pytest.approx(20.0)


def test_summarize_leaves_the_opening_burst_out_of_steady_overhead() -> None:
    # A closed loop at concurrency 3 opens with three requests at once; the last of them
    # waits behind the other two in the server (40 ms of overhead), later ones do not.
    burst = [RequestRecord(0.0, 1.0 + o, 200, engine_seconds=1.0) for o in (0.002, 0.02, 0.04)]
    later = [RequestRecord(1.0 + i, 1.003, 200, engine_seconds=1.0) for i in range(10)]
    summary = summarize(burst + later, duration=12.0, burst=3)
    assert summary.overhead_ms["p95"] > 20
    assert summary.overhead_steady_ms["p95"] == pytest.approx(3.0)
    assert summarize(burst + later, duration=12.0).overhead_steady_ms == summary.overhead_ms


def test_histogram_quantile_matches_prometheus() -> None:
    buckets = [(0.1, 10.0), (0.5, 60.0), (1.0, 100.0), (math.inf, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.42)
    assert histogram_quantile(0.05, buckets) == pytest.approx(0.05)
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.9375)
    assert math.isnan(histogram_quantile(0.5, [(1.0, 0.0)]))


def _tokens(text: str) -> float:
    return len(text.split()) / WORDS_PER_TOKEN


def test_variable_workload_spans_10_to_200_tokens_deterministically() -> None:
    workload = variable(400, seed=1)
    lengths = [_tokens(i.text) for i in workload.items]
    assert 9 <= min(lengths) < 25
    assert 180 < max(lengths) <= 201
    assert 90 < sum(lengths) / len(lengths) < 120  # same mean as uniform: only spread differs
    assert variable(400, seed=1) == workload
    assert variable(400, seed=2) != workload


def test_uniform_workload_is_nearly_equal_length() -> None:
    lengths = [_tokens(i.text) for i in uniform(200, seed=0).items]
    assert max(lengths) - min(lengths) <= 12
    assert 95 <= sum(lengths) / len(lengths) <= 105


def test_articles_workload_uses_both_directions() -> None:
    workload = articles(300, seed=0)
    assert {(i.source_lang, i.target_lang) for i in workload.items} == {("en", "ne"), ("ne", "en")}
    nepali = [i.text for i in workload.items if i.source_lang == "ne"]
    assert any("अनुवाद" in text for text in nepali)


def test_jsonl_workload(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"text": "Hi", "source_lang": "en", "target_lang": "de"}\n\n'
        '{"text": "Yo", "source_lang": "en", "target_lang": "fr"}\n'
    )
    workload = load(str(path))
    assert workload.name == "mine"
    assert [i.target_lang for i in workload.items] == ["de", "fr"]
    path.write_text('{"text": "Hi"}\n')
    with pytest.raises(ValueError, match=r"mine.jsonl:1"):
        from_jsonl(path)
    path.write_text(
        '{"text": "# Hi", "source_lang": "en", "target_lang": "de", "format": "markdown"}\n'
    )
    assert load(str(path)).items[0].body()["format"] == "markdown"
    path.write_text('{"text": "Hi", "source_lang": "en", "target_lang": "de", "format": "pdf"}\n')
    with pytest.raises(ValueError, match=r"mine.jsonl:1.*format"):
        from_jsonl(path)
    with pytest.raises(ValueError, match="unknown workload"):
        load("nonsense")


def test_poisson_arrivals() -> None:
    times = poisson_arrivals(10.0, random.Random(3), count=5000)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert len(times) == 5000
    assert times == sorted(times)
    assert sum(gaps) / len(gaps) == pytest.approx(0.1, rel=0.05)
    # Exponential gaps: about 1/e of them exceed the mean.
    assert sum(g > 0.1 for g in gaps) / len(gaps) == pytest.approx(math.exp(-1), abs=0.03)
    within = poisson_arrivals(10.0, random.Random(3), duration=2.0)
    assert within
    assert max(within) < 2.0
    assert within == times[: len(within)]


def test_engine_seconds_from_server_timing() -> None:
    assert engine_seconds({"server-timing": "engine;dur=123.5"}) == pytest.approx(0.1235)
    assert engine_seconds({"server-timing": "db;dur=1, engine;dur=2"}) == pytest.approx(0.002)
    assert engine_seconds({}) is None


METRICS_BEFORE = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="a"} 1.0
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="a"} 2.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="a"} 2.0
vllm:time_to_first_token_seconds_count{model_name="a"} 2.0
vllm:time_to_first_token_seconds_sum{model_name="a"} 0.6
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{model_name="a"} 1.0
"""
METRICS_AFTER = METRICS_BEFORE.replace('"1.0",model_name="a"} 2.0', '"1.0",model_name="a"} 6.0')
METRICS_AFTER = METRICS_AFTER.replace('"+Inf",model_name="a"} 2.0', '"+Inf",model_name="a"} 6.0')
METRICS_AFTER = METRICS_AFTER.replace('_count{model_name="a"} 2.0', '_count{model_name="a"} 6.0')
METRICS_AFTER = METRICS_AFTER.replace('_sum{model_name="a"} 0.6', '_sum{model_name="a"} 2.6')
METRICS_AFTER = METRICS_AFTER.replace(
    'preemptions_total{model_name="a"} 1.0', 'preemptions_total{model_name="a"} 3.0'
)


def test_engine_summary_uses_differences() -> None:
    summary = engine_summary(Snapshot.parse(METRICS_BEFORE), Snapshot.parse(METRICS_AFTER))
    assert summary["ttft_s_mean"] == pytest.approx(0.5)  # 2.0 s over 4 new requests
    assert summary["ttft_s_p50"] == pytest.approx(0.55)  # all 4 new ones in (0.1, 1.0]
    assert summary["preemptions"] == 2.0


def test_report_writes_json_markdown_and_charts(tmp_path: Path) -> None:
    written = report.write(run_results(), tmp_path)
    assert sorted(p.name for p in written) == [
        "latency_over_time.png",
        "levels.png",
        "report.md",
        "results.json",
        "timeline.png",
    ]
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "tolk.bench.run/1"
    assert data["levels"][0]["summary"]["overhead_ms"]["p50"] == pytest.approx(100.0)
    assert "| 5 | 1 | 0 | 1.00 |" in (tmp_path / "report.md").read_text()
    assert all(p.stat().st_size > 1000 for p in written if p.suffix == ".png")


def test_journey_architectures() -> None:
    assert [a.key for a in journey.select(None)] == [
        "baseline-1-worker",
        "baseline-2-workers",
        "static-batching",
        "tolk-64",
        "tolk-16",
    ]
    assert [a.key for a in journey.select(["tolk-16", "baseline-1-worker"])] == [
        "baseline-1-worker",
        "tolk-16",
    ]
    with pytest.raises(ValueError, match="unknown architecture"):
        journey.select(["nope"])


def _bench_results(level: int, gpu: list[float | None], rps: float) -> dict[str, Any]:
    timeline = [{"t": i * 0.1, "gpu_util": u, "running": 1} for i, u in enumerate(gpu)]
    return {
        "url": "http://127.0.0.1:1",
        "levels": [{"level": level, "timeline": timeline, "summary": {"rps": rps}}],
    }


def test_gpu_compare_summarises_spiky_and_steady(tmp_path: Path) -> None:
    spiky = _bench_results(25, [93.0, 0.0, 93.0, 0.0, None, 93.0], rps=1.2)
    steady = _bench_results(25, [80.0, 84.0, 82.0, 82.0], rps=14.5)
    comparison = gpu_compare.compare([("baseline", spiky), ("tolk", steady)], 25)
    base, tolk_run = comparison["runs"]
    assert base["summary"]["samples"] == 5  # a sample without a GPU reading is left out
    assert base["summary"]["idle_share"] == pytest.approx(0.4)
    assert base["summary"]["mean"] == pytest.approx(55.8)
    assert tolk_run["summary"]["idle_share"] == 0
    assert tolk_run["summary"]["stdev"] == pytest.approx(math.sqrt(2))
    assert tolk_run["rps"] == 14.5
    written = gpu_compare.write(comparison, tmp_path)
    assert json.loads(written[0].read_text())["runs"][1]["label"] == "tolk"
    assert written[1].stat().st_size > 0
    with pytest.raises(ValueError, match=r"no level 16 \(it has 25\)"):
        gpu_compare.compare([("tolk", steady)], 16)


def test_journey_takes_requests_or_duration_not_both() -> None:
    from typer.testing import CliRunner

    from tolk.cli import app

    result = CliRunner().invoke(
        app, ["bench", "journey", "--requests", "10", "--duration", "30"], terminal_width=200
    )
    assert result.exit_code == 2
    assert "give --requests or --duration, not both" in result.output


def test_versus_asks_vllm_for_data_parallel_engines(test_model: Path) -> None:
    from tolk.bench.versus import vllm_command
    from tolk.config import build_config

    model = model_config("demo", test_model, languages=["en", "de"])
    settings = build_config({"models": [model]}, environ={}).models[0]
    command = vllm_command(settings, 8123, data_parallel=2)
    assert command[command.index("--data-parallel-size") + 1] == "2"
    assert "--data-parallel-size" not in vllm_command(settings, 8123)


def test_versus_turns_engine_args_into_vllm_server_flags() -> None:
    from tolk.bench.versus import server_flags

    flags = server_flags(
        {
            "model": "/m",
            "max_num_seqs": 16,
            "enforce_eager": False,
            "enable_prefix_caching": True,
            "disable_log_stats": False,
            "compilation_config": {"mode": 0},
        }
    )
    assert flags == [
        "--model",
        "/m",
        "--max-num-seqs",
        "16",
        "--no-enforce-eager",
        "--enable-prefix-caching",
        "--compilation-config",
        '{"mode": 0}',
    ]


def test_documents_workload_and_its_segmenting_cost() -> None:
    from tolk.bench.documents import cost
    from tolk.bench.workloads import load

    workload = load("documents")
    assert [(i.source_lang, i.format) for i in workload.items][:4] == [
        ("en", "text"), ("ne", "text"), ("en", "text"), ("ne", "text")
    ]  # fmt: skip
    assert {i.format for i in workload.items} == {"text", "markdown"}
    assert workload.items[4].body()["format"] == "markdown"
    assert "format" not in workload.items[0].body()
    rows = cost(workload, None, rounds=1)
    assert [r["bytes"] for r in rows] == [len(i.text.encode()) for i in workload.items]
    assert all(r["ms"] > 0 and r["ms_per_10kb"] > 0 for r in rows)


def test_progress_without_a_terminal_says_how_far_it_is_in_plain_lines() -> None:
    import io

    from rich.console import Console
    from rich.progress import Progress

    from tolk.bench.run import progress_callback

    out = io.StringIO()
    with Progress(console=Console(file=out, force_terminal=False)) as progress:
        advance = progress_callback(progress, "tolk: texts", 20)
        for _ in range(20):
            advance(1)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("tolk: texts:")]
    assert lines[0].startswith("tolk: texts: 2/20")
    assert lines[-1].startswith("tolk: texts: 20/20")
    assert len(lines) == 10
