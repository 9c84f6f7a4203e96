"""Translation memories (tolk.store.memories) without a server: TMX read with its inline
markup dropped, and the `tolk memories` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.processes import run_tolk
from tests.support.samples.tmx import GERMAN, TMX
from tolk.store.memories import read_tmx

SAVED = "The batch size is tuned by the server."


def test_tmx_units_per_target_with_inline_markup_dropped(tmp_path: Path) -> None:
    source, units = read_tmx(TMX)
    assert source == "en"
    assert (("de", SAVED, GERMAN)) in units
    assert ("fr", SAVED, "La taille du lot est réglée par le serveur.") in units
    assert (
        "de",
        "Click <b>Save</b> to keep your changes.",
        "Klicken Sie auf <b>Speichern</b>, um Ihre Änderungen zu behalten.",
    ) not in units  # <ph> elements are markup, not text
    assert ("de", "Click Save to keep your changes.", "Klicken Sie auf Speichern, um Ihre "
            "Änderungen zu behalten.") in units  # fmt: skip
    assert len(units) == 3  # the unit without an English segment is none
    bare = tmp_path / "bare.tmx"
    bare.write_text('<tmx version="1.4"><header/><body/></tmx>')
    with pytest.raises(ValueError, match="srclang"):
        read_tmx(bare)


def test_tolk_memories_commands(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    made = run_tolk("memories", "import", str(TMX), "--name", "docs", "--db", db, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    memory_id = made.stdout.strip()
    assert "3 segments from en into de, fr" in made.stderr
    listed = run_tolk("memories", "list", "--json", "--db", db, cwd=tmp_path)
    (info,) = json.loads(listed.stdout)
    assert (info["id"], info["name"], info["segments"]) == (memory_id, "docs", 3)
    assert run_tolk("memories", "delete", memory_id, "--db", db, cwd=tmp_path).returncode == 0
    assert json.loads(run_tolk("memories", "list", "--json", "--db", db, cwd=tmp_path).stdout) == []
    assert run_tolk("memories", "delete", memory_id, "--db", db, cwd=tmp_path).returncode == 2
