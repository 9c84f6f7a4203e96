"""Language detection on real sentences, and keys, rates and quotas (no server needed)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import sqlalchemy

from tests.support.paths import REPO
from tests.support.processes import run_tolk
from tolk.detect import Detector
from tolk.errors import InvalidKey, KeyRequired, QuotaExceeded, RateLimited
from tolk.server.access import UNLIMITED, Access
from tolk.server.middleware import RedactQuery
from tolk.store.database import url_of
from tolk.store.keys import KeyStore, hash_key

SERVED = ["en", "de", "fr", "es", "pt", "zh", "ne"]
CASE_STUDY = REPO / "src/tolk/data/case_study"
SHORT = {
    "en": ["Good morning", "Thank you very much", "Where is the station?"],
    "de": ["Guten Morgen", "Vielen Dank", "Wo ist der Bahnhof?"],
    "fr": ["Bonjour", "Merci beaucoup", "Où est la gare ?"],
    "es": ["Buenos días", "Muchas gracias", "¿Dónde está la estación?"],
    "pt": ["Bom dia", "Muito obrigado", "Onde fica a estação?"],
    "zh": ["早上好", "非常感谢", "火车站在哪里？"],
    "ne": ["शुभ प्रभात", "धेरै धन्यवाद", "स्टेशन कहाँ छ?"],
}
DEVANAGARI = re.compile(r"[\u0900-\u097F]")


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector(SERVED)


def test_short_phrases_in_every_served_language(detector: Detector) -> None:
    for language, phrases in SHORT.items():
        assert [detector.detect(p).language for p in phrases] == [language] * 3, language


def test_the_case_study_in_english_and_nepali(detector: Detector) -> None:
    english = [
        line
        for line in (CASE_STUDY / "part1.en.txt").read_text().splitlines()
        if len(line.split()) >= 6
    ]
    assert all(detector.detect(line).language == "en" for line in english)
    # The Nepali translation keeps technical terms in English: lines mostly in Devanagari.
    nepali = [
        line
        for name in ("part1.ne.txt", "part2.ne.txt")
        for line in (CASE_STUDY / name).read_text().splitlines()
        if len(DEVANAGARI.findall(line)) > 0.3 * len(line.replace(" ", "")) > 10
    ]
    assert len(nepali) > 25
    found = [detector.detect(line) for line in nepali]
    assert [d.language for d in found] == ["ne"] * len(nepali)
    assert all(d.reliable for d in found)


def test_what_cannot_be_told_gets_the_documented_fallback(detector: Detector) -> None:
    for text in ("", "12 345", "😀 🎉", " \n\t", "!!!"):
        detection = detector.detect(text)
        assert (detection.language, detection.confidence, detection.reliable) == ("en", 0, False)
    unsure = detector.detect("ok")  # letters, but nothing that tells the languages apart
    assert not unsure.reliable
    assert detector.detect("x" * 100_000).language in SERVED  # long input: one page looked at


def test_a_served_variant_is_what_detection_answers() -> None:
    detector = Detector(["en", "zh-Hant", "pt-BR"], fallback="pt-BR")
    assert detector.detect("火車站在哪裡？").language == "zh-Hant"
    assert detector.detect("Onde fica a estação de comboios?").language == "pt-BR"
    assert detector.detect("42").language == "pt-BR"


# -- keys ----------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def key_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A key store's location: a SQLite file, or a fresh database on a real PostgreSQL."""
    if request.param == "sqlite":
        return tmp_path / "keys.db"
    from tests.support.postgres import fresh_database

    return fresh_database(request.getfixturevalue("postgres_url"), "keys_test")


def test_keys_are_stored_hashed_counted_and_revoked(key_db: Path | str) -> None:
    store = KeyStore(key_db)
    key, secret = store.add("app", character_limit=100, rate="5/second")
    database = sqlalchemy.create_engine(url_of(key_db) or "")
    with database.connect() as connection:
        stored = repr(connection.execute(sqlalchemy.text("SELECT * FROM keys")).all())
    database.dispose()
    assert hash_key(secret) in stored
    assert secret not in stored
    assert store.lookup(secret) == key
    assert store.lookup(secret + "x") is None
    store.record(key, 30)
    store.sync()
    store.record(key, 12)
    assert store.used(key) == 42  # synced and not yet
    store.sync()
    assert KeyStore(key_db).used(key) == 42  # in the store
    with pytest.raises(ValueError, match="already exists"):
        store.add("app")
    # Another process (`tolk keys revoke`) revokes it: this store sees it on the next look.
    other = KeyStore(key_db)
    other.revoke("app")
    assert store.lookup(secret) == key  # until the next sync
    store.sync()
    assert store.lookup(secret) is None
    assert [k.name for k in other.all_keys(include_revoked=True)] == ["app"]
    # Nothing written here or elsewhere since: the next sync reads nothing back.
    keys_read = store._by_hash
    store.sync()
    assert store._by_hash is keys_read


def test_access_without_keys_with_keys_and_requiring_them(tmp_path: Path) -> None:
    store = KeyStore(None)
    open_access = Access(store)
    assert open_access.caller(None).key.id == "anonymous"
    assert open_access.caller("anything").key.id == "anonymous"  # no keys exist at all
    _, secret = store.add("app", character_limit=10, rate="2/minute")
    with pytest.raises(InvalidKey):
        open_access.caller("anything")  # once keys exist, a wrong one is refused
    caller = open_access.caller(secret)
    open_access.settle(open_access.admit(caller, 8), 8)
    with pytest.raises(QuotaExceeded):
        open_access.admit(caller, 3)
    with pytest.raises(RateLimited) as limited:
        open_access.admit(caller, 0)  # its third request this minute
    assert 0 < (limited.value.retry_after or 0) <= 60
    assert open_access.usage(caller) == (8, 10, "month")
    anonymous = open_access.caller("")
    open_access.settle(open_access.admit(anonymous, 5), 5)
    assert open_access.usage(anonymous) == (5, UNLIMITED, "month")
    with pytest.raises(KeyRequired):
        Access(store, require_key=True).caller(None)


def test_tolk_keys_commands(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    added = run_tolk(
        "keys",
        "add",
        "weblate",
        "--quota",
        "500000",
        "--rate",
        "10/second",
        "--db",
        db,
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip()
    assert secret.startswith("tolk-")
    table = run_tolk("keys", "list", "--db", db, cwd=tmp_path)
    assert "weblate" in table.stdout
    assert secret not in table.stdout
    listed = json.loads(run_tolk("keys", "list", "--json", "--db", db, cwd=tmp_path).stdout)
    assert [
        (k["name"], k["character_limit"], k["period"], k["rate"], k["used"]) for k in listed
    ] == [("weblate", 500000, "month", "10/second", 0)]
    bad_rate = run_tolk("keys", "add", "x", "--rate", "often", "--db", db, cwd=tmp_path)
    assert bad_rate.returncode == 2
    assert run_tolk("keys", "revoke", "weblate", "--db", db, cwd=tmp_path).returncode == 0
    assert run_tolk("keys", "revoke", "weblate", "--db", db, cwd=tmp_path).returncode == 2
    assert json.loads(run_tolk("keys", "list", "--json", "--db", db, cwd=tmp_path).stdout) == []


def test_access_log_lines_leave_keys_and_texts_out() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", "/detect?q=private+text&api_key=tolk-secret", "1.1", 200),
        None,
    )
    assert RedactQuery().filter(record)
    line = record.getMessage()
    assert "private" not in line
    assert "tolk-secret" not in line
    assert '"POST /detect?… HTTP/1.1" 200' in line
