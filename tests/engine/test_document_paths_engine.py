"""Every kind of file through `tolk translate` against the shared real-engine main server,
with the sample file of each kind (src/tolk/data/samples): each comes back a readable file of
the right kind under the right name. The HTTP document paths: tests/edge/test_document_paths.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.document_paths import readable, translated_name
from tests.support.processes import run_tolk
from tests.support.servers import ServerProcess
from tolk.bench.documents import samples


def test_tolk_translate_every_kind_with_the_real_engine(
    main_server: ServerProcess, tmp_path: Path
) -> None:
    shipped = samples()
    for name, content in shipped.items():
        (tmp_path / name).write_bytes(content)
    done = run_tolk(
        "translate", *shipped, "--from", "en", "--to", "de", "--url", main_server.url,
        "--out-dir", "out", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name, content in shipped.items():
        stem, suffix = Path(name).stem, Path(translated_name(name)).suffix
        translated = (tmp_path / "out" / f"{stem}.de{suffix}").read_bytes()
        assert translated != content, name
        readable(f"{stem}{suffix}", translated)
