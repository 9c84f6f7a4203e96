"""API keys, their usage, and glossaries made through the DeepL API: one small SQLite file.

A server never touches the file on its event loop: keys, usage counts and glossaries are
read from memory, usage is added in memory, and `sync()` (run every SYNC_SECONDS in a
thread by the server) writes the new usage in one transaction and reads back keys, counts
and glossaries, so `tolk keys add/revoke` and other servers sharing the file are seen within
that time. (Measured: a WAL checkpoint's fsync inside a request stalled the event loop for
2 s on this machine's disk.) Keys are stored as SHA-256 hashes: the key itself is shown
once, by `tolk keys add`, and never logged.

Usage is counted per key and period (a UTC calendar month or day), so the servers of one
host that share the file share the counts; `/v2/usage` reports them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Period = Literal["month", "day"]
SYNC_SECONDS = 1.0

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
    created REAL NOT NULL,
    dictionaries TEXT
);
CREATE TABLE IF NOT EXISTS style_rules (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    rule TEXT NOT NULL,
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
class GlossaryDictionary:
    """A glossary's entries for one language pair (DeepL v3's "dictionary")."""

    source_lang: str
    target_lang: str
    entries: Mapping[str, str]

    @property
    def pair(self) -> tuple[str, str]:
        return self.source_lang, self.target_lang

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source_lang, "target": self.target_lang, "entries": self.entries}


@dataclass(frozen=True)
class StoredGlossary:
    """A glossary made through an API: DeepL v2 makes one with one dictionary, v3 with
    several; both APIs read and change the same glossaries."""

    id: str
    owner: str
    name: str
    dictionaries: tuple[GlossaryDictionary, ...]
    created: float

    def dictionary(self, source: str, target: str) -> GlossaryDictionary | None:
        return next((d for d in self.dictionaries if d.pair == (source, target)), None)

    # DeepL v2's view: a glossary of one pair (the first dictionary).
    @property
    def source_lang(self) -> str:
        return self.dictionaries[0].source_lang if self.dictionaries else ""

    @property
    def target_lang(self) -> str:
        return self.dictionaries[0].target_lang if self.dictionaries else ""

    @property
    def entries(self) -> Mapping[str, str]:
        return self.dictionaries[0].entries if self.dictionaries else {}


@dataclass(frozen=True)
class CustomInstruction:
    id: str
    label: str
    prompt: str
    source_language: str | None = None


@dataclass(frozen=True)
class StyleRule:
    """DeepL's style rule: predefined rules (`configured_rules`, {category: {rule: option}})
    and custom instructions, for one target language; a translation naming it (`style_id`)
    gets them as instructions in its prompt."""

    id: str
    owner: str
    name: str
    language: str
    created: float
    updated: float
    version: int = 1
    configured_rules: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    custom_instructions: tuple[CustomInstruction, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "language": self.language,
            "updated": self.updated,
            "version": self.version,
            "configured_rules": self.configured_rules,
            "custom_instructions": [dataclasses.asdict(c) for c in self.custom_instructions],
        }

    @classmethod
    def of_json(cls, rule_id: str, owner: str, created: float, data: dict[str, Any]) -> StyleRule:
        return cls(
            rule_id,
            owner,
            data["name"],
            data["language"],
            created,
            data["updated"],
            data["version"],
            data["configured_rules"],
            tuple(CustomInstruction(**c) for c in data["custom_instructions"]),
        )


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
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(glossaries)")}
            if "dictionaries" not in columns:  # a file from before DeepL v3's glossaries
                self._db.execute("ALTER TABLE glossaries ADD COLUMN dictionaries TEXT")
        self._by_hash: dict[str, Key] = {}
        self._used: dict[tuple[str, str], int] = {}  # (key id, period start) -> characters
        self._pending: dict[tuple[str, str], tuple[int, int]] = {}  # -> (characters, requests)
        self._flushing: dict[tuple[str, str], tuple[int, int]] = {}
        self._pending_lock = threading.Lock()
        self._glossaries: dict[str, StoredGlossary] = {}
        self._style_rules: dict[str, StyleRule] = {}
        self._version = -1  # the file's PRAGMA data_version at the last read
        self.sync(force=True)

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
        self.sync(force=True)
        return key, secret

    def revoke(self, name: str) -> Key:
        with self._tx() as db:
            updated = db.execute(
                "UPDATE keys SET revoked = ? WHERE (name = ? OR id = ?) AND revoked IS NULL",
                (time.time(), name, name),
            ).rowcount
        if not updated:
            raise KeyError(f"no active key named '{name}'")
        self.sync(force=True)
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
        """The active key with this secret (as of the last sync)."""
        return self._by_hash.get(hash_key(secret))

    def has_keys(self) -> bool:
        """Whether any key is active."""
        return bool(self._by_hash)

    # -- usage -------------------------------------------------------------------------------

    def used(self, key: Key) -> int:
        """Characters used this period: the file's count at the last sync, plus this
        process's since."""
        slot = (key.id, period_start(key.period))
        unsynced = self._pending.get(slot, (0, 0))[0] + self._flushing.get(slot, (0, 0))[0]
        return self._used.get(slot, 0) + unsynced

    def record(self, key: Key, characters: int) -> None:
        slot = (key.id, period_start(key.period))
        with self._pending_lock:
            chars, requests = self._pending.get(slot, (0, 0))
            self._pending[slot] = (chars + characters, requests + 1)

    def sync(self, *, force: bool = False) -> None:
        """Write this process's new usage; read keys, usage and glossaries back if this
        process wrote or another one changed the file since the last read (or `force`: after
        this connection's own key changes, which data_version does not count). Blocking:
        servers run it in a thread."""
        with self._pending_lock:
            # Still counted by used() (as _flushing) until the file's counts are read back.
            pending, self._pending = self._pending, {}
            self._flushing = pending
        try:
            if pending:
                self._write_usage(pending)
        except BaseException:
            with self._pending_lock:  # not lost: counted again at the next sync
                for slot, (c, r) in pending.items():
                    chars, requests = self._pending.get(slot, (0, 0))
                    self._pending[slot] = (chars + c, requests + r)
                self._flushing = {}
            raise
        with self._lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if force or pending or version != self._version:
            self._read()
            self._version = version
        self._flushing = {}

    def _write_usage(self, pending: Mapping[tuple[str, str], tuple[int, int]]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT INTO usage (key_id, period_start, characters, requests) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (key_id, period_start) DO UPDATE SET "
                "characters = characters + excluded.characters, "
                "requests = requests + excluded.requests",
                [(k, p, c, r) for (k, p), (c, r) in pending.items()],
            )

    def _read(self) -> None:
        with self._lock:
            keys = self._db.execute(
                "SELECT hash, id, name, character_limit, period, rate, created, revoked "
                "FROM keys WHERE revoked IS NULL"
            ).fetchall()
            usage = self._db.execute(
                "SELECT key_id, period_start, characters FROM usage WHERE period_start >= ?",
                (period_start("month"),),
            ).fetchall()
            glossaries = self._db.execute(
                "SELECT id, owner, name, source_lang, target_lang, entries, created, dictionaries "
                "FROM glossaries"
            ).fetchall()
            rules = self._db.execute("SELECT id, owner, created, rule FROM style_rules").fetchall()
        self._by_hash = {row[0]: Key(*row[1:]) for row in keys}
        self._used = {(k, p): c for k, p, c in usage}
        self._glossaries = {row[0]: _glossary_of_row(row) for row in glossaries}
        self._style_rules = {i: StyleRule.of_json(i, o, c, json.loads(r)) for i, o, c, r in rules}

    # -- glossaries made through the API -----------------------------------------------------

    def add_glossary(
        self, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
    ) -> StoredGlossary:
        glossary = StoredGlossary(str(uuid.uuid4()), owner, name, tuple(dictionaries), time.time())
        columns = _glossary_columns(glossary)
        with self._tx() as db:
            db.execute(
                "INSERT INTO glossaries (id, owner, name, source_lang, target_lang, entries, "
                "dictionaries, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (glossary.id, owner, *columns, glossary.created),
            )
        self._glossaries[glossary.id] = glossary
        return glossary

    def change_glossary(self, glossary: StoredGlossary) -> None:
        """Store a changed glossary (its name or dictionaries) under its id and owner."""
        name, source, target, entries, dictionaries = _glossary_columns(glossary)
        with self._tx() as db:
            db.execute(
                "UPDATE glossaries SET name = ?, source_lang = ?, target_lang = ?, entries = ?, "
                "dictionaries = ? WHERE id = ? AND owner = ?",
                (name, source, target, entries, dictionaries, glossary.id, glossary.owner),
            )
        self._glossaries[glossary.id] = glossary

    def glossaries(self, owner: str | None = None) -> list[StoredGlossary]:
        found = self._glossaries.values()
        return sorted(
            (g for g in found if owner is None or g.owner == owner), key=lambda g: g.created
        )

    def glossary(self, glossary_id: str) -> StoredGlossary | None:
        """Any owner's glossary by id (an id is unguessable: having it is using it)."""
        return self._glossaries.get(glossary_id)

    def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        return self._delete("glossaries", self._glossaries, owner, glossary_id)

    def _delete(self, table: str, held: dict[str, Any], owner: str, item_id: str) -> bool:
        """Delete the owner's row `item_id` from `table` (a name of this module's schema)
        and from its cache `held`; whether there was one."""
        with self._tx() as db:
            deleted = db.execute(
                f"DELETE FROM {table} WHERE id = ? AND owner = ?", (item_id, owner)
            ).rowcount
        if deleted:
            held.pop(item_id, None)
        return bool(deleted)

    # -- style rules made through the API ----------------------------------------------------

    def put_style_rule(self, rule: StyleRule) -> None:
        """Store a new or changed style rule (under its id and owner)."""
        body = json.dumps(rule.to_json(), ensure_ascii=False)
        with self._tx() as db:
            db.execute(
                "INSERT INTO style_rules (id, owner, rule, created) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET rule = excluded.rule WHERE owner = excluded.owner",
                (rule.id, rule.owner, body, rule.created),
            )
        self._style_rules[rule.id] = rule

    def style_rules(self, owner: str) -> list[StyleRule]:
        found = (r for r in self._style_rules.values() if r.owner == owner)
        return sorted(found, key=lambda r: r.created)

    def style_rule(self, rule_id: str) -> StyleRule | None:
        """Any owner's rule by id (an id is unguessable: having it is using it)."""
        return self._style_rules.get(rule_id)

    def delete_style_rule(self, owner: str, rule_id: str) -> bool:
        return self._delete("style_rules", self._style_rules, owner, rule_id)


def _glossary_columns(glossary: StoredGlossary) -> tuple[str, str, str, str, str]:
    """name, and the first dictionary in the columns of v2-only files (readable by an older
    tolk sharing the file), and every dictionary as JSON."""
    dictionaries = json.dumps([d.to_json() for d in glossary.dictionaries], ensure_ascii=False)
    first = json.dumps(dict(glossary.entries), ensure_ascii=False)
    return glossary.name, glossary.source_lang, glossary.target_lang, first, dictionaries


def _glossary_of_row(row: Sequence[Any]) -> StoredGlossary:
    glossary_id, owner, name, source, target, entries, created, dictionaries = row
    found: tuple[GlossaryDictionary, ...]
    if dictionaries is None:  # written before v3: one pair, in the row itself
        found = (GlossaryDictionary(source, target, json.loads(entries)),)
    else:
        found = tuple(
            GlossaryDictionary(d["source"], d["target"], d["entries"])
            for d in json.loads(dictionaries)
        )
    return StoredGlossary(glossary_id, owner, name, found, created)
