"""`tolk translate FILE... --to de` with a server of its own (a real engine started for the
command), which leaves nothing running."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
import yaml

from tests.support.processes import run_tolk
from tests.support.servers import model_config


@pytest.mark.slow
def test_translate_with_a_server_of_its_own_leaves_nothing_running(
    test_model: Path, tmp_path: Path
) -> None:
    config = tmp_path / "tolk.yaml"
    model = model_config("demo", test_model, languages=["en", "de"])
    config.write_text(yaml.safe_dump({"models": [model]}))
    (tmp_path / "notes.txt").write_text("First line.\n\nSecond paragraph here.\n")
    result = run_tolk("translate", "notes.txt", "--to", "de", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (tmp_path / "notes.de.txt").read_text().split("\n")
    assert [bool(line) for line in lines] == [True, False, True, False]
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if any("tolk-translate-" in part for part in p.info["cmdline"] or [])
    ]
    assert leftovers == []
