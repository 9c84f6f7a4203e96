"""What every translating endpoint does around the service, whatever API it speaks: refuse
while draining, check the caller's key, rate and quota, run the work under the lifecycle's
guard (a client that leaves aborts its engine requests), count usage and metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import Depends
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response

from tolk.config import TolkConfig
from tolk.errors import Overloaded
from tolk.languages import Lang
from tolk.server.access import Access, Caller
from tolk.server.lifecycle import Lifecycle
from tolk.server.metrics import ServiceMetrics
from tolk.translation import Translation, Translator
from tolk.translation.files import TranslatedFile, translate_file
from tolk.translation.prompts import NO_INSTRUCTIONS, Instructions
from tolk.translation.request import GlossaryRequest, MemoryMode, TranslationRequest
from tolk.wire.asgi import CLIENT_CLOSED

T = TypeVar("T")


async def client_closed(request: Request, exc: Exception) -> Response:
    """ClientDisconnected, from any API's handler: nobody is listening, and the engine
    requests have been aborted; the status is for the access log and the metrics."""
    return Response(status_code=CLIENT_CLOSED)


async def _calls(request: Request) -> Calls:
    calls: Calls = request.app.state.calls
    return calls


def attachment(file: TranslatedFile, filename: str) -> Response:
    """A translated file as a download under its own name (any characters, RFC 6266)."""
    response = Response(file.content, media_type=file.media_type)
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(filename)}"
    return response


def bearer_key(request: Request) -> str | None:
    """A key from `Authorization: Bearer K` (or DeepL's `DeepL-Auth-Key K`) or `X-API-Key`."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "deepl-auth-key") and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


class Calls:
    def __init__(
        self,
        config: TolkConfig,
        translator: Translator,
        lifecycle: Lifecycle,
        metrics: ServiceMetrics,
        access: Access,
    ) -> None:
        self.config = config
        self.translator = translator
        self.lifecycle = lifecycle
        self.metrics = metrics
        self.access = access
        self.store = access.store  # keys, usage and the glossaries made through DeepL's API

    def deadline(self, requested: float | None = None) -> float:
        limit = self.config.server.request_timeout
        return min(limit, requested) if requested else limit

    @staticmethod
    def memory_mode(request: Request, asked: MemoryMode = "use") -> MemoryMode:
        """How a request uses the segment memory: what it asked (tolk's `memory`), or what
        its Cache-Control header says, whichever is stricter (any API): `no-store` is off,
        `no-cache` translates anew (and remembers)."""
        directives = {
            d.strip().lower() for d in request.headers.get("cache-control", "").split(",")
        }
        header: MemoryMode = (
            "off" if "no-store" in directives else "refresh" if "no-cache" in directives else "use"
        )
        order: tuple[MemoryMode, ...] = ("use", "refresh", "off")
        return max(asked, header, key=order.index)

    def document(
        self,
        filename: str,
        data: bytes,
        source: Lang | None,
        target: Lang,
        glossary: GlossaryRequest | None = None,
        instructions: Instructions = NO_INSTRUCTIONS,
        memory: MemoryMode = "use",
    ) -> Coroutine[Any, Any, TranslatedFile]:
        """A whole file as the drop-in APIs translate it: the pair's model, the background
        document deadline (server.document_timeout), the request's glossary and
        instructions."""
        return translate_file(
            self.translator,
            filename,
            data,
            TranslationRequest(
                target.tag,
                self.config.server.document_timeout,
                source.tag if source else None,
                glossary=glossary or GlossaryRequest(),
                instructions=instructions,
                memory=memory,
            ),
        )

    def admit(self, caller: Caller, characters: int) -> None:
        """Draining, then the caller's rate and quota: before any work is made."""
        self.lifecycle.refuse_if_draining()
        self.access.admit(caller, characters)

    async def run(
        self,
        request: Request,
        caller: Caller,
        characters: int,
        work: Callable[[], Coroutine[Any, Any, T]],
        charged: Callable[[T], int] | None = None,
    ) -> T:
        """`work()` admitted and guarded. Usage is counted for work that succeeded:
        `charged(result)` characters, or `characters`. A client that went away raises
        ClientDisconnected (its engine requests aborted), which the app answers with 499
        in one place (client_closed), whatever the API.

        A server at capacity refuses here, before the caller's rate is spent and before
        any per-text work (ModelPool.shed); the work itself is then admitted exactly."""
        self.lifecycle.refuse_if_draining()
        try:
            with self.translator.pool.shed():
                self.access.admit(caller, characters)
                result = await self.lifecycle.guard(request, work())
        except Overloaded as exc:
            self.metrics.rejections.labels(str(exc.details.get("model", ""))).inc()
            raise
        self.access.record(caller, charged(result) if charged else characters)
        return result

    def record(
        self, request: Request, headers: MutableHeaders, result: Translation, texts: int
    ) -> None:
        request.state.engine_seconds = result.engine_seconds
        request.state.model = result.model
        # W3C Server-Timing: lets a client tell engine time from everything else.
        headers["Server-Timing"] = f"engine;dur={result.engine_seconds * 1000:.3f}"
        metrics = self.metrics
        metrics.texts.labels(result.model).inc(texts)
        metrics.characters.labels(result.model).inc(result.usage.characters)
        pair = f"{result.source.tag}>{result.target.tag}"
        for source_tokens, output_tokens in result.lengths:
            metrics.source_tokens.labels(result.model, pair).observe(source_tokens)
            metrics.output_tokens.labels(result.model, pair).observe(output_tokens)
        usage = result.usage
        if usage.memory_lookups:
            metrics.memory.labels(result.model, "hit").inc(usage.memory_segments)
            metrics.memory.labels(result.model, "miss").inc(
                usage.memory_lookups - usage.memory_segments
            )
        # The drop-in APIs' bodies have no place for it; tolk's own `usage` has it too.
        headers["X-Tolk-Memory-Segments"] = str(usage.memory_segments)
        checks = result.checks
        for problem, segments in checks.found.items():
            metrics.output_problems.labels(result.model, problem).inc(segments)
        if checks.retried:
            metrics.output_retries.labels(result.model, "mended").inc(checks.mended)
            metrics.output_retries.labels(result.model, "not_mended").inc(
                checks.retried - checks.mended
            )
        for warning in result.warnings:
            metrics.flagged.labels(result.model, warning.code).inc()
        if result.warnings:
            # The drop-in APIs' bodies have no place for them; tolk's own also has `warnings`.
            headers["X-Tolk-Warnings"] = json.dumps(
                [{"text": w.text, "code": w.code} for w in result.warnings],
                separators=(",", ":"),
            )


# `async def` accessor: FastAPI runs plain `def` dependencies in a thread pool.
CallsDep = Annotated[Calls, Depends(_calls)]
