"""The translation memory sample (tests/data/memory.tmx) and one of its German translations."""

from __future__ import annotations

from tests.support.paths import REPO

TMX = REPO / "tests" / "data" / "memory.tmx"


GERMAN = "Die Stapelgröße wird vom Server abgestimmt."
