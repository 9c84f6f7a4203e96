"""gettext PO/POT files through `tolk translate` against the shared real-engine main
server: the catalogue comes back with every entry to translate filled, read back with polib."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.processes import run_tolk
from tests.support.samples.gettext import check, make_po
from tests.support.servers import ServerProcess


def test_tolk_translate_fills_a_catalogue_with_the_real_engine(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    source = make_po()
    (tmp_path / "app.pot").write_text(source, encoding="utf-8")
    done = run_tolk("translate", "app.pot", "--to", "de", "--url", main_server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"app.pot -> app.de.pot", done.stderr), done.stderr[-2000:]
    check(source, (tmp_path / "app.de.pot").read_text(encoding="utf-8"))
