"""The markup retry's guiding expression (tolk.translation.guide) on a real vLLM engine of its
own, configured by tolk (the llguidance backend): even the random model's output keeps to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tolk.config import SamplingSettings
from tolk.translation.guide import placeholder_regex


@pytest.mark.slow
async def test_the_real_engine_keeps_to_the_expression(test_model: Path) -> None:
    """vLLM, configured by tolk (the llguidance backend), makes even the random model's
    token salad match: each placeholder once, in order, the text between them bounded."""
    from tests.support.servers import model_config, runtime_env
    from tolk.config import ModelSettings
    from tolk.engine import EngineMetrics
    from tolk.engine.engine import ModelEngine, build_llm

    runtime_env()
    settings = ModelSettings.model_validate(model_config("salad", test_model, languages=["en"]))
    llm, seconds = build_llm(settings, EngineMetrics())
    engine = ModelEngine(settings, llm, seconds)
    try:
        masked = "Click <g1>Save</g1> to keep <x2/> now."
        regex = placeholder_regex(masked, "tags")
        assert regex is not None
        prompt = engine.tokenizer.encode("Translate: " + masked)
        free = await engine.generate_n(prompt, 200, None, False, 1)
        assert re.fullmatch(regex, free[0].text) is None  # salad does not match by itself
        sampled = SamplingSettings(temperature=1.0)
        guided = await engine.generate_n(prompt, 200, sampled, False, 3, regex)
        for output in guided:
            assert output.finish_reason == "stop", output
            assert re.fullmatch(regex, output.text), output
    finally:
        engine.shutdown()
