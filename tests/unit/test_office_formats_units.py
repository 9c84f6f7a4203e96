"""PowerPoint (.pptx) and Excel (.xlsx) without a server: both types are registered. The
files through the server: tests/edge/test_office_formats.py."""

from __future__ import annotations

from tests.support.samples.office import PPTX, XLSX
from tolk.translation.files import FILE_TYPES


def test_both_types_are_registered() -> None:
    assert FILE_TYPES[".pptx"].media_type == PPTX
    assert FILE_TYPES[".xlsx"].media_type == XLSX
    assert not FILE_TYPES[".pptx"].text
    assert not FILE_TYPES[".xlsx"].text
    assert FILE_TYPES[".md"].text
