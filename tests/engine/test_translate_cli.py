"""`tolk translate FILE... --to de` through a running server: the shared real-engine main
server."""

from __future__ import annotations

import io
import re
from pathlib import Path

import docx
import openpyxl  # type: ignore[import-untyped]

from tests.support.documents import DOCUMENTS, README, cue_heads, make_docx, without_emphasis
from tests.support.processes import run_tolk
from tests.support.servers import ServerProcess
from tolk.translation.markdown_format import structure


def test_translate_files_through_a_running_server(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    srt = (DOCUMENTS / "talk.srt").read_text(encoding="utf-8")
    (tmp_path / "talk.srt").write_text(srt, encoding="utf-8")
    (tmp_path / "report.docx").write_bytes(make_docx())
    out = tmp_path / "out"
    result = run_tolk(
        "translate", "README.md", "talk.srt", "report.docx", "--to", "de", "--url",
        main_server.url, "--out-dir", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"README.md -> README.de.md .* \d+/\d+ segments", result.stderr)
    translated = (out / "README.de.md").read_text(encoding="utf-8")
    # The random model loses placeholders: emphasis may go (flagged), nothing else.
    assert without_emphasis(structure(translated)) == without_emphasis(structure(README))
    assert translated != README
    assert cue_heads((out / "talk.de.srt").read_text(encoding="utf-8")) == cue_heads(srt)
    report = docx.Document(io.BytesIO((out / "report.de.docx").read_bytes()))
    assert len(report.paragraphs) == len(docx.Document(io.BytesIO(make_docx())).paragraphs)

    # A spreadsheet goes as a file, as a .docx does: its text cells translated, the rest kept.
    book = openpyxl.Workbook()
    book.worksheets[0].append(["A quiet morning in the mountains.", 42, "=B1*2"])
    sheet = io.BytesIO()
    book.save(sheet)
    (tmp_path / "sheet.xlsx").write_bytes(sheet.getvalue())
    done = run_tolk("translate", "sheet.xlsx", "--to", "de", "--url", main_server.url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    translated_book = openpyxl.load_workbook(tmp_path / "sheet.de.xlsx")
    row = next(translated_book.worksheets[0].iter_rows(values_only=True))
    assert row[0] != "A quiet morning in the mountains."
    assert row[1:] == (42, "=B1*2")

    (tmp_path / "slides.key").write_bytes(b"PK")
    refused = run_tolk(
        "translate", "slides.key", "--to", "de", "--url", main_server.url, cwd=tmp_path
    )
    assert refused.returncode == 2
    assert ".docx" in refused.stderr
