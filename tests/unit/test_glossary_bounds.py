"""What one key may keep in glossaries and style rules, and glossaries re-read only when they change
(issue 35): a usage write every second under traffic had made every server re-read every
glossary with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolk.errors import PayloadTooLarge
from tolk.store.keys import GlossaryDictionary, KeyStore, StyleRule


def _dictionary(entries: int, width: int = 10) -> list[GlossaryDictionary]:
    return [GlossaryDictionary("en", "de", {f"t{i:0{width}}": f"b{i}" for i in range(entries)})]


def test_a_key_keeps_a_bounded_number_and_size_of_glossaries(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.db", max_glossaries=3, max_glossary_bytes=20_000)
    for n in range(3):
        store.add_glossary("a", f"g{n}", _dictionary(5))
    with pytest.raises(PayloadTooLarge, match="3 glossaries"):
        store.add_glossary("a", "one too many", _dictionary(5))
    store.add_glossary("b", "another key's", _dictionary(5))  # counted per key
    with pytest.raises(PayloadTooLarge, match="bytes of entries"):
        store.add_glossary("b", "too big", _dictionary(2_000))
    small = store.glossaries("b")[0]
    grown = type(small)(small.id, small.owner, small.name, tuple(_dictionary(2_000)), 0.0)
    with pytest.raises(PayloadTooLarge):
        store.change_glossary(grown)
    assert len(store.glossaries("a")) == 3
    assert len(store.glossaries("b")) == 1
    for n in range(3):
        store.put_style_rule(StyleRule(f"r{n}", "a", f"rule {n}", "de", 0.0, 0.0))
    with pytest.raises(PayloadTooLarge, match="3 style rules"):
        store.put_style_rule(StyleRule("r3", "a", "one too many", "de", 0.0, 0.0))
    store.put_style_rule(StyleRule("r0", "a", "renamed", "de", 0.0, 1.0))  # a change is no new
    assert [r.name for r in store.style_rules("a")] == ["renamed", "rule 1", "rule 2"]
    store.close()


def test_usage_writes_do_not_make_servers_reread_glossaries(tmp_path: Path) -> None:
    one, other = KeyStore(tmp_path / "keys.db"), KeyStore(tmp_path / "keys.db")
    key, _ = other.add("client", character_limit=1000)
    made = one.add_glossary("a", "g", _dictionary(5))
    other.sync()
    held = other.glossary(made.id)
    assert held is not None
    for _ in range(3):  # another server's traffic: usage written and read back
        one.sync(force=False)
        one.record(key, 10)
        one.sync()
        other.sync()
    assert other.glossary(made.id) is held  # the same object: not read again
    one.add("another client")  # a key written: keys re-read, glossaries not
    other.sync()
    assert other.glossary(made.id) is held
    assert other.used(key) == 30  # while usage was
    second = one.add_glossary("a", "g2", _dictionary(5))
    other.sync()
    assert other.glossary(second.id) is not None  # a glossary write is read back
    one.close()
    other.close()
