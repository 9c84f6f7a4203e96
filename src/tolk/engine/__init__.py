"""The engine layer: one vLLM AsyncLLM per configured model, and the pool that routes to them."""

from tolk.engine.engine import EngineStartError, Generation, ModelEngine, Tokenizer
from tolk.engine.metrics import EngineMetrics
from tolk.engine.pool import ModelPool

__all__ = [
    "EngineMetrics",
    "EngineStartError",
    "Generation",
    "ModelEngine",
    "ModelPool",
    "Tokenizer",
]
