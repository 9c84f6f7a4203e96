"""The segment memory's store (tolk.store.segment_cache) on its own, on a SQLite file and on
a real PostgreSQL: what is put is seen at once and kept by flush, the least recently used go
past max_entries, keys change with what decides the translation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tolk.store.segment_cache import Remembered, SegmentMemory, memory_key, model_revision


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same tests on a SQLite file and on a real PostgreSQL (emptied first)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'memory.db'}"
        return
    url = request.getfixturevalue("postgres_url")
    emptied = SegmentMemory(url, max_entries=1)
    emptied.clear()
    emptied.close()
    yield url


def test_put_is_seen_at_once_and_kept_by_flush(store_url: str) -> None:
    url = store_url
    memory = SegmentMemory(url, max_entries=100)
    key = memory_key({"segment": "Hello."})
    assert memory.lookup(key) is None
    memory.put(key, "Hallo.", ("loop",))
    assert memory.cached(key) == Remembered("Hallo.", ("loop",))  # before any write
    assert len(memory) == 0
    assert memory.flush() == 1
    assert len(memory) == 1
    memory.close()
    # Another server (or this one restarted) on the same file finds it in the database.
    again = SegmentMemory(url, max_entries=100)
    assert again.cached(key) is None
    assert again.lookup(key) == Remembered("Hallo.", ("loop",))
    assert again.cached(key) == Remembered("Hallo.", ("loop",))
    again.close()


def test_the_least_recently_used_go_past_max_entries(store_url: str) -> None:
    memory = SegmentMemory(store_url, max_entries=2, cache_entries=1)
    keys = [memory_key({"segment": str(i)}) for i in range(3)]
    memory.put(keys[0], "null")
    memory.put(keys[1], "eins")
    memory.flush()
    assert memory.lookup(keys[0]) == Remembered("null")  # used: key 1 is the least recent
    memory.put(keys[2], "zwei")
    memory._pruned = float("-inf")  # prune at this flush (once a minute otherwise)
    memory.flush()
    assert len(memory) == 2
    memory.put(keys[0], "null")  # pushes key 1 out of the one-entry cache
    assert memory.lookup(keys[1]) is None
    assert memory.lookup(keys[0]) == Remembered("null")
    assert memory.lookup(keys[2]) == Remembered("zwei")
    memory.close()


def test_keys_change_with_what_decides_the_translation(tmp_path: Path) -> None:
    base = {"model": "m", "segment": "Hi.", "prompt": [1, 2, 3], "max_tokens": 20}
    assert memory_key(base) == memory_key(dict(reversed(list(base.items()))))
    for change in ({"prompt": [1, 2, 4]}, {"max_tokens": 21}, {"segment": "Hi. "}):
        assert memory_key(base | change) != memory_key(base)
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"1234")
    before = model_revision(str(tmp_path))
    weights.write_bytes(b"12345")  # new weights: a new revision, so no old entry matches
    assert model_revision(str(tmp_path)) != before
    assert model_revision("Qwen/Some-Model") == "Qwen/Some-Model"
