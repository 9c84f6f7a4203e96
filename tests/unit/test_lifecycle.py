"""tolk.server.lifecycle's guard: a handler's work runs in the handler's own task until it
ends, its client leaves (ClientDisconnected) or the drain's grace period ends (ShuttingDown);
its work cancelled then, and the handler's task left able to answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request

from tolk.errors import ClientDisconnected, ShuttingDown
from tolk.server.lifecycle import Lifecycle


class Client:
    """A request whose client leaves when told to (its next ASGI message the disconnect)."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.request = Request({"type": "http", "method": "POST", "headers": []}, self.receive)

    async def receive(self) -> dict[str, Any]:
        return await self.messages.get()

    def leave(self) -> None:
        self.messages.put_nowait({"type": "http.disconnect"})


async def test_the_work_runs_in_the_handlers_task_and_answers() -> None:
    lifecycle, client = Lifecycle(grace=5), Client()
    handler = asyncio.current_task()

    async def work() -> object:
        await asyncio.sleep(0)
        return asyncio.current_task()

    assert await lifecycle.guard(client.request, work()) is handler
    # The client leaving afterwards stops nothing: the handler goes on.
    client.leave()
    for _ in range(3):
        await asyncio.sleep(0)
    assert handler is not None
    assert handler.cancelling() == 0


async def test_a_client_that_leaves_stops_the_work() -> None:
    lifecycle, client = Lifecycle(grace=5), Client()
    stopped = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()  # an engine request that never ends
        finally:
            stopped.set()

    asyncio.get_running_loop().call_later(0.01, client.leave)
    with pytest.raises(ClientDisconnected):
        await lifecycle.guard(client.request, work())
    assert stopped.is_set()
    handler = asyncio.current_task()
    assert handler is not None
    assert handler.cancelling() == 0
    await asyncio.sleep(0)  # and the handler can still await (its answer is written so)


async def test_the_grace_period_ending_stops_the_work_and_refuses_new_work() -> None:
    lifecycle = Lifecycle(grace=0.01)
    stopped = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    lifecycle.begin_drain()
    with pytest.raises(ShuttingDown, match="shut down before the translation finished"):
        await lifecycle.guard(Client().request, work())
    assert stopped.is_set()
    assert lifecycle.grace_over.is_set()
    ran: list[bool] = []

    async def late() -> None:
        ran.append(True)

    with pytest.raises(ShuttingDown):
        await lifecycle.guard(Client().request, late())  # closed, never run
    assert ran == []


async def test_failures_and_outside_cancellation_pass_through() -> None:
    lifecycle = Lifecycle(grace=5)

    async def fail() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await lifecycle.guard(Client().request, fail())

    async def handler() -> None:
        await lifecycle.guard(Client().request, asyncio.Event().wait())

    task = asyncio.create_task(handler())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_work_whose_cleanup_fails_when_stopped_is_answered_as_stopped() -> None:
    """The client leaves; the work's cleanup raises another error instead of the
    cancellation: still ClientDisconnected, and the handler's task not left cancelling."""
    lifecycle, client = Lifecycle(grace=5), Client()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise KeyError("cleanup failed")

    asyncio.get_running_loop().call_later(0.01, client.leave)
    with pytest.raises(ClientDisconnected):
        await lifecycle.guard(client.request, work())
    handler = asyncio.current_task()
    assert handler is not None
    assert handler.cancelling() == 0


async def test_a_cancellation_from_inside_the_work_is_answered_503() -> None:
    """Not this task's cancellation (something inside the work cancelled what it awaited):
    ShuttingDown (503), as when the work had a task of its own, and the handler goes on."""
    lifecycle = Lifecycle(grace=5)

    async def work() -> None:
        inner = asyncio.ensure_future(asyncio.Event().wait())
        asyncio.get_running_loop().call_soon(inner.cancel)
        await inner

    with pytest.raises(ShuttingDown):
        await lifecycle.guard(Client().request, work())
    handler = asyncio.current_task()
    assert handler is not None
    assert handler.cancelling() == 0
