"""Which upstream a request may go to: its language pair and model, read from the body
without re-serialising it (JSON, form or query, as each API sends it), the paths only
upstreams serve, and the documents that must be fetched where they were made (sticky)."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs

import langcodes
from fastapi import Request
from starlette.formparsers import MultiPartException
from starlette.types import Message

from tolk.errors import InvalidLanguage
from tolk.languages import lang, request_lang
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
    servers' APIs; None when it is not a well-formed request naming one (an upstream will
    say what is wrong, or find the pair in it: a chat's prompt)."""
    data = _fields(body, media, query)
    return None if data is None else route_of_fields(data)


# A chat completion's model named `tolk-<target>` or `tolk-<source>-<target>` carries its pair
# (tolk.server.api.openai); `tolk` alone is the server's first model.
CHAT_ALIAS = "tolk"


def route_of_fields(data: dict[str, Any]) -> Route | None:
    """The pair and model of a request's parameters, read by each API's names: tolk's,
    DeepL's, DeepLX's and Immersive Translate's `source_lang`/`target_lang`, LibreTranslate's
    `source`/`target`, KISS Translator's `from`/`to`; a chat completion's model name
    (`tolk-en-de`) or its `translation_options` (Qwen-MT's: codes or English names)."""
    model = data.get("model")
    if "messages" in data:
        return _chat_route(data, model if isinstance(model, str) else None)
    if "target_lang" in data:
        source, target, read = data.get("source_lang"), data["target_lang"], request_lang
    elif "to" in data:
        source, target, read = data.get("from"), data["to"], request_lang
    else:
        # LibreTranslate's fields take its aliases (zh, zt, pb, iw, no), as the server reads them.
        source, target, read = data.get("source"), data.get("target"), from_libretranslate
    if not isinstance(target, str) or not (source is None or isinstance(source, str)):
        return None
    try:
        s = None
        if source is not None and source.strip().lower() not in ("", "auto"):
            s = read(source, "source").tag
        t = read(target, "target").tag
    except InvalidLanguage:
        return None
    return Route(s, t, model if isinstance(model, str) else None)


def _chat_route(data: dict[str, Any], model: str | None) -> Route | None:
    """A chat completion's pair: its model's name (`tolk-<target>`, `tolk-<source>-<target>`),
    else its `translation_options`; a language no code or name resolves gives no pair (the
    upstream explains). A served model named `tolk-...` would be read as a pair here."""
    if model is not None and model.startswith(CHAT_ALIAS + "-"):
        tags = [_language(part) for part in model[len(CHAT_ALIAS) + 1 :].split("-")]
        if len(tags) > 2 or None in tags:
            return None
        return Route(tags[0] if len(tags) == 2 else None, str(tags[-1]), None)
    options = data.get("translation_options")
    if not isinstance(options, dict):
        return None
    source, target = options.get("source_lang"), options.get("target_lang")
    if not isinstance(target, str) or not (source is None or isinstance(source, str)):
        return None
    auto = source is None or source.strip().lower() in ("", "auto")
    s, t = None if auto else _language(str(source)), _language(target)
    if t is None or (s is None and not auto):
        return None
    return Route(s, t, None if model == CHAT_ALIAS else model)


@lru_cache(maxsize=1024)
def _language(name: str) -> str | None:
    """The tag of a code (`de`, `zh-Hans`) or an English name (`German`, `Simplified
    Chinese`), as Qwen-MT's `translation_options` name languages; None for neither."""
    try:
        return request_lang(name, "target_lang").tag
    except InvalidLanguage:
        pass
    if not 0 < len(name) <= 64:
        return None
    try:
        return lang(langcodes.find(name).to_tag()).tag
    except (LookupError, ValueError):
        return None


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
