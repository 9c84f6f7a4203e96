"""What every translating endpoint does around the service, whatever API it speaks: refuse
while draining, check the caller's key and rate and reserve its characters of the caller's
quota, run the work under the lifecycle's guard (a client that leaves aborts its engine
requests) in the caller's partition of the segment memory, settle the reservation into usage
(or release it), count metrics."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import Depends
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response

from tolk.config import TolkConfig
from tolk.errors import Overloaded
from tolk.keys import Reservation
from tolk.languages import Lang
from tolk.memory import partition
from tolk.server.access import Access, Caller
from tolk.server.lifecycle import Lifecycle
from tolk.server.metrics import ServiceMetrics
from tolk.translation import Translation, Translator
from tolk.translation.files import TranslatedFile, file_characters, translate_file
from tolk.translation.prompts import NO_INSTRUCTIONS, Instructions
from tolk.translation.request import GlossaryRequest, MemoryMode, TranslationRequest
from tolk.translation.results import Usage
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

    def memory_partition(self, caller: Caller) -> str:
        """The caller's partition of the segment memory (`memory.scope`): with `key`, its
        key's (callers without a key share the anonymous one); with `shared`, the one every
        caller shares."""
        return caller.owner if self.config.memory.scope == "key" else ""

    @property
    def hides_memory(self) -> bool:
        """Whether answers withhold what tells a memory hit (`memory.scope: shared`): a hit
        may then be another key's translation, and counting it would tell the caller that
        someone sent the same text."""
        return self.config.memory.scope == "shared"

    def reported(self, usage: Usage) -> Usage:
        """A translation's usage as its caller may see it: with `memory.scope: shared`,
        without the memory hits and the engine's tokens (a hit has none), which would tell a
        hit from a translation; characters stay, charged alike either way."""
        if not self.hides_memory:
            return usage
        return dataclasses.replace(
            usage, prompt_tokens=0, completion_tokens=0, memory_segments=0, memory_lookups=0
        )

    def document(
        self,
        caller: Caller,
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
        instructions, in the caller's partition of the segment memory."""
        asked = TranslationRequest(
            target.tag,
            self.config.server.document_timeout,
            source.tag if source else None,
            glossary=glossary or GlossaryRequest(),
            instructions=instructions,
            memory=memory,
        )

        async def scoped() -> TranslatedFile:
            with partition(self.memory_partition(caller)):
                return await translate_file(self.translator, filename, data, asked)

        return scoped()

    async def file_characters(self, filename: str, data: bytes) -> int:
        """A file's characters of text, counted before it is translated (refused as its
        translation would be: type, encoding, size limits), to reserve them."""
        return await file_characters(self.translator, filename, data)

    def admit(self, caller: Caller, characters: int = 0) -> Reservation:
        """Draining, then the caller's rate, and `characters` reserved of its quota: before
        any work is made. Settle what it returns (`settle`); a reservation of no characters
        (detection's) may be dropped."""
        self.lifecycle.refuse_if_draining()
        return self.access.admit(caller, characters)

    def settle(self, held: Reservation, charged: int | None) -> None:
        """`charged` characters of a reservation counted as used, the rest released (None:
        the work failed, nothing counted)."""
        self.access.settle(held, charged)

    async def run(
        self,
        request: Request,
        caller: Caller,
        characters: int | Callable[[], Awaitable[int]],
        work: Callable[[], Coroutine[Any, Any, T]],
        charged: Callable[[T], int] | None = None,
    ) -> T:
        """`work()` admitted and guarded. `characters` (or, for a file, what counting them
        returns: counted once the rate is checked) are reserved of the caller's quota first;
        when the work ends they are settled: `charged(result)` characters (or all of them)
        counted as used for work that succeeded, the rest released; none counted for work
        that failed or was cancelled. The work runs in the caller's partition of the
        segment memory. A client that went away raises ClientDisconnected (its engine
        requests aborted), which the app answers with 499 in one place (client_closed),
        whatever the API.

        A server at capacity refuses here, before the caller's rate is spent and before
        any per-text work (ModelPool.shed); the work itself is then admitted exactly."""
        self.lifecycle.refuse_if_draining()

        async def scoped() -> T:
            with partition(self.memory_partition(caller)):
                return await work()

        try:
            with self.translator.pool.shed():
                if isinstance(characters, int):
                    count = characters
                    held = self.access.admit(caller, count)
                else:
                    self.access.check_rate(caller)
                    count = await characters()
                    held = self.access.reserve(caller, count)
                spent: int | None = None
                try:
                    result = await self.lifecycle.guard(request, scoped())
                    spent = charged(result) if charged else count
                finally:
                    self.access.settle(held, spent)
        except Overloaded as exc:
            self.metrics.rejections.labels(str(exc.details.get("model", ""))).inc()
            raise
        return result

    def record(
        self, request: Request, headers: MutableHeaders, result: Translation, texts: int
    ) -> None:
        request.state.engine_seconds = result.engine_seconds
        request.state.model = result.model
        # W3C Server-Timing: lets a client tell engine time from everything else. Withheld
        # with a shared memory: a hit's engine time (none) would tell another key's text.
        if not self.hides_memory:
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
        # Withheld with a shared memory: a hit may be another key's (`reported`).
        if not self.hides_memory:
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
