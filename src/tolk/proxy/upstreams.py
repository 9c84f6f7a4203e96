"""The proxy's upstreams as a pool: the configured ones and those a DNS name resolves to,
kept up to date, checked and scraped in the background, and chosen per request (tolk.proxy.
upstream is one of them)."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable, Iterable

import aiohttp

from tolk.proxy.config import DnsUpstreams, ProxyConfig
from tolk.proxy.upstream import LOAD_QUERY, CircuitBreaker, Clock, ModelInfo, Upstream
from tolk.wire.prometheus import Snapshot

log = logging.getLogger("tolk.proxy")


async def resolve(name: str, port: int) -> list[str]:
    """Every address `name` resolves to (IPv4 and IPv6), in a stable order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return sorted({str(info[4][0]) for info in infos})


def address_url(scheme: str, address: str, port: int) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


Resolver = Callable[[str, int], Awaitable[list[str]]]
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


__all__ = ["UpstreamPool", "address_url", "resolve"]
