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
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidRequest, NotFound, UnsupportedLanguagePair
from tolk.languages import lang
from tolk.server.api.libretranslate_bodies import (
    FILE_FIELD,
    LibreTranslateDetect,
    LibreTranslateFile,
    LibreTranslateTranslate,
)
from tolk.server.documents import documents_of
from tolk.server.gateway import (
    ConfigDep,
    GatewayDep,
    PoolDep,
    StoreDep,
    Upload,
    attachment,
)
from tolk.server.params import (
    FORM_MEDIA,
    JSON_MEDIA,
    MULTIPART_MEDIA,
    ParamsDep,
    openapi_body,
)
from tolk.translation.files import FILE_TYPES
from tolk.translation.request import GlossaryRequest, TranslationRequest
from tolk.translation.results import Translation
from tolk.wire import codes
from tolk.wire.endpoints import LIBRETRANSLATE_PREFIX

LIBRETRANSLATE_TAG = "LibreTranslate API"
router = APIRouter(tags=[LIBRETRANSLATE_TAG])
WEBLATE_PLACEABLE = re.compile(r"\[X\d+X\]")
MEDIA = (JSON_MEDIA, FORM_MEDIA, MULTIPART_MEDIA)


def _detected(translation: Translation, index: int) -> dict[str, Any]:
    detection = translation.detections[index]
    return {
        "confidence": round(detection.confidence * 100, 1),
        "language": codes.libretranslate_code(detection.language),
    }


@router.post(
    "/libretranslate/translate",
    summary="LibreTranslate: translate (served at POST /translate for requests with `q`)",
    openapi_extra=openapi_body(LibreTranslateTranslate, media=MEDIA),
)
async def translate(
    request: Request, params: ParamsDep, gateway: GatewayDep, pool: PoolDep
) -> Response:
    body = LibreTranslateTranslate.of(params, pool=pool)
    source, target = body.source_lang, body.target_lang
    caller = gateway.caller(body.api_key or None)
    texts = body.texts
    asked = TranslationRequest(
        target_lang=target.tag,
        deadline=gateway.deadline(),
        source_lang=source.tag if source else None,
        format=body.format,
        # Weblate's placeables ([X12X]) come back exactly as sent.
        glossary=GlossaryRequest(
            do_not_translate=sorted({m for t in texts for m in WEBLATE_PLACEABLE.findall(t)})
        ),
        alternatives=body.alternatives,
        memory=gateway.memory_mode(request),
    )
    try:
        result = await gateway.translate(request, caller, texts, asked)
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
    answer = JSONResponse(
        _translated(
            result,
            listed=isinstance(body.q, list),
            detected=source is None,
            alternatives=body.alternatives > 0,
        )
    )
    answer.headers.update(gateway.headers(result))
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
    openapi_extra=openapi_body(LibreTranslateDetect, media=MEDIA),
)
async def detect(params: ParamsDep, gateway: GatewayDep) -> JSONResponse:
    body = LibreTranslateDetect.of(params)
    found = gateway.detect(body.texts, gateway.caller(body.api_key or None))
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
async def languages(pool: PoolDep) -> JSONResponse:
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
async def frontend_settings(pool: PoolDep, store: StoreDep, config: ConfigDep) -> JSONResponse:
    target = next(iter(pool.targets), "en")
    return JSONResponse(
        {
            "charLimit": config.server.max_request_chars,
            "frontendTimeout": 500,
            "apiKeys": store.has_keys(),
            "keyRequired": config.access.require_key,
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
    openapi_extra=openapi_body(
        LibreTranslateFile, media=(MULTIPART_MEDIA,), extra=FILE_FIELD, required=["file"]
    ),
)
async def translate_file_route(
    request: Request, params: ParamsDep, gateway: GatewayDep, pool: PoolDep
) -> Response:
    file = params.file("file")
    if file is None:
        raise InvalidRequest("Invalid request: missing file parameter", field="file")
    body = LibreTranslateFile.of(params, pool=pool)
    caller = gateway.caller(body.api_key or None)
    upload = Upload.of(
        file,
        unsupported=lambda _: InvalidRequest(
            "Invalid request: file format not supported", field="file"
        ),
    )
    source, target = body.source_lang, body.target_lang
    asked = TranslationRequest(
        target_lang=target.tag,
        deadline=gateway.deadline(document=True),
        source_lang=source.tag if source else None,
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate_file(request, caller, upload, asked)
    name = result.name(upload.filename)  # a PDF comes back as a .docx
    doc = documents_of(request).put(caller.owner, name, result)
    url = f"{str(request.base_url).rstrip('/')}/download_file/{doc.id}.{quote(name)}"
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
