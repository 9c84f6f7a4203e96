"""tolk.engine.gather: new engine requests released in groups while the engine is busy."""

from __future__ import annotations

import asyncio

from tolk.engine.gather import Gather


async def test_off_or_quiet_requests_go_at_once() -> None:
    off = Gather(0.0, 0)
    await off.wait(500)  # returns without suspending: nothing gathered
    quiet = Gather(5.0, 64)
    await quiet.wait(64)  # at the threshold, not above it
    assert (off.gathered, quiet.gathered, quiet.groups) == (0, 0, 0)


async def test_requests_arriving_while_busy_go_together_after_the_first_ones_interval() -> None:
    gather = Gather(0.05, 2)
    loop = asyncio.get_running_loop()
    released: list[tuple[int, float]] = []  # (the group released, when)

    async def request() -> None:
        await gather.wait(3)
        released.append((gather.groups, loop.time()))

    start = loop.time()
    first = [asyncio.create_task(request()) for _ in range(3)]
    await asyncio.sleep(0)  # the three are waiting: none released yet
    assert released == []
    assert gather.gathered == 3
    later = asyncio.create_task(request())  # joins the same group
    await asyncio.gather(*first, later)
    assert gather.groups == 1
    assert len(released) == 4
    assert {group for group, _ in released} == {1}  # one release for all four
    assert min(when for _, when in released) - start >= 0.05
    # Each waited from its arrival to the release: together at least the interval apiece,
    # and no more than the time the group took.
    first_wait = gather.waited
    # (asyncio may fire a timer up to its clock resolution early: a millisecond spared)
    assert 4 * 0.049 <= first_wait <= 4 * (max(when for _, when in released) - start)
    # The next busy arrival starts a group of its own.
    await asyncio.create_task(request())
    assert (gather.groups, gather.gathered) == (2, 5)
    assert gather.waited - first_wait >= 0.049


async def test_a_request_cancelled_while_it_waits_leaves_its_group_without_it() -> None:
    gather = Gather(0.05, 0)
    gone = asyncio.create_task(gather.wait(1))
    kept = asyncio.create_task(gather.wait(1))
    await asyncio.sleep(0)
    gone.cancel()
    await kept  # released with the group, the cancelled one skipped
    assert gone.cancelled()
    assert gather.groups == 1
    assert 0.049 <= gather.waited < 0.1  # the one released: the cancelled one is not counted


async def test_a_full_group_goes_at_once_and_the_next_arrival_starts_another() -> None:
    gather = Gather(60.0, 0, most=3)  # an interval no test waits out
    loop = asyncio.get_running_loop()
    waiting = [asyncio.create_task(gather.wait(1)) for _ in range(2)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiting)  # two of three: the group waits
    start = loop.time()
    await gather.wait(1)  # the third fills it: all three go now, not in a minute
    await asyncio.gather(*waiting)
    assert loop.time() - start < 1
    assert (gather.groups, gather.gathered) == (1, 3)
    later = asyncio.create_task(gather.wait(1))  # a group of its own, waiting again
    await asyncio.sleep(0)
    assert not later.done()
    later.cancel()
    await asyncio.gather(later, return_exceptions=True)


async def test_a_request_cancelled_while_it_waits_no_longer_counts_toward_a_full_group() -> None:
    """`most`: a group goes once it holds that many requests still waiting; one cancelled
    leaves it (a group of 3 with one gone waits for a fourth arrival), and a group all of
    whose requests went is never released."""
    gather = Gather(60.0, 0, most=3)  # an interval no test waits out
    first = [asyncio.create_task(gather.wait(1)) for _ in range(2)]
    await asyncio.sleep(0)
    first[0].cancel()
    await asyncio.gather(first[0], return_exceptions=True)
    third = asyncio.create_task(gather.wait(1))
    await asyncio.sleep(0)
    assert not third.done()  # two waiting: not full
    assert not first[1].done()
    await gather.wait(1)  # the third still waiting fills it
    await asyncio.gather(first[1], third)
    assert (gather.groups, gather.gathered) == (1, 4)
    # All of a group gone: no release, and its timer stopped.
    alone = asyncio.create_task(gather.wait(1))
    await asyncio.sleep(0)
    alone.cancel()
    await asyncio.gather(alone, return_exceptions=True)
    assert gather.groups == 1
    assert gather._timer is None
