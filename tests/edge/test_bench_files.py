"""`tolk bench documents --only-files` against the in-process server over stand-in engines
(edge_server): a sample file of each kind tolk translates, through /translate/file alone and
all at once, its translation kept beside the report. The command's shape and the samples'
round trip; what the times are on a real model is in docs/benchmarks.md."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import tolk
from tests.support.servers import InProcessServer
from tolk.bench.documents import samples
from tolk.translation.files import file_type


def test_bench_documents_translates_each_sample_alone_and_together(
    edge_server: InProcessServer, tmp_path: Path
) -> None:
    result = tolk(
        "bench", "documents", "--url", edge_server.url, "--only-files", "--out", "report",
        cwd=tmp_path,
    )  # fmt: skip
    assert "at once, into de" in result.stdout
    report = json.loads((tmp_path / "report" / "documents.json").read_text())
    assert "load" not in report
    files = report["files"]
    assert files["errors"] == 0, [(r["file"], r["together_status"]) for r in files["rows"]]
    shipped = samples()
    assert [r["file"] for r in files["rows"]] == list(shipped)
    for row in files["rows"]:
        assert row["status"] == row["together_status"] == 200
        assert all(isinstance(code, str) for code in row["flagged"])  # X-Tolk-Warnings' codes
        assert row["alone_s"] > 0
        assert row["together_s"] > 0
    assert files["together_wall_s"] > 0
    kept = {p.name: p.read_bytes() for p in (tmp_path / "report" / "translated").iterdir()}
    expected = {
        f"{Path(name).stem}.de{Path(file_type(name).translated_name(name)).suffix}"
        for name in shipped
    }
    assert set(kept) == expected
    assert "paper.de.docx" in kept  # the PDF's translation is a Word document
    for name, content in shipped.items():
        translated = f"{Path(name).stem}.de{Path(file_type(name).translated_name(name)).suffix}"
        assert kept[translated] != content, name
