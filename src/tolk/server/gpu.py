"""NVIDIA GPU utilisation and memory on /metrics, read through NVML at scrape time.

vLLM's own metrics say how full the KV cache is, not how busy the GPU is; `tolk bench`
samples these beside the engine's gauges. On a machine without an NVIDIA driver (or without
the `nvidia-ml-py` package) NVML cannot initialise and the families are simply absent.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

UTILIZATION = "tolk_gpu_utilization_percent"
MEMORY_USED = "tolk_gpu_memory_used_bytes"
MEMORY_TOTAL = "tolk_gpu_memory_total_bytes"
FAMILIES = (UTILIZATION, MEMORY_USED, MEMORY_TOTAL)


def _load_nvml() -> ModuleType | None:
    try:
        return importlib.import_module("pynvml")  # from nvidia-ml-py; ships no type hints
    except ImportError:
        return None


class GpuCollector:
    """A Prometheus collector over every GPU NVML can see. `nvml` is the `pynvml` module
    (injectable so the exposition can be checked on machines that have no GPU)."""

    def __init__(self, nvml: Any = None) -> None:
        self.nvml: Any = nvml if nvml is not None else _load_nvml()
        self.handles: list[tuple[str, Any]] = []
        if self.nvml is None:
            return
        try:
            self.nvml.nvmlInit()
            count = self.nvml.nvmlDeviceGetCount()
            self.handles = [(str(i), self.nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        except Exception as exc:  # NVMLError: no driver, no device, no permission
            log.debug("NVML not available, no GPU metrics: %s", exc)
            self.handles = []

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def describe(self) -> list[Metric]:
        # Collected only on demand: no NVML calls at registration time.
        return []

    def collect(self) -> Iterator[Metric]:
        if not self.handles:
            return
        util = GaugeMetricFamily(
            UTILIZATION,
            "Percent of the last sample period in which a kernel ran on the GPU (NVML).",
            labels=["gpu"],
        )
        used = GaugeMetricFamily(MEMORY_USED, "GPU memory in use (NVML).", labels=["gpu"])
        total = GaugeMetricFamily(MEMORY_TOTAL, "GPU memory in all (NVML).", labels=["gpu"])
        for index, handle in self.handles:
            try:
                rates = self.nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as exc:  # a GPU fallen off the bus: skip it, keep the rest
                log.warning("NVML read of GPU %s failed: %s", index, exc)
                continue
            util.add_metric([index], float(rates.gpu))
            used.add_metric([index], float(memory.used))
            total.add_metric([index], float(memory.total))
        yield from (util, used, total)
