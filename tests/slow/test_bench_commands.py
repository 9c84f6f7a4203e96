"""`tolk bench run`, `journey`, `overhead`, `versus-vllm` and `quality` with rounds against
vLLM's own server, end to end on the test model (few requests): `bench run` against the shared
main server, the others on engines of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.processes import tolk
from tests.support.servers import ServerProcess, model_config


@pytest.fixture(scope="module")
def bench_config(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench-config") / "tolk.yaml"
    model = model_config("demo", test_model, languages=["en", "de", "ne"])
    model["engine"]["max_model_len"] = 2048
    path.write_text(yaml.safe_dump({"server": {"request_timeout": 60}, "models": [model]}))
    return path


@pytest.mark.slow
def test_bench_run_closed_and_open_loop(main_server: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = tolk(
        "bench",
        "run",
        "--url",
        main_server.url,
        "--concurrency",
        "1,4",
        "--requests",
        "6",
        "--warmup",
        "1",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert "req/s" in result.stdout
    data: dict[str, Any] = json.loads((out / "results.json").read_text())
    assert data["schema"] == "tolk.bench.run/1"
    assert data["mode"] == "closed"
    assert data["generator_ceiling_rps"] > 0
    assert [level["level"] for level in data["levels"]] == [1.0, 4.0]
    for level in data["levels"]:
        summary, records = level["summary"], level["records"]
        assert len(records) == summary["requests"] == summary["ok"] == 6
        assert summary["rps"] == pytest.approx(6 / summary["duration_s"])
        assert all(r["completion_tokens"] > 0 and r["engine_seconds"] > 0 for r in records)
        assert summary["overhead_ms"]["p95"] >= summary["overhead_ms"]["p50"] >= 0
        assert level["engine"]["ttft_s_mean"] > 0
        assert level["engine"]["e2e_s_mean"] > 0
        assert level["timeline"], "running/waiting sampled during the level"
        # No NVIDIA GPU on the test machines: GPU utilisation is absent, not zero.
        assert all(p["gpu_util"] is None for p in level["timeline"])
        assert "gpu_util_mean" not in level["engine"]
    assert data["levels"][1]["engine"]["running_peak"] >= 2
    for name in ("report.md", "levels.png", "latency_over_time.png", "timeline.png"):
        assert (out / name).stat().st_size > 0

    out = tmp_path / "open"
    tolk(
        "bench",
        "run",
        "--url",
        main_server.url,
        "--rate",
        "4",
        "--requests",
        "6",
        "--warmup",
        "0",
        "--workload",
        "articles",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    data = json.loads((out / "results.json").read_text())
    assert data["mode"] == "open"
    assert data["workload"]["pairs"] == ["en>ne", "ne>en"]
    assert data["levels"][0]["summary"]["ok"] == 6


@pytest.mark.slow
def test_bench_journey_runs_every_architecture(bench_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "journey"  # passed relative, as scripts/run-benchmarks.sh does
    result = tolk(
        "bench",
        "journey",
        "--config",
        str(bench_config),
        "--model",
        "demo",
        "--workloads",
        "variable",
        "--concurrency",
        "2",
        "--requests",
        "3",
        "--warmup",
        "0",
        "--out",
        "journey",
        cwd=tmp_path,
    )
    assert "The architecture journey" in result.stdout
    data = json.loads((out / "journey.json").read_text())
    assert data["schema"] == "tolk.bench.journey/1"
    runs = {run["architecture"]: run for run in data["runs"]}
    assert list(runs) == [
        "baseline-1-worker",
        "baseline-2-workers",
        "static-batching",
        "tolk-64",
        "tolk-16",
    ]
    for run in runs.values():
        assert run["summary"]["ok"] == 3, run
        assert run["ratio_to_baseline"] == pytest.approx(
            run["summary"]["rps"] / runs["baseline-1-worker"]["summary"]["rps"]
        )
    assert runs["baseline-1-worker"]["ratio_to_baseline"] == 1.0
    assert (out / "journey.png").stat().st_size > 0
    assert "| Static batching (16, 50 ms) | variable |" in (out / "journey.md").read_text()


@pytest.mark.slow
def test_bench_overhead_compares_direct_and_http(bench_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "overhead"
    tolk(
        "bench",
        "overhead",
        "--config",
        str(bench_config),
        "--model",
        "demo",
        "--concurrency",
        "4",
        "--requests",
        "8",
        "--rounds",
        "1",
        "--warmup",
        "1",
        "--out",
        "overhead",
        cwd=tmp_path,
    )
    data = json.loads((out / "overhead.json").read_text())
    assert data["schema"] == "tolk.bench.overhead/1"
    assert [(r["round"], r["path"]) for r in data["rounds"]] == [(1, "direct"), (1, "http")]
    assert all(r["summary"]["ok"] == 8 for r in data["rounds"])
    assert data["ratio"] == pytest.approx(data["http_rps"] / data["direct_rps"])
    assert data["overhead_ms_p95"] >= 0


def versus(bench_config: Path, tmp_path: Path, *options: str) -> dict[str, Any]:
    """`tolk bench versus-vllm` of the demo model, one round, into tmp_path/versus: its JSON."""
    tolk(
        "bench", "versus-vllm", "--config", str(bench_config), "--model", "demo",
        "--rounds", "1", *options, "--out", "versus", cwd=tmp_path,
    )  # fmt: skip
    data: dict[str, Any] = json.loads((tmp_path / "versus" / "versus.json").read_text())
    return data


@pytest.mark.slow
def test_bench_versus_vllm_sends_both_servers_the_same_work(
    bench_config: Path, tmp_path: Path
) -> None:
    # Each pair's output budget measured as tolk's engine measures it (no max_tokens_ratio:
    # as the shipped configs): vLLM's server must be given the same budgets.
    config = yaml.safe_load(bench_config.read_text())
    config["models"][0].pop("max_tokens_ratio", None)
    measured = tmp_path / "measured.yaml"
    measured.write_text(yaml.safe_dump(config))
    data = versus(
        measured, tmp_path, "--concurrency", "3", "--requests", "6", "--warmup", "1",
        "--systems", "vllm,tolk,direct",
    )  # fmt: skip
    assert data["schema"] == "tolk.bench.versus/1"
    assert [(r["round"], r["path"]) for r in data["rounds"]] == [
        (1, "vllm"),
        (1, "tolk"),
        (1, "direct"),
    ]
    assert all(r["summary"]["ok"] == 6 for r in data["rounds"])
    # Same prompts and budgets on all three: the test model never stops early, so every
    # request generates its whole budget on either server and on tolk's engine awaited directly.
    assert data["same_token_counts"] is True
    assert data["totals"]["vllm"]["output_tokens"] > 0
    assert data["totals"]["direct"]["output_tokens"] == data["totals"]["vllm"]["output_tokens"]
    # Each round's engine, read from its server's /metrics (direct: from this process's
    # registry) around the measured loop: the tokens it generated are the ones the clients got
    # (the warm-up left out), in its steps, with the time between tokens measured.
    for r in data["rounds"]:
        engine = r["engine"]
        assert engine["generation_tokens"] == r["summary"]["completion_tokens"], r["path"]
        assert engine["steps"] > 0
        assert engine["step_ms"] > 0
        assert engine["itl_ms"] > 0, r["path"]
        shares = [share for _, share in sorted(
            (float(le), share) for le, share in engine["steps_by_tokens"].items()
        )]  # fmt: skip
        assert shares == sorted(shares), r["path"]  # cumulative
        assert shares[-1] == 1.0, r["path"]  # every step under the largest bound
    assert data["ratio_rps"] == pytest.approx(
        data["totals"]["tolk"]["rps"] / data["totals"]["vllm"]["rps"]
    )
    assert data["ratio_rps_tolk_to_direct"] == pytest.approx(
        data["totals"]["tolk"]["rps"] / data["totals"]["direct"]["rps"]
    )


@pytest.mark.slow
def test_bench_versus_vllm_data_parallel_against_a_tolk_fleet(
    bench_config: Path, tmp_path: Path
) -> None:
    """vLLM's --data-parallel-size 2 (two engines in one server) against two tolk servers
    behind the proxy; on this CPU both run (vLLM CPU supports data parallelism)."""
    data = versus(
        bench_config, tmp_path, "--data-parallel", "2", "--concurrency", "4", "--requests", "8",
        "--warmup", "2",
    )  # fmt: skip
    assert data["data_parallel"] == 2
    rounds = {r["path"]: r["summary"] for r in data["rounds"]}
    assert rounds["vllm"]["ok"] == rounds["tolk"]["ok"] == 8
    assert data["same_token_counts"] is True
    # tolk's requests went through the proxy (its Server-Timing says what it added) ...
    assert rounds["tolk"]["proxy_added_ms"]
    assert not rounds["vllm"]["proxy_added_ms"]
    # ... to two servers, and vLLM ran two engines
    fleet_logs = sorted(p.name for p in (tmp_path / "versus" / "versus-fleet").glob("server-*.log"))
    assert fleet_logs == ["server-1.log", "server-2.log"]
    vllm_log = (tmp_path / "versus" / "vllm-server.log").read_text()
    assert "EngineCore_DP1" in vllm_log


@pytest.mark.slow
def test_bench_quality_speed_alternates_tolk_its_variant_and_vllm(
    bench_config: Path, test_model: Path, tmp_path: Path
) -> None:
    """tolk from the config and again with its checks off, each two rounds alternating with
    vLLM's own OpenAI server on the same model (kept up through the run): every pass timed
    and sampled from the engines' /metrics, tolk's ratio to the baseline first."""
    result = tolk(
        "bench", "quality", "--config", str(bench_config), "--model", "demo",
        "--openai-start", str(test_model), "--variants", "checks-off", "--rounds", "2",
        "--sentences", "2", "--pairs", "en-de", "--concurrency", "2", "--profile",
        "--out", "q", cwd=tmp_path,
    )  # fmt: skip
    data = json.loads((tmp_path / "q" / "quality.json").read_text())
    passes = [(p["round"], p["system"]) for p in data["speed"]["passes"]]
    assert passes == [
        (1, "tolk"), (1, "openai"), (2, "openai"), (2, "tolk"),
        (1, "tolk[checks-off]"), (1, "openai"), (2, "openai"), (2, "tolk[checks-off]"),
    ]  # fmt: skip
    assert all(p["errors"] == 0 and p["requests"] == 2 for p in data["speed"]["passes"])
    # The engines' own gauges were read from both kinds of server during the passes.
    assert all(p["running_mean"] is not None for p in data["speed"]["passes"])
    assert all(p["output_tokens"] > 0 for p in data["speed"]["passes"])
    assert [r["system"] for r in data["speed"]["ratios"]] == ["tolk", "tolk[checks-off]"]
    assert [s["name"] for s in data["systems"]] == ["tolk", "openai", "tolk[checks-off]"]
    assert {r["system"] for r in data["records"]} == {"tolk", "openai", "tolk[checks-off]"}
    assert len(data["records"]) == 6  # the first pass of each system, scored
    assert result.stdout.index("tolk / openai: requests/s x") < result.stdout.index("chrF++")
    # Each pass's engine steps, from the engine's own counters.
    assert all(p["engine"]["steps"] > 0 for p in data["speed"]["passes"])
    assert all(p["engine"]["engine_requests"] >= 2 for p in data["speed"]["passes"])
    # tolk's event loop read around each of its passes (its own CPU counter), vLLM's not.
    for p in data["speed"]["passes"]:
        assert (p["engine"].get("loop_cpu_s", 0) > 0) == p["system"].startswith("tolk"), p
    # py-spy on each server's first pass, the engine's process beside the API's.
    assert set(data["profiles"]) == {"tolk", "openai", "tolk[checks-off]"}
    for found in data["profiles"].values():
        processes = {t["process"].split(" [")[0] for t in found["threads"]}
        assert any(p.startswith("VLLM::EngineCore") for p in processes), processes
        assert (tmp_path / "q" / found["file"]).is_file()
    assert "Profile (py-spy" in (tmp_path / "q" / "quality.md").read_text()
