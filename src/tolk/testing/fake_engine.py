"""A stand-in for vLLM's AsyncLLM, named so: for tests of the HTTP edge, in-process.

It sits under a real `ModelEngine` (through the `LLMStarter` seam, tolk.engine.engine), so
everything tolk does around an engine request runs as in a server: admission, budgets,
tokenising, prompts, segmenting, fidelity checks, the compatible APIs, errors, limits. What
it leaves out is the engine itself: continuous batching, real aborts, restarts of real
processes, vLLM's metrics. Those keep their tests against the real engine.

Its output imitates the random test model (tolk.testing.model): every request generates
exactly its `max_tokens` of ordinary tokens (token salad, which can contain `<`, `&`, `*`,
`` ` `` and `[`), deterministically from the prompt, so that tests of what tolk returns see
the same kind of text as with the real test model, in microseconds instead of an engine's
start-up and steps.

`seconds_per_token` gives
each request the time its tokens would take (without batching's limits: every admitted
request runs at once), for tests of tools that need requests to stay in flight, such as
`tolk bench overload`'s refusals.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from tolk.config import ModelSettings
from tolk.engine import LLM, EngineMetrics


@dataclass(frozen=True)
class FakeCompletion:
    token_ids: list[int]
    finish_reason: str


@dataclass(frozen=True)
class FakeOutput:
    outputs: list[FakeCompletion]


@dataclass(frozen=True)
class FakeModelConfig:
    max_model_len: int


@dataclass
class FakeLLM:
    """Answers every request with `max_tokens` tokens drawn from `vocabulary`, seeded by the
    prompt (and, for `n` > 1, the output's index; sampled outputs by their sampling too:
    sampled candidates differ from the greedy one)."""

    model_config: FakeModelConfig
    vocabulary: list[int]
    seconds_per_token: float = 0.0
    requests: int = 0  # engine requests answered, for tests that count them
    outputs: int = 0  # outputs written (a request asks for `n`)
    # The latest requests' prompts (token ids), for tests of what reached the model
    prompts: deque[list[int]] = field(default_factory=lambda: deque(maxlen=64))
    # ... and the priorities they were given (`scheduling: shortest_first`), in the same order
    priorities: deque[int] = field(default_factory=lambda: deque(maxlen=64))
    _dead: bool = field(default=False, repr=False)

    @property
    def errored(self) -> bool:
        return self._dead

    async def generate(
        self, prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[FakeOutput]:
        from vllm.v1.engine.exceptions import EngineDeadError

        if self._dead:
            raise EngineDeadError("the stand-in engine was shut down")
        # A request is at least a task switch, as in the real front end; cancelling it here
        # is the abort.
        await asyncio.sleep(sampling_params.max_tokens * self.seconds_per_token)
        prompt_ids = list(prompt["prompt_token_ids"])
        self.prompts.append(prompt_ids)
        self.priorities.append(priority)
        seed = hashlib.sha256(repr(prompt_ids).encode()).digest()
        completions = []
        # Sampled outputs differ from the greedy one and from each other.
        sampled = b"sampled" if sampling_params.temperature > 0 else b""
        for index in range(sampling_params.n):
            rng = random.Random(seed + sampled + bytes([index % 256]))
            tokens = rng.choices(self.vocabulary, k=sampling_params.max_tokens)
            completions.append(FakeCompletion(tokens, "length"))
        self.requests += 1
        self.outputs += len(completions)
        yield FakeOutput(completions)

    def shutdown(self) -> None:
        self._dead = True


@dataclass
class FakeEngines:
    """An `LLMStarter` that starts FakeLLMs; `started` keeps them by model name."""

    seconds_per_token: float = 0.0
    started: dict[str, FakeLLM] = field(default_factory=dict)

    def __call__(
        self, settings: ModelSettings, metrics: EngineMetrics, *, models_sharing: int = 1
    ) -> tuple[LLM, float]:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(settings.path))
        special = set(tokenizer.all_special_ids)
        # Tokens that are whole characters: the stand-in's text never holds a broken one
        # (which the output checks flag, and which would keep a sample from being offered).
        vocabulary = [
            i
            for i in range(len(tokenizer))
            if i not in special and "\ufffd" not in tokenizer.decode([i])
        ]
        llm = FakeLLM(
            FakeModelConfig(settings.engine.max_model_len or 4096),
            vocabulary,
            self.seconds_per_token,
        )
        self.started[settings.name] = llm
        return llm, 0.0
