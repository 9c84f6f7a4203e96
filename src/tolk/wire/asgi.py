"""ASGI helpers every tolk HTTP process (server and proxy) shares."""

from __future__ import annotations

import uuid

from starlette.requests import Request
from starlette.types import Scope

# nginx's status for a request whose client went away before the answer: what the access
# log and the metrics record (no client sees it).
CLIENT_CLOSED = 499


async def wait_for_disconnect(request: Request) -> None:
    # The body has been read by now, so the next ASGI message is the disconnect (uvicorn
    # delivers it when the client closes the connection). This is vLLM's own approach
    # (vllm/entrypoints/utils.py): no polling.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (`name` lower-case, as ASGI gives them), or None."""
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def request_id_for(scope: Scope) -> str:
    """The client's X-Request-ID, or a new one: what every response of a tolk process carries
    and its upstreams and logs are given."""
    return header(scope, b"x-request-id") or uuid.uuid4().hex
