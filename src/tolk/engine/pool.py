"""The server's models, and which one serves a (source, target) pair."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tolk.config import ModelSettings
from tolk.engine.engine import LLMStarter, ModelEngine, build_llm
from tolk.engine.metrics import EngineMetrics
from tolk.errors import Overloaded, UnknownModel, UnsupportedLanguagePair
from tolk.languages import Pair, serves

log = logging.getLogger("tolk.engine")


class ModelPool:
    """Engines in configuration order; that order is the preference when several serve a pair."""

    def __init__(self, engines: Sequence[ModelEngine]) -> None:
        self.engines = list(engines)
        self._by_name = {e.name: e for e in self.engines}
        # The cheap first admission check (shed): requests in the service now, against what
        # all the models admit together. Each admitted request holds at least one place, so
        # once this many are inside, a new one can only be refused later, after its texts
        # were parsed, segmented and tokenised; it is refused here instead, before any of it.
        self.capacity = sum(e.admission.capacity for e in self.engines)
        self.requests_inside = 0

    @property
    def full(self) -> bool:
        return self.requests_inside >= self.capacity

    def overloaded(self) -> Overloaded:
        """The refusal of the cheap check."""
        return Overloaded(
            f"this server is at capacity ({self.capacity} requests being translated by "
            f"model(s) {', '.join(e.name for e in self.engines)}); retry shortly or on "
            "another server",
            retry_after=1.0,
            model=self.engines[0].name if len(self.engines) == 1 else "",
        )

    @contextlib.contextmanager
    def shed(self) -> Iterator[None]:
        """Hold one request's place in the count for the `with` body, or refuse it with
        Overloaded at once (no per-text work done). The exact, per-model admission of its
        segments follows (ModelEngine.admit)."""
        if self.full:
            raise self.overloaded()
        self.requests_inside += 1
        try:
            yield
        finally:
            self.requests_inside -= 1

    @classmethod
    def start(
        cls,
        models: Sequence[ModelSettings],
        metrics: EngineMetrics,
        starter: LLMStarter = build_llm,
    ) -> ModelPool:
        """Start every model's engine, one after another (they share the machine's cores).
        If one fails, those already started are shut down before the error propagates."""
        started: list[ModelEngine] = []
        try:
            for settings in models:
                started.append(
                    ModelEngine.start(
                        settings, metrics, models_sharing=len(models), starter=starter
                    )
                )
        except BaseException:
            for engine in started:
                engine.shutdown()
            raise
        return cls(started)

    def get(self, name: str) -> ModelEngine:
        engine = self._by_name.get(name)
        if engine is None:
            raise UnknownModel(
                f"there is no model named '{name}'; this server has: {', '.join(self._by_name)}",
                models=list(self._by_name),
            )
        return engine

    def route(self, source: str, target: str, model: str | None = None) -> ModelEngine:
        """The engine for normalised tags `source` -> `target`, preferring live engines."""
        candidates = [self.get(model)] if model is not None else self.engines
        serving = [e for e in candidates if e.settings.coverage.covers(source, target)]
        if not serving:
            scope = (
                f"model '{model}' does not translate"
                if model
                else "no model on this server translates"
            )
            raise UnsupportedLanguagePair(
                f"{scope} {source} to {target}; see 'supported' for what is served",
                source_lang=source,
                target_lang=target,
                supported=[self.describe_model(e) for e in candidates],
            )
        return next((e for e in serving if e.alive), serving[0])

    @functools.cached_property
    def sources(self) -> tuple[str, ...]:
        """The tags some model translates from, in configuration order."""
        return self._tags(lambda pair: pair.source)

    @functools.cached_property
    def targets(self) -> tuple[str, ...]:
        """The tags some model translates into, in configuration order."""
        return self._tags(lambda pair: pair.target)

    def _tags(self, side: Callable[[Pair], str]) -> tuple[str, ...]:
        tags: dict[str, None] = {}
        for coverage in (e.settings.coverage for e in self.engines):
            tags |= dict.fromkeys((*coverage.languages, *map(side, coverage.pairs)))
        return tuple(tags)

    def takes_source(self, tag: str) -> bool:
        return any(serves(s, tag) for s in self.sources)

    def gives_target(self, tag: str) -> bool:
        return any(serves(t, tag) for t in self.targets)

    def covers(self, source: str, target: str) -> bool:
        return any(e.settings.coverage.covers(source, target) for e in self.engines)

    @staticmethod
    def describe_model(engine: ModelEngine) -> dict[str, Any]:
        return {"model": engine.name, **engine.settings.coverage.describe()}

    def shutdown(self) -> None:
        for engine in self.engines:
            engine.shutdown()
