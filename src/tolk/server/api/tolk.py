"""Routes: parse, validate, hand to the services on app.state, shape the response."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import PurePath
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, File, Form, Header, Query, Request, Response, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.datastructures import MutableHeaders

from tolk import sse
from tolk.detect import Detection
from tolk.engine import ModelPool
from tolk.errors import ClientDisconnected, TolkError
from tolk.server.access import Caller
from tolk.server.calls import Calls, CallsDep, attachment, bearer_key
from tolk.server.lifecycle import Lifecycle
from tolk.server.metrics import ServiceMetrics
from tolk.server.params import CheckedRoute
from tolk.server.schemas import (
    ERROR_RESPONSES,
    Candidate,
    Detected,
    DetectRequest,
    DetectResponse,
    ErrorResponse,
    Formality,
    HealthResponse,
    LanguagesResponse,
    ModelLanguages,
    ReadyResponse,
    TextWarning,
    TranslateRequest,
    TranslateResponse,
    Usage,
)
from tolk.translation import Translation, Translator
from tolk.translation.files import FILE_TYPES, file_type, translate_file
from tolk.translation.prompts import Instructions
from tolk.translation.request import (
    GlossaryRequest,
    MemoryMode,
    MemoryRequest,
    TranslationRequest,
)
from tolk.translation.results import SegmentDone
from tolk.translation.segment import SplitMode
from tolk.wire.asgi import CLIENT_CLOSED
from tolk.wire.errors import error_body, error_response, request_id_of


async def _pool(request: Request) -> ModelPool:
    pool: ModelPool = request.app.state.pool
    return pool


async def _lifecycle(request: Request) -> Lifecycle:
    lifecycle: Lifecycle = request.app.state.lifecycle
    return lifecycle


async def _metrics(request: Request) -> ServiceMetrics:
    metrics: ServiceMetrics = request.app.state.metrics
    return metrics


async def _caller(request: Request) -> Caller:
    calls: Calls = request.app.state.calls
    return calls.access.caller(bearer_key(request))


# Accessors are `async def`: FastAPI runs plain `def` dependencies in a thread pool, a thread
# hand-off per request that showed up as tens of milliseconds of overhead under load.
PoolDep = Annotated[ModelPool, Depends(_pool)]
LifecycleDep = Annotated[Lifecycle, Depends(_lifecycle)]
MetricsDep = Annotated[ServiceMetrics, Depends(_metrics)]
CallerDep = Annotated[Caller, Depends(_caller)]

router = APIRouter(route_class=CheckedRoute)
T = TypeVar("T")
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
    calls: CallsDep,
    caller: CallerDep,
    x_request_timeout: RequestTimeout = None,
) -> TranslateResponse | Response:
    texts = [body.text] if isinstance(body.text, str) else body.text
    deadline = calls.deadline(x_request_timeout)
    characters = sum(len(t) for t in texts)
    if body.stream:
        return await _stream(body, texts, deadline, request, calls, caller)
    memory = calls.memory_mode(request, body.memory)
    result = await calls.run(
        request,
        caller,
        characters,
        lambda: _work(calls.translator, body, texts, deadline, memory),
    )
    calls.record(request, response.headers, result, len(texts))
    return _response(body, result, calls)


def _work(
    translator: Translator,
    body: TranslateRequest,
    texts: list[str],
    deadline: float,
    memory: MemoryMode,
    on_segment: Callable[[SegmentDone], None] | None = None,
) -> Coroutine[Any, Any, Translation]:
    """The translation a /translate body asks for, not yet started."""
    request = TranslationRequest(
        body.target_lang,
        deadline,
        body.source_lang,
        body.model,
        body.split,
        body.format,
        GlossaryRequest(
            body.glossary or {},
            [body.glossary_id] if body.glossary_id is not None else [],
            body.do_not_translate or (),
        ),
        Instructions.of(body.formality, body.context, body.instructions or ()),
        alternatives=body.alternatives,
        memory=memory,
        translation_memory=(
            MemoryRequest(body.translation_memory_id, body.translation_memory_threshold)
            if body.translation_memory_id
            else None
        ),
    )
    return translator.translate(texts, request, on_segment)


def _detected(detection: Detection) -> Detected:
    return Detected(
        language=detection.language,
        confidence=detection.confidence,
        reliable=detection.reliable,
        candidates=[Candidate(language=c, confidence=p) for c, p in detection.candidates],
    )


def _response(body: TranslateRequest, result: Translation, calls: Calls) -> TranslateResponse:
    usage = calls.reported(result.usage)  # (memory hits withheld with a shared memory)
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
    )


async def _stream(
    body: TranslateRequest,
    texts: list[str],
    deadline: float,
    request: Request,
    calls: Calls,
    caller: Caller,
) -> Response:
    """`stream: true`: Server-Sent Events. Failures before the first segment (validation,
    limits, admission) are ordinary error responses; later ones an `error` event."""
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    characters = sum(len(t) for t in texts)

    def on_segment(segment: SegmentDone) -> None:
        events.put_nowait(("segment", dataclasses.asdict(segment)))

    async def produce() -> None:
        try:
            result = await calls.run(
                request,
                caller,
                characters,
                lambda: _work(
                    calls.translator,
                    body,
                    texts,
                    deadline,
                    calls.memory_mode(request, body.memory),
                    on_segment,
                ),
            )
        except TolkError as exc:
            events.put_nowait(("error", exc))
            return
        except ClientDisconnected:
            events.put_nowait(("gone", None))
            return
        calls.record(request, MutableHeaders(), result, len(texts))
        events.put_nowait(("done", _response(body, result, calls).model_dump()))

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
async def detect(body: DetectRequest, calls: CallsDep, caller: CallerDep) -> DetectResponse:
    texts = [body.text] if isinstance(body.text, str) else body.text
    calls.admit(caller, 0)
    found = [_detected(d) for d in calls.translator.detect(texts)]
    return DetectResponse(detected=found[0] if isinstance(body.text, str) else found)


@router.post(
    "/translate/file",
    response_class=Response,
    responses={
        200: {
            "content": {t.media_type.split(";")[0]: {} for t in FILE_TYPES.values()},
            "description": "The translated file: same name, type and structure.",
        },
        415: {"model": ErrorResponse, "description": "A file type tolk does not translate"},
        **ERROR_RESPONSES,
    },
    summary="Translate a file: .txt, .md, .html, .srt, .vtt, .docx",
)
async def translate_file_route(
    request: Request,
    calls: CallsDep,
    caller: CallerDep,
    file: Annotated[UploadFile, File(description="The file; its extension gives its type.")],
    target_lang: Annotated[str, Form(min_length=1, max_length=64)],
    source_lang: Annotated[
        str | None, Form(max_length=64, description="Omitted or 'auto': detected.")
    ] = None,
    model: Annotated[str | None, Form()] = None,
    split: Annotated[SplitMode, Form(description="As on /translate.")] = "sentences",
    glossary_id: Annotated[str | None, Form(description="As on /translate.")] = None,
    formality: Annotated[Formality, Form(description="As on /translate.")] = "default",
    memory: Annotated[MemoryMode, Form(description="As on /translate.")] = "use",
    x_request_timeout: RequestTimeout = None,
) -> Response:
    filename = PurePath(file.filename or "").name
    file_type(filename)  # 415 before the upload is read
    data = await file.read()
    asked = TranslationRequest(
        target_lang,
        calls.deadline(x_request_timeout),
        source_lang,
        model,
        split,
        glossary=GlossaryRequest(ids=[glossary_id] if glossary_id else []),
        instructions=Instructions.of(formality, None, ()),
        memory=calls.memory_mode(request, memory),
    )
    result = await calls.run(
        request,
        caller,
        lambda: calls.file_characters(filename, data),  # reserved of the quota before
        lambda: translate_file(calls.translator, filename, data, asked),
        charged=lambda done: done.translation.usage.characters,
    )
    response = attachment(result, filename)
    response.headers["X-Tolk-Segments"] = str(result.translation.usage.segments)
    if result.translation.detections:
        response.headers["X-Tolk-Detected-Source-Lang"] = result.translation.source.tag
    calls.record(request, response.headers, result.translation, 1)
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
