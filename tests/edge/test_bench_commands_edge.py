"""`tolk bench apis`, `bench run --api` and `bench overload` against the main server's
configuration in-process over stand-in engines: their subject is the HTTP edge and admission."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.main_server import MainKeys, main_config
from tests.support.processes import tolk
from tests.support.servers import InProcessServer


@pytest.fixture(scope="module")
def paced_server(
    test_model: Path, main_keys: MainKeys, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessServer]:
    """The main server's configuration in-process over stand-in engines that take 2 ms a
    token: for the commands whose subject is tolk's admission and the HTTP edge, not the
    engine (what the engine does under overload is tested in test_server_faults)."""
    server = InProcessServer(main_config(test_model, main_keys, tmp_path_factory), 0.002)
    yield server
    server.stop()


def test_bench_drives_the_deepl_and_libretranslate_apis(
    paced_server: InProcessServer, main_keys: MainKeys, tmp_path: Path
) -> None:
    main_server = paced_server
    tolk(
        "bench", "apis", "--url", main_server.url, "--concurrency", "2", "--requests", "4",
        "--rounds", "1", "--warmup", "1", "--items", "20", "--key", main_keys.full,
        "--out", "apis", cwd=tmp_path,
    )  # fmt: skip
    data = json.loads((tmp_path / "apis" / "apis.json").read_text())
    assert data["schema"] == "tolk.bench.apis/1"
    assert data["keys"] is True
    assert [r["path"] for r in data["rounds"]] == ["tolk", "deepl", "libretranslate", "openai"]
    for name, api in data["apis"].items():
        assert api["errors"] == 0, name
        assert api["throughput_ratio"] == pytest.approx(api["rps"] / data["apis"]["tolk"]["rps"])
    # Every API answered with engine timing, so overhead is measured on all four.
    assert all(r["summary"]["overhead_ms"]["p50"] >= 0 for r in data["rounds"])
    assert data["detection"]["texts"] == 20
    assert 0 < data["detection"]["us_per_text"] < 10_000
    tolk(
        "bench", "run", "--url", main_server.url, "--api", "libretranslate", "--key",
        main_keys.full, "--concurrency", "2", "--requests", "4", "--warmup", "0",
        "--out", "run-lt", cwd=tmp_path,
    )  # fmt: skip
    run = json.loads((tmp_path / "run-lt" / "results.json").read_text())
    assert run["api"] == "libretranslate"
    assert run["levels"][0]["summary"]["ok"] == 4
    assert all(r["chars_out"] > 0 for r in run["levels"][0]["records"])


def test_bench_overload_sheds_the_excess_of_a_burst(
    paced_server: InProcessServer, tmp_path: Path
) -> None:
    main_server = paced_server
    # The main server admits 16 running + 24 waiting: waves of 40, bursts of 80.
    tolk(
        "bench", "overload", "--url", main_server.url, "--capacity", "40", "--factor", "2",
        "--waves", "1", "--items", "20", "--documents-seconds", "3", "--out", "overload",
        cwd=tmp_path,
    )  # fmt: skip
    data = json.loads((tmp_path / "overload" / "overload.json").read_text())
    assert data["baseline"]["requests"] == data["baseline"]["admitted"] == 40
    burst = data["burst"]
    assert burst["requests"] == 80
    assert burst["refused"] >= 1
    assert burst["refused"] + burst["admitted"] == 80
    assert burst["refused_p95_s"] >= burst["refused_p50_s"] > 0
    assert data["health_floor"]["requests"] == 40
    assert data["other_failures"] == []
    stalls = data["documents_loop_stalls"]
    assert stalls["samples"] > 100  # the server sampled its loop every 10 ms meanwhile
    assert stalls["ok"] >= 1
    assert "burst" in (tmp_path / "overload" / "overload.md").read_text()
    assert data["client"] == "lean"
    # The same waves through aiohttp, the comparison the lean client is measured against.
    tolk(
        "bench", "overload", "--url", main_server.url, "--capacity", "40", "--factor", "1.5",
        "--waves", "1", "--items", "20", "--documents-seconds", "0", "--client", "aiohttp",
        "--out", "overload-aiohttp", cwd=tmp_path,
    )  # fmt: skip
    data = json.loads((tmp_path / "overload-aiohttp" / "overload.json").read_text())
    assert data["client"] == "aiohttp"
    assert data["burst"]["requests"] == 60
    assert data["burst"]["refused"] + data["burst"]["admitted"] == 60
    assert data["health_floor"]["requests"] == 20
    assert data["other_failures"] == []
