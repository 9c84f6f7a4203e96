"""The sample files `tolk bench documents --only-files` sends (tolk.bench.documents): one of
every kind tolk translates is shipped. The command itself: tests/edge/test_bench_files.py."""

from __future__ import annotations

from tolk.bench.documents import samples
from tolk.translation.files import FILE_TYPES, file_type


def test_a_sample_of_every_kind_is_shipped() -> None:
    kinds = {file_type(name).kind for name in samples()}
    assert kinds == {t.kind for t in FILE_TYPES.values()}
