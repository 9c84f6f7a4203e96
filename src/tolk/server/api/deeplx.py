"""DeepLX's API (OwO-Network/DeepLX, the self-hosted DeepL front end many translation apps
can call: KISS Translator, Pot, Zotero PDF-Translate, Read Frog, Immersive Translate, Bob), at
`/deeplx/...`: an app's "DeepLX URL" setting is `http://tolk:8000/deeplx/translate`.

`POST /deeplx/translate` (and `/deeplx/v1/translate`, DeepLX's Pro path, the same here) takes
`{"text", "source_lang", "target_lang", "tag_handling"}` with DeepL's upper-case codes (`DE`,
`EN-US`, `ZH-HANS`; source `auto` or absent: detected) and answers `{"code": 200, "id",
"data", "alternatives": [], "source_lang", "target_lang", "method": "tolk"}`: `source_lang`
is the source's upper-case DeepL code (detected, as DeepLX detects it), `target_lang` is
echoed as sent (as DeepLX does; KISS compares the two to skip a text already in the target
language). `POST /deeplx/v2/translate` takes DeepL's `{text: [...], target_lang}` (JSON or a
form) and answers `{"translations": [{"detected_source_language", "text"}]}`, one per text
(DeepLX joins the texts with newlines into one translation; DeepL's clients expect one each).

Errors are DeepLX's `{"code": <status>, "message"}` with that HTTP status (DeepLXRoute): 400
for a malformed request or an unknown language, 401 for a missing or wrong key (DeepLX's
"Invalid access token"), 404 "No text to translate" for an empty text (DeepLX's), and tolk's
statuses otherwise (413, 429, 503 with Retry-After, 504). The X-Tolk-Error-Code header
carries tolk's code, for the proxy. Refusals made before a route is reached (a body over
`max_body_bytes`, a full server shedding load, an unknown path under `/deeplx/`) take the
same shape (tolk.wire.errors.DeepLXShape: the API is known from the path).

Keys: `Authorization: Bearer <key>` (what KISS sends) or `DeepL-Auth-Key <key>`, or, as
DeepLX takes it, `?token=<key>` in the URL: Pot's and Zotero's DeepLX services send no
headers, so a token in the URL is the only way they can authenticate. SECURITY: a key in a
URL ends up in browser histories, proxies' logs and app settings shown in clear; tolk reads
`token` on these paths (and Immersive Translate's, tolk.server.api.extensions) only, never on
its own API or DeepL's (LibreTranslate's clients put their `api_key` there, as LibreTranslate
takes it), and its access log leaves query strings out (tolk.server.middleware.RedactQuery).
Give such an app a key of its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from tolk.errors import InvalidRequest, TolkError
from tolk.server.access import Caller
from tolk.server.api.deepl_bodies import deepl_lang
from tolk.server.gateway import Gateway, GatewayDep, bearer_key
from tolk.server.params import (
    MANY,
    CheckedRoute,
    ParamsDep,
    ParamsModel,
    openapi_body,
    strings_of,
    text_field,
)
from tolk.translation.request import TranslationRequest
from tolk.wire import codes
from tolk.wire.errors import error_response

DEEPLX_TAG = "DeepLX"
METHOD = "tolk"  # DeepLX answers "Free" (or "Pro"); clients do not read it
HTTP_CODES = {400: "invalid_request", 404: "not_found", 413: "payload_too_large"}
NO_TEXT = "No text to translate"  # DeepLX's 404 for an empty or missing text
TAG_HANDLING = "Invalid tag_handling value. Allowed values are 'html' and 'xml'."
# DeepLX's ids are random integers; below 2**53 a JavaScript client reads them exactly.
MAX_ID = 10**10


class DeepLXNoText(TolkError):
    """DeepLX's answer to an empty or missing text: 404 "No text to translate"."""

    code = "invalid_request"
    status = 404


class DeepLXError(BaseModel):
    code: int = Field(description="The HTTP status, repeated.")
    message: str


class DeepLXTranslate(BaseModel):
    """DeepLX's `/translate` body; other fields (tolk's, DeepL's) are ignored, as DeepLX
    ignores them."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [{"text": "Hello, world!", "source_lang": "auto", "target_lang": "DE"}]
        },
    )

    text: str = Field(
        "", description="One text (KISS joins several with spaces). Empty: 404, as DeepLX."
    )
    source_lang: str | None = Field(
        None, max_length=64, description="A DeepL code (EN, DE, ZH); '' or 'auto': detected."
    )
    target_lang: str = Field(
        min_length=1,
        max_length=64,
        description="A DeepL code: DE, EN-US, EN-GB, PT-BR, ZH-HANS, ZH-HANT, ... (any case).",
    )
    tag_handling: str | None = Field(
        None, description="'' (plain text), 'html' or 'xml' (markup: every tag kept)."
    )


class DeepLXTranslated(BaseModel):
    code: int = Field(200, description="Always 200 on success.")
    id: int = Field(description="A random number, as DeepLX's.")
    data: str = Field(description="The translation: what every DeepLX client reads.")
    alternatives: list[str] = Field(default_factory=list, description="Always empty.")
    source_lang: str = Field(description="The source's DeepL code, detected or as asked: EN.")
    target_lang: str = Field(description="The target as sent.")
    method: str = Field(METHOD, description="DeepLX's Free or Pro; tolk's own here.")


def _texts(value: Any) -> list[str]:
    """`text` of a DeepL request: one string or several; none, or only empty ones, is
    DeepLX's 404."""
    texts = strings_of(value, "text", commas=False) or []
    if not any(texts):
        raise DeepLXNoText(NO_TEXT)
    return texts


Code = Annotated[
    str | None,
    BeforeValidator(text_field),
    Field(description="A DeepL code (DE, EN-US, ZH-HANS); a source omitted or 'auto': detected."),
]


class DeepLXDeepL(ParamsModel):
    """`/deeplx/v2/translate`: DeepL's own request (JSON or a form), as DeepLX takes it."""

    text: Annotated[
        list[str],
        MANY,
        BeforeValidator(_texts),
        Field(description="The texts; each is translated on its own."),
    ]
    target_lang: Code = None
    source_lang: Code = None


class DeepLXDetected(BaseModel):
    detected_source_language: str
    text: str


class DeepLXDeepLTranslated(BaseModel):
    translations: list[DeepLXDetected]


def deeplx_error(
    status: int, code: str, message: str, retry_after: float | None = None
) -> JSONResponse:
    """An error as DeepLX writes it: `{"code": <status>, "message"}` with that status (a
    malformed request, tolk's 422, is DeepLX's 400); tolk's code in X-Tolk-Error-Code (the
    proxy reads it whatever the body's shape)."""
    return error_response(status, code, message, retry_after=retry_after, api="deeplx")


def _problems(errors: Sequence[Any]) -> str:
    """`field: message` for each field a malformed body got wrong (the first five)."""
    found: dict[str, str] = {}
    for error in errors:
        field = ".".join(str(p) for p in error["loc"] if p != "body") or "body"
        found.setdefault(field, error["msg"])
    return "; ".join(f"{f}: {m}" for f, m in list(found.items())[:5])


class DeepLXRoute(CheckedRoute):
    """A route whose every failure while it answers (the body's validation, the caller's
    key, the gateway's refusals) is in DeepLX's error shape. A client that left
    (ClientDisconnected) and unexpected failures go on to the app's own handlers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def shaped(request: Request) -> Response:
            try:
                return await handle(request)
            except TolkError as exc:
                return deeplx_error(exc.status, exc.code, exc.message, exc.retry_after)
            except RequestValidationError as exc:
                message = f"Invalid request payload: {_problems(exc.errors())}"
                return deeplx_error(400, "invalid_request", message)
            except StarletteHTTPException as exc:
                code = HTTP_CODES.get(exc.status_code, "http_error")
                return deeplx_error(exc.status_code, code, str(exc.detail))

        return shaped


router = APIRouter(prefix="/deeplx", route_class=DeepLXRoute, tags=[DEEPLX_TAG])
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": DeepLXError, "description": text}
    for status, text in {
        400: "A malformed request, an unknown language or an unserved pair",
        401: "No key, or a wrong one, where the server requires one",
        404: "No text to translate",
        413: "More text than the server's max_request_chars, or texts than max_texts",
        429: "The key's rate or quota is spent",
        503: "Overloaded (see Retry-After), or shutting down",
        504: "The deadline passed",
    }.items()
}


async def deeplx_caller(request: Request, gateway: GatewayDep) -> Caller:
    """DeepLX's keys: `Authorization: Bearer` / `DeepL-Auth-Key` (or tolk's X-API-Key), else
    `?token=` in the URL, which Pot and Zotero can only send so (see the module's note)."""
    return gateway.caller(bearer_key(request) or request.query_params.get("token") or None)


DeepLXCallerDep = Annotated[Caller, Depends(deeplx_caller)]


def _source(code: str | None) -> str | None:
    """The source tag a DeepLX request names; None ('', 'auto', absent) is detected."""
    if code is None or code.strip().lower() in ("", "auto"):
        return None
    return deepl_lang(code, "source_lang").tag


def _format(tag_handling: str | None) -> Literal["text", "html"]:
    if tag_handling in (None, ""):
        return "text"
    if tag_handling in ("html", "xml"):
        return "html"
    raise InvalidRequest(TAG_HANDLING, field="tag_handling")


async def _translate(
    request: Request, gateway: Gateway, caller: Caller, body: DeepLXTranslate
) -> JSONResponse:
    if not body.text:
        raise DeepLXNoText(NO_TEXT)
    asked = TranslationRequest(
        target_lang=deepl_lang(body.target_lang, "target_lang").tag,
        deadline=gateway.deadline(),
        source_lang=_source(body.source_lang),
        format=_format(body.tag_handling),
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate(request, caller, [body.text], asked)
    answer = DeepLXTranslated(
        id=secrets.randbelow(MAX_ID),
        data=result.texts[0],
        source_lang=codes.deepl_source(result.source_of(0)),
        target_lang=body.target_lang,
    )
    response = JSONResponse(answer.model_dump())
    response.headers.update(gateway.headers(result))
    return response


@router.post(
    "/v1/translate",
    response_model=DeepLXTranslated,
    responses=ERRORS,
    summary="DeepLX: its Pro path, answered as /deeplx/translate",
)
@router.post(
    "/translate",
    response_model=DeepLXTranslated,
    responses=ERRORS,
    summary="DeepLX: translate a text (the URL DeepLX apps call)",
)
async def translate(
    body: DeepLXTranslate, request: Request, gateway: GatewayDep, caller: DeepLXCallerDep
) -> JSONResponse:
    return await _translate(request, gateway, caller, body)


@router.post(
    "/v2/translate",
    response_model=DeepLXDeepLTranslated,
    responses=ERRORS,
    summary="DeepLX: DeepL's request and answer (one translation per text)",
    openapi_extra=openapi_body(DeepLXDeepL),
)
async def translate_deepl(
    request: Request, params: ParamsDep, gateway: GatewayDep, caller: DeepLXCallerDep
) -> JSONResponse:
    body = DeepLXDeepL.of(params)
    if not body.target_lang:
        raise InvalidRequest("Invalid request payload: target_lang is required")
    asked = TranslationRequest(
        target_lang=deepl_lang(body.target_lang, "target_lang").tag,
        deadline=gateway.deadline(),
        source_lang=_source(body.source_lang),
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate(request, caller, body.text, asked)
    translations = [
        {"detected_source_language": codes.deepl_source(result.source_of(i)), "text": text}
        for i, text in enumerate(result.texts)
    ]
    response = JSONResponse({"translations": translations})
    response.headers.update(gateway.headers(result))
    return response
