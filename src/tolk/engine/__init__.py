"""The engine layer: one vLLM AsyncLLM per configured model, and the pool that routes to them."""

from tolk.engine.engine import (
    LLM,
    EngineStartError,
    Generation,
    LLMStarter,
    ModelEngine,
    Tokenizer,
    build_llm,
)
from tolk.engine.metrics import EngineMetrics
from tolk.engine.pool import ModelPool

__all__ = [
    "LLM",
    "EngineMetrics",
    "EngineStartError",
    "Generation",
    "LLMStarter",
    "ModelEngine",
    "ModelPool",
    "Tokenizer",
    "build_llm",
]
