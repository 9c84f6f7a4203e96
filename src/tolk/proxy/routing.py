"""Which upstream a request may go to: its language pair and model, read from the body
without re-serialising it (JSON, form or query, as each API sends it), the paths only
upstreams serve, and the documents that must be fetched where they were made (sticky)."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request
from starlette.formparsers import MultiPartException
from starlette.types import Message

from tolk.errors import InvalidLanguage
from tolk.languages import request_lang
from tolk.wire.bodies import InvalidInput, loads
from tolk.wire.codes import from_libretranslate


@dataclass(frozen=True)
class Route:
    source: str | None  # None: the upstream detects it ("auto", or not given)
    target: str
    model: str | None


@dataclass(frozen=True)
class Target:
    """Where an attempt goes on the upstream, and the request headers passed on."""

    method: str = "POST"
    path: str = "/translate"  # with the query string, if any
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


TRANSLATE = Target()


def _fields(body: bytes, media: str, query: str) -> dict[str, Any] | None:
    """A request's parameters, as the server reads them: a JSON object, or a urlencoded
    form (multipart is parsed by `multipart_fields`), then the query string."""
    fields: dict[str, Any] = {k: v[0] for k, v in parse_qs(query).items()}
    if media == "application/x-www-form-urlencoded":
        fields |= {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        return fields
    if not body.strip():
        return fields
    try:
        data = loads(body)
    except (ValueError, InvalidInput):  # not JSON, too deep, a lone surrogate
        return None
    return {**fields, **data} if isinstance(data, dict) else None


def route_of(body: bytes, media: str = "application/json", query: str = "") -> Route | None:
    """The language pair (normalised tags) and model of a translate body of any of the
    three APIs (tolk and DeepL: source_lang/target_lang; LibreTranslate: source/target);
    None when it is not a well-formed request (an upstream will say what is wrong)."""
    data = _fields(body, media, query)
    return None if data is None else route_of_fields(data)


def route_of_fields(data: dict[str, Any]) -> Route | None:
    """The pair and model of a request's parameters, read by any of the three APIs' names."""
    source = data.get("source_lang", data.get("source"))
    target = data.get("target_lang", data.get("target"))
    model = data.get("model")
    if not isinstance(target, str) or not (source is None or isinstance(source, str)):
        return None
    # LibreTranslate's fields take its aliases (zh, zt, pb, iw, no), as the server reads them.
    read = from_libretranslate if "target_lang" not in data else request_lang
    try:
        s = None
        if source is not None and source.strip().lower() not in ("", "auto"):
            s = read(source, "source").tag
        t = read(target, "target").tag
    except InvalidLanguage:
        return None
    return Route(s, t, model if isinstance(model, str) else None)


MAX_STICKY = 10_000


async def multipart_fields(body: bytes, content_type: str) -> dict[str, Any]:
    """A multipart body's text fields (the file parts are not needed to route); none when
    the body cannot be read as one (no boundary, a broken part header): the upstream that
    gets it says what is wrong, in its API's shape."""

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", content_type.encode())],
    }
    try:
        form = await Request(scope, receive).form()
    except MultiPartException:
        return {}
    return {k: v for k, v in form.multi_items() if isinstance(v, str)}


def hold_sticky(
    payload: bytes, upstream: str, sticky: OrderedDict[str, str], base_url: str
) -> bytes:
    """A document stays on the upstream that made it: remember which, and give the client
    LibreTranslate's download URL through the proxy."""
    try:
        data = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(data, dict):
        return payload
    url = data.get("translatedFileUrl")
    doc_id = data.get("document_id")
    if isinstance(url, str):
        name = url.rsplit("/download_file/", 1)[-1]
        doc_id = name.split(".", 1)[0]
        data["translatedFileUrl"] = f"{base_url.rstrip('/')}/download_file/{name}"
        payload = json.dumps(data).encode()
    if isinstance(doc_id, str):
        sticky[doc_id.upper()] = upstream
        while len(sticky) > MAX_STICKY:
            sticky.popitem(last=False)
    return payload
