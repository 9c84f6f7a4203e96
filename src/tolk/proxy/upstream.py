"""One upstream as the proxy sees it: what it serves (from its /models), whether it is
healthy (active /ready checks with rise/fall thresholds, plus a passive circuit breaker fed
by real requests), and how loaded it is (the proxy's own outstanding count, plus queue depth
and KV cache use scraped from its /metrics)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tolk.languages import LanguageCoverage, parse_pair, serves
from tolk.proxy.config import BreakerSettings, HealthSettings

log = logging.getLogger("tolk.proxy")

LOAD_QUERY = [
    ("name[]", "vllm:num_requests_waiting"),
    ("name[]", "vllm:num_requests_running"),
    ("name[]", "vllm:kv_cache_usage_perc"),
]

Clock = Callable[[], float]


class Circuit(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Opens after `failures` consecutive failed requests; after `open_seconds` lets one probe
    through (half-open): its success closes the circuit, its failure opens it again."""

    def __init__(self, settings: BreakerSettings, clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.state = Circuit.CLOSED
        self.failures = 0
        self.opened_at = 0.0
        self.probing = False

    def allows(self) -> bool:
        if self.state is Circuit.OPEN:
            if self.clock() - self.opened_at < self.settings.open_seconds:
                return False
            self.state = Circuit.HALF_OPEN
            self.probing = False
        if self.state is Circuit.HALF_OPEN:
            return not self.probing
        return True

    def attempt(self) -> None:
        if self.state is Circuit.HALF_OPEN:
            self.probing = True

    def abandon(self) -> None:
        """The attempt ended with no verdict (its client left): let another probe through."""
        self.probing = False

    def success(self) -> None:
        self.failures = 0
        self.state = Circuit.CLOSED
        self.probing = False

    def failure(self) -> bool:
        """Record a failure; True if this opened the circuit."""
        self.failures += 1
        if self.state is Circuit.HALF_OPEN or (
            self.state is Circuit.CLOSED and self.failures >= self.settings.failures
        ):
            self.state = Circuit.OPEN
            self.opened_at = self.clock()
            self.probing = False
            return True
        return False


@dataclass(frozen=True)
class ModelInfo:
    """One model of an upstream, as its /models describes it."""

    name: str
    coverage: LanguageCoverage
    raw: dict[str, Any] = field(compare=False)
    capacity: int | None = None  # None: a server from before tolk published it

    @classmethod
    def from_languages(cls, entry: dict[str, Any]) -> ModelInfo:
        coverage = LanguageCoverage(
            tuple(str(t) for t in entry.get("languages", ())),
            tuple(parse_pair(str(p)) for p in entry.get("pairs", ())),
        )
        capacity = entry.get("capacity")
        return cls(
            str(entry["model"]),
            coverage,
            entry,
            capacity if isinstance(capacity, int) and capacity > 0 else None,
        )

    @property
    def pairs(self) -> frozenset[str]:
        """Every pair served, as "en>de": the explicit ones and those among its languages."""
        among = itertools.permutations(self.coverage.languages, 2)
        return frozenset({*map(str, self.coverage.pairs), *(f"{s}>{t}" for s, t in among)})

    def covers(self, source: str, target: str) -> bool:
        """Matched as the server itself matches: a model serving `de` takes `de-AT`."""
        return self.coverage.covers(source, target)

    def targets(self, target: str) -> bool:
        """Whether some source of this model translates into `target`."""
        coverage = self.coverage
        return any(serves(t, target) for t in coverage.languages) or any(
            serves(p.target, target) for p in coverage.pairs
        )


@dataclass
class Upstream:
    url: str
    origin: str  # "static" or "dns:<name>"
    health: HealthSettings
    breaker: CircuitBreaker
    clock: Clock = time.monotonic
    up: bool = False
    checked: bool = False
    passes: int = 0
    fails: int = 0
    models: dict[str, ModelInfo] = field(default_factory=dict)
    discovered_at: float | None = None
    outstanding: int = 0
    waiting: float = 0.0
    running: float = 0.0
    kv_usage: float = 0.0
    cooling_until: float = 0.0
    last_error: str | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def serves(self, source: str | None, target: str, model: str | None) -> bool:
        """`source` None: the upstream detects it, so any model with this target will do."""
        models = [self.models.get(model)] if model is not None else list(self.models.values())
        return any(
            m is not None and (m.covers(source, target) if source else m.targets(target))
            for m in models
        )

    def available(self) -> bool:
        return self.up and self.clock() >= self.cooling_until and self.breaker.allows()

    @property
    def capacity(self) -> int | None:
        """Requests the server admits at once: its models' summed capacity, as its own
        shedding counts (None if one of them did not say)."""
        capacities = [m.capacity for m in self.models.values()]
        if not capacities or None in capacities:
            return None
        return sum(c for c in capacities if c is not None)

    def full(self) -> bool:
        """This proxy alone has as many requests there as the server admits: one more
        would be refused, so it is refused here, without the round trip."""
        capacity = self.capacity
        return capacity is not None and self.outstanding >= capacity

    def accepting(self) -> bool:
        """Available and not full: a request may be sent there now."""
        return self.available() and not self.full()

    def busy(self) -> bool:
        """Up and healthy, but refusing for now: full, or cooling after an overload."""
        return self.up and self.breaker.allows() and not self.accepting()

    def load(self) -> float:
        """Lower is better: requests this proxy has outstanding there plus the engine queue,
        weighted up as its KV cache fills."""
        return (self.outstanding + self.waiting) * (1.0 + self.kv_usage)

    def record_check(self, ok: bool, error: str | None = None) -> str | None:
        """One active check's result; returns "up" or "down" when the state changes. The first
        check decides at once; after that `rise`/`fall` consecutive results are needed."""
        first = not self.checked
        self.checked = True
        if ok:
            self.passes, self.fails = self.passes + 1, 0
            if not self.up and (first or self.passes >= self.health.rise):
                self.up = True
                self.last_error = None
                return "up"
        else:
            self.fails, self.passes = self.fails + 1, 0
            self.last_error = error
            if self.up and self.fails >= self.health.fall:
                self.up = False
                return "down"
        return None

    @contextlib.contextmanager
    def trying(self) -> Iterator[None]:
        """One attempt at this upstream, for the body of the `with`: counted in `outstanding`
        (its load) and by the breaker (a half-open one lets one through); an attempt given
        up by its caller (cancelled) is abandoned, neither a success nor a failure."""
        self.outstanding += 1
        self.breaker.attempt()
        try:
            yield
        except asyncio.CancelledError:
            self.breaker.abandon()
            raise
        finally:
            self.outstanding -= 1

    def settle(self, failed: bool) -> bool:
        """An attempt's outcome, to the breaker; True when this failure opened the circuit."""
        if failed:
            return self.breaker.failure()
        self.breaker.success()
        return False

    def mark_down(self, reason: str) -> bool:
        """Passive: the upstream said it is going away (503 shutting_down). Active checks
        bring it back after `rise` passes."""
        self.passes = 0
        self.last_error = reason
        if self.up:
            self.up = False
            return True
        return False

    def cool(self, seconds: float) -> None:
        """Passive: it answered 503 overloaded. Send it nothing new for `seconds`."""
        self.cooling_until = max(self.cooling_until, self.clock() + seconds)

    def describe(self) -> dict[str, Any]:
        now = self.clock()
        return {
            "url": self.url,
            "origin": self.origin,
            "healthy": self.up,
            "available": self.available(),
            "circuit": self.breaker.state.value,
            "consecutive_failures": self.breaker.failures,
            "cooling_seconds": round(max(0.0, self.cooling_until - now), 3),
            "outstanding": self.outstanding,
            "capacity": self.capacity,
            "queue_waiting": self.waiting,
            "running": self.running,
            "kv_cache_usage": self.kv_usage,
            "load": self.load(),
            "models": {name: sorted(m.pairs) for name, m in self.models.items()},
            "discovered_seconds_ago": (
                None if self.discovered_at is None else round(now - self.discovered_at, 1)
            ),
            "last_error": self.last_error,
        }


__all__ = ["LOAD_QUERY", "Circuit", "CircuitBreaker", "Clock", "ModelInfo", "Upstream"]
