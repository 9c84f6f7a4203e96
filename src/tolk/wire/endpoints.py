"""Which API a request speaks, so one server answers tolk's, DeepL's, LibreTranslate's and
OpenAI's.

DeepL's API lives under `/v2/`, OpenAI's (chat completions that translate) under `/v1/`.
LibreTranslate's is served at the server's root, as LibreTranslate itself serves it, so an
app's URL setting is just the server's address; two
of its paths are also tolk's own (`POST /translate`, `POST /detect`), told apart by the
request: a LibreTranslate client sends `q` (in a JSON body, a form, or the query string) or
a form, tolk's clients JSON with `text`. A LibreTranslate request is routed to the
`/libretranslate/...` route of the same name, which OpenAPI documents.

The API is recorded in the request's state (errors are shaped by it: tolk.wire.errors),
and LibreTranslate's answers carry its CORS headers (browser clients depend on them).
Pure ASGI, like the other middleware: bodies stream through, disconnects reach handlers.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tolk.wire.errors import Api

LIBRETRANSLATE_PATHS = frozenset(
    {"/languages", "/frontend/settings", "/translate_file", "/suggest", "/spec"}
)
SHARED_PATHS = frozenset({"/translate", "/detect"})
# The file uploads of tolk's, DeepL's and LibreTranslate's APIs: their bodies may be as large
# as max_file_bytes (server and proxy alike).
FILE_PATHS = frozenset({"/translate/file", "/v2/document", "/translate_file"})
# DeepL's glossary writes: dictionaries of up to 10 MB, so bodies as large as a file's.
GLOSSARY_PATHS = re.compile(r"^/v[23]/glossaries(?:/|$)")
LIBRETRANSLATE_PREFIX = "/libretranslate"
# The translation apps' own APIs (tolk.server.api.deeplx and .extensions): DeepLX's, Immersive
# Translate's and KISS Translator's, each under a prefix of its own.
APP_PREFIXES = ("/deeplx/", "/immersive/", "/kiss/")
APP_TRANSLATING_PATHS = frozenset(
    {
        "/deeplx/translate",
        "/deeplx/v1/translate",
        "/deeplx/v2/translate",
        "/immersive/translate",
        "/kiss/translate",
    }
)
# Translation requests: refused first when the server is full (server.middleware.Shedding).
TRANSLATING_PATHS = FILE_PATHS | {
    "/translate",
    "/v2/translate",
    "/v2/write/rephrase",
    "/v2/write/correct",
    "/libretranslate/translate",
    "/v1/chat/completions",
    *APP_TRANSLATING_PATHS,
}
# What the servers answer and a proxy forwards (anything else is the proxy's own or its 404).
UPSTREAM_PATHS = frozenset(
    {"/", "/detect", "/translate/file", *SHARED_PATHS, *LIBRETRANSLATE_PATHS}
)
UPSTREAM_PREFIXES = (
    "/v1/",
    "/v2/",
    "/v3/",
    "/download_file/",
    "/static/",
    LIBRETRANSLATE_PREFIX + "/",
    *APP_PREFIXES,
)
# Uploads whose answer names a document made on the server that answered (a proxy keeps
# that server for the document's later calls, STICKY).
DOCUMENT_UPLOADS = frozenset({"/v2/document", "/translate_file"})
# A document made by one server and fetched later (DeepL's jobs, LibreTranslate's files): the
# group is its id, which a proxy keeps on the server that made it.
STICKY = re.compile(r"^/(?:v2/document/|download_file/)([0-9A-Fa-f]+)")


def takes_large_bodies(path: str) -> bool:
    """Paths whose bodies may be as large as max_file_bytes (server and proxy alike): file
    uploads and glossaries; every other body is held to max_body_bytes."""
    return path in FILE_PATHS or GLOSSARY_PATHS.match(path) is not None


def served_by_upstreams(path: str) -> bool:
    """Paths the servers answer and a proxy forwards."""
    return path in UPSTREAM_PATHS or path.startswith(UPSTREAM_PREFIXES)


FORMS = (b"application/x-www-form-urlencoded", b"multipart/form-data")
_NAMES_Q = re.compile(rb'"q"\s*:')

# LibreTranslate's after_request headers, on every one of its responses. Not starlette's
# CORSMiddleware: that one answers only requests that carry an Origin (and preflights only
# with Access-Control-Request-Method), while LibreTranslate sends these on every response
# and answers any OPTIONS with them, which its clients and its own API tests expect.
CORS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-headers", b"Authorization, Content-Type"),
    (b"access-control-expose-headers", b"Authorization"),
    (b"access-control-allow-methods", b"GET, POST"),
    (b"access-control-allow-credentials", b"true"),
    (b"access-control-max-age", b"1728000"),
]


def api_of_path(path: str) -> Api | None:
    """The API a path belongs to; None for the two shared paths (the request tells)."""
    if path.startswith(("/v2/", "/v3/")):
        return "deepl"
    if path.startswith("/v1/"):
        return "openai"
    if path.startswith("/deeplx/"):
        return "deeplx"
    if (
        path in LIBRETRANSLATE_PATHS
        or path.startswith("/download_file/")
        or path.startswith(LIBRETRANSLATE_PREFIX + "/")
    ):
        return "libretranslate"
    return None if path in SHARED_PATHS else "tolk"


def is_libretranslate(media: bytes, query_has_q: bool, body: bytes | None) -> bool:
    """On a shared path: a form, `q` in the query, a JSON object with `q`, or nothing at all
    (no body, no content type: LibreTranslate's own API tests post so to see its 400;
    tolk's clients send JSON)."""
    if media in FORMS or query_has_q:
        return True
    return body is not None and (_has_q(body) or (not body and not media))


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value)
    return b""


def _query_has_q(scope: Scope) -> bool:
    query = bytes(scope.get("query_string", b""))
    return any(part.split(b"=", 1)[0] == b"q" for part in query.split(b"&"))


class ApiDispatch:
    """Outside the body-size limit (so its 413s are shaped for the right API); it reads a
    JSON body ahead only for the two shared paths, and only one of a declared size within
    `max_peek` bytes (a larger one meets the limit anyway)."""

    def __init__(self, app: ASGIApp, max_peek: int) -> None:
        self.app = app
        self.max_peek = max_peek

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        api: Api = api_of_path(path) or "tolk"
        if path in SHARED_PATHS and scope["method"] in ("POST", "OPTIONS"):
            media = _header(scope, b"content-type").split(b";")[0].strip().lower()
            if scope["method"] == "OPTIONS" or is_libretranslate(media, _query_has_q(scope), None):
                api = "libretranslate"
            else:
                body, receive = await self._peek(scope, receive)
                if is_libretranslate(media, False, body):
                    api = "libretranslate"
            if api == "libretranslate":
                scope["path"] = LIBRETRANSLATE_PREFIX + path
                scope["raw_path"] = scope["path"].encode()
        scope.setdefault("state", {})["api"] = api
        if api != "libretranslate":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":  # a browser's preflight
            await send({"type": "http.response.start", "status": 200, "headers": CORS})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *CORS]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _peek(self, scope: Scope, receive: Receive) -> tuple[bytes | None, Receive]:
        declared = _header(scope, b"content-length")
        if not declared and not _header(scope, b"transfer-encoding"):
            return b"", receive  # HTTP/1.1: neither header, no body
        if not declared.isdigit() or int(declared) > self.max_peek:
            return None, receive
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client left while sending: hand on what there is, then the disconnect.
                pending: list[Message] = [message]
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                pending = []
                break
        body = b"".join(chunks)
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
        replay += pending

        async def replayed() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        return body, replayed


def _has_q(body: bytes) -> bool:
    """Whether a JSON body is an object with a `q` member (cheap test first: tolk's own
    bodies rarely contain the bytes `"q"` at all). A body nested too deep to decode is
    LibreTranslate's if it names a `q` member anywhere: refused in its shape."""
    if b'"q"' not in body:
        return False
    try:
        data = json.loads(body)
    except ValueError:
        return False
    except RecursionError:
        return _NAMES_Q.search(body) is not None
    return isinstance(data, dict) and "q" in data
