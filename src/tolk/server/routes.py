"""Routes: parse, validate, hand to the services on app.state, shape the response."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import PurePath
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, Header, Query, Request, Response, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.datastructures import MutableHeaders

from tolk import sse
from tolk.engine import ModelPool
from tolk.errors import ClientDisconnected, Overloaded, TolkError
from tolk.server.errors import error_body, error_response, request_id_of
from tolk.server.lifecycle import Lifecycle
from tolk.server.metrics import ServiceMetrics
from tolk.server.middleware import CLIENT_CLOSED
from tolk.server.schemas import (
    ERROR_RESPONSES,
    ErrorResponse,
    HealthResponse,
    LanguagesResponse,
    ModelLanguages,
    ReadyResponse,
    TranslateRequest,
    TranslateResponse,
    Usage,
)
from tolk.translation import Translation, Translator
from tolk.translation.files import FILE_TYPES, file_type, translate_file
from tolk.translation.segment import SplitMode
from tolk.translation.service import GlossaryRequest, SegmentDone


async def _translator(request: Request) -> Translator:
    translator: Translator = request.app.state.translator
    return translator


async def _pool(request: Request) -> ModelPool:
    pool: ModelPool = request.app.state.pool
    return pool


async def _lifecycle(request: Request) -> Lifecycle:
    lifecycle: Lifecycle = request.app.state.lifecycle
    return lifecycle


async def _metrics(request: Request) -> ServiceMetrics:
    metrics: ServiceMetrics = request.app.state.metrics
    return metrics


# Accessors are `async def`: FastAPI runs plain `def` dependencies in a thread pool, a thread
# hand-off per request that showed up as tens of milliseconds of overhead under load.
TranslatorDep = Annotated[Translator, Depends(_translator)]
PoolDep = Annotated[ModelPool, Depends(_pool)]
LifecycleDep = Annotated[Lifecycle, Depends(_lifecycle)]
MetricsDep = Annotated[ServiceMetrics, Depends(_metrics)]

router = APIRouter()
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
)
async def translate(
    body: TranslateRequest,
    request: Request,
    response: Response,
    translator: TranslatorDep,
    lifecycle: LifecycleDep,
    metrics: MetricsDep,
    x_request_timeout: RequestTimeout = None,
) -> TranslateResponse | Response:
    lifecycle.refuse_if_draining()
    texts = [body.text] if isinstance(body.text, str) else body.text
    deadline = _deadline(request, x_request_timeout)
    if body.stream:
        return await _stream(body, texts, deadline, request, translator, lifecycle, metrics)
    result = await _guarded(request, lifecycle, metrics, _work(translator, body, texts, deadline))
    if result is None:
        # Nobody is listening; the engine requests have been aborted.
        return Response(status_code=CLIENT_CLOSED)
    _record(request, response.headers, metrics, result, len(texts))
    return _response(body, result)


def _work(
    translator: Translator,
    body: TranslateRequest,
    texts: list[str],
    deadline: float,
    on_segment: Callable[[SegmentDone], None] | None = None,
) -> Coroutine[Any, Any, Translation]:
    """The translation a /translate body asks for, not yet started."""
    return translator.translate(
        texts,
        body.source_lang,
        body.target_lang,
        body.model,
        deadline,
        body.split,
        body.format,
        on_segment=on_segment,
        glossary=GlossaryRequest(
            body.glossary or {}, body.glossary_id, body.do_not_translate or ()
        ),
    )


def _response(body: TranslateRequest, result: Translation) -> TranslateResponse:
    usage = result.usage
    return TranslateResponse(
        translation=result.texts[0] if isinstance(body.text, str) else result.texts,
        source_lang=result.source.tag,
        target_lang=result.target.tag,
        model=result.model,
        usage=Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.prompt_tokens + usage.completion_tokens,
            segments=usage.segments,
            characters=usage.characters,
        ),
    )


async def _stream(
    body: TranslateRequest,
    texts: list[str],
    deadline: float,
    request: Request,
    translator: Translator,
    lifecycle: Lifecycle,
    metrics: ServiceMetrics,
) -> Response:
    """`stream: true`: Server-Sent Events. Failures before the first segment (validation,
    limits, admission) are ordinary error responses; later ones an `error` event."""
    events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_segment(segment: SegmentDone) -> None:
        events.put_nowait(("segment", dataclasses.asdict(segment)))

    async def produce() -> None:
        work = _work(translator, body, texts, deadline, on_segment)
        try:
            result = await _guarded(request, lifecycle, metrics, work)
        except TolkError as exc:
            events.put_nowait(("error", exc))
            return
        if result is None:
            events.put_nowait(("gone", None))
            return
        _record(request, MutableHeaders(), metrics, result, len(texts))
        events.put_nowait(("done", _response(body, result).model_dump()))

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
    translator: TranslatorDep,
    lifecycle: LifecycleDep,
    metrics: MetricsDep,
    file: Annotated[UploadFile, File(description="The file; its extension gives its type.")],
    source_lang: Annotated[str, Form(min_length=1, max_length=64)],
    target_lang: Annotated[str, Form(min_length=1, max_length=64)],
    model: Annotated[str | None, Form()] = None,
    split: Annotated[SplitMode, Form(description="As on /translate.")] = "sentences",
    x_request_timeout: RequestTimeout = None,
) -> Response:
    lifecycle.refuse_if_draining()
    filename = PurePath(file.filename or "").name
    file_type(filename)  # 415 before the upload is read
    data = await file.read()
    work = translate_file(
        translator,
        filename,
        data,
        source_lang,
        target_lang,
        model,
        _deadline(request, x_request_timeout),
        split,
    )
    result = await _guarded(request, lifecycle, metrics, work)
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    response = Response(result.content, media_type=result.media_type)
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(filename)}"
    response.headers["X-Tolk-Segments"] = str(result.translation.usage.segments)
    _record(request, response.headers, metrics, result.translation, 1)
    return response


def _deadline(request: Request, requested: float | None) -> float:
    limit: float = request.app.state.config.server.request_timeout
    return min(limit, requested) if requested else limit


async def _guarded(
    request: Request, lifecycle: Lifecycle, metrics: ServiceMetrics, work: Coroutine[Any, Any, T]
) -> T | None:
    """The work under the lifecycle's guard (drain, client disconnect); None when the
    client went away."""
    try:
        return await lifecycle.guard(request, work)
    except Overloaded as exc:
        metrics.rejections.labels(str(exc.details.get("model", ""))).inc()
        raise
    except ClientDisconnected:
        return None


def _record(
    request: Request,
    headers: MutableHeaders,
    metrics: ServiceMetrics,
    result: Translation,
    texts: int,
) -> None:
    request.state.engine_seconds = result.engine_seconds
    request.state.model = result.model
    # W3C Server-Timing: lets a client tell engine time from everything else.
    headers["Server-Timing"] = f"engine;dur={result.engine_seconds * 1000:.3f}"
    metrics.texts.labels(result.model).inc(texts)
    metrics.characters.labels(result.model).inc(result.usage.characters)
    pair = f"{result.source.tag}>{result.target.tag}"
    for source_tokens, output_tokens in result.lengths:
        metrics.source_tokens.labels(result.model, pair).observe(source_tokens)
        metrics.output_tokens.labels(result.model, pair).observe(output_tokens)


@router.get("/languages", response_model=LanguagesResponse, summary="Pairs each model serves")
async def languages(pool: PoolDep) -> LanguagesResponse:
    return LanguagesResponse(
        models=[
            ModelLanguages(
                model=e.name,
                prompt_format=e.settings.prompt_format,
                languages=list(e.settings.coverage.languages),
                pairs=[str(p) for p in e.settings.coverage.pairs],
                ready=e.alive,
            )
            for e in pool.engines
        ]
    )


@router.get("/health", response_model=HealthResponse, summary="The process is alive")
async def health() -> HealthResponse:
    return HealthResponse(status="ok")


@router.get(
    "/ready",
    response_model=ReadyResponse,
    responses={503: ERROR_RESPONSES[503]},
    summary="Every engine is loaded and healthy, and the server is not draining",
)
async def ready(request: Request, pool: PoolDep, lifecycle: LifecycleDep) -> JSONResponse:
    models = {e.name: ("ready" if e.alive else "dead") for e in pool.engines}
    if lifecycle.draining:
        return error_response(
            503,
            "shutting_down",
            "this server is shutting down",
            request_id=request_id_of(request),
            models=models,
        )
    dead = [name for name, state in models.items() if state != "ready"]
    if dead:
        return error_response(
            503,
            "engine_unavailable",
            f"the engine for {', '.join(repr(d) for d in dead)} has stopped; restart this server",
            request_id=request_id_of(request),
            models=models,
        )
    return JSONResponse(ReadyResponse(status="ready", models=models).model_dump())


@router.get("/metrics", summary="Prometheus metrics: tolk_* and every model's vllm:*")
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
