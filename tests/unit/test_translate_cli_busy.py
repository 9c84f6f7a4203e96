"""`tolk translate` sends a file the server refused for now (503, Retry-After) again, within the
file's time; the real server's refusal is tests/engine/test_translate_cli.py's."""

from __future__ import annotations

import time

import httpx
import pytest

from tolk.cli.translate import ServerBusy, TranslateFailed, _again_while_busy, _raise_for_error


def _busy(after: str) -> httpx.Response:
    body = {"error": {"code": "overloaded", "message": "model 'demo' is at capacity"}}
    return httpx.Response(503, json=body, headers={"Retry-After": after})


def test_a_503_with_retry_after_is_busy_and_anything_else_fails() -> None:
    with pytest.raises(ServerBusy) as busy:
        _raise_for_error(_busy("2"))
    assert busy.value.retry_after == 2.0
    assert "HTTP 503: model 'demo' is at capacity" in str(busy.value)
    with pytest.raises(ServerBusy) as long:
        _raise_for_error(_busy("3600"))
    assert long.value.retry_after == 30.0  # waited for at most this long at once
    with pytest.raises(ServerBusy) as now:
        _raise_for_error(_busy("0"))
    assert now.value.retry_after == 1.0  # never sent back to back
    for response in (httpx.Response(503, json={}), httpx.Response(400, json={"error": {}})):
        with pytest.raises(TranslateFailed) as failed:
            _raise_for_error(response)
        assert not isinstance(failed.value, ServerBusy)


async def test_a_busy_file_is_sent_again_until_answered_or_out_of_time() -> None:
    sent: list[float] = []
    waits: list[float] = []

    async def send(left: float) -> bytes:
        sent.append(left)
        if len(sent) < 3:
            raise ServerBusy("HTTP 503", 0.0)
        return b"translated"

    assert await _again_while_busy(send, time.monotonic() + 60, waits.append) == b"translated"
    assert waits == [0.0, 0.0]
    # Each time with the file's time left, never more.
    assert len(sent) == 3
    assert 59 < sent[0] <= 60
    assert sent[0] >= sent[1] >= sent[2]

    async def always_busy(left: float) -> bytes:
        raise ServerBusy("HTTP 503: busy", 5.0)

    with pytest.raises(ServerBusy, match="busy"):  # 5 s would pass the file's time: told
        await _again_while_busy(always_busy, time.monotonic() + 1, waits.append)
    assert waits == [0.0, 0.0]
