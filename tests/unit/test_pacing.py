"""The pacer: per-text work gets turns per pass of the event loop (one, or a time budget's
worth), so what arrives on a socket meanwhile is read after at most that much more work, not
after the whole batch."""

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


def busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def pieces_and_a_packet(paced: bool, budget: float = 0.0) -> list[object]:
    """Ten 2 ms pieces of work, ready together; a packet arrives during the first one.
    Returns the order in which pieces ran and the packet was read."""
    order: list[object] = []

    class Reader(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            order.append("packet")

    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    await loop.create_connection(Reader, sock=ours)
    pacer = Pacer(budget)

    async def piece(i: int) -> None:
        if paced:
            await pacer.turn()
        order.append(i)
        busy(0.002)
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
    # With a budget of three pieces a pass: the first pass measures one, the next pass two
    # or three (what a piece cost rounds down), and the packet is read between passes.
    budgeted = run(pieces_and_a_packet(paced=True, budget=0.006))
    assert budgeted.index("packet") <= 4
    assert [x for x in budgeted if x != "packet"] == list(range(10))


def test_a_burst_is_taken_a_budget_a_pass() -> None:
    """Forty 1 ms pieces under a 4 ms budget: never more than four pieces in one pass (a
    piece costs at least its 1 ms), and fewer passes than pieces, where one a pass took 40."""

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        pacer = Pacer(0.004)
        per_pass = [0]
        done = False

        def tick() -> None:  # runs once a pass: rescheduled from itself
            per_pass.append(0)
            if not done:
                loop.call_soon(tick)

        async def piece() -> None:
            await pacer.turn()
            per_pass[-1] += 1
            busy(0.001)

        loop.call_soon(tick)
        await asyncio.gather(*(piece() for _ in range(40)))
        done = True
        return [n for n in per_pass if n]

    passes = asyncio.run(scenario())
    assert sum(passes) == 40
    assert passes[0] == 1  # nothing measured yet: one
    assert max(passes) <= 4
    assert len(passes) < 40


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


def test_a_turn_is_taken_at_once_where_there_is_room_and_nobody_waits() -> None:
    """No waiting for the next pass where nothing would be gained: a pass's grant is taken
    at once while nobody waits. Past that, or without a budget, turns wait as before."""

    async def scenario(pacer: Pacer, asked: int) -> list[int]:
        loop = asyncio.get_running_loop()
        passes = [0]
        done = False

        def tick() -> None:  # runs once a pass: rescheduled from itself
            passes[0] += 1
            if not done:
                loop.call_soon(tick)

        async def piece() -> int:
            before = passes[0]
            await pacer.turn()
            return passes[0] - before  # the passes it waited

        loop.call_soon(tick)
        await asyncio.sleep(0)
        waited = await asyncio.gather(*(piece() for _ in range(asked)))
        done = True
        return list(waited)

    budgeted = Pacer(0.004)
    budgeted.piece = 0.001  # four pieces a pass, at once while nobody waits
    first = asyncio.run(scenario(budgeted, 5))
    assert first[:4] == [0, 0, 0, 0]
    assert first[4] >= 1
    one_a_pass = asyncio.run(scenario(Pacer(), 2))  # none at once
    assert 1 <= one_a_pass[0] < one_a_pass[1]
    unmeasured = Pacer(0.004)  # no piece's cost known yet: none at once
    assert asyncio.run(scenario(unmeasured, 1))[0] >= 1


def test_turns_run_in_the_order_asked_taken_at_once_or_granted() -> None:
    """Pieces asking at staggered passes, some at once and some granted: never one asked
    later before one asked earlier (a turn asked just after a grant waits for the pieces
    granted)."""

    async def scenario() -> tuple[list[int], list[int]]:
        pacer = Pacer(0.004)
        pacer.piece = 0.001
        asked: list[int] = []
        ran: list[int] = []

        async def piece(i: int) -> None:
            for _ in range(i % 7):
                await asyncio.sleep(0)
            asked.append(i)
            await pacer.turn()
            ran.append(i)

        await asyncio.gather(*(piece(i) for i in range(60)))
        return asked, ran

    asked, ran = asyncio.run(scenario())
    assert ran == asked
    assert sorted(ran) == list(range(60))
