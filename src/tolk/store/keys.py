"""API keys, their usage, and glossaries and style rules made through the DeepL API: the key
store, in a SQLite file for one server or PostgreSQL for a fleet (tolk.store.database: one
code path).

A server never touches the database on its event loop: keys, usage counts, glossaries and
style rules are read from memory, usage is added in memory, and `sync()` (run every
SYNC_SECONDS in a thread by the server) writes the new usage in one transaction and reads
everything back when the store's version (a counter every write bumps) moved, so `tolk keys
add/revoke` and other servers sharing the store are seen within that time. (Measured: a WAL
checkpoint's fsync inside a request stalled the event loop for 2 s on this machine's disk.)
Keys are stored as SHA-256 hashes: the key itself is shown once, by `tolk keys add`, and
never logged.

Usage is counted per key and period (a UTC calendar month or day), so the servers that share
the store share the counts; `/v2/usage` reports them. A request's characters are reserved
against the key's quota when it is admitted (`reserve`: refused unless the characters used,
those reserved by requests still in flight in this process, and its own fit the quota) and
settled when it ends (`settle`: what it was charged becomes usage, the rest is released).
Reservations are this process's own: servers sharing the store see each other's usage at the
next sync, never each other's requests in flight (docs/security.md states the bound).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    delete,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError

from tolk.errors import PayloadTooLarge
from tolk.store.database import Database, url_of

Period = Literal["month", "day"]
SYNC_SECONDS = 1.0

_metadata = MetaData()
_keys = Table(
    "keys",
    _metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("hash", Text, nullable=False, unique=True),
    Column("character_limit", Integer),
    Column("period", Text, nullable=False, server_default="month"),
    Column("rate", Text),
    Column("created", Float, nullable=False),
    Column("revoked", Float),
)
_usage = Table(
    "usage",
    _metadata,
    Column("key_id", Text, primary_key=True),
    Column("period_start", Text, primary_key=True),
    Column("characters", BigInteger, nullable=False, server_default="0"),
    Column("requests", BigInteger, nullable=False, server_default="0"),
)
_glossaries = Table(
    "glossaries",
    _metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("source_lang", Text, nullable=False),
    Column("target_lang", Text, nullable=False),
    Column("entries", Text, nullable=False),
    Column("created", Float, nullable=False),
    Column("dictionaries", Text),
)
_style_rules = Table(
    "style_rules",
    _metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("rule", Text, nullable=False),
    Column("created", Float, nullable=False),
)
# Two rows: 1 bumped by every write, so that a server re-reads keys and usage only when some
# server (or `tolk keys`) changed them; 2 bumped by writes of glossaries and style rules only,
# which are re-read only then (usage is written every second under traffic, and re-reading
# every glossary with it had grown a server by 615 MB and tripled small requests' latency).
KEYS_VERSION, CONTENT_VERSION = 1, 2
_version = Table(
    "tolk_store_version",
    _metadata,
    Column("id", Integer, primary_key=True),
    Column("version", BigInteger, nullable=False),
)


@dataclass(frozen=True)
class Key:
    id: str
    name: str
    character_limit: int | None  # None: no quota
    period: Period
    rate: str | None  # e.g. "10/second", in the `limits` library's notation
    created: float
    revoked: float | None = None


@dataclass
class Reservation:
    """Characters of a key's quota held for one request in flight (KeyStore.reserve), in
    the period it was admitted in; settled once (KeyStore.settle)."""

    key: Key
    period_start: str
    characters: int
    settled: bool = False

    @property
    def slot(self) -> tuple[str, str]:
        return self.key.id, self.period_start


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
    """The store's database: a SQLite file (a path), any SQLAlchemy URL (PostgreSQL for a
    fleet), or an in-memory database (None: for a server with no `access.db`)."""

    def __init__(
        self,
        location: Path | str | None,
        max_glossaries: int = 100,
        max_glossary_bytes: int = 16 << 20,
    ) -> None:
        """`max_glossaries` and `max_glossary_bytes`: what one owner (API key) may keep in
        glossaries, in number and in bytes of entries, all of them together; every server
        holds every owner's glossaries in memory."""
        self.url = url_of(location)
        self._db = Database(self.url)
        with self._db.begin() as connection:
            _metadata.create_all(connection)
            columns = {c["name"] for c in inspect(connection).get_columns("glossaries")}
            if "dictionaries" not in columns:  # a file from before DeepL v3's glossaries
                connection.execute(text("ALTER TABLE glossaries ADD COLUMN dictionaries TEXT"))
            present = set(connection.execute(select(_version.c.id)).scalars())
            for row in (KEYS_VERSION, CONTENT_VERSION):
                if row not in present:
                    connection.execute(insert(_version).values(id=row, version=0))
        self._by_hash: dict[str, Key] = {}
        self._used: dict[tuple[str, str], int] = {}  # (key id, period start) -> characters
        self._pending: dict[tuple[str, str], tuple[int, int]] = {}  # -> (characters, requests)
        self._flushing: dict[tuple[str, str], tuple[int, int]] = {}
        self._reserved: dict[tuple[str, str], int] = {}  # -> characters held by requests
        self._pending_lock = threading.Lock()  # pending, flushing and reserved counts
        self._glossaries: dict[str, StoredGlossary] = {}
        self._style_rules: dict[str, StyleRule] = {}
        self._version = -1  # the store's version at the last read
        self._content_version = -1  # of glossaries and style rules
        self.max_glossaries = max_glossaries
        self.max_glossary_bytes = max_glossary_bytes
        self.sync(force=True)

    def close(self) -> None:
        self._db.close()

    @property
    def database(self) -> Database:
        """The store's database, which translation memories (tolk.store.memories) share."""
        return self._db

    @contextmanager
    def _tx(self, content: bool = False) -> Iterator[Connection]:
        """A write: one transaction, which bumps the store's version (and, with `content`:
        a write of glossaries or style rules, theirs)."""
        rows = (KEYS_VERSION, CONTENT_VERSION) if content else (KEYS_VERSION,)
        with self._db.begin() as connection:
            yield connection
            connection.execute(
                update(_version)
                .where(_version.c.id.in_(rows))
                .values(version=_version.c.version + 1)
            )

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
        row = dataclasses.asdict(key) | {"hash": hash_key(secret)}
        try:
            with self._tx() as db:
                db.execute(insert(_keys).values(row))
        except IntegrityError as exc:
            raise ValueError(f"a key named '{name}' already exists") from exc
        self.sync(force=True)
        return key, secret

    def revoke(self, name: str) -> Key:
        with self._tx() as db:
            updated = db.execute(
                update(_keys)
                .where(or_(_keys.c.name == name, _keys.c.id == name), _keys.c.revoked.is_(None))
                .values(revoked=time.time())
            ).rowcount
        if not updated:
            raise KeyError(f"no active key named '{name}'")
        self.sync(force=True)
        return next(k for k in self.all_keys(include_revoked=True) if name in (k.name, k.id))

    def all_keys(self, include_revoked: bool = False) -> list[Key]:
        with self._db.connect() as db:
            rows = db.execute(select(*_key_columns()).order_by(_keys.c.created)).all()
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
        """Characters used this period: the store's count at the last sync, plus this
        process's since."""
        return self._used_in((key.id, period_start(key.period)))

    def _used_in(self, slot: tuple[str, str]) -> int:
        unsynced = self._pending.get(slot, (0, 0))[0] + self._flushing.get(slot, (0, 0))[0]
        return self._used.get(slot, 0) + unsynced

    def reserved(self, key: Key) -> int:
        """Characters this period held by this process's requests in flight."""
        return self._reserved.get((key.id, period_start(key.period)), 0)

    def record(self, key: Key, characters: int) -> None:
        slot = (key.id, period_start(key.period))
        with self._pending_lock:
            self._add_usage(slot, characters)

    def _add_usage(self, slot: tuple[str, str], characters: int) -> None:
        chars, requests = self._pending.get(slot, (0, 0))
        self._pending[slot] = (chars + characters, requests + 1)

    def reserve(self, key: Key, characters: int) -> Reservation | None:
        """Hold `characters` of the key's quota for a request, or None when they do not
        fit: used + reserved + characters > the quota. The check and the hold are one step
        (under the lock), so requests admitted at once cannot together pass the quota; a
        key without a quota always gets its reservation."""
        slot = (key.id, period_start(key.period))
        with self._pending_lock:
            held = self._reserved.get(slot, 0)
            limit = key.character_limit
            if limit is not None and self._used_in(slot) + held + characters > limit:
                return None
            if characters:
                self._reserved[slot] = held + characters
        return Reservation(key, slot[1], characters)

    def settle(self, reservation: Reservation, charged: int | None) -> None:
        """End a reservation: `charged` characters become usage (one request, in the period
        it was admitted in) and the rest is released, in one step; None (the request failed
        or was cancelled) releases it all and counts nothing. A second call does nothing."""
        slot = reservation.slot
        with self._pending_lock:
            if reservation.settled:
                return
            reservation.settled = True
            left = self._reserved.get(slot, 0) - reservation.characters
            if left > 0:
                self._reserved[slot] = left
            else:
                self._reserved.pop(slot, None)
            if charged is not None:
                self._add_usage(slot, charged)

    def sync(self, *, force: bool = False) -> None:
        """Write this process's new usage; read keys, usage, glossaries and style rules back
        if the store's version moved since the last read (any server's or `tolk keys`'
        write), or `force`. Blocking: servers run it in a thread."""
        with self._pending_lock:
            # Still counted by used() (as _flushing) until the store's counts are read back.
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
        with self._db.connect() as db:
            versions = {
                row[0]: row[1] for row in db.execute(select(_version.c.id, _version.c.version))
            }
        version, content = versions[KEYS_VERSION], versions[CONTENT_VERSION]
        if force or version != self._version:
            self._read(content=force or content != self._content_version)
            self._version, self._content_version = version, content
        with self._pending_lock:
            self._flushing = {}

    def _write_usage(self, pending: Mapping[tuple[str, str], tuple[int, int]]) -> None:
        rows = [
            {"key_id": k, "period_start": p, "characters": c, "requests": r}
            for (k, p), (c, r) in pending.items()
        ]
        with self._tx() as db:
            self._db.upsert(
                db,
                _usage,
                rows,
                ["key_id", "period_start"],
                lambda new: {
                    "characters": _usage.c.characters + new.characters,
                    "requests": _usage.c.requests + new.requests,
                },
            )

    def _read(self, content: bool) -> None:
        """Keys and usage; glossaries and style rules too if `content` (they changed)."""
        with self._db.connect() as db:
            keys = db.execute(
                select(_keys.c.hash, *_key_columns()).where(_keys.c.revoked.is_(None))
            ).all()
            usage = db.execute(
                select(_usage.c.key_id, _usage.c.period_start, _usage.c.characters).where(
                    _usage.c.period_start >= period_start("month")
                )
            ).all()
            if content:
                glossaries = db.execute(
                    select(
                        _glossaries.c.id, _glossaries.c.owner, _glossaries.c.name,
                        _glossaries.c.source_lang, _glossaries.c.target_lang,
                        _glossaries.c.entries, _glossaries.c.created, _glossaries.c.dictionaries,
                    )
                ).all()  # fmt: skip
                rules = db.execute(
                    select(
                        _style_rules.c.id, _style_rules.c.owner, _style_rules.c.created,
                        _style_rules.c.rule,
                    )
                ).all()  # fmt: skip
        self._by_hash = {row[0]: Key(*row[1:]) for row in keys}
        used = {(k, p): c for k, p, c in usage}
        # The counts just flushed are in `used` now: both swapped in one step, or a
        # reservation in between would count them twice.
        with self._pending_lock:
            self._used, self._flushing = used, {}
        if content:
            self._glossaries = {row[0]: _glossary_of_row(row) for row in glossaries}
            self._style_rules = {
                i: StyleRule.of_json(i, o, c, json.loads(r)) for i, o, c, r in rules
            }

    # -- glossaries made through the API -----------------------------------------------------

    def add_glossary(
        self, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
    ) -> StoredGlossary:
        glossary = StoredGlossary(str(uuid.uuid4()), owner, name, tuple(dictionaries), time.time())
        name, source, target, entries, stored = _glossary_columns(glossary)
        held = [g for g in self._glossaries.values() if g.owner == owner]
        if len(held) >= self.max_glossaries:
            raise PayloadTooLarge(
                f"this key has {len(held)} glossaries, the most one key may keep; delete one first",
                field="glossary",
                limit=self.max_glossaries,
            )
        self._check_bytes(owner, glossary.id, len(stored.encode()))
        with self._tx(content=True) as db:
            db.execute(
                insert(_glossaries).values(
                    id=glossary.id, owner=owner, name=name, source_lang=source,
                    target_lang=target, entries=entries, dictionaries=stored,
                    created=glossary.created,
                )
            )  # fmt: skip
        self._glossaries[glossary.id] = glossary
        return glossary

    def change_glossary(self, glossary: StoredGlossary) -> None:
        """Store a changed glossary (its name or dictionaries) under its id and owner."""
        name, source, target, entries, dictionaries = _glossary_columns(glossary)
        self._check_bytes(glossary.owner, glossary.id, len(dictionaries.encode()))
        with self._tx(content=True) as db:
            db.execute(
                update(_glossaries)
                .where(_glossaries.c.id == glossary.id, _glossaries.c.owner == glossary.owner)
                .values(
                    name=name, source_lang=source, target_lang=target, entries=entries,
                    dictionaries=dictionaries,
                )
            )  # fmt: skip
        self._glossaries[glossary.id] = glossary

    def _check_bytes(self, owner: str, glossary_id: str, size: int) -> None:
        """Refuse a glossary that would take the owner's glossaries past max_glossary_bytes
        (its other glossaries' entries, as stored, and this one's)."""
        others = sum(
            len(_glossary_columns(g)[4].encode())
            for g in self._glossaries.values()
            if g.owner == owner and g.id != glossary_id
        )
        if others + size > self.max_glossary_bytes:
            raise PayloadTooLarge(
                f"this key's glossaries would hold {others + size:,} bytes of entries; at most "
                f"{self.max_glossary_bytes:,} are kept per key: delete or shorten one first",
                field="entries",
                limit=self.max_glossary_bytes,
            )

    def glossaries(self, owner: str | None = None) -> list[StoredGlossary]:
        found = self._glossaries.values()
        return sorted(
            (g for g in found if owner is None or g.owner == owner), key=lambda g: g.created
        )

    def glossary(self, glossary_id: str) -> StoredGlossary | None:
        """Any owner's glossary by id (an id is unguessable: having it is using it)."""
        return self._glossaries.get(glossary_id)

    def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        return self._delete(_glossaries, self._glossaries, owner, glossary_id)

    def _delete(self, table: Table, held: dict[str, Any], owner: str, item_id: str) -> bool:
        """Delete the owner's row `item_id` from `table` and from its cache `held`; whether
        there was one."""
        with self._tx(content=True) as db:
            deleted = db.execute(
                delete(table).where(table.c.id == item_id, table.c.owner == owner)
            ).rowcount
        if deleted:
            held.pop(item_id, None)
        return bool(deleted)

    # -- style rules made through the API ----------------------------------------------------

    def put_style_rule(self, rule: StyleRule) -> None:
        """Store a new or changed style rule (under its id and owner); a new one only while
        its owner has fewer than max_glossaries rules (each is at most a request body)."""
        held = sum(r.owner == rule.owner for r in self._style_rules.values())
        if rule.id not in self._style_rules and held >= self.max_glossaries:
            raise PayloadTooLarge(
                f"this key has {held} style rules, the most one key may keep; delete one first",
                field="style_rule",
                limit=self.max_glossaries,
            )
        body = json.dumps(rule.to_json(), ensure_ascii=False)
        row = {"id": rule.id, "owner": rule.owner, "rule": body, "created": rule.created}
        with self._tx(content=True) as db:
            self._db.upsert(
                db,
                _style_rules,
                [row],
                ["id"],
                lambda new: {"rule": new.rule},
                where=lambda new: _style_rules.c.owner == new.owner,
            )
        self._style_rules[rule.id] = rule

    def style_rules(self, owner: str) -> list[StyleRule]:
        found = (r for r in self._style_rules.values() if r.owner == owner)
        return sorted(found, key=lambda r: r.created)

    def style_rule(self, rule_id: str) -> StyleRule | None:
        """Any owner's rule by id (an id is unguessable: having it is using it)."""
        return self._style_rules.get(rule_id)

    def delete_style_rule(self, owner: str, rule_id: str) -> bool:
        return self._delete(_style_rules, self._style_rules, owner, rule_id)


def _key_columns() -> list[Any]:
    """The keys table's columns in Key's field order: a row of them is a Key."""
    return [_keys.c[f.name] for f in dataclasses.fields(Key)]


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
