"""The custom APIs of two browser extensions, whose "custom API" setting takes any URL:
Immersive Translate (`POST /immersive/translate`) and KISS Translator
(`POST /kiss/translate`). Both are thin adapters over the gateway, as every API is: one
`gateway.translate` call per request over all its texts (which batch together on the
engine), so admission, limits (`server.max_texts`, `server.max_request_chars`: 413),
deadlines, quotas, usage and metrics are the same as everywhere.

Their language codes are the extensions' own (`auto`, `en`, `de`, `zh-CN`, `zh-TW`, ...:
BCP-47 or ISO 639 codes, Chinese by its region), read as BCP-47 (`zh-CN` as `zh-Hans`,
`zh-TW` as `zh-Hant`); a detected source is answered the same way. Neither extension
documents an error shape, and both show an error's body as it is: errors are tolk's own,
`{"error": {"code", "message", "request_id"}}` with tolk's statuses (422 for a malformed
body, 400 for an unknown language, 401/403 for keys, 413, 429, 503, 504).

Keys: KISS sends `Authorization: Bearer <key>` (with nothing after `Bearer` when no key is
set: no key). Immersive Translate's custom API has no header setting; as MTranServer's
`/imme` does, tolk takes its key from `?token=<key>` in the URL (or a Bearer header).
SECURITY: a key in a URL is seen wherever the URL is (the extension's settings, proxies'
logs); tolk's access log leaves query strings out (tolk.server.middleware.RedactQuery), and
only this path and DeepLX's (tolk.server.api.deeplx) take one so. Give the extension a key
of its own.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tolk.languages import lang, request_lang
from tolk.server.access import Caller
from tolk.server.gateway import Gateway, GatewayDep, TolkCallerDep, bearer_key
from tolk.server.params import CheckedRoute
from tolk.server.schemas import ERROR_RESPONSES
from tolk.translation.request import GlossaryRequest, TranslationRequest
from tolk.translation.results import Translation

router = APIRouter(route_class=CheckedRoute)
# The extensions' names for Chinese by script (Google Translate's codes).
CHINESE = {"zh-cn": "zh-Hans", "zh-tw": "zh-Hant"}
# Immersive Translate's reserved placeholders ({0}; or <b0></b0> with the tag separator 'b'):
# the extension puts back what they stand for, so they come back exactly as sent.
IMMERSIVE_PLACEHOLDER = re.compile(r"\{\d+\}|<b\d+>\s*</b\d+>")
TEXTS = (
    "Each text is translated on its own; at most the server's max_texts texts and "
    "max_request_chars characters in all (413)."
)


def source_tag(code: str, field: str) -> str | None:
    """The tag of an extension's source code; None for `auto` (or nothing): detected."""
    if code.strip().lower() in ("", "auto"):
        return None
    return target_tag(code, field)


def target_tag(code: str, field: str) -> str:
    """The tag of an extension's language code (`zh-CN` -> zh-Hans, `de` -> de)."""
    raw = code.strip()
    return request_lang(CHINESE.get(raw.lower(), raw), field).tag


def app_code(tag: str) -> str:
    """An answered language as the extensions write it: the base code (`en`), Chinese by
    its script (`zh-CN` simplified, `zh-TW` traditional)."""
    parsed = lang(tag)
    if parsed.code == "zh":
        return "zh-TW" if "Hant" in tag or tag.endswith(("-TW", "-HK", "-MO")) else "zh-CN"
    return parsed.code


def _answered(gateway: Gateway, result: Translation, body: object) -> JSONResponse:
    response = JSONResponse(body)
    response.headers.update(gateway.headers(result))
    return response


# -- Immersive Translate ----------------------------------------------------------------------


class ImmersiveTranslate(BaseModel):
    """Immersive Translate's custom API request (its documentation's)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {"source_lang": "auto", "target_lang": "de", "text_list": ["Hello, {0} world!"]}
            ]
        },
    )

    source_lang: str = Field("auto", max_length=64, description="auto, en, zh-CN, ...")
    target_lang: str = Field(min_length=1, max_length=64, description="de, zh-CN, zh-TW, ...")
    text_list: list[str] = Field(description=TEXTS)


class ImmersiveTranslation(BaseModel):
    detected_source_lang: str = Field(description="The text's source: detected, or as asked.")
    text: str


class ImmersiveTranslated(BaseModel):
    translations: list[ImmersiveTranslation] = Field(description="One per text, in order.")


async def immersive_caller(request: Request, gateway: GatewayDep) -> Caller:
    """A Bearer (or X-API-Key) header, else `?token=` in the URL (see the module's note)."""
    return gateway.caller(bearer_key(request) or request.query_params.get("token") or None)


@router.post(
    "/immersive/translate",
    response_model=ImmersiveTranslated,
    responses=ERROR_RESPONSES,
    tags=["Immersive Translate"],
    summary="Immersive Translate's custom API: a list of texts",
)
async def immersive_translate(
    body: ImmersiveTranslate,
    request: Request,
    gateway: GatewayDep,
    caller: Annotated[Caller, Depends(immersive_caller)],
) -> JSONResponse:
    texts = body.text_list
    asked = TranslationRequest(
        target_lang=target_tag(body.target_lang, "target_lang"),
        deadline=gateway.deadline(),
        source_lang=source_tag(body.source_lang, "source_lang"),
        glossary=GlossaryRequest(
            do_not_translate=sorted({m for t in texts for m in IMMERSIVE_PLACEHOLDER.findall(t)})
        ),
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate(request, caller, texts, asked)
    translations = [
        {"detected_source_lang": app_code(result.source_of(i)), "text": text}
        for i, text in enumerate(result.texts)
    ]
    return _answered(gateway, result, {"translations": translations})


# -- KISS Translator --------------------------------------------------------------------------


class KissTranslate(BaseModel):
    """KISS Translator's custom API request: `texts` in its batch mode, `text` otherwise."""

    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {"texts": ["Hello", "Click Save to continue."], "from": "auto", "to": "de"},
                {"text": "Hello", "from": "auto", "to": "zh-CN"},
            ]
        },
    )

    text: str | None = Field(None, description="One text (KISS's default, non-batch mode).")
    texts: list[str] | None = Field(None, description="Several (batch mode). " + TEXTS)
    from_: str = Field(
        "auto", alias="from", max_length=64, description="auto, en, zh-CN, zh-TW, de, ..."
    )
    to: str = Field(min_length=1, max_length=64, description="en, zh-CN, zh-TW, de, ...")

    @model_validator(mode="after")
    def _one_of_text_and_texts(self) -> KissTranslate:
        if (self.text is None) == (self.texts is None):
            raise ValueError("send either `text` (one) or `texts` (a list)")
        return self


class KissTranslation(BaseModel):
    text: str
    src: str = Field(description="The text's source: detected, or as asked.")


@router.post(
    "/kiss/translate",
    response_model=list[KissTranslation] | KissTranslation,
    responses=ERROR_RESPONSES,
    tags=["KISS Translator"],
    summary="KISS Translator's custom API: `texts` -> [{text, src}], `text` -> {text, src}",
)
async def kiss_translate(
    body: KissTranslate, request: Request, gateway: GatewayDep, caller: TolkCallerDep
) -> JSONResponse:
    texts = body.texts if body.texts is not None else [body.text or ""]
    asked = TranslationRequest(
        target_lang=target_tag(body.to, "to"),
        deadline=gateway.deadline(),
        source_lang=source_tag(body.from_, "from"),
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate(request, caller, texts, asked)
    translated = [
        {"text": text, "src": app_code(result.source_of(i))} for i, text in enumerate(result.texts)
    ]
    return _answered(gateway, result, translated if body.texts is not None else translated[0])
