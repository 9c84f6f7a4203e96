"""Quotas (issue 35) on the key store alone: a reservation is checked, held and settled in
one step. The quotas through the APIs: tests/edge/test_quotas.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.quotas import QUOTA
from tolk.store.keys import KeyStore


def test_a_reservation_is_checked_held_and_settled_in_one_step(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.db")
    key, _ = store.add("app", character_limit=QUOTA)
    first = store.reserve(key, 200)
    assert first is not None
    assert store.reserve(key, 101) is None  # 0 used + 200 held + 101 > 300
    second = store.reserve(key, 100)  # exactly the quota
    assert second is not None
    assert store.reserve(key, 1) is None
    assert (store.used(key), store.reserved(key)) == (0, 300)
    store.settle(first, 150)  # charged 150: the other 50 released
    assert (store.used(key), store.reserved(key)) == (150, 100)
    store.settle(first, 150)  # once only
    assert (store.used(key), store.reserved(key)) == (150, 100)
    store.settle(second, None)  # failed: nothing charged, all released
    assert (store.used(key), store.reserved(key)) == (150, 0)
    store.sync()
    assert KeyStore(tmp_path / "keys.db").used(key) == 150
    unlimited, _ = store.add("unlimited")
    assert store.reserve(unlimited, 10**9) is not None
    store.close()
