"""What the file-format tests share: a file posted to /translate/file, and a zip bomb."""

from __future__ import annotations

import io
import zipfile

import httpx


async def post_file(
    edge: httpx.AsyncClient, name: str, content: bytes, target: str = "de"
) -> httpx.Response:
    """`content` named `name` through tolk's /translate/file, from English into `target`."""
    return await edge.post(
        "/translate/file",
        files={"file": (name, content)},
        data={"source_lang": "en", "target_lang": target},
    )


def zip_bomb(member: str, inflated: int, first: dict[str, bytes] | None = None) -> bytes:
    """A zip whose `member` inflates to `inflated` bytes of spaces (a few KB per 64 MiB
    deflated), after the small members `first` (a container's mimetype, its manifest: what
    makes it look like the kind it claims; a `mimetype` is stored, as the formats require)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, content in (first or {"[Content_Types].xml": b"<Types/>"}).items():
            stored = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(name, content, compress_type=stored)
        with archive.open(member, "w", force_zip64=True) as stream:
            chunk = b" " * (1 << 22)
            for _ in range(inflated >> 22):
                stream.write(chunk)
    return out.getvalue()
