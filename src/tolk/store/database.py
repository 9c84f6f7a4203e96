"""The databases tolk keeps its state in, through SQLAlchemy Core: one code path for SQLite
(embedded: a file for one server, or in memory) and PostgreSQL (a fleet's shared store).

The key store (tolk.store.keys: keys, usage, API-made glossaries and style rules) and the segment
memory (tolk.store.segment_cache) each take an SQLAlchemy URL. Where the dialects differ (an
upsert), SQLAlchemy spells both alike; this module makes the engines and the upsert.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.pool import StaticPool


def url_of(location: Path | str | None) -> str | None:
    """An SQLAlchemy URL: a path is a SQLite file; None stays None (in memory)."""
    if location is None or (isinstance(location, str) and "://" in location):
        return location
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def database(url: str | None) -> Engine:
    """An engine for `url` (None: an in-memory SQLite database of this process)."""
    if url is None:
        return create_engine(
            "sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool
        )
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _wal(connection: Any, _: Any) -> None:
            # Readers never wait for the writer; a commit is no fsync (a WAL checkpoint's
            # fsync stalled for 2 s on this project's disk, so never on the event loop).
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

    return engine


class Database:
    """An engine, and the lock an in-memory database needs: it is one connection, whose
    statements are taken one at a time across threads."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.engine = database(url)
        self._lock = threading.Lock() if url is None else None

    @property
    def postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction: committed at the end, rolled back on an exception."""
        with self._lock or nullcontext(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._lock or nullcontext(), self.engine.connect() as connection:
            yield connection

    def insert(self, table: Table) -> Any:
        """The dialect's INSERT, which has on_conflict_do_update (the same in both)."""
        return (postgresql if self.postgresql else sqlite).insert(table)

    def upsert(
        self,
        connection: Connection,
        table: Table,
        rows: Sequence[dict[str, Any]],
        keys: Sequence[str],
        update: Callable[[Any], dict[str, Any]] | None = None,
        where: Callable[[Any], Any] | None = None,
    ) -> None:
        """Insert `rows`; where `keys` exist, set `update(excluded)` (default: the new values
        of every other column), if `where(excluded)` holds (`excluded`: the row that was
        refused, as both dialects name it)."""
        if not rows:
            return
        insert = self.insert(table)
        excluded = insert.excluded
        changes = (
            update(excluded)
            if update is not None
            else {c: excluded[c] for c in rows[0] if c not in keys}
        )
        connection.execute(
            insert.on_conflict_do_update(
                index_elements=list(keys),
                set_=changes,
                where=where(excluded) if where is not None else None,
            ),
            list(rows),
        )

    def close(self) -> None:
        self.engine.dispose()


__all__ = ["Database", "database", "url_of"]
