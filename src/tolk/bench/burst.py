"""A lean HTTP/1.1 client for bursts: `tolk bench overload` sends its waves with it.

Written by hand because the client must not be what it measures, and no library is lean
enough here: timed through aiohttp, the same server's refusals of the same waves came out 3x
slower on this 2-core machine (`tolk bench overload --client aiohttp`, docs/benchmarks.md
section 9), aiohttp's own per-request work in the bench process competing with the server
for the cores and counted in every latency.

What it does, and no more: each wave gets its own connections, opened and used once
(`GET /health`) before the wave starts, so neither connecting nor the server's accepting is
timed; every request's bytes are encoded before the clock starts; an answer is read as a
status line, headers, and a body of its Content-Length (what tolk and its proxy send to
these requests). No chunked bodies, redirects, retries or compression; https only as far as
asyncio's streams do TLS.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import CIMultiDict

from tolk.bench.loadgen import record
from tolk.bench.stats import RequestRecord
from tolk.bench.workloads import WorkItem


@dataclass(frozen=True)
class Answer:
    status: int
    headers: CIMultiDict[str]
    body: bytes


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def exchange(self, request: bytes) -> Answer:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
        headers: CIMultiDict[str] = CIMultiDict()
        for line in lines:
            name, _, value = line.partition(":")
            headers.add(name.strip(), value.strip())
        if "content-length" not in headers:
            # tolk's and the proxy's answers to /translate and /health all say their length.
            raise ValueError("an answer without Content-Length (chunked?) is not read here")
        body = await self.reader.readexactly(int(headers["content-length"]))
        return Answer(int(status_line.split(" ", 2)[1]), headers, body)

    def close(self) -> None:
        self.writer.close()


class Burst:
    """Requests to one server, sent at the same moment, each on its own open connection."""

    def __init__(self, url: str, timeout: float = 600.0) -> None:
        parts = urlsplit(url)
        self.timeout = timeout
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")

    def get(self, path: str) -> bytes:
        return (
            f"GET {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n"
        ).encode()

    def post(self, path: str, body: object) -> bytes:
        data = json.dumps(body).encode()
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        return head.encode() + data

    async def _open(self, n: int) -> list[Connection]:
        async def one() -> Connection:
            reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.tls)
            connection = Connection(reader, writer)
            await connection.exchange(self.get("/health"))  # accepted and used once
            return connection

        return list(await asyncio.gather(*(one() for _ in range(n))))

    async def send(self, requests: Sequence[bytes]) -> list[tuple[float, Answer | str]]:
        """Each request on its own connection, all at once: (latency, answer or the
        exception's name) per request, in order."""
        connections = await self._open(len(requests))

        async def timed(connection: Connection, request: bytes) -> tuple[float, Answer | str]:
            started = time.monotonic()
            try:
                async with asyncio.timeout(self.timeout):
                    answer: Answer | str = await connection.exchange(request)
            except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
                answer = type(exc).__name__
            return time.monotonic() - started, answer

        try:
            return list(
                await asyncio.gather(
                    *(timed(c, r) for c, r in zip(connections, requests, strict=True))
                )
            )
        finally:
            for connection in connections:
                connection.close()

    async def translations(
        self, items: Sequence[WorkItem], extra: Sequence[bytes] = ()
    ) -> tuple[list[RequestRecord], list[tuple[float, Answer | str]]]:
        """POST /translate for each item and, at the same moment, the `extra` requests:
        the items' records, and the extra requests' latencies and answers."""
        requests = [self.post("/translate", item.body()) for item in items]
        answers = await self.send([*requests, *extra])
        records = [
            record(0.0, latency, answer.status, answer.headers, answer.body, item)
            if isinstance(answer, Answer)
            else RequestRecord(0.0, latency, 0, answer, chars_in=len(item.text))
            for item, (latency, answer) in zip(items, answers, strict=False)
        ]
        return records, answers[len(items) :]
