"""tolk.engine.timing: a translation's marks up to its first engine output."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from tolk.engine.timing import CLOCK, RequestClock
from tolk.server.documents import _without_clock as without_clock


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
    assert handed is not None
    clock.answer(SimpleNamespace(first_token_ts=handed, last_token_ts=time.monotonic()))
    first = clock.marks()
    now = time.monotonic()
    clock.answer(SimpleNamespace(first_token_ts=now, last_token_ts=now))  # the later one
    assert clock.marks() == first
    assert clock.handed == handed
    assert clock.engine_requests == 2
    assert list(first) == ["to-engine", "to-first-token", "to-last-token", "to-first-output"]
    assert first["to-engine"] == pytest.approx(1.0, abs=0.05)
    assert first["to-first-token"] == pytest.approx(first["to-engine"])
    assert first["to-first-token"] <= first["to-last-token"] <= first["to-first-output"]


def test_engine_marks_outside_the_requests_own_span_are_left_out() -> None:
    clock = RequestClock()
    clock.hand()
    clock.answer(SimpleNamespace(first_token_ts=1.0, last_token_ts=2.0))  # another clock's
    assert list(clock.marks()) == ["to-engine", "to-first-output"]


def test_a_background_document_job_runs_without_the_posts_clock() -> None:
    token = CLOCK.set(RequestClock())
    try:
        assert without_clock().run(CLOCK.get) is None
        assert CLOCK.get() is not None  # the request's own context keeps it
    finally:
        CLOCK.reset(token)


@pytest.mark.parametrize("metrics", [None, SimpleNamespace(first_token_ts=0.0, last_token_ts=0.0)])
def test_an_engine_without_its_own_marks_leaves_them_out(metrics: object) -> None:
    clock = RequestClock()
    clock.hand()
    clock.answer(metrics)
    assert list(clock.marks()) == ["to-engine", "to-first-output"]
