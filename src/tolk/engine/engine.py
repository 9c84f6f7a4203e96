"""One vLLM AsyncLLM per configured model: start, generate, admission, health, shutdown.

This is the only module that talks to vLLM's engine API (what differs between vLLM releases
is in tolk.engine.vllm_compat). Its exceptions are translated here into tolk's own
(tolk.errors), so nothing above needs to know vLLM's exception types.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tolk.budget import Budgets, counting
from tolk.config import EngineSettings, ModelSettings, SamplingSettings
from tolk.engine.admission import Admission
from tolk.engine.gather import Gather
from tolk.engine.metrics import EngineMetrics
from tolk.engine.timing import CLOCK
from tolk.engine.vllm_compat import (
    UnsupportedEngineArgs,
    VllmRelease,
    guidance_backend,
    loop_detection,
    structured_regex,
)
from tolk.errors import EngineRestarting, EngineUnavailable, Overloaded, TolkError

log = logging.getLogger("tolk.engine")

CPU_DEFAULT_KV_CACHE_BYTES = 1 << 30
# How long a failed request waits to learn whether its engine is dying (see _dying).
DEATH_NOTICE_SECONDS = 2.0
# On a GPU without a configured share: vLLM's own default (0.9), divided among the models of
# the server, which all share the GPU.
GPU_MEMORY_SHARE = 0.9


class Tokenizer(Protocol):
    """The part of a Hugging Face tokenizer tolk uses."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> Any: ...

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...


class LLM(Protocol):
    """What tolk uses of vLLM's AsyncLLM: the seam where a test puts a stand-in
    (tolk.testing.fake_engine) under a real ModelEngine, so admission, budgets, tokenising,
    states, fidelity checks and everything above them stay tolk's own code."""

    @property
    def errored(self) -> bool: ...

    @property
    def model_config(self) -> Any: ...

    def generate(
        self, prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[Any]: ...

    def shutdown(self) -> None: ...


class LLMStarter(Protocol):
    """Starts the LLM of one model (blocking) and says how many seconds that took: build_llm
    (vLLM) in a server; a stand-in's in tests of the HTTP edge."""

    def __call__(
        self, settings: ModelSettings, metrics: EngineMetrics, *, models_sharing: int = 1
    ) -> tuple[LLM, float]: ...


class EngineStartError(Exception):
    def __init__(self, model: str, cause: BaseException) -> None:
        super().__init__(
            f"the engine for model '{model}' failed to start: {type(cause).__name__}: {cause}. "
            "The engine's own log lines above give the root cause."
        )
        self.model = model


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


def on_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def engine_args(model: ModelSettings, *, cpu: bool, models_sharing: int = 1) -> dict[str, Any]:
    """AsyncEngineArgs fields for `model`, every batching setting explicit. `models_sharing`
    is how many models share the GPU (the default memory share is split among them)."""
    e: EngineSettings = model.engine
    gpu_share = e.gpu_memory_utilization
    if gpu_share is None:
        gpu_share = round(GPU_MEMORY_SHARE / max(1, models_sharing), 3)
    args: dict[str, Any] = {
        "model": model.path,
        "served_model_name": model.name,
        "max_num_seqs": e.max_num_seqs,
        "max_num_batched_tokens": e.max_num_batched_tokens,
        "dtype": engine_dtype(e.dtype, cpu=cpu),
        "enforce_eager": cpu if e.enforce_eager is None else e.enforce_eager,
        "enable_prefix_caching": e.enable_prefix_caching,
        "seed": e.seed,
        "trust_remote_code": e.trust_remote_code,
        "disable_log_stats": False,  # the vllm:* Prometheus metrics need stats on
        "gpu_memory_utilization": gpu_share,
    }
    if e.scheduling == "shortest_first":
        args["scheduling_policy"] = "priority"
    if e.max_model_len is not None:
        args["max_model_len"] = e.max_model_len
    if e.kv_cache_memory_bytes is not None:
        args["kv_cache_memory_bytes"] = int(e.kv_cache_memory_bytes)
    elif cpu and "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
        # Without a size vLLM on CPU reserves most of NUMA node 0 and fails to start.
        args["kv_cache_memory_bytes"] = CPU_DEFAULT_KV_CACHE_BYTES
    args.update(e.extra_args)
    return args


def size_rank(segments: int) -> int:
    """A translation request's rank under `scheduling: shortest_first` (vLLM runs lower
    ranks first): its segment count in powers of two, so 1 segment is 0, 2 is 1, 3-4 are 2,
    a 200-segment document 8. Powers of two rather than the count itself: requests of about
    one size stay first come, first served."""
    return max(0, segments - 1).bit_length()


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX-512 BF16 or AMX). Without it
    PyTorch emulates bf16 matrix products: 3.4x slower than fp32 measured here (AVX2 host)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def engine_dtype(configured: str, *, cpu: bool) -> str:
    """The dtype an engine runs in: as configured, except that "auto" (the model's own,
    bf16 for most) becomes float32 on a CPU without native bf16."""
    if configured == "auto" and cpu and not cpu_has_bf16():
        return "float32"
    return configured


# vLLM's own loop detection (RepetitionDetectionParams: 0.26, the GPU kit's, and 0.32 have
# it; a release without it runs a loop to its budget): the scheduler ends a generation whose
# last tokens are one pattern of 1-24 tokens repeated 8 times (16 tokens for a two-token word,
# 96 for a short phrase), finish_reason "repetition". 8, not fewer: a translation may well
# say a word or a symbol three or four times in a row.
LOOP_DETECTION = {"min_pattern_size": 1, "max_pattern_size": 24, "min_count": 8}


def sampling_params(
    sampling: SamplingSettings,
    max_tokens: int,
    detokenize: bool = True,
    stop_loops: bool = False,
    n: int = 1,
    regex: str | None = None,
) -> Any:
    """vLLM's SamplingParams for one segment. `detokenize=False`: vLLM returns token ids
    only, and does not decode them token by token on every engine step (see generate).
    `stop_loops`: with vLLM's loop detection, where the installed release has it. `regex`:
    the output must match it (vLLM's structured outputs; tolk.translation.guide)."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams

    extra: dict[str, Any] = {}
    detection = loop_detection(**LOOP_DETECTION) if stop_loops else None
    if detection is not None:
        extra["repetition_detection"] = detection
    if regex is not None:
        extra["structured_outputs"] = structured_regex(regex)
    return SamplingParams(
        n=n,
        max_tokens=max_tokens,
        output_kind=RequestOutputKind.FINAL_ONLY,
        skip_special_tokens=True,
        detokenize=detokenize,
        # Made for this one request and never reused, so vLLM's AsyncLLM may take it as it
        # is: its deep copy otherwise was 3% of a real-model server's event loop on the H100
        # (docs/benchmarks.md, section 13); vLLM's own OpenAI server does the same.
        skip_clone=True,
        **sampling.model_dump(exclude_none=True),
        **extra,
    )


def load_tokenizer(settings: ModelSettings) -> Tokenizer:
    """tolk's own instance of the model's tokenizer, used only on the event loop's thread.

    Not vLLM's (`AsyncLLM.get_tokenizer()`): that one is a thread-safe pool shared with vLLM's
    input-processing threads, and when its copy is borrowed it deep-copies the whole
    tokenizer, which cost tens of milliseconds in the request path under load.
    """
    from transformers import AutoTokenizer

    tokenizer: Tokenizer = AutoTokenizer.from_pretrained(
        settings.path, trust_remote_code=settings.engine.trust_remote_code
    )
    return tokenizer


_request_ids = itertools.count()

# What ModelEngine.warm_up sends: a few tokens of a short text, enough for every kind of step
# (prefill, decode, sampling, penalties) to have run once.
WARM_UP_TEXT = "Hello, world."
WARM_UP_TOKENS = 8
WARM_UP_REGEX = r"[A-Za-z ]{1,16}"
# The sequences of each batch it sends: both 8 or more (where vLLM samples top-k/top-p with
# Triton) and one a multiple of 16, one not (Triton compiles each kind of integer argument).
WARM_UP_BATCHES = (16, 17)

EngineState = Literal["ready", "dead", "restarting", "failed"]


def build_llm(
    settings: ModelSettings, metrics: EngineMetrics, *, models_sharing: int = 1
) -> tuple[LLM, float]:
    """A started AsyncLLM for `settings` and the seconds its start took (blocks for the
    engine's start-up, ~15-25 s on CPU). Its `vllm:*` metrics are adopted into `metrics`."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    begun = time.monotonic()
    if missing := settings.missing_directory():
        raise EngineStartError(settings.name, FileNotFoundError(missing))
    release = VllmRelease.installed()
    if not release.tested:
        log.warning("vLLM %s is not a release tolk is tested on", release.version)
    try:
        args = release.check_engine_args(
            engine_args(settings, cpu=on_cpu(), models_sharing=models_sharing), settings.name
        )
    except UnsupportedEngineArgs as exc:
        raise EngineStartError(settings.name, exc) from exc
    if release.accepts("structured_outputs_config"):  # for a guided markup retry
        args.setdefault("structured_outputs_config", guidance_backend())
    log.info(
        "starting engine for model '%s' from %s (vLLM %s)",
        settings.name,
        settings.path,
        release.version,
    )
    try:
        llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
    except Exception as exc:
        raise EngineStartError(settings.name, exc) from exc
    adopted = metrics.adopt(settings.name)
    seconds = time.monotonic() - begun
    log.info(
        "engine for model '%s' ready in %.1f s (max_num_seqs=%d, max_model_len=%d, %d metrics)",
        settings.name,
        seconds,
        settings.engine.max_num_seqs,
        int(llm.model_config.max_model_len),
        adopted,
    )
    return llm, seconds


class ModelEngine:
    """A configured model and the AsyncLLM that serves it."""

    def __init__(
        self,
        settings: ModelSettings,
        llm: LLM,
        start_seconds: float = 0.0,
        models_sharing: int = 1,
        starter: LLMStarter = build_llm,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self._llm = llm
        self.starter = starter  # what a restart starts the next LLM with
        # What a request's path imports from vLLM, imported with the engine's start: under a
        # stand-in LLM nothing else had imported it, and the first request spent 6 s of
        # imports (torch's among them) on the event loop.
        import vllm.sampling_params
        import vllm.v1.engine.exceptions  # noqa: F401

        self.tokenizer = load_tokenizer(settings)
        tokenizer = self.tokenizer
        self.budgets = Budgets(counting(tokenizer), settings.max_tokens_ratio)
        # Counted here, once, with the engine's start (about 0.3 s for the eight languages):
        # lazily it was 230 ms on the event loop in the first request of a language pair.
        self.budgets.prepare()
        self.max_model_len: int = int(llm.model_config.max_model_len)
        # Engine requests submitted and not yet finished: the concurrency this model sees,
        # sampled into tolk_concurrent_texts for `tolk tune`.
        self.in_flight = 0
        e = settings.engine
        self.admission = Admission(e.max_num_seqs + e.max_waiting, batch=e.max_num_seqs)
        self.gather = Gather(e.gather_ms / 1000, e.gather_above, e.gather_most)
        self._state: EngineState = "ready"
        self.start_seconds = start_seconds  # how long its last start took: a restart's estimate
        self.models_sharing = models_sharing  # models on the same GPU (its memory share)
        self.expected_ready = 0.0
        self.restarts = 0

    @classmethod
    def start(
        cls,
        settings: ModelSettings,
        metrics: EngineMetrics,
        *,
        models_sharing: int = 1,
        starter: LLMStarter = build_llm,
    ) -> ModelEngine:
        """Start the engine (blocks for the engine's start-up, ~15-25 s on CPU)."""
        llm, seconds = starter(settings, metrics, models_sharing=models_sharing)
        return cls(settings, llm, seconds, models_sharing, starter)

    @property
    def state(self) -> EngineState:
        """ready, dead (noticed by nobody yet), restarting, or failed (given up on)."""
        if self._state == "ready" and self._llm.errored:
            return "dead"
        return self._state

    def mark_restarting(self, expected_ready: float) -> None:
        """The engine is being replaced; until then its requests are told when to retry
        (`expected_ready`: a time.monotonic() estimate)."""
        self._state = "restarting"
        self.expected_ready = expected_ready
        self.restarts += 1

    def mark_failed(self) -> None:
        self._state = "failed"

    def replace(self, llm: LLM, seconds: float) -> None:
        """Serve from a freshly started AsyncLLM (the old one is shut down by then)."""
        self._llm = llm
        self.start_seconds = seconds
        self._state = "ready"

    @property
    def alive(self) -> bool:
        return self.state == "ready"

    def check_alive(self) -> None:
        state = self.state
        if state == "ready":
            return
        if state == "restarting":
            wait = max(1.0, self.expected_ready - time.monotonic())
            raise EngineRestarting(
                f"the engine for model '{self.name}' is restarting after a failure; retry in "
                f"{wait:.0f} s (or on another server)",
                retry_after=wait,
                model=self.name,
            )
        if state == "failed":
            raise EngineUnavailable(
                f"the engine for model '{self.name}' failed too often and this server is "
                "shutting down to be replaced; retry on another server",
                model=self.name,
                state=state,
            )
        raise EngineUnavailable(
            f"the engine for model '{self.name}' has stopped and is about to be restarted; "
            "retry shortly or on another server",
            retry_after=max(1.0, self.start_seconds),
            model=self.name,
            state=state,
        )

    @contextlib.contextmanager
    def admit(self, n: int) -> Iterator[int]:
        """Hold the `n` segments of one request against this model's capacity for the body
        of the `with`, or refuse them all at once with Overloaded. Called before any
        per-segment work. Yields the window: how many may be in the engine at once
        (Admission.window)."""
        window = self.admission.admit(n)
        if window is None:
            raise self._overloaded(n)
        try:
            yield window
        finally:
            self.admission.release(window)

    def _overloaded(self, n: int) -> Overloaded:
        e = self.settings.engine
        message = (
            f"model '{self.name}' is at capacity ({e.max_num_seqs} running, "
            f"{e.max_waiting} waiting); retry shortly or on another server"
        )
        return Overloaded(message, retry_after=1.0, model=self.name, requested=n)

    async def generate(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        sampling: SamplingSettings | None = None,
        stop_loops: bool = False,
    ) -> Generation:
        """Run one engine request to completion (with the model's sampling settings, or
        `sampling`). Cancelling this aborts it in the engine. `stop_loops`: vLLM ends the
        generation when its tail repeats (finish_reason "repetition", LOOP_DETECTION)."""
        (generation,) = await self.generate_n(prompt_ids, max_tokens, sampling, stop_loops, 1)
        return generation

    async def generate_n(
        self,
        prompt_ids: list[int],
        max_tokens: int,
        sampling: SamplingSettings | None = None,
        stop_loops: bool = False,
        n: int = 1,
        regex: str | None = None,
        segments: int = 1,
    ) -> list[Generation]:
        """`n` outputs of one engine request (vLLM's `n`: the prompt is read once), in
        vLLM's order, each matching `regex` if given; as `generate` otherwise. The prompt's
        tokens are counted on the first. `segments`: the size of the translation request
        this belongs to, its rank under `scheduling: shortest_first` (`size_rank`)."""
        from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

        request_id = f"{self.name}-{next(_request_ids)}"
        # vLLM refuses a priority other than 0 unless its policy is "priority".
        priority = size_rank(segments) if self.settings.engine.scheduling != "fcfs" else 0
        # tolk asks for the final output only and uses no stop strings, so vLLM's incremental
        # detokenizer (Python, on this event loop, for every token of every step) would do
        # work nobody reads; the ids are decoded once, when the segment is done.
        params = sampling_params(
            sampling or self.settings.sampling,
            max_tokens,
            detokenize=False,
            stop_loops=stop_loops,
            n=n,
            regex=regex,
        )
        final = None
        await self.gather.wait(self.in_flight)
        self.in_flight += 1
        clock = CLOCK.get()  # the HTTP request's, for its Server-Timing (tolk.engine.timing)
        if clock is not None:
            clock.hand()
        try:
            async for output in self._llm.generate(
                {"prompt_token_ids": prompt_ids}, params, request_id, priority=priority
            ):
                final = output
        except EngineDeadError as exc:
            self.check_alive()
            raise EngineUnavailable(
                f"the engine for model '{self.name}' died", model=self.name
            ) from exc
        except EngineGenerateError as exc:
            if await self._dying():
                raise EngineUnavailable(
                    f"the engine for model '{self.name}' died during this request; retry "
                    "shortly or on another server",
                    retry_after=max(1.0, self.start_seconds),
                    model=self.name,
                ) from exc
            cause = exc.__cause__
            raise TolkError(
                f"the engine for model '{self.name}' failed this request: "
                f"{type(cause).__name__ if cause else 'error'}: {cause}",
                model=self.name,
            ) from exc
        finally:
            self.in_flight -= 1
        if final is None or len(final.outputs) < n:
            raise TolkError(f"the engine for model '{self.name}' returned no output")
        if clock is not None:
            clock.answer(getattr(final, "metrics", None))
        return [
            Generation(
                text=str(self.tokenizer.decode(list(c.token_ids), skip_special_tokens=True)),
                prompt_tokens=len(prompt_ids) if i == 0 else 0,
                completion_tokens=len(c.token_ids),
                finish_reason=c.finish_reason,
            )
            for i, c in enumerate(final.outputs[:n])
        ]

    def warm_up_shapes(self) -> list[tuple[SamplingSettings | None, bool, int, str | None]]:
        """(sampling, stop_loops, n, regex) of each way tolk asks this model to decode: its
        own sampling; where checks are on, with loop detection, the retry's sampling and
        the markup retry's candidates (guided where configured); sampled candidates (and those of
        segments with placeholders)."""
        settings = self.settings
        checks, candidates = settings.checks, settings.candidates
        stop = checks.enabled and checks.stop_loops
        shapes: list[tuple[SamplingSettings | None, bool, int, str | None]] = [
            (None, False, 1, None)
        ]
        if stop:
            shapes.append((None, True, 1, None))
        if checks.enabled and checks.retry:
            shapes.append((checks.retry_sampling, stop, 1, None))
            if checks.markup_candidates > 1:
                n = 1 if checks.markup_first_clean else checks.markup_candidates
                shapes.append((checks.markup_sampling, stop, n, None))
            if checks.markup_guided:
                shapes.append((checks.retry_sampling, stop, 1, WARM_UP_REGEX))
        if candidates.n > 1:
            shapes.append((candidates.sampling, stop, candidates.n - 1, None))
        if settings.markup_twins:
            shapes.append((candidates.sampling, stop, settings.markup_twins, None))
        return shapes

    async def warm_up(self, batches: Sequence[int] | None = None) -> float:
        """Each of warm_up_shapes, before the server takes traffic: first the model's own
        decoding alone, then all of them together in a batch of each size of `batches`
        sequences (the rest of each batch the model's own decoding); the seconds it took.
        `batches`: WARM_UP_BATCHES on a GPU; on a CPU, where vLLM compiles nothing on first
        use, one batch of the shapes alone.

        vLLM compiles some of what a step runs the first time a batch needs it: on a GPU,
        Triton kernels such as top-k/top-p sampling, used for batches of 8 sequences or
        more, and compiled again for each specialisation of their integer arguments (a
        batch size that is a multiple of 16 or not), inside the engine's step while every
        sequence of the batch waits. py-spy found the first loaded pass of a fresh server
        spending 10-13% of its engine's time in Triton's compiler, 1.6-3.5 s (docs/
        benchmarks.md, section 17): hence batches of both kinds here. A failure is logged:
        the engine's supervision deals with an engine that cannot serve."""
        begun = time.monotonic()
        ids = self.tokenizer.encode(WARM_UP_TEXT, add_special_tokens=False)
        shapes = self.warm_up_shapes()
        sequences = sum(n for _, _, n, _ in shapes)
        if batches is None:
            batches = (0,) if on_cpu() else WARM_UP_BATCHES
        try:
            await self.generate_n(ids, WARM_UP_TOKENS)
            for size in batches:
                fill = [(None, False, 1, None)] * max(0, size - sequences)
                await asyncio.gather(
                    *(
                        self.generate_n(ids, WARM_UP_TOKENS, sampling, stop, n, regex)
                        for sampling, stop, n, regex in [*shapes, *fill]
                    )
                )
        except TolkError as exc:
            log.warning("warming up the engine for model '%s' failed: %s", self.name, exc)
        seconds = time.monotonic() - begun
        log.info(
            "engine for model '%s' warmed up in %.2f s (decoding setups: %d)",
            self.name, seconds, len(shapes),
        )  # fmt: skip
        return seconds

    async def _dying(self) -> bool:
        """Whether a request's failure is the engine dying: when a Worker dies its
        EngineCore fails the requests in flight first and only then exits, so vLLM marks
        the engine errored a moment after they fail. Waits up to DEATH_NOTICE_SECONDS."""
        deadline = time.monotonic() + DEATH_NOTICE_SECONDS
        while self.state == "ready":
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def shutdown(self) -> None:
        """Stop the engine, or release what a dead one still holds (its sockets, its surviving
        processes); an error doing so is logged, never raised."""
        log.info("shutting down engine for model '%s'", self.name)
        try:
            self._llm.shutdown()
        except Exception:
            log.exception("error while shutting down the engine for model '%s'", self.name)
