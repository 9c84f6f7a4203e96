"""ASGI helpers every tolk HTTP process (server and proxy) shares."""

from __future__ import annotations

from starlette.requests import Request

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
