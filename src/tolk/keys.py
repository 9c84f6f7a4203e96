"""API keys, their usage, and glossaries made through the DeepL API: one small SQLite file.

`tolk keys add/list/revoke` edit it while servers run; a server re-reads the keys at most
`REFRESH_SECONDS` after a change (SQLite's `PRAGMA data_version` says whether anything
changed, so an unchanged file costs one pragma). Keys are stored as SHA-256 hashes: the key
itself is shown once, by `tolk keys add`, and never logged.

Usage is counted per key and period (a UTC calendar month or day) in the same file, so the
servers of one host that share it share the counts; `/v2/usage` reads them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Period = Literal["month", "day"]
REFRESH_SECONDS = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL UNIQUE,
    character_limit INTEGER,
    period TEXT NOT NULL DEFAULT 'month',
    rate TEXT,
    created REAL NOT NULL,
    revoked REAL
);
CREATE TABLE IF NOT EXISTS usage (
    key_id TEXT NOT NULL,
    period_start TEXT NOT NULL,
    characters INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, period_start)
);
CREATE TABLE IF NOT EXISTS glossaries (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL,
    entries TEXT NOT NULL,
    created REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Key:
    id: str
    name: str
    character_limit: int | None  # None: no quota
    period: Period
    rate: str | None  # e.g. "10/second", in the `limits` library's notation
    created: float
    revoked: float | None = None


@dataclass(frozen=True)
class StoredGlossary:
    id: str
    owner: str
    name: str
    source_lang: str
    target_lang: str
    entries: Mapping[str, str]
    created: float


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def period_start(period: Period, now: float | None = None) -> str:
    """The start of the current period, as a date (UTC): '2026-11-01' for a month."""
    today = dt.datetime.fromtimestamp(now if now is not None else time.time(), dt.UTC).date()
    return (today.replace(day=1) if period == "month" else today).isoformat()


class KeyStore:
    """The SQLite file (or an in-memory database, for a server with no `access.db`)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, used from the event loop thread and from `tolk keys`; sqlite3
        # objects refuse other threads unless told, and the lock keeps statements whole.
        self._db = sqlite3.connect(
            str(path) if path else ":memory:", check_same_thread=False, isolation_level=None
        )
        self._lock = threading.Lock()
        with self._lock:
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=2000")
            self._db.executescript(_SCHEMA)
        self._by_hash: dict[str, Key] = {}
        self._version = -1
        self._checked, self._version = 0.0, -1  # our own writes leave data_version be

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- keys --------------------------------------------------------------------------------

    def add(
        self,
        name: str,
        character_limit: int | None = None,
        period: Period = "month",
        rate: str | None = None,
    ) -> tuple[Key, str]:
        """A new key; returns it and its secret (shown once)."""
        secret = f"tolk-{secrets.token_urlsafe(24)}"
        key = Key(uuid.uuid4().hex[:12], name, character_limit, period, rate, time.time())
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT INTO keys (id, name, hash, character_limit, period, rate, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (key.id, name, hash_key(secret), character_limit, period, rate, key.created),
                )
        except sqlite3.IntegrityError as exc:
            raise ValueError(f"a key named '{name}' already exists") from exc
        self._checked, self._version = 0.0, -1  # our own writes leave data_version be
        return key, secret

    def revoke(self, name: str) -> Key:
        with self._tx() as db:
            updated = db.execute(
                "UPDATE keys SET revoked = ? WHERE (name = ? OR id = ?) AND revoked IS NULL",
                (time.time(), name, name),
            ).rowcount
        if not updated:
            raise KeyError(f"no active key named '{name}'")
        self._checked, self._version = 0.0, -1  # our own writes leave data_version be
        return next(k for k in self.all_keys(include_revoked=True) if name in (k.name, k.id))

    def all_keys(self, include_revoked: bool = False) -> list[Key]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, name, character_limit, period, rate, created, revoked FROM keys "
                "ORDER BY created"
            ).fetchall()
        keys = [Key(*row) for row in rows]
        return keys if include_revoked else [k for k in keys if k.revoked is None]

    def lookup(self, secret: str) -> Key | None:
        """The active key with this secret."""
        self._refresh()
        return self._by_hash.get(hash_key(secret))

    def has_keys(self) -> bool:
        """Whether any key is active."""
        self._refresh()
        return bool(self._by_hash)

    def _refresh(self) -> None:
        """Re-read the keys when the file changed, looking at most every REFRESH_SECONDS."""
        now = time.monotonic()
        if now - self._checked > REFRESH_SECONDS:
            self._checked = now
            with self._lock:
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
                if version != self._version:
                    rows = self._db.execute(
                        "SELECT hash, id, name, character_limit, period, rate, created, revoked "
                        "FROM keys WHERE revoked IS NULL"
                    ).fetchall()
                    self._by_hash = {row[0]: Key(*row[1:]) for row in rows}
                    self._version = version

    # -- usage -------------------------------------------------------------------------------

    def used(self, key: Key) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT characters FROM usage WHERE key_id = ? AND period_start = ?",
                (key.id, period_start(key.period)),
            ).fetchone()
        return int(row[0]) if row else 0

    def record(self, key: Key, characters: int) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO usage (key_id, period_start, characters, requests) "
                "VALUES (?, ?, ?, 1) ON CONFLICT (key_id, period_start) DO UPDATE SET "
                "characters = characters + excluded.characters, requests = requests + 1",
                (key.id, period_start(key.period), characters),
            )

    # -- glossaries made through the API -----------------------------------------------------

    def add_glossary(
        self, owner: str, name: str, source: str, target: str, entries: Mapping[str, str]
    ) -> StoredGlossary:
        glossary = StoredGlossary(
            str(uuid.uuid4()), owner, name, source, target, dict(entries), time.time()
        )
        with self._tx() as db:
            db.execute(
                "INSERT INTO glossaries VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    glossary.id,
                    owner,
                    name,
                    source,
                    target,
                    json.dumps(glossary.entries, ensure_ascii=False),
                    glossary.created,
                ),
            )
        return glossary

    def glossaries(self, owner: str | None = None) -> list[StoredGlossary]:
        query = "SELECT id, owner, name, source_lang, target_lang, entries, created FROM glossaries"
        args: tuple[str, ...] = ()
        if owner is not None:
            query += " WHERE owner = ?"
            args = (owner,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created", args).fetchall()
        return [StoredGlossary(i, o, n, s, t, json.loads(e), c) for i, o, n, s, t, e, c in rows]

    def glossary(self, glossary_id: str) -> StoredGlossary | None:
        """Any owner's glossary by id (an id is unguessable: having it is using it)."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, owner, name, source_lang, target_lang, entries, created "
                "FROM glossaries WHERE id = ?",
                (glossary_id,),
            ).fetchone()
        if row is None:
            return None
        i, o, n, s, t, e, c = row
        return StoredGlossary(i, o, n, s, t, json.loads(e), c)

    def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        with self._tx() as db:
            deleted = db.execute(
                "DELETE FROM glossaries WHERE id = ? AND owner = ?", (glossary_id, owner)
            ).rowcount
        return bool(deleted)
