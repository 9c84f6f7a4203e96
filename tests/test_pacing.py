"""The pacer: per-text work gets one turn per pass of the event loop, so what arrives on a
socket meanwhile is read after at most one more piece, not after the whole batch."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from tolk.translation.pacing import Pacer

RUNNERS: dict[str, Callable[[Coroutine[Any, Any, list[object]]], list[object]]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}


async def pieces_and_a_packet(paced: bool) -> list[object]:
    """Ten 2 ms pieces of work, ready together; a packet arrives during the first one.
    Returns the order in which pieces ran and the packet was read."""
    order: list[object] = []

    class Reader(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            order.append("packet")

    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    await loop.create_connection(Reader, sock=ours)
    pacer = Pacer()

    async def piece(i: int) -> None:
        if paced:
            await pacer.turn()
        order.append(i)
        busy_until = time.monotonic() + 0.002
        while time.monotonic() < busy_until:
            pass
        if i == 0:
            theirs.send(b"x")

    await asyncio.gather(*(piece(i) for i in range(10)))
    theirs.close()
    return order


@pytest.mark.parametrize("loop", sorted(RUNNERS))
def test_a_packet_waits_behind_one_piece_not_the_batch(loop: str) -> None:
    run = RUNNERS[loop]
    unpaced = run(pieces_and_a_packet(paced=False))
    paced = run(pieces_and_a_packet(paced=True))
    # Without turns the ten pieces run in one pass and the packet is read after all of them.
    assert unpaced.index("packet") == 10
    # With turns it is read after the piece that was running and at most one more.
    assert paced.index("packet") <= 2
    assert [x for x in paced if x != "packet"] == list(range(10))  # order kept


def test_a_cancelled_waiter_gives_up_its_turn() -> None:
    async def scenario() -> tuple[list[int], int]:
        pacer = Pacer()
        ran: list[int] = []

        async def piece(i: int) -> None:
            await pacer.turn()
            ran.append(i)

        tasks = [asyncio.create_task(piece(i)) for i in range(5)]
        await asyncio.sleep(0)  # all five are waiting
        tasks[1].cancel()
        tasks[3].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return ran, pacer.waiting

    ran, waiting = asyncio.run(scenario())
    assert ran == [0, 2, 4]
    assert waiting == 0
