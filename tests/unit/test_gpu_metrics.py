"""GPU utilisation on /metrics (NVML) and in the bench report.

This machine has no NVIDIA GPU, so the exposition is checked through `StandInNvml`
(tests/support/gpu.py), a stand-in for the `pynvml` module: a real NVML cannot be made to
report a GPU that is not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.support.bench import run_results
from tests.support.gpu import StandInNvml
from tolk.bench import report
from tolk.bench.scrape import GPU_UTILIZATION
from tolk.engine import EngineMetrics
from tolk.server.gpu import FAMILIES, GpuCollector
from tolk.server.metrics import ServiceMetrics
from tolk.wire.prometheus import Snapshot


def test_gpu_collector_exposes_utilisation_and_memory_per_gpu() -> None:
    metrics = ServiceMetrics(EngineMetrics(), GpuCollector(StandInNvml()))
    text = metrics.exposition().decode()
    assert 'tolk_gpu_utilization_percent{gpu="0"} 40.0' in text
    assert 'tolk_gpu_utilization_percent{gpu="1"} 90.0' in text
    assert Snapshot.parse(text).get("tolk_gpu_memory_used_bytes") == 3 * 2**30  # both GPUs
    only = metrics.exposition([GPU_UTILIZATION]).decode()
    assert "tolk_gpu_utilization_percent" in only
    assert "tolk_gpu_memory_used_bytes" not in only
    assert Snapshot.parse(only).mean(GPU_UTILIZATION) == pytest.approx(65.0)


def test_gpu_metrics_absent_without_nvml() -> None:
    collector = GpuCollector(StandInNvml(broken=True))
    assert not collector.available
    text = ServiceMetrics(EngineMetrics(), collector).exposition().decode()
    assert not any(name in text for name in FAMILIES)
    assert Snapshot.parse(text).mean(GPU_UTILIZATION) is None


def test_real_nvml_on_this_machine() -> None:
    """The real pynvml: without an NVIDIA driver the collector must stay silent."""
    collector = GpuCollector()
    if Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert collector.nvml is not None, "nvidia-ml-py is a dependency"
    assert not collector.available
    assert generate_latest_of(collector) == b""


def generate_latest_of(collector: GpuCollector) -> bytes:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry)


def test_report_shows_gpu_utilisation_when_sampled(tmp_path: Path) -> None:
    results = run_results()
    level = results["levels"][0]  # type: ignore[index]
    level["engine"] = {"gpu_util_mean": 72.0, "gpu_util_peak": 95.0}
    level["timeline"] = [
        {"t": 0.0, "running": 1.0, "waiting": 0.0, "kv_cache": 0.1, "gpu_util": 50.0},
        {"t": 0.5, "running": 2.0, "waiting": 0.0, "kv_cache": 0.2, "gpu_util": 95.0},
    ]
    report.write(results, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "GPU util %" in md
    row = next(line for line in md.splitlines() if line.startswith("| 5 |"))
    assert row.endswith("| 72 |")
