"""The proxy's view of its upstreams: what each serves (from its /models), whether it is
healthy (active /ready checks with rise/fall thresholds, plus a passive circuit breaker fed
by real requests), and how loaded it is (the proxy's own outstanding count, plus queue depth
and KV cache use scraped from its /metrics)."""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tolk.languages import LanguageCoverage, parse_pair, serves
from tolk.proxy.config import BreakerSettings, DnsUpstreams, HealthSettings, ProxyConfig
from tolk.wire.prometheus import Snapshot

log = logging.getLogger("tolk.proxy")

LOAD_QUERY = [
    ("name[]", "vllm:num_requests_waiting"),
    ("name[]", "vllm:num_requests_running"),
    ("name[]", "vllm:kv_cache_usage_perc"),
]

Clock = Callable[[], float]
Resolver = Callable[[str, int], Awaitable[list[str]]]


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


async def resolve(name: str, port: int) -> list[str]:
    """Every address `name` resolves to (IPv4 and IPv6), in a stable order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return sorted({str(info[4][0]) for info in infos})


def address_url(scheme: str, address: str, port: int) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


Listener = Callable[[Upstream, str, str], None]  # upstream, event, detail


class UpstreamPool:
    """Every upstream, its background checks, and the choice among them."""

    def __init__(
        self,
        config: ProxyConfig,
        session: aiohttp.ClientSession,
        *,
        resolver: Resolver = resolve,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.session = session
        self.resolver = resolver
        self.clock = clock
        self.rng = rng or random.Random()
        self.upstreams: dict[str, Upstream] = {}
        self.listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._routes: dict[tuple[str | None, str, str | None], list[str]] = {}

    # -- membership ------------------------------------------------------------------------

    def _event(self, upstream: Upstream, event: str, detail: str = "") -> None:
        for listener in self.listeners:
            listener(upstream, event, detail)

    def add(self, url: str, origin: str) -> Upstream:
        existing = self.upstreams.get(url)
        if existing is not None:
            return existing
        upstream = Upstream(
            url,
            origin,
            self.config.health,
            CircuitBreaker(self.config.breaker, self.clock),
            clock=self.clock,
        )
        self.upstreams[url] = upstream
        self._routes.clear()
        self._event(upstream, "added", origin)
        return upstream

    def remove(self, url: str) -> None:
        upstream = self.upstreams.pop(url, None)
        if upstream is None:
            return
        self._routes.clear()
        for task in upstream.tasks:
            task.cancel()
        self._event(upstream, "removed", upstream.origin)

    async def start(self) -> None:
        """Add the static and resolved upstreams, check each once (so routing works from the
        first request), then keep checking in the background."""
        for url in self.config.static_urls:
            self.add(url, "static")
        for dns in self.config.dns:
            await self._resolve_once(dns)
        await asyncio.gather(*(self.check(u) for u in list(self.upstreams.values())))
        for upstream in self.upstreams.values():
            self._watch(upstream)
        self._tasks += [asyncio.create_task(self._dns_loop(d)) for d in self.config.dns]

    async def stop(self) -> None:
        tasks = [*self._tasks, *(t for u in self.upstreams.values() for t in u.tasks)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _watch(self, upstream: Upstream) -> None:
        if not upstream.tasks:
            upstream.tasks = [
                asyncio.create_task(self._health_loop(upstream)),
                asyncio.create_task(self._load_loop(upstream)),
            ]

    async def _resolve_once(self, dns: DnsUpstreams) -> None:
        origin = f"dns:{dns.name}"
        try:
            addresses = await self.resolver(dns.name, dns.port)
        except OSError as exc:
            # Keep the last known set: a resolver hiccup must not empty the pool.
            log.warning("cannot resolve %s: %s; keeping its %s upstreams", dns.name, exc, origin)
            return
        wanted = {address_url(dns.scheme, a, dns.port) for a in addresses}
        for url in sorted(wanted):
            if url not in self.upstreams:
                self.add(url, origin)
        for url, upstream in list(self.upstreams.items()):
            if upstream.origin == origin and url not in wanted:
                self.remove(url)

    async def _dns_loop(self, dns: DnsUpstreams) -> None:
        while True:
            await asyncio.sleep(dns.interval)
            await self._resolve_once(dns)
            for upstream in list(self.upstreams.values()):
                if not upstream.tasks:
                    await self.check(upstream)
                    self._watch(upstream)

    # -- checks ----------------------------------------------------------------------------

    async def check(self, upstream: Upstream) -> None:
        """One active check of /ready; discovery of /models when due."""
        timeout = aiohttp.ClientTimeout(total=self.config.health.timeout)
        try:
            async with self.session.get(f"{upstream.url}/ready", timeout=timeout) as response:
                await response.read()
                ok, error = response.status == 200, f"/ready answered {response.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            ok, error = False, f"/ready failed: {type(exc).__name__}: {exc}"
        change = upstream.record_check(ok, None if ok else error)
        if ok:
            due = upstream.discovered_at is None or (
                self.clock() - upstream.discovered_at >= self.config.health.discovery_interval
            )
            if due or change == "up":
                await self.discover(upstream)
        if change is not None:
            self._event(upstream, change, upstream.last_error or "")

    async def discover(self, upstream: Upstream) -> None:
        timeout = aiohttp.ClientTimeout(total=self.config.health.timeout * 2)
        try:
            async with self.session.get(f"{upstream.url}/models", timeout=timeout) as response:
                data = await response.json()
            infos = [ModelInfo.from_languages(m) for m in data["models"]]
            models = {info.name: info for info in infos}
            upstream.discovered_at = self.clock()
            if models != upstream.models:
                upstream.models = models
                self._routes.clear()
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, KeyError) as exc:
            log.warning("discovery of %s/models failed: %s", upstream.url, exc)

    async def scrape_load(self, upstream: Upstream) -> None:
        timeout = aiohttp.ClientTimeout(total=self.config.health.timeout)
        try:
            async with self.session.get(
                f"{upstream.url}/metrics", params=LOAD_QUERY, timeout=timeout
            ) as response:
                snap = Snapshot.parse(await response.text())
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return  # stale load figures until the next scrape; health checks judge failure
        upstream.waiting = snap.get("vllm:num_requests_waiting")
        upstream.running = snap.get("vllm:num_requests_running")
        upstream.kv_usage = snap.mean("vllm:kv_cache_usage_perc") or 0.0

    async def _health_loop(self, upstream: Upstream) -> None:
        while True:
            await asyncio.sleep(self.config.health.interval)
            await self.check(upstream)

    async def _load_loop(self, upstream: Upstream) -> None:
        while True:
            if upstream.up:
                await self.scrape_load(upstream)
            await asyncio.sleep(self.config.health.load_interval)

    # -- choice ----------------------------------------------------------------------------

    def serving(self, source: str | None, target: str, model: str | None) -> list[Upstream]:
        """Upstreams serving the pair (healthy or not), from a cache that discovery and
        membership changes clear."""
        key = (source, target, model)
        urls = self._routes.get(key)
        if urls is None:
            urls = [u.url for u in self.upstreams.values() if u.serves(source, target, model)]
            self._routes[key] = urls
        return [self.upstreams[url] for url in urls if url in self.upstreams]

    def pick(self, candidates: Iterable[Upstream], exclude: set[str]) -> Upstream | None:
        """Power of two choices: two random available candidates, the less loaded wins."""
        usable = [u for u in candidates if u.url not in exclude and u.accepting()]
        if not usable:
            return None
        if len(usable) == 1:
            return usable[0]
        a, b = self.rng.sample(usable, 2)
        return a if a.load() <= b.load() else b

    def served_pairs(self) -> list[str]:
        return sorted(
            {p for u in self.upstreams.values() for m in u.models.values() for p in m.pairs}
        )

    def served_models(self) -> list[str]:
        return sorted({m for u in self.upstreams.values() for m in u.models})

    def any_up(self) -> bool:
        return any(u.up for u in self.upstreams.values())


__all__ = [
    "Circuit",
    "CircuitBreaker",
    "ModelInfo",
    "Upstream",
    "UpstreamPool",
    "address_url",
    "resolve",
]
