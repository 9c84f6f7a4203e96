"""The engine's warm-up (ModelEngine.warm_up) over a recording stand-in LLM: every way tolk
decodes with a model runs once, greedy alone first, so that nothing vLLM compiles on first use
(Triton's sampling and penalty kernels on a GPU) is compiled inside a loaded engine's step;
without checks, only the model's own decoding and its candidates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.servers import model_config
from tolk.config import ModelSettings, SamplingSettings
from tolk.engine import EngineMetrics
from tolk.engine.engine import LOOP_DETECTION, WARM_UP_BATCHES, WARM_UP_TOKENS, ModelEngine
from tolk.engine.vllm_compat import loop_detection
from tolk.testing.fake_engine import FakeEngines, FakeLLM, FakeOutput


@dataclass
class Recorded:
    """What one engine request asked for, and how many were in flight beside it."""

    temperature: float
    repetition_penalty: float
    n: int
    max_tokens: int
    loops_stopped: bool


@dataclass
class RecordingLLM:
    """A stand-in LLM (tolk.testing.fake_engine) that records each request's sampling."""

    inner: FakeLLM
    seen: list[Recorded] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # "start" and "end", in order

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(
        self, prompt: Any, params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[FakeOutput]:
        self.events.append("start")
        self.seen.append(
            Recorded(
                params.temperature,
                params.repetition_penalty,
                params.n,
                params.max_tokens,
                getattr(params, "repetition_detection", None) is not None,
            )
        )
        try:
            async for output in self.inner.generate(prompt, params, request_id):
                yield output
        finally:
            self.events.append("end")


def _engine(settings: ModelSettings) -> tuple[ModelEngine, RecordingLLM]:
    fake, _ = FakeEngines()(settings, EngineMetrics())
    assert isinstance(fake, FakeLLM)
    llm = RecordingLLM(fake)
    return ModelEngine(settings, llm), llm


async def test_every_way_of_decoding_runs_once_greedy_alone_first(test_model: Path) -> None:
    # The checks as shipped (the random model's tests switch them off).
    settings = ModelSettings.model_validate(
        model_config("demo", test_model, languages=["en"]) | {"checks": {}}
    )
    checks = settings.checks
    assert checks.enabled
    assert checks.retry
    assert checks.markup_candidates == 4
    engine, llm = _engine(settings)
    await engine.warm_up(WARM_UP_BATCHES)  # as on a GPU
    first, *batches = llm.seen
    assert (first.temperature, first.n) == (0.0, 1)  # the model's own, alone
    assert all(r.max_tokens == WARM_UP_TOKENS for r in llm.seen)
    # Then every way at once, twice: batches that mix them, as a loaded engine's do, of 16
    # sequences and of 17 (the rest the model's own).
    assert len(engine.warm_up_shapes()) == 4
    sixteen, seventeen = batches[:13], batches[13:]
    assert sum(r.n for r in sixteen) == WARM_UP_BATCHES[0] == 16
    assert sum(r.n for r in seventeen) == WARM_UP_BATCHES[1] == 17
    assert llm.events == (
        ["start", "end"] + ["start"] * 13 + ["end"] * 13 + ["start"] * 14 + ["end"] * 14
    )
    together = sixteen[:4]
    # On a CPU (here), where vLLM compiles nothing on first use: one batch of the shapes.
    llm.seen.clear()
    llm.events.clear()
    await engine.warm_up()
    assert [r.n for r in llm.seen] == [1, 1, 1, 1, 4]
    assert llm.events == ["start", "end"] + ["start"] * 4 + ["end"] * 4
    retry, markup = checks.retry_sampling, checks.markup_sampling
    assert retry.repetition_penalty is not None
    ways = {(r.temperature, r.repetition_penalty, r.n) for r in together}
    assert ways == {
        (0.0, 1.0, 1),  # the model's own ...
        (retry.temperature, retry.repetition_penalty, 1),  # the retry's penalty
        (markup.temperature, 1.0, 4),  # the markup retry's sampled candidates
    }
    # ... and the model's own again with loop detection (as the retries), where the
    # installed vLLM has it.
    assert sum(r.temperature == 0.0 and r.n == 1 for r in together) == 3
    detects = loop_detection(**LOOP_DETECTION) is not None
    assert sum(r.loops_stopped for r in together) == (3 if detects else 0)


def test_first_clean_markup_candidates_warm_up_as_requests_of_one_output(test_model: Path) -> None:
    """`checks.markup_first_clean`: the markup retry's candidates go as requests of one
    output each, so that is the shape warmed up, not one request of `markup_candidates`."""
    settings = ModelSettings.model_validate(
        model_config("demo", test_model, languages=["en"])
        | {"checks": {"markup_first_clean": True}}
    )
    engine, _ = _engine(settings)
    markup = settings.checks.markup_sampling
    shapes = engine.warm_up_shapes()
    assert [n for sampling, _, n, _ in shapes if sampling == markup] == [1]
    as_one = settings.model_copy(
        update={"checks": settings.checks.model_copy(update={"markup_first_clean": False})}
    )
    engine, _ = _engine(as_one)
    assert [n for sampling, _, n, _ in engine.warm_up_shapes() if sampling == markup] == [4]


async def test_without_checks_only_the_models_own_and_its_candidates(test_model: Path) -> None:
    settings = ModelSettings.model_validate(
        model_config("demo", test_model, languages=["en"])
        | {
            "checks": {"enabled": False},
            "candidates": {"n": 3, "sampling": {"temperature": 0.5}},
            "sampling": {"temperature": 0.2},
        }
    )
    engine, _ = _engine(settings)
    assert engine.warm_up_shapes() == [
        (None, False, 1, None),
        (SamplingSettings(temperature=0.5), False, 2, None),
    ]
    # More candidates for segments with placeholders: their shape too.
    more = settings.model_copy(
        update={"candidates": settings.candidates.model_copy(update={"markup_n": 5})}
    )
    engine, _ = _engine(more)
    # Checks off: a twin is never needed (nothing finds a problem in the greedy output).
    assert engine.warm_up_shapes()[-1] == (SamplingSettings(temperature=0.5), False, 2, None)
    checked = more.model_copy(update={"checks": more.checks.model_copy(update={"enabled": True})})
    engine, _ = _engine(checked)
    assert engine.warm_up_shapes()[-1] == (SamplingSettings(temperature=0.5), True, 4, None)
    # No more than `n`: nothing added.
    fewer = checked.model_copy(
        update={"candidates": checked.candidates.model_copy(update={"markup_n": 3})}
    )
    engine, _ = _engine(fewer)
    assert engine.warm_up_shapes()[-1] == (SamplingSettings(temperature=0.5), True, 2, None)
