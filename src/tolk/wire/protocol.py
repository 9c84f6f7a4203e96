"""uvicorn's HTTP protocol with a deadline for each request's head (request line and headers).

uvicorn closes a keep-alive connection that stays idle, but once a byte has arrived it waits
for the rest of the headers for ever: 14 connections sending a byte a second (or nothing
after connecting) were all still open after 30 s, each holding a slot of the connection limit
(`server.max_connections`). Here every connection, and every further request on it, must
finish its head within `header_timeout` seconds or is closed: tolk's servers and its proxy
alike. The body has its own deadline (the server's BodyTimeout middleware, the proxy's
read_incoming). Written here because uvicorn has no such
setting; it subclasses uvicorn's httptools protocol at its documented hooks (`http=` takes a
protocol class).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class TimedHead(HttpToolsProtocol):
    """Armed when a connection opens and when a request begins (a pipelined one too),
    disarmed when its headers are in; between requests uvicorn's keep-alive timeout rules."""

    header_timeout = 10.0  # set per server by timed_head()
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def timed_head(seconds: float) -> type[TimedHead]:
    """The protocol class for a server whose requests' heads must arrive within `seconds`."""
    return type("TimedHead", (TimedHead,), {"header_timeout": seconds})
