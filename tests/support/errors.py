"""Assertions on tolk's error bodies."""

from __future__ import annotations

from typing import Any

import httpx


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """`response` is tolk's error `code` with `status`, in tolk's shape (a message, the
    request's id); returns the error object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert len(error["message"]) > 10
    assert error["request_id"] == response.headers["x-request-id"]
    return error
