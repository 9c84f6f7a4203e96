"""`engine.gather_ms` on a real vLLM engine of its own: engine requests that arrive while the
engine is busy reach vLLM together, with their group, and all of them are answered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.polling import wait_until


@pytest.mark.slow
async def test_requests_arriving_while_the_engine_is_busy_reach_vllm_with_their_group(
    test_model: Path,
) -> None:
    from tests.support.servers import model_config, runtime_env
    from tolk.config import ModelSettings
    from tolk.engine import EngineMetrics
    from tolk.engine.engine import ModelEngine, build_llm
    from tolk.server.metrics import EngineStates

    runtime_env()
    config = model_config(
        "salad", test_model, languages=["en"], engine={"gather_ms": 200, "gather_above": 0}
    )
    settings = ModelSettings.model_validate(config)
    llm, seconds = build_llm(settings, EngineMetrics())
    engine = ModelEngine(settings, llm, seconds)
    vllm: Any = llm  # vLLM's AsyncLLM: its own count of the requests it holds
    try:
        prompt = engine.tokenizer.encode("Translate: the weather is lovely today.")
        # Nothing in flight: the first goes to vLLM at once.
        first = asyncio.create_task(engine.generate_n(prompt, 600))

        async def first_in_vllm() -> bool:
            return bool(vllm.get_num_unfinished_requests() == 1)

        await wait_until(first_in_vllm, within=30)
        assert engine.in_flight == 1
        assert engine.gather.gathered == 0
        later = [asyncio.create_task(engine.generate_n(prompt, 8)) for _ in range(3)]
        await asyncio.sleep(0)  # each runs to its first wait
        # Held by tolk, not in vLLM: the engine still holds the first alone (or none, if it
        # has finished), until the group's time is up.
        assert engine.gather.gathered == 3
        assert engine.gather.groups == 0
        assert vllm.get_num_unfinished_requests() <= 1
        outputs = await asyncio.wait_for(asyncio.gather(first, *later), timeout=60)
        assert engine.gather.groups == 1
        assert [len(out) for out in outputs] == [1, 1, 1, 1]
        assert all(out[0].completion_tokens > 0 for out in outputs)
        assert all(out[0].completion_tokens <= 8 for out in outputs[1:])
        assert vllm.get_num_unfinished_requests() == 0
        states = EngineStates()
        states.engines = [engine]
        counted = {
            family.name: [(sample.labels, sample.value) for sample in family.samples]
            for family in states.collect()
        }
        assert counted["tolk_engine_gathered_requests"][0] == ({"model": "salad"}, 3.0)
        assert counted["tolk_engine_gather_groups"][0] == ({"model": "salad"}, 1.0)
        # The three waited the group's 200 ms each, from their arrival to its release.
        ((labels, waited),) = counted["tolk_engine_gather_wait_seconds"]
        assert labels == {"model": "salad"}
        assert 3 * 0.19 <= waited < 3 * 5.0
    finally:
        engine.shutdown()
