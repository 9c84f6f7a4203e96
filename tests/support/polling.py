"""Waiting for a condition: polled until it holds, failing with `message` after `within`
seconds. The one way tests wait for something to happen (a server's state, a store's write,
a process's output); `wait_until` for async conditions, `wait_until_sync` for plain ones."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# What the failure says: a string, or a function called at the failure (the state then).
Message = str | Callable[[], object] | None


def _not_met(within: float, message: Message) -> AssertionError:
    if message is None:
        return AssertionError(f"condition not met within {within} s")
    return AssertionError(message() if callable(message) else message)


async def wait_until(
    condition: Callable[[], Awaitable[object]],
    within: float,
    interval: float = 0.05,
    message: Message = None,
) -> float:
    """Poll an async condition until true; returns the seconds it took, fails on timeout."""
    started = time.monotonic()
    while True:
        if await condition():
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise _not_met(within, message)
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], object],
    within: float,
    interval: float = 0.05,
    message: Message = None,
) -> float:
    """Poll a condition until true, sleeping between tries; returns the seconds it took,
    fails on timeout."""
    started = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise _not_met(within, message)
        time.sleep(interval)
