"""Hostile input (issue 35) without a server: the JSON decoder bounds the depth and refuses
lone surrogates only; the proxy's breaker holds only the upstream's own failures against it;
the proxy routes hostile bodies without failing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.samples.hostile import CRLF_FILE, DEEP, LONE, MULTIPART, PART, body
from tolk.proxy.attempts import Attempt, upstream_failed
from tolk.proxy.config import ProxyConfig as ProxySettings
from tolk.proxy.routing import multipart_fields, route_of
from tolk.proxy.upstream import CircuitBreaker, Upstream
from tolk.wire.bodies import MAX_DEPTH, InvalidInput, loads


def test_the_decoder_bounds_depth_and_refuses_surrogates_only() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(InvalidInput, match="nested deeper than 64"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(InvalidInput, match="nested deeper than 64"):
        loads(b"{" + b'"a": {' * 100_000)  # refused before its syntax error is found
    # A surrogate pair (an escaped emoji) is one character, not a lone surrogate.
    assert loads(b'{"text": "\\ud83d\\ude00 \\\\ud800"}') == {"text": "\U0001f600 \\ud800"}
    with pytest.raises(InvalidInput, match=r"at text\[2\]\.a, character 0"):
        loads(b'{"text": ["", "", {"a": "\\udfff"}]}')
    with pytest.raises(ValueError, match="Expecting property name"):
        loads(b"{not json")
    with pytest.raises(InvalidInput, match=r"at a member name in x\[0\], character 1"):
        loads(b'{"x": [{"a\\udc00": 1}]}')
    # Many brackets (the walk runs) but shallow and clean, then a str body (no bytes).
    assert loads("[" + "[], " * 100 + "[]]") == [[]] * 101
    with pytest.raises(InvalidInput, match="at the body, character 0"):
        loads('"\\ud800"')


def test_the_breaker_holds_only_the_upstreams_own_failures_against_it() -> None:
    upstream = Upstream(
        "http://u", "static", ProxySettings(upstreams=("http://u",)).health,
        CircuitBreaker(ProxySettings(upstreams=("http://u",)).breaker),
    )  # fmt: skip

    def failed(status: int, code: str | None, *, clients: bool = False, **kw: Any) -> bool:
        attempt = Attempt(upstream, 0.01, status, **kw)
        return upstream_failed(attempt, code, clients)

    for status, code in [(400, "invalid_request"), (413, "payload_too_large"), (404, None),
                         (403, "invalid_key"), (429, "rate_limited"), (429, "quota_exceeded"),
                         (456, "quota_exceeded"), (422, "invalid_request")]:  # fmt: skip
        assert not failed(status, code), (status, code)
    assert not failed(504, "deadline_exceeded", clients=True)  # the client's own deadline
    assert not failed(0, None, clients=True, failure="timeout")
    for status, code in [(500, "internal_error"), (502, None), (503, "overloaded"),
                         (429, "overloaded"), (504, "deadline_exceeded")]:  # fmt: skip
        assert failed(status, code), (status, code)
    for failure in ("connect", "reset", "timeout", "broken_response"):
        assert failed(0, None, failure=failure)
        assert failure == "timeout" or failed(0, None, clients=True, failure=failure)


async def test_the_proxy_routes_hostile_bodies_without_failing() -> None:
    assert route_of(body('{{"text": {d}, "target_lang": "de"}}', d=DEEP)) is None
    assert route_of(body('{{"text": "x", "target_lang": {t}}}', t=LONE)) is None
    assert await multipart_fields(PART, "multipart/form-data") == {}
    assert await multipart_fields(CRLF_FILE, MULTIPART["Content-Type"]) == {}
