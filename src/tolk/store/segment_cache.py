"""The segment cache: a segment translated once is not sent to the engine again.

Real traffic repeats itself (Weblate re-sends source strings for every language and check, a
documentation site re-translates a page after a one-line edit, an app translates the same UI
strings for every user); tolk de-duplicates inside one request, and this cache across
requests, servers and restarts. A segment's translation is stored under a key made of
everything that decides it (tolk.translation.service builds it): the model and its revision,
the segment as sent (markup placeholders in it), the exact prompt the model saw (so the
source and target, the glossary terms and instructions that reached it, the prompt format),
the output budget, and the decoding and checking settings. A translation is stored with the
problems the output checks found in it, and served with them again: a flagged output is
never served as good (and not translated again for nothing: the same prompt and settings
would make it again; a request can ask for a fresh one).

Who may be answered from whose translations is `segment_cache.scope` (docs/security.md, "Quotas
and the segment cache"): with `key` (the default) the cache is partitioned per API key, so a
hit tells a caller only what it sent itself; with `shared` every caller is answered from
every caller's segments. The partition is the request's (`partition()`, which the server
sets around each caller's work, tolk.server.gateway): every read and write of the cache is
made under the key that names both it and the segment (`_stored`), so the code that builds
a segment's key (tolk.translation.service, memory_key) need not know about callers.

The store is a SQL table (tolk.store.database: SQLite in memory by default, or a file;
PostgreSQL for a fleet's shared store). The server never touches the
database on its event loop: lookups run in a thread behind an in-process LRU cache, new
translations are kept in memory and written by `flush()` (run every FLUSH_SECONDS in a
thread), in one transaction, which also records when entries were last used and drops the
least recently used ones past `max_entries`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cachetools
from sqlalchemy import (
    Column,
    Float,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    delete,
    func,
    select,
    update,
)

from tolk.store.database import Database

FLUSH_SECONDS = 1.0
PRUNE_SECONDS = 60.0
CACHE_ENTRIES = 4096  # the LRU cache in front of the database, per server
# Bumped when what a stored translation means changes (a prompt or cleaning change that the
# key's parts do not show): older entries are then never matched.
KEY_VERSION = 1

_metadata = MetaData()
_segments = Table(
    "tolk_segment_memory",
    _metadata,
    Column("key", String(64), primary_key=True),
    Column("translation", Text, nullable=False),
    Column("problems", String(200), nullable=False, default=""),  # comma-separated codes
    Column("created", Float, nullable=False),
    Column("used", Float, nullable=False, index=True),
)


# The partition of the cache that the running request reads and writes: "" is the one every
# caller shares (`segment_cache.scope: shared`, and everything before scopes); a context
# variable, so each request's tasks and threads see their own. asyncio copies the context into
# the tasks a request starts and into `asyncio.to_thread`, not into `loop.run_in_executor`: a
# read or write of the cache made there would be made in the shared partition.
_partition: ContextVar[str] = ContextVar("tolk_memory_partition", default="")


@contextmanager
def partition(name: str) -> Iterator[None]:
    """Within the block (and the tasks and threads it starts), the cache is read and
    written in partition `name` ("": the shared one)."""
    token = _partition.set(name)
    try:
        yield
    finally:
        _partition.reset(token)


def _stored(key: str) -> str:
    """The key a segment's entry is stored under in the current partition: the key itself in
    the shared one (so entries stored before partitions still match), else the hash of the
    partition and the key (the same length: the table's column holds either)."""
    name = _partition.get()
    return key if not name else memory_key({"partition": name, "key": key})


@dataclass(frozen=True)
class Remembered:
    translation: str
    problems: tuple[str, ...] = ()  # what the output checks found in it


def memory_key(parts: Mapping[str, Any]) -> str:
    """The SHA-256 of the parts (JSON, keys sorted) and KEY_VERSION."""
    data = json.dumps([KEY_VERSION, parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def model_revision(path: str) -> str:
    """What identifies a model's weights: for a local directory, its config.json and each
    weight file's name, size and modification time (hashing gigabytes at every start would
    take longer than the start); else the path (a hub id) as given."""
    folder = Path(path)
    if not folder.is_dir():
        return path
    parts: list[Any] = []
    config = folder / "config.json"
    if config.is_file():
        parts.append(hashlib.sha256(config.read_bytes()).hexdigest())
    for file in sorted(folder.iterdir()):
        if file.suffix in (".safetensors", ".bin", ".gguf", ".pt"):
            stat = file.stat()
            parts.append([file.name, stat.st_size, stat.st_mtime_ns])
    return memory_key({"model": parts})


class SegmentMemory:
    def __init__(self, url: str | None, max_entries: int, cache_entries: int = CACHE_ENTRIES):
        self.url = url
        self.max_entries = max_entries
        self._db = Database(url)
        with self._db.begin() as connection:
            _metadata.create_all(connection)
        self._cache: cachetools.LRUCache[str, Remembered] = cachetools.LRUCache(cache_entries)
        self._lock = threading.Lock()  # the cache and the pending writes, across threads
        self._pending: dict[str, Remembered] = {}
        self._used: dict[str, float] = {}  # hits since the last flush: key -> when
        self._pruned = -PRUNE_SECONDS

    def close(self) -> None:
        self._db.close()

    def cached(self, key: str) -> Remembered | None:
        """From this server's memory alone (no database): for the event loop."""
        key = _stored(key)
        with self._lock:
            found = self._pending.get(key) or self._cache.get(key)
            if found is not None:
                self._used[key] = time.time()
            return found

    def lookup(self, key: str) -> Remembered | None:
        """From this server's memory, else the database (blocking: run it in a thread)."""
        found = self.cached(key)
        if found is not None:
            return found
        key = _stored(key)
        with self._db.connect() as connection:
            row = connection.execute(
                select(_segments.c.translation, _segments.c.problems).where(_segments.c.key == key)
            ).one_or_none()
        if row is not None:
            found = Remembered(row.translation, tuple(p for p in row.problems.split(",") if p))
            with self._lock:
                self._cache[key] = found
                self._used[key] = time.time()
        return found

    def put(self, key: str, translation: str, problems: Sequence[str] = ()) -> None:
        """Keep a translation and what the checks found in it; written at the next
        `flush()`."""
        remembered = Remembered(translation, tuple(problems))
        key = _stored(key)
        with self._lock:
            self._pending[key] = remembered
            self._cache[key] = remembered

    def flush(self) -> int:
        """Write what was put and when entries were used, in one transaction; drop the least
        recently used entries past `max_entries`. Returns how many were written (blocking)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            used, self._used = self._used, {}
        if not pending and not used:
            return 0
        now = time.time()
        try:
            with self._db.begin() as connection:
                if pending:
                    rows = [
                        {
                            "key": k,
                            "translation": r.translation,
                            "problems": ",".join(r.problems),
                            "created": now,
                            "used": now,
                        }
                        for k, r in pending.items()
                    ]
                    self._db.upsert(
                        connection,
                        _segments,
                        rows,
                        ["key"],
                        lambda new: {
                            "translation": new.translation,
                            "problems": new.problems,
                            "used": new.used,
                        },
                    )
                if used:  # one statement, executed for every entry used
                    connection.execute(
                        update(_segments)
                        .where(_segments.c.key == bindparam("hit"))
                        .values(used=bindparam("when")),
                        [{"hit": k, "when": w} for k, w in used.items()],
                    )
                self._prune(connection)
        except BaseException:
            with self._lock:  # kept for the next flush
                self._pending = pending | self._pending
                self._used = used | self._used
            raise
        return len(pending)

    def _prune(self, connection: Any) -> None:
        # Counting a big table is not free (PostgreSQL scans it): once a PRUNE_SECONDS.
        if time.monotonic() - self._pruned < PRUNE_SECONDS:
            return
        self._pruned = time.monotonic()
        count = connection.execute(select(func.count()).select_from(_segments)).scalar_one()
        excess = count - self.max_entries
        if excess > 0:
            oldest = select(_segments.c.key).order_by(_segments.c.used.asc()).limit(excess)
            connection.execute(delete(_segments).where(_segments.c.key.in_(oldest)))

    def clear(self) -> None:
        """Forget everything, here and in the database (blocking)."""
        with self._lock:
            self._pending.clear()
            self._used.clear()
            self._cache.clear()
        with self._db.begin() as connection:
            connection.execute(delete(_segments))

    def __len__(self) -> int:
        """Entries in the database (blocking)."""
        with self._db.connect() as connection:
            stored = connection.execute(select(func.count()).select_from(_segments)).scalar_one()
        return int(stored)


__all__ = [
    "FLUSH_SECONDS",
    "Remembered",
    "SegmentMemory",
    "memory_key",
    "model_revision",
    "partition",
]
