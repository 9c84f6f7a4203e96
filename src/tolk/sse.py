"""Server-Sent Events as tolk's `/translate` stream uses them: named events whose data is one
line of JSON. Written by the server, read by `tolk translate` and `tolk bench documents`.

By hand because the format is two lines per event; the SSE client libraries are bound to
one HTTP client each (httpx-sse, aiohttp-sse-client), and tolk reads the stream from both.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any


def event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, Any]]:
    """(name, data) of each event in a stream's lines."""
    name = "message"
    async for line in lines:
        line = line.rstrip("\r\n")
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: ") :])
