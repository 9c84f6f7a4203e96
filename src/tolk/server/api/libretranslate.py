"""LibreTranslate's API (as LibreTranslate 1.9 serves it), at the server's root.

`POST /translate` and `POST /detect` share their paths with tolk's own API; a request with
`q` (or a form) is routed here by tolk.wire.endpoints, to the `/libretranslate/...` paths
below. Parameters come from a JSON body, a urlencoded or multipart form, or the query string.
Errors are `{"error": "..."}` (400, 403, 429; tolk.wire.errors shapes them).

Differences from LibreTranslate, on purpose: `alternatives` are sampled outputs of the
model (tolk.translation.service), for HTML too (LibreTranslate has none for HTML), at most
`server.max_alternatives` a text; `detectedLanguage` of a list is per text (1.9.6
repeats one detection); LibreTranslate's formatting fix-ups (copying final punctuation and
case) are not made; `/suggest` answers 403 "disabled", as LibreTranslate does by default.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidLanguage, InvalidRequest, NotFound, UnsupportedLanguagePair
from tolk.languages import Lang, lang
from tolk.server.access import Caller
from tolk.server.calls import Calls, CallsDep, attachment
from tolk.server.documents import documents_of
from tolk.server.params import Params, read_params
from tolk.translation.files import FILE_TYPES, file_type
from tolk.translation.request import GlossaryRequest, TranslationRequest
from tolk.translation.results import Translation
from tolk.wire import codes
from tolk.wire.endpoints import LIBRETRANSLATE_PREFIX

LIBRETRANSLATE_TAG = "LibreTranslate API"
router = APIRouter(tags=[LIBRETRANSLATE_TAG])
WEBLATE_PLACEABLE = re.compile(r"\[X\d+X\]")
FORM_BODY: dict[str, Any] = {
    "requestBody": {
        "content": {
            media: {"schema": {"type": "object", "properties": {"q": {}, "api_key": {}}}}
            for media in (
                "application/json",
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            )
        }
    }
}


def _caller(calls: Calls, params: Params) -> Caller:
    """LibreTranslate's `api_key` (an empty one is no key, as Weblate sends it)."""
    return calls.access.caller(params.text("api_key") or None)


def _required(params: Params, name: str) -> Any:
    value = params.one(name)
    if value is None or value == "" or value == []:
        raise InvalidRequest(f"Invalid request: missing {name} parameter", field=name)
    return value


def _count(value: Any, name: str) -> int:
    """A count as LibreTranslate reads it (Python's int() of the value; below 0 is 0)."""
    try:
        return max(0, int(value if value is not None else 0))
    except (TypeError, ValueError):
        raise InvalidRequest(
            f"Invalid request: {name} parameter is not a number", field=name
        ) from None


def _language(calls: Calls, code: Any, field: str) -> Lang | None:
    """A LibreTranslate code as a served language; None for `auto`."""
    if not isinstance(code, str):
        raise InvalidRequest(f"Invalid request: {field} must be a string", field=field)
    if field == "source" and code.strip().lower() == "auto":
        return None
    pool = calls.translator.pool
    try:
        parsed = codes.from_libretranslate(code, field)
    except InvalidLanguage as exc:
        raise InvalidLanguage(f"{code} is not supported", field=field) from exc
    known = pool.takes_source(parsed.tag) if field == "source" else pool.gives_target(parsed.tag)
    if not known:
        raise InvalidLanguage(f"{code} is not supported", field=field)
    return parsed


def _pair(calls: Calls, params: Params) -> tuple[Lang | None, Lang]:
    """`source` (None for auto) and `target`, both required, both served."""
    source_code = _required(params, "source")
    target_code = _required(params, "target")
    source = _language(calls, source_code, "source")
    target = _language(calls, target_code, "target")
    assert target is not None
    return source, target


def _detected(translation: Translation, index: int) -> dict[str, Any]:
    detection = translation.detections[index]
    return {
        "confidence": round(detection.confidence * 100, 1),
        "language": codes.libretranslate_code(detection.language),
    }


@router.post(
    "/libretranslate/translate",
    summary="LibreTranslate: translate (served at POST /translate for requests with `q`)",
    openapi_extra=FORM_BODY,
)
async def translate(request: Request, calls: CallsDep) -> Response:
    params = await read_params(request)
    q = _required(params, "q")
    source, target = _pair(calls, params)
    caller = _caller(calls, params)
    texts = q if isinstance(q, list) else [q]
    if not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("Invalid request: q must be a string or a list of strings")
    fmt = params.text("format") or "text"
    if fmt not in ("text", "html"):
        raise InvalidRequest(f"{fmt} format is not supported", field="format")
    alternatives = _count(params.one("alternatives"), "alternatives")
    deadline = calls.deadline()

    # Weblate's placeables ([X12X]) come back exactly as sent.
    placeables = sorted({m for t in texts for m in WEBLATE_PLACEABLE.findall(t)})

    async def work() -> Translation:
        try:
            return await calls.translator.translate(
                texts,
                TranslationRequest(
                    target.tag,
                    deadline,
                    source.tag if source else None,
                    format="html" if fmt == "html" else "text",
                    glossary=GlossaryRequest(do_not_translate=placeables),
                    alternatives=alternatives,
                    memory=calls.memory_mode(request),
                ),
            )
        except UnsupportedLanguagePair as exc:
            to = f"{target.name} ({codes.libretranslate_code(target.tag)})"
            since = (
                f"{source.name} ({codes.libretranslate_code(source.tag)})"
                if source
                else "the detected language (auto)"
            )
            raise UnsupportedLanguagePair(
                f"{to} is not available as a target language from {since}", **exc.details
            ) from exc

    result = await calls.run(request, caller, sum(len(t) for t in texts), work)
    answer = JSONResponse(
        _translated(
            result,
            listed=isinstance(q, list),
            detected=source is None,
            alternatives=alternatives > 0,
        )
    )
    calls.record(request, answer.headers, result, len(texts))
    return answer


def _translated(
    result: Translation, *, listed: bool, detected: bool, alternatives: bool
) -> dict[str, Any]:
    """LibreTranslate's body: one text's fields, or lists of them when `q` was a list."""
    if not listed:
        response: dict[str, Any] = {"translatedText": result.texts[0]}
        if detected:
            response["detectedLanguage"] = _detected(result, 0)
        if alternatives:
            response["alternatives"] = list(result.alternatives[0])
        return response
    response = {"translatedText": result.texts}
    if detected:
        response["detectedLanguage"] = [_detected(result, i) for i in range(len(result.texts))]
    if alternatives:
        response["alternatives"] = [list(a) for a in result.alternatives]
    return response


@router.post(
    "/libretranslate/detect",
    summary="LibreTranslate: detect (served at POST /detect for requests with `q`)",
    openapi_extra=FORM_BODY,
)
async def detect(request: Request, calls: CallsDep) -> JSONResponse:
    params = await read_params(request)
    q = _required(params, "q")
    calls.admit(_caller(calls, params), 0)
    texts = q if isinstance(q, list) else [q]
    found = calls.translator.detect([t for t in texts if isinstance(t, str)])
    # LibreTranslate: candidates sorted by confidence, averaged over a list's texts.
    totals: dict[str, float] = {}
    for detection in found:
        for language, confidence in detection.candidates or ((detection.language, 0.0),):
            code = codes.libretranslate_code(language)
            totals[code] = totals.get(code, 0.0) + confidence
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:3]
    return JSONResponse(
        [{"confidence": round(c / len(found) * 100, 1), "language": lg} for lg, c in ranked]
        or [{"confidence": 0.0, "language": "en"}]
    )


@router.get("/languages", summary="LibreTranslate: languages, each with its targets")
async def languages(calls: CallsDep) -> JSONResponse:
    pool = calls.translator.pool
    out: dict[str, dict[str, Any]] = {}
    for tag in pool.sources:
        for code in codes.libretranslate_codes(tag):
            source = codes.from_libretranslate(code, "source")
            targets = [
                t
                for target in pool.targets
                for t in codes.libretranslate_codes(target)
                if t != code and pool.covers(source.tag, codes.from_libretranslate(t, "target").tag)
            ]
            out.setdefault(
                code, {"code": code, "name": source.name, "targets": list(dict.fromkeys(targets))}
            )
    return JSONResponse(list(out.values()))


@router.get("/frontend/settings", summary="LibreTranslate: settings for web front ends")
async def frontend_settings(calls: CallsDep) -> JSONResponse:
    pool = calls.translator.pool
    target = next(iter(pool.targets), "en")
    return JSONResponse(
        {
            "charLimit": calls.config.server.max_request_chars,
            "frontendTimeout": 500,
            "apiKeys": calls.store.has_keys(),
            "keyRequired": calls.access.require_key,
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": list(FILE_TYPES),
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {
                    "code": codes.libretranslate_code(target),
                    "name": lang(target).name,
                },
            },
        }
    )


@router.post(
    "/translate_file",
    summary="LibreTranslate: translate a file; answers the URL to download it from",
    openapi_extra=FORM_BODY,
)
async def translate_file_route(request: Request, calls: CallsDep) -> Response:
    params = await read_params(request)
    upload = params.file("file")
    if upload is None:
        raise InvalidRequest("Invalid request: missing file parameter", field="file")
    source, target = _pair(calls, params)
    caller = _caller(calls, params)
    filename = PurePath(upload.filename or "").name
    try:
        file_type(filename)
    except Exception as exc:
        raise InvalidRequest("Invalid request: file format not supported", field="file") from exc
    data = await upload.read()
    result = await calls.run(
        request,
        caller,
        lambda: calls.file_characters(filename, data),  # reserved of the quota before
        lambda: calls.document(
            caller, filename, data, source, target, memory=calls.memory_mode(request)
        ),
        charged=lambda done: done.translation.usage.characters,
    )
    doc = documents_of(request).put(caller.owner, filename, result)
    url = f"{str(request.base_url).rstrip('/')}/download_file/{doc.id}.{quote(filename)}"
    return JSONResponse({"translatedFileUrl": url})


@router.get("/download_file/{name}", summary="LibreTranslate: a file /translate_file translated")
async def download_file(name: str, request: Request) -> Response:
    doc_id, _, filename = name.partition(".")
    doc = documents_of(request).get(doc_id)
    if doc is None or doc.result is None or doc.filename != filename:
        raise NotFound("Invalid filename: no such translated file (it may have expired)")
    return attachment(doc.result, filename)


@router.post("/suggest", summary="LibreTranslate: suggestions (disabled on tolk)")
async def suggest() -> JSONResponse:
    return JSONResponse({"error": "Suggestions are disabled on this server."}, status_code=403)


@router.get("/spec", summary="LibreTranslate: this API's OpenAPI document")
async def spec(request: Request) -> JSONResponse:
    """LibreTranslate serves its API's description here (a Swagger document); tolk serves
    the OpenAPI document of its LibreTranslate routes, at the paths clients call them by
    (`/translate`, `/detect`, not the `/libretranslate/...` names tolk's own document
    lists them under)."""
    whole = request.app.openapi()
    paths = {
        path.removeprefix(LIBRETRANSLATE_PREFIX): item
        for path, item in whole["paths"].items()
        if any(LIBRETRANSLATE_TAG in op.get("tags", []) for op in item.values())
    }
    return JSONResponse(
        {
            **whole,
            "info": {**whole["info"], "title": "tolk: LibreTranslate-compatible API"},
            "paths": paths,
        }
    )
