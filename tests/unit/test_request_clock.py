"""tolk.engine.timing: a translation's marks up to its first engine output."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from tolk.engine.timing import RequestClock


def test_marks_only_what_was_reached() -> None:
    clock = RequestClock()
    assert clock.marks() == {}
    clock.hand()
    marks = clock.marks()
    assert list(marks) == ["to-engine"]
    assert marks["to-engine"] >= 0
    assert clock.engine_requests == 1


def test_the_first_engine_request_back_sets_the_marks_once() -> None:
    clock = RequestClock(started=time.monotonic() - 1.0)
    clock.hand()
    clock.hand()  # a twin beside it: counted, the hand-off mark kept
    handed = clock.handed
    now = time.monotonic()
    clock.answer(SimpleNamespace(first_token_ts=now - 0.5, last_token_ts=now - 0.1))
    first = clock.marks()
    clock.answer(SimpleNamespace(first_token_ts=now, last_token_ts=now))  # the later one
    assert clock.marks() == first
    assert clock.handed == handed
    assert clock.engine_requests == 2
    assert list(first) == ["to-engine", "to-first-token", "to-last-token", "to-first-output"]
    assert first["to-first-token"] == pytest.approx(0.5, abs=0.05)
    assert first["to-last-token"] == pytest.approx(0.9, abs=0.05)
    assert first["to-first-output"] >= first["to-last-token"]


@pytest.mark.parametrize("metrics", [None, SimpleNamespace(first_token_ts=0.0, last_token_ts=0.0)])
def test_an_engine_without_its_own_marks_leaves_them_out(metrics: object) -> None:
    clock = RequestClock()
    clock.hand()
    clock.answer(metrics)
    assert list(clock.marks()) == ["to-engine", "to-first-output"]
