"""The HTTP clients tests use on a server: an async client, and one blocking /translate."""

from __future__ import annotations

from typing import Any

import httpx


def http_client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    return httpx.AsyncClient(base_url=url, timeout=120, limits=limits)


def translate(url: str, **body: Any) -> dict[str, Any]:
    """tolk's /translate on the server at `url` with `body`, which must succeed: its answer."""
    response = httpx.post(f"{url}/translate", json=body, timeout=600)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
