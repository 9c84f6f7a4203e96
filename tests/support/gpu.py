"""A stand-in for NVML: this machine has no NVIDIA GPU, and a real NVML cannot be made to
report a GPU that is not there."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class StandInNvml:
    """Stand-in for pynvml with two GPUs; `broken` makes nvmlInit fail as it does without a
    driver."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    def nvmlInit(self) -> None:
        if self.broken:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=[40, 90][handle], memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(used=(handle + 1) * 2**30, total=80 * 2**30, free=0)
