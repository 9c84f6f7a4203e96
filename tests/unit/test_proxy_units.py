"""The proxy's parts on their own: circuit breaker, health thresholds, the choice among
upstreams, request routing, DNS membership, configuration."""

from __future__ import annotations

import random
from pathlib import Path

import aiohttp
import pytest

from tolk.config import ConfigError
from tolk.proxy.attempts import Attempt, Forwarder
from tolk.proxy.config import BreakerSettings, HealthSettings, ProxyConfig, load_proxy_config
from tolk.proxy.metrics import ProxyMetrics
from tolk.proxy.routing import Route, route_of
from tolk.proxy.upstream import Circuit, CircuitBreaker, ModelInfo, Upstream
from tolk.proxy.upstreams import UpstreamPool, address_url, resolve


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def upstream(url: str, clock: Clock | None = None, **health: int) -> Upstream:
    clock = clock or Clock()
    return Upstream(
        url,
        "static",
        HealthSettings(**health),
        CircuitBreaker(BreakerSettings(failures=3, open_seconds=5), clock),
        clock=clock,
    )


def test_breaker_opens_after_consecutive_failures_and_half_opens_for_one_probe() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerSettings(failures=3, open_seconds=5), clock)
    assert not breaker.failure()
    breaker.success()  # a success resets the count: failures must be consecutive
    assert [breaker.failure() for _ in range(3)] == [False, False, True]
    assert breaker.state is Circuit.OPEN
    assert not breaker.allows()
    clock.now += 5
    assert breaker.allows()
    assert breaker.state.value == "half_open"
    breaker.attempt()
    assert not breaker.allows()  # one probe at a time
    breaker.abandon()  # its client left before an answer: another may probe
    assert breaker.allows()
    breaker.attempt()
    assert breaker.failure()  # the probe failed: open again, for another 5 s
    assert not breaker.allows()
    clock.now += 5
    assert breaker.allows()
    breaker.attempt()
    breaker.success()
    assert breaker.state.value == "closed"
    assert breaker.allows()


def test_health_rise_and_fall() -> None:
    u = upstream("http://a", rise=2, fall=3)
    assert u.record_check(True) == "up"  # the first check decides at once
    assert [u.record_check(False) for _ in range(3)] == [None, None, "down"]
    assert not u.available()
    assert u.record_check(True) is None
    assert u.record_check(True) == "up"
    assert u.available()
    # A passive "shutting down" takes it out at once; active checks bring it back.
    assert u.mark_down("answered 503 shutting_down")
    assert [u.record_check(True), u.record_check(True)] == [None, "up"]


def test_overloaded_upstream_cools_down() -> None:
    clock = Clock()
    u = upstream("http://a", clock)
    u.record_check(True)
    u.cool(1.0)
    assert not u.available()
    clock.now += 1.0
    assert u.available()


async def test_power_of_two_choices_prefers_the_less_loaded() -> None:
    async with aiohttp.ClientSession() as session:
        pool = UpstreamPool(ProxyConfig(upstreams=("http://a",)), session, rng=random.Random(1))
        a, b, c = (pool.add(f"http://{n}", "static") for n in "abc")
        for u in (a, b, c):
            u.record_check(True)
        a.outstanding, b.outstanding, c.outstanding = 0, 5, 10
        picks = [pool.pick([a, b, c], set()) for _ in range(300)]
        assert picks.count(c) == 0  # the most loaded never wins a pair
        assert picks.count(a) > picks.count(b)
        assert pool.pick([a, b], {a.url}) is b  # exclusion
        b.breaker.state = Circuit.OPEN
        b.breaker.opened_at = pool.clock()
        assert pool.pick([a, b], {a.url}) is None
        # Queue depth and KV use scraped from the upstream count too.
        a.outstanding, c.outstanding = 1, 1
        a.waiting, a.kv_usage = 4, 0.9
        assert all(pool.pick([a, c], set()) is c for _ in range(20))


async def test_routing_matches_like_the_server_and_caches() -> None:
    async with aiohttp.ClientSession() as session:
        pool = UpstreamPool(ProxyConfig(upstreams=("http://a",)), session)
        a, b = pool.add("http://a", "static"), pool.add("http://b", "static")
        a.models = {"m1": ModelInfo.from_languages({"model": "m1", "languages": ["en", "de"]})}
        b.models = {"m2": ModelInfo.from_languages({"model": "m2", "pairs": ["en>de", "en>ne"]})}
        assert pool.serving("en", "de", None) == [a, b]
        assert pool.serving("en", "de-AT", None) == [a, b]  # `de` serves de-AT
        assert pool.serving("en", "ne", None) == [b]
        assert pool.serving("en", "de", "m1") == [a]
        assert pool.serving("fr", "de", None) == []
        assert pool.served_pairs() == ["de>en", "en>de", "en>ne"]
        pool.remove("http://b")
        assert pool.serving("en", "ne", None) == []


def test_route_of_a_translate_body() -> None:
    route = route_of(b'{"text": "x", "source_lang": "EN", "target_lang": "de-at", "model": "m"}')
    assert route is not None
    assert (route.source, route.target, route.model) == ("en", "de-AT", "m")
    assert route_of(b"not json") is None
    assert route_of(b'{"text": "x", "source_lang": "en"}') is None
    assert route_of(b'{"text": "x", "source_lang": "en", "target_lang": "zz-notalang!"}') is None


async def test_dns_membership_follows_the_resolver() -> None:
    answers = [["10.0.0.1", "10.0.0.2"], ["10.0.0.2", "10.0.0.3"], []]

    async def stand_in_resolver(name: str, port: int) -> list[str]:
        """Stand-in for DNS: a headless service whose pods come and go."""
        answer = answers.pop(0)
        if not answer:
            raise OSError("temporary failure in name resolution")
        return answer

    config = ProxyConfig.model_validate({"dns": [{"name": "tolk.svc", "port": 8000}]})
    async with aiohttp.ClientSession() as session:
        pool = UpstreamPool(config, session, resolver=stand_in_resolver)
        dns = config.dns[0]
        await pool._resolve_once(dns)
        assert sorted(pool.upstreams) == ["http://10.0.0.1:8000", "http://10.0.0.2:8000"]
        await pool._resolve_once(dns)
        assert sorted(pool.upstreams) == ["http://10.0.0.2:8000", "http://10.0.0.3:8000"]
        await pool._resolve_once(dns)  # a failed resolution keeps the last known set
        assert sorted(pool.upstreams) == ["http://10.0.0.2:8000", "http://10.0.0.3:8000"]
        assert {u.origin for u in pool.upstreams.values()} == {"dns:tolk.svc"}


async def test_real_resolution_of_localhost() -> None:
    assert "127.0.0.1" in await resolve("localhost", 80)
    assert address_url("http", "::1", 80) == "http://[::1]:80"


def test_config(tmp_path: Path) -> None:
    sample = load_proxy_config(Path("configs/proxy.yaml"))
    assert sample.static_urls == ["http://127.0.0.1:8000"]
    assert (sample.health.interval, sample.health.rise, sample.health.fall) == (2.0, 2, 2)
    empty = tmp_path / "empty.yaml"
    empty.write_text("port: 8080\n")
    with pytest.raises(ConfigError, match="give 'upstreams'"):
        load_proxy_config(empty)
    typo = tmp_path / "typo.yaml"
    typo.write_text("upstreams: [http://a:1]\nhealth: {intervall: 2}\n")
    with pytest.raises(ConfigError, match=r"health\.intervall"):
        load_proxy_config(typo)


def test_route_of_deepl_and_libretranslate_bodies() -> None:
    form = route_of(b"text=a&text=b&target_lang=ZH-HANS", "application/x-www-form-urlencoded")
    assert form == Route(None, "zh-Hans", None)  # no source: routed by target alone
    mastodon = route_of(b'{"q": ["<p>x</p>"], "source": "auto", "target": "pb", "format": "html"}')
    assert mastodon == Route(None, "pt-BR", None)  # LibreTranslate's alias
    discourse = route_of(b"q=x&source=iw&target=zh", "application/x-www-form-urlencoded")
    assert discourse == Route("he", "zh-Hans", None)
    nextcloud = route_of(b"", "multipart/form-data", "q=x&source=en&target=de")
    assert nextcloud == Route("en", "de", None)


async def test_an_overloaded_answer_in_any_apis_shape_is_retried_elsewhere() -> None:
    async with aiohttp.ClientSession() as session:
        config = ProxyConfig(upstreams=("http://a",))
        pool = UpstreamPool(config, session)
        forwarder = Forwarder(config, pool, session, ProxyMetrics(pool))
        a = pool.add("http://a", "static")
        # DeepL's and LibreTranslate's overload is a 429 with their own body; the header
        # carries tolk's code whatever the body's shape.
        lt = Attempt(
            a, 0.01, 429, b'{"error": "Slowdown: busy"}', {"x-tolk-error-code": "overloaded"}
        )
        assert lt.error_code() == "overloaded"
        assert forwarder.judge(lt) is True
        deepl = Attempt(a, 0.01, 429, b'{"message": "x"}', {"x-tolk-error-code": "rate_limited"})
        assert forwarder.judge(deepl) is False  # a key's rate is not another server's business
        tolk_body = Attempt(a, 0.01, 503, b'{"error": {"code": "shutting_down"}}', {})
        assert tolk_body.error_code() == "shutting_down"
