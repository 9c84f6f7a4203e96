"""The HTTP client tests use on a server."""

from __future__ import annotations

import httpx


def http_client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    return httpx.AsyncClient(base_url=url, timeout=120, limits=limits)
