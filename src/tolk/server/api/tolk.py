"""Routes: parse, validate, hand to the services on app.state, shape the response."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST

from tolk import sse
from tolk.detect import Detection
from tolk.errors import ClientDisconnected, TolkError
from tolk.server.access import Caller
from tolk.server.gateway import (
    Gateway,
    GatewayDep,
    LifecycleDep,
    MetricsDep,
    PoolDep,
    TolkCallerDep,
    Upload,
    attachment,
)
from tolk.server.params import CheckedRoute
from tolk.server.schemas import (
    ERROR_RESPONSES,
    Candidate,
    Detected,
    DetectRequest,
    DetectResponse,
    ErrorResponse,
    HealthResponse,
    LanguagesResponse,
    ModelLanguages,
    ReadyResponse,
    TextWarning,
    TranslateFileForm,
    TranslateRequest,
    TranslateResponse,
    Usage,
)
from tolk.translation import Translation
from tolk.translation.files import FILE_TYPES
from tolk.translation.prompts import Instructions
from tolk.translation.request import (
    GlossaryRequest,
    MemoryRequest,
    TranslationRequest,
)
from tolk.translation.results import SegmentDone
from tolk.wire.asgi import CLIENT_CLOSED
from tolk.wire.errors import error_body, error_response, request_id_of

router = APIRouter(route_class=CheckedRoute)
RequestTimeout = Annotated[
    float | None,
    Header(gt=0, description="Seconds this request may take; capped by the server's own."),
]


@router.post(
    "/translate",
    response_model=TranslateResponse,
    responses=ERROR_RESPONSES,
    summary="Translate a text or a list of texts",
    description="tolk's own API. A LibreTranslate client's request to this path (its body "
    "has `q`, or is a form) is answered by LibreTranslate's /translate: see "
    "`/libretranslate/translate`.",
)
async def translate(
    body: TranslateRequest,
    request: Request,
    response: Response,
    gateway: GatewayDep,
    caller: TolkCallerDep,
    x_request_timeout: RequestTimeout = None,
) -> TranslateResponse | Response:
    texts = [body.text] if isinstance(body.text, str) else body.text
    asked = _asked(body, request, gateway.deadline(x_request_timeout))
    if body.stream:
        return await _stream(body, texts, asked, request, gateway, caller)
    result = await gateway.translate(request, caller, texts, asked)
    response.headers.update(gateway.headers(result))
    return _response(body, result, gateway)


def _asked(body: TranslateRequest, request: Request, deadline: float) -> TranslationRequest:
    """The translation a /translate body asks for."""
    return TranslationRequest(
        target_lang=body.target_lang,
        deadline=deadline,
        source_lang=body.source_lang,
        model=body.model,
        split=body.split,
        format=body.format,
        glossary=GlossaryRequest(
            body.glossary or {},
            [body.glossary_id] if body.glossary_id is not None else [],
            body.do_not_translate or (),
        ),
        instructions=Instructions.of(body.formality, body.context, body.instructions or ()),
        alternatives=body.alternatives,
        memory=Gateway.memory_mode(request, body.memory),
        translation_memory=(
            MemoryRequest(body.translation_memory_id, body.translation_memory_threshold)
            if body.translation_memory_id
            else None
        ),
    )


def _detected(detection: Detection) -> Detected:
    return Detected(
        language=detection.language,
        confidence=detection.confidence,
        reliable=detection.reliable,
        candidates=[Candidate(language=c, confidence=p) for c, p in detection.candidates],
    )


def _response(body: TranslateRequest, result: Translation, gateway: Gateway) -> TranslateResponse:
    usage = gateway.reported(result.usage)  # (cache hits withheld with a shared segment cache)
    detected = [_detected(d) for d in result.detections]
    single = isinstance(body.text, str)
    return TranslateResponse(
        translation=result.texts[0] if single else result.texts,
        source_lang=result.source.tag,
        target_lang=result.target.tag,
        model=result.model,
        detected=(detected[0] if single else detected) if detected else None,
        alternatives=(
            (list(result.alternatives[0]) if single else [list(a) for a in result.alternatives])
            if body.alternatives
            else None
        ),
        usage=Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.prompt_tokens + usage.completion_tokens,
            segments=usage.segments,
            memory_segments=usage.memory_segments,
            translation_memory_segments=usage.translation_memory_segments,
            characters=usage.characters,
        ),
        warnings=[
            TextWarning(text=w.text, code=w.code, message=w.message, units=w.units)
            for w in result.warnings
        ],
        id=secrets.randbelow(10**10),  # DeepLX's fields (TranslateResponse)
        data=result.texts[0] if single else None,
    )


async def _stream(
    body: TranslateRequest,
    texts: list[str],
    asked: TranslationRequest,
    request: Request,
    gateway: Gateway,
    caller: Caller,
) -> Response:
    """`stream: true`: Server-Sent Events. Failures before the first segment (validation,
    limits, admission) are ordinary error responses; later ones an `error` event."""
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_segment(segment: SegmentDone) -> None:
        events.put_nowait(("segment", dataclasses.asdict(segment)))

    async def produce() -> None:
        try:
            result = await gateway.translate(request, caller, texts, asked, on_segment)
        except TolkError as exc:
            events.put_nowait(("error", exc))
            return
        except ClientDisconnected:
            events.put_nowait(("gone", None))
            return
        events.put_nowait(("done", _response(body, result, gateway).model_dump()))

    producer = asyncio.create_task(produce())
    kind, first = await events.get()
    if kind == "error":
        raise first
    if kind == "gone":
        return Response(status_code=CLIENT_CLOSED)

    async def send() -> AsyncIterator[str]:
        try:
            item: tuple[str, Any] = (kind, first)
            while True:
                name, data = item
                if name == "gone":
                    return
                if name == "error":
                    data = error_body(data, request_id_of(request))
                yield sse.event(name, data)
                if name in ("done", "error"):
                    return
                item = await events.get()
        finally:
            # The client went away (or the stream ended): nothing may keep generating.
            producer.cancel()

    return StreamingResponse(
        send(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
    )


@router.post(
    "/detect",
    response_model=DetectResponse,
    responses=ERROR_RESPONSES,
    summary="Detect the language of a text or a list of texts",
    description="Among the languages this server's models serve. A text with no letters "
    "gives the fallback language (default en) with confidence 0; a short or mixed one its "
    "best guess with `reliable: false`. A LibreTranslate client's request (`q`) is answered "
    "by `/libretranslate/detect`.",
)
async def detect(body: DetectRequest, gateway: GatewayDep, caller: TolkCallerDep) -> DetectResponse:
    texts = [body.text] if isinstance(body.text, str) else body.text
    found = [_detected(d) for d in gateway.detect(texts, caller)]
    return DetectResponse(detected=found[0] if isinstance(body.text, str) else found)


@router.post(
    "/translate/file",
    response_class=Response,
    responses={
        200: {
            "content": {t.media_type.split(";")[0]: {} for t in FILE_TYPES.values()},
            "description": "The translated file: same name, type and structure (a PDF comes "
            "back as a .docx).",
        },
        415: {"model": ErrorResponse, "description": "A file type tolk does not translate"},
        **ERROR_RESPONSES,
    },
    summary=f"Translate a file: {', '.join(FILE_TYPES)}",
)
async def translate_file_route(
    request: Request,
    gateway: GatewayDep,
    caller: TolkCallerDep,
    form: Annotated[TranslateFileForm, Form(media_type="multipart/form-data")],
    x_request_timeout: RequestTimeout = None,
) -> Response:
    upload = Upload.of(form.file)  # 415 before the upload is read
    asked = TranslationRequest(
        target_lang=form.target_lang,
        deadline=gateway.deadline(x_request_timeout),
        source_lang=form.source_lang,
        model=form.model,
        split=form.split,
        glossary=GlossaryRequest(ids=[form.glossary_id] if form.glossary_id else []),
        instructions=Instructions.of(form.formality, None, ()),
        memory=gateway.memory_mode(request, form.memory),
    )
    done = await gateway.translate_file(request, caller, upload, asked)
    response = attachment(done, upload.filename)
    response.headers["X-Tolk-Segments"] = str(done.translation.usage.segments)
    if done.translation.detections:
        response.headers["X-Tolk-Detected-Source-Lang"] = done.translation.source.tag
    response.headers.update(gateway.headers(done.translation))
    return response


@router.get(
    "/models",
    response_model=LanguagesResponse,
    summary="Each model: the languages and pairs it serves",
    description="tolk's own listing (LibreTranslate's `/languages` is served at its path).",
)
async def models(pool: PoolDep) -> LanguagesResponse:
    return LanguagesResponse(
        models=[
            ModelLanguages(
                model=e.name,
                prompt_format=e.settings.prompt_format,
                languages=list(e.settings.coverage.languages),
                pairs=[str(p) for p in e.settings.coverage.pairs],
                ready=e.alive,
                capacity=e.admission.capacity,
            )
            for e in pool.engines
        ]
    )


@router.get(
    "/health",
    response_model=HealthResponse,
    responses={503: ERROR_RESPONSES[503]},
    summary="The process is alive and not giving up (wire the liveness probe here)",
    description="503 `engine_failed` once a model's engine died more often than "
    "`server.max_restarts` allows: the server then drains and exits with status 3. An engine "
    "that is restarting does not fail this check (see /ready).",
)
async def health(request: Request, lifecycle: LifecycleDep) -> Response:
    if lifecycle.failed is not None:
        return error_response(
            503,
            "engine_failed",
            f"this server gave up: {lifecycle.failed}; it exits once drained, for its "
            "supervisor to start a fresh one",
            request_id=request_id_of(request),
        )
    return JSONResponse(HealthResponse(status="ok").model_dump())


@router.get(
    "/ready",
    response_model=ReadyResponse,
    responses={503: ERROR_RESPONSES[503]},
    summary="Every engine is loaded and healthy, and the server is not draining "
    "(wire the readiness probe here)",
)
async def ready(request: Request, pool: PoolDep, lifecycle: LifecycleDep) -> JSONResponse:
    models = {e.name: e.state for e in pool.engines}
    if lifecycle.draining:
        return error_response(
            503,
            "shutting_down",
            "this server is shutting down",
            request_id=request_id_of(request),
            models=models,
        )
    down = {name: state for name, state in models.items() if state != "ready"}
    if down:
        restarting = all(state == "restarting" for state in down.values())
        return error_response(
            503,
            "engine_restarting" if restarting else "engine_unavailable",
            "not every engine serves: "
            + ", ".join(f"model '{name}' is {state}" for name, state in down.items()),
            request_id=request_id_of(request),
            models=models,
        )
    return JSONResponse(ReadyResponse(status="ready", models=models).model_dump())


@router.get(
    "/metrics",
    summary="Prometheus metrics: tolk_* and every model's vllm:*",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics_endpoint(
    metrics: MetricsDep,
    names: Annotated[
        list[str],
        Query(
            alias="name[]", description="Only these metric families, e.g. vllm:kv_cache_usage_perc."
        ),
    ] = [],  # noqa: B006 - FastAPI copies defaults per request
) -> Response:
    return Response(metrics.exposition(names), media_type=CONTENT_TYPE_LATEST)
