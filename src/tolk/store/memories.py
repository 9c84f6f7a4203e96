"""Translation memories the user brings: TMX files imported into the store (tolk.store.database: the
key store's database, so a fleet on PostgreSQL shares them), listed through DeepL's
`/v3/translation_memories`, and used by translations that name one (`translation_memory_id`,
`translation_memory_threshold`, as DeepL's API takes them).

A segment whose source text is in the memory exactly (after whitespace is normalised) is
answered with the memory's translation as is, without the engine. A segment at least
`threshold` similar (rapidfuzz's normalised Indel similarity, 0-100, of the texts, the best
match of the memory's units for the pair) is translated with that unit in its prompt as a
reference (tolk.translation.run), so that the new sentence follows the memory's
terminology and style.

TMX is read with the standard library's XML parser: TMX 1.4 is plain XML (header, `tu`
units, one `tuv` per language with a `seg`), and the well-kept translation libraries that read
it (translate-toolkit) bring a large dependency tree for one file format; inline markup in a
`seg` (`bpt`, `ept`, `ph`...) is dropped, its text kept. The XML parser is defusedxml's, which
refuses entity expansion attacks (a TMX file is user input).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from defusedxml import ElementTree
from rapidfuzz import fuzz, process
from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
)

from tolk.languages import lang
from tolk.store.database import Database

DEFAULT_THRESHOLD = 75  # DeepL's default for translation_memory_threshold
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

_metadata = MetaData()
_memories = Table(
    "tolk_translation_memories",
    _metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("source_lang", Text, nullable=False),
    Column("created", Float, nullable=False),
)
_units = Table(
    "tolk_translation_memory_units",
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("memory_id", Text, ForeignKey(_memories.c.id, ondelete="CASCADE"), index=True),
    Column("target_lang", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("target", Text, nullable=False),
)


@dataclass(frozen=True)
class MemoryInfo:
    id: str
    name: str
    source_lang: str
    target_langs: tuple[str, ...]
    segments: int
    created: float


@dataclass(frozen=True)
class Match:
    score: float  # 0-100; 100: the same text
    source: str
    target: str

    @property
    def exact(self) -> bool:
        return self.score >= 100


def _normal(text: str) -> str:
    return " ".join(text.split())


# TMX's inline elements that hold native markup codes (`<ph>&lt;b&gt;</ph>`), not text.
_CODES = frozenset({"bpt", "ept", "ph", "it", "ut"})


def _segment_text(element: Any) -> str:
    """A `seg`'s text: its own and its `hi`/`sub` children's, without markup codes."""
    parts = [element.text or ""]
    for child in element:
        if child.tag not in _CODES:
            parts.append(_segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def read_tmx(path: Path, source_lang: str | None = None) -> tuple[str, list[tuple[str, str, str]]]:
    """(the source language, [(target language, source, target)]) of a TMX file: the
    header's `srclang` unless `source_lang` is given; every other language of a unit is a
    target. Language codes become tolk's (lang())."""
    root = ElementTree.parse(path).getroot()
    if root is None or root.tag != "tmx":
        raise ValueError(f"{path}: not a TMX file (its root element is not <tmx>)")
    header = root.find("header")
    declared = source_lang or (header.get("srclang") if header is not None else None)
    if not declared or declared == "*all*":
        raise ValueError(f"{path}: the TMX header names no srclang; give the source language")
    source = lang(declared).code
    units: list[tuple[str, str, str]] = []
    for tu in root.iter("tu"):
        texts: dict[str, str] = {}
        for tuv in tu.iter("tuv"):
            code = tuv.get(XML_LANG) or tuv.get("lang")
            seg = tuv.find("seg")
            if code and seg is not None:
                texts[lang(code).code] = _normal(_segment_text(seg))
        original = texts.pop(source, None)
        if original:
            units += [(target, original, text) for target, text in texts.items() if text]
    if not units:
        raise ValueError(f"{path}: no translation unit with a {source} segment and another")
    return source, units


class TranslationMemories:
    def __init__(self, db: Database) -> None:
        self._db = db
        with db.begin() as connection:
            _metadata.create_all(connection)
        self._lock = threading.Lock()
        # (memory id, target) -> (sources normalised, targets): read once, as matched
        self._loaded: dict[tuple[str, str], tuple[list[str], list[str]]] = {}

    def import_tmx(self, path: Path, name: str, source_lang: str | None = None) -> MemoryInfo:
        source, units = read_tmx(path, source_lang)
        memory_id = str(uuid.uuid4())
        with self._db.begin() as connection:
            connection.execute(
                insert(_memories).values(
                    id=memory_id, name=name, source_lang=source, created=time.time()
                )
            )
            connection.execute(
                insert(_units),
                [
                    {"memory_id": memory_id, "target_lang": t, "source": s, "target": x}
                    for t, s, x in units
                ],
            )
        found = self.get(memory_id)
        assert found is not None
        return found

    def all(self) -> list[MemoryInfo]:
        return self._infos()

    def get(self, memory_id: str) -> MemoryInfo | None:
        """One memory (a request naming it: counting every memory's units is not needed)."""
        found = self._infos(memory_id)
        return found[0] if found else None

    def _infos(self, memory_id: str | None = None) -> list[MemoryInfo]:
        memories = select(_memories).order_by(_memories.c.created)
        counts = select(_units.c.memory_id, _units.c.target_lang, func.count()).group_by(
            _units.c.memory_id, _units.c.target_lang
        )
        if memory_id is not None:
            memories = memories.where(_memories.c.id == memory_id)
            counts = counts.where(_units.c.memory_id == memory_id)
        with self._db.connect() as connection:
            rows = connection.execute(memories).all()
            counted = connection.execute(counts).all() if rows else []
        targets: dict[str, dict[str, int]] = {}
        for found_id, target, count in counted:
            targets.setdefault(found_id, {})[target] = count
        return [
            MemoryInfo(
                m.id,
                m.name,
                m.source_lang,
                tuple(sorted(targets.get(m.id, {}))),
                sum(targets.get(m.id, {}).values()),
                m.created,
            )
            for m in rows
        ]

    def delete(self, memory_id: str) -> bool:
        with self._db.begin() as connection:
            connection.execute(delete(_units).where(_units.c.memory_id == memory_id))
            deleted = connection.execute(
                delete(_memories).where(_memories.c.id == memory_id)
            ).rowcount
        with self._lock:
            for key in [k for k in self._loaded if k[0] == memory_id]:
                del self._loaded[key]
        return bool(deleted)

    def _units_of(self, memory_id: str, target: str) -> tuple[list[str], list[str]]:
        with self._lock:
            held = self._loaded.get((memory_id, target))
        if held is not None:
            return held
        with self._db.connect() as connection:
            rows = connection.execute(
                select(_units.c.source, _units.c.target).where(
                    _units.c.memory_id == memory_id, _units.c.target_lang == target
                )
            ).all()
        loaded = ([r.source for r in rows], [r.target for r in rows])
        with self._lock:
            self._loaded[(memory_id, target)] = loaded
        return loaded

    def match(self, memory_id: str, target: str, text: str, threshold: float) -> Match | None:
        """The memory's best unit for `text` into `target`, if at least `threshold`
        similar (blocking: run it in a thread)."""
        sources, targets = self._units_of(memory_id, target)
        wanted = _normal(text)
        found = process.extractOne(wanted, sources, scorer=fuzz.ratio, score_cutoff=threshold)
        if found is None:
            return None
        _, score, index = found
        score = 100.0 if sources[index] == wanted else min(float(score), 99.9)
        return Match(score, sources[index], targets[index])


__all__ = ["DEFAULT_THRESHOLD", "Match", "MemoryInfo", "TranslationMemories", "read_tmx"]
