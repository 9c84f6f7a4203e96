"""The gateway: what every translating endpoint does around the translation service,
whatever API it speaks, behind a few verbs (`translate`, `translate_groups`,
`translate_file`, `detect`, `chat`): refuse while draining, check the caller's rate and reserve its
characters of the caller's quota, run the work under the lifecycle's guard (a client that
leaves aborts its engine requests) in the caller's partition of the segment cache, settle
the reservation into usage (or release it), count metrics. It also resolves callers (each
API reads the key where its clients send it: the dependencies below), and bounds deadlines.

`chat` serves a conversation that is not a translation (OpenAI's endpoint) under the same
admission. Handlers read as parse -> gateway -> shape: they parse their API's request into a
TranslationRequest (and texts, or an Upload), hand it to a verb with the caller, and shape
the result as their clients expect. They get the gateway, and whatever else they read (the
model pool for language lists, the key store for glossaries and style rules), as FastAPI
dependencies (GatewayDep, PoolDep, StoreDep, ...), never from one another."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Annotated, Any, Literal, TypeVar, overload
from urllib.parse import quote

from fastapi import Depends
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from tolk.config import TolkConfig
from tolk.detect import Detection
from tolk.engine import ModelPool
from tolk.engine.timing import CLOCK
from tolk.errors import InvalidKey, InvalidRequest, Overloaded, TolkError
from tolk.languages import Lang, lang
from tolk.server.access import Access, Caller
from tolk.server.documents import DocumentStore, StoredDocument
from tolk.server.lifecycle import Lifecycle
from tolk.server.metrics import ServiceMetrics
from tolk.server.params import ParamsDep
from tolk.store.keys import KeyStore, Period
from tolk.store.memories import TranslationMemories
from tolk.store.segment_cache import partition
from tolk.translation import Translation, Translator
from tolk.translation.chat import ChatCompletion
from tolk.translation.files import (
    FileType,
    TranslatedFile,
    UnsupportedFileType,
    file_characters,
    file_type,
    translate_file,
)
from tolk.translation.request import ChatRequest, MemoryMode, TranslationRequest
from tolk.translation.results import OnSegment, Usage
from tolk.translation.service import run_all
from tolk.wire.asgi import CLIENT_CLOSED

T = TypeVar("T")
# A check of a document's source language (the one asked, before translating; the one
# found, after), raising what ends the document (DeepL's "Source and target language ...").
SourceCheck = Callable[[Lang], None]


async def client_closed(request: Request, exc: Exception) -> Response:
    """ClientDisconnected, from any API's handler: nobody is listening, and the engine
    requests have been aborted; the status is for the access log and the metrics."""
    return Response(status_code=CLIENT_CLOSED)


def attachment(file: TranslatedFile, filename: str) -> Response:
    """A translated file as a download under its own name (any characters, RFC 6266), its
    suffix the translated file's (a PDF comes back as a .docx)."""
    response = Response(file.content, media_type=file.media_type)
    name = quote(file.name(filename))
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{name}"
    return response


def check_output_format(kind: FileType, output_format: str) -> None:
    """DeepL's `output_format` for a document of `kind`: what tolk makes of it, which is the
    document's own format, or for a kind translated into another (a PDF into a .docx:
    `FileType.output`) that other one, asked for by name, so that a client never writes a
    .docx under a .pdf name."""
    wanted = output_format.strip().lower().lstrip(".")
    if kind.output is not None:
        made = kind.output.lstrip(".")
        if wanted != made:
            raise InvalidRequest(
                f"a {kind.kind.upper()} is translated into a .{made} on this server: ask for "
                f"output_format={made}"
            )
    elif wanted and file_type(f"x.{wanted}") != kind:
        raise InvalidRequest("output_format must be the document's own format on this server")


@dataclass(frozen=True)
class Upload:
    """An uploaded file tolk translates: its name (no directories) and type, checked once
    here for every API, before its bytes are read."""

    filename: str
    kind: FileType
    file: UploadFile

    @classmethod
    def of(
        cls,
        file: UploadFile,
        name: str | None = None,
        *,
        output_format: str | None = None,
        unsupported: Callable[[str], TolkError] | None = None,
    ) -> Upload:
        """The upload named `name` (else its own file name). A type tolk does not translate
        is UnsupportedFileType, or what `unsupported(filename)` makes of it (each API its
        own answer); an `output_format` other than the file's own is refused (DeepL's)."""
        filename = PurePath(name or file.filename or "").name
        try:
            kind = file_type(filename)
        except UnsupportedFileType as exc:
            if unsupported is None:
                raise
            raise unsupported(filename) from exc
        if output_format is not None:
            check_output_format(kind, output_format)
        return cls(filename, kind, file)

    async def read(self) -> bytes:
        return await self.file.read()


def bearer_key(request: Request) -> str | None:
    """A key from `Authorization: Bearer K` (or DeepL's `DeepL-Auth-Key K`) or `X-API-Key`."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "deepl-auth-key") and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


def memory_mode(request: Request, asked: MemoryMode = "use") -> MemoryMode:
    """How a request uses the segment cache: what it asked (tolk's `memory`), or what its
    Cache-Control header says, whichever is stricter (any API): `no-store` is off,
    `no-cache` translates anew (and remembers)."""
    directives = {d.strip().lower() for d in request.headers.get("cache-control", "").split(",")}
    header: MemoryMode = (
        "off" if "no-store" in directives else "refresh" if "no-cache" in directives else "use"
    )
    order: tuple[MemoryMode, ...] = ("use", "refresh", "off")
    return max(asked, header, key=order.index)


class Gateway:
    def __init__(
        self,
        config: TolkConfig,
        translator: Translator,
        lifecycle: Lifecycle,
        metrics: ServiceMetrics,
        access: Access,
        documents: DocumentStore,
    ) -> None:
        self._config = config
        self._translator = translator
        self._lifecycle = lifecycle
        self._metrics = metrics
        self._access = access
        self._documents = documents

    # -- who calls, and what a request may ask -------------------------------------------

    def caller(self, key: str | None) -> Caller:
        """The caller a request's key names (None or "": no key; tolk.server.access)."""
        return self._access.caller(key)

    def usage(self, caller: Caller) -> tuple[int, int, Period]:
        """(characters the caller used this period, its limit, the period)."""
        return self._access.usage(caller)

    def deadline(self, requested: float | None = None, *, document: bool = False) -> float:
        """Seconds a request's work may take: what it asked, capped by the server's
        request_timeout; a document translated for a drop-in API gets document_timeout."""
        if document:
            return self._config.server.document_timeout
        limit = self._config.server.request_timeout
        return min(limit, requested) if requested else limit

    @staticmethod
    def memory_mode(request: Request, asked: MemoryMode = "use") -> MemoryMode:
        """The request's use of the segment cache (`memory_mode`)."""
        return memory_mode(request, asked)

    @property
    def hides_memory(self) -> bool:
        """Whether answers withhold what tells a cache hit (`segment_cache.scope: shared`): a hit
        may then be another key's translation, and counting it would tell the caller that
        someone sent the same text."""
        return self._config.segment_cache.scope == "shared"

    def reported(self, usage: Usage) -> Usage:
        """A translation's usage as its caller may see it: with `segment_cache.scope: shared`,
        without the cache hits and the engine's tokens (a hit has none), which would tell a
        hit from a translation; characters stay, charged alike either way."""
        if not self.hides_memory:
            return usage
        return dataclasses.replace(
            usage, prompt_tokens=0, completion_tokens=0, memory_segments=0, memory_lookups=0
        )

    # -- the verbs ---------------------------------------------------------------------------

    async def translate(
        self,
        request: Request,
        caller: Caller,
        texts: Sequence[str],
        asked: TranslationRequest,
        on_segment: OnSegment | None = None,
    ) -> Translation:
        """`texts` translated as `asked`, admitted for their characters (metrics counted)."""
        result = await self._admitted(
            request,
            caller,
            sum(len(t) for t in texts),
            lambda: self._translator.translate(texts, asked, on_segment),
        )
        self._record(request, result, len(texts))
        return result

    async def translate_groups(
        self,
        request: Request,
        caller: Caller,
        groups: Sequence[tuple[Sequence[str], TranslationRequest]],
    ) -> list[Translation]:
        """Several translations admitted as one request (their characters together), run
        side by side under one deadline: if one fails, the others are cancelled (run_all)."""

        def work() -> Coroutine[Any, Any, list[Translation]]:
            alone = len(groups) == 1
            translate = self._translator.translate
            return run_all([translate(texts, asked, alone=alone) for texts, asked in groups])

        characters = sum(len(t) for texts, _ in groups for t in texts)
        results = await self._admitted(request, caller, characters, work)
        for (texts, _), result in zip(groups, results, strict=True):
            self._record(request, result, len(texts))
        if results:  # side by side: the request's engine time is the longer's, not the last's
            request.state.engine_seconds = max(r.engine_seconds for r in results)
        return results

    @overload
    async def translate_file(
        self,
        request: Request,
        caller: Caller,
        upload: Upload,
        asked: TranslationRequest,
        *,
        background: Literal[False] = False,
        check: SourceCheck | None = None,
    ) -> TranslatedFile: ...

    @overload
    async def translate_file(
        self,
        request: Request,
        caller: Caller,
        upload: Upload,
        asked: TranslationRequest,
        *,
        background: Literal[True],
        check: SourceCheck | None = None,
    ) -> StoredDocument: ...

    async def translate_file(
        self,
        request: Request,
        caller: Caller,
        upload: Upload,
        asked: TranslationRequest,
        *,
        background: bool = False,
        check: SourceCheck | None = None,
    ) -> TranslatedFile | StoredDocument:
        """A file, admitted for its characters of text (counted before it is translated,
        once the rate is checked: a file over the quota never reaches an engine), translated
        as `asked` (its format is the file's own). Now, as the answer (its client leaving
        stops it); or, with `background`, as a document of the document store, translated
        after the answer (DeepL's /v2/document: a file that cannot be opened is taken and
        ends in `error`, costing nothing). `check` sees the source language."""
        if background:
            return await self._start_file(caller, upload, asked, check)
        data = await upload.read()
        done = await self._admitted(
            request,
            caller,
            lambda: file_characters(self._translator, upload.filename, data),
            lambda: self._file(upload.filename, data, asked, check),
            charged=lambda done: done.translation.usage.characters,
        )
        self._record(request, done.translation, 1)
        return done

    async def chat(
        self, request: Request, caller: Caller, model: str | None, asked: ChatRequest
    ) -> ChatCompletion:
        """A plain chat completion (OpenAI's endpoint, for a prompt that is not a
        translation), admitted for its conversation's characters as a translation is."""
        characters = sum(len(m.content) for m in asked.messages)
        result = await self._admitted(
            request, caller, characters, lambda: self._translator.chat(model, asked)
        )
        request.state.engine_seconds = result.engine_seconds
        request.state.model = result.model
        self._metrics.texts.labels(result.model).inc()
        self._metrics.characters.labels(result.model).inc(characters)
        return result

    def detect(self, texts: Sequence[str], caller: Caller | None = None) -> list[Detection]:
        """Each text's language. With a caller, a request of its own: refused while
        draining or over the caller's rate (no characters charged); without, part of a
        request admitted by another verb (DeepL Write groups its texts so)."""
        if caller is not None:
            self._lifecycle.refuse_if_draining()
            self._access.admit(caller, 0)
        return self._translator.detect(texts)

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` off the event loop, in the service's preparation pool (parsing that
        grows with the input: glossary entries)."""
        return await self._translator.offload(fn, *args)

    def headers(self, result: Translation) -> dict[str, str]:
        """What a response tells of a translation beside its body (any API): the engine's
        time and where the request's time went (W3C Server-Timing), segments from the
        segment cache, and the warnings. The first two are withheld with a
        shared segment cache: a hit (no engine time) may be another key's."""
        headers: dict[str, str] = {}
        if not self.hides_memory:
            # The engine's time, then how long from the request's arrival its first engine
            # request took to be handed to vLLM, the first one back to make its first and last
            # token and to be back, and its segments to be done and put back
            # (tolk.engine.timing), and how many engine requests it made.
            timing = [f"engine;dur={result.engine_seconds * 1000:.3f}"]
            if (clock := CLOCK.get()) is not None:  # this HTTP request's (RequestAccounting)
                timing += [f"{name};dur={at * 1000:.3f}" for name, at in clock.marks().items()]
                timing.append(f'engine-requests;desc="{clock.engine_requests}"')
            headers["Server-Timing"] = ", ".join(timing)
            headers["X-Tolk-Memory-Segments"] = str(result.usage.memory_segments)
        if result.warnings:
            # The drop-in APIs' bodies have no place for them; tolk's own also has `warnings`.
            headers["X-Tolk-Warnings"] = json.dumps(
                [{"text": w.text, "code": w.code} for w in result.warnings],
                separators=(",", ":"),
            )
        return headers

    # -- admission -----------------------------------------------------------------------------

    async def _admitted(
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
        segment cache. A client that went away raises ClientDisconnected (its engine
        requests aborted), which the app answers with 499 in one place (client_closed),
        whatever the API.

        A server at capacity refuses here, before the caller's rate is spent and before
        any per-text work (ModelPool.shed); the work itself is then admitted exactly."""
        self._lifecycle.refuse_if_draining()
        try:
            with self._translator.pool.shed():
                if isinstance(characters, int):
                    count = characters
                    held = self._access.admit(caller, count)
                else:
                    self._access.check_rate(caller)
                    count = await characters()
                    held = self._access.reserve(caller, count)
                spent: int | None = None
                try:
                    result = await self._lifecycle.guard(request, self._in_partition(caller, work))
                    spent = charged(result) if charged else count
                finally:
                    self._access.settle(held, spent)
        except Overloaded as exc:
            self._metrics.rejections.labels(str(exc.details.get("model", ""))).inc()
            raise
        return result

    async def _in_partition(self, caller: Caller, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """The work in the caller's partition of the segment cache (`segment_cache.scope`): with
        `key`, its key's (callers without a key share the anonymous one); with `shared`, the
        one every caller shares."""
        with partition(caller.owner if self._config.segment_cache.scope == "key" else ""):
            return await work()

    async def _file(
        self, filename: str, data: bytes, asked: TranslationRequest, check: SourceCheck | None
    ) -> TranslatedFile:
        if check is not None and asked.source_lang:
            check(lang(asked.source_lang))
        done = await translate_file(self._translator, filename, data, asked)
        if check is not None:
            check(done.translation.source)
        return done

    async def _start_file(
        self, caller: Caller, upload: Upload, asked: TranslationRequest, check: SourceCheck | None
    ) -> StoredDocument:
        """A file translated in the background: admitted (draining, the rate) before it is
        read, its characters reserved at upload (a document the quota cannot pay for is
        refused now, not left to fail), settled when its translation ends."""
        self._lifecycle.refuse_if_draining()
        self._access.admit(caller, 0)  # the rate, before the upload is read
        data = await upload.read()
        unreadable: TolkError | None = None
        try:
            characters = await file_characters(self._translator, upload.filename, data)
        except TolkError as exc:  # taken; the document ends in `error` naming why
            unreadable, characters = exc, 0
        held = self._access.reserve(caller, characters)

        async def work() -> TranslatedFile:
            spent: int | None = None
            try:
                if unreadable is not None:
                    raise unreadable
                done = await self._in_partition(
                    caller, lambda: self._file(upload.filename, data, asked, check)
                )
                spent = done.translation.usage.characters
                self._count(done.translation, 1)
                return done
            finally:
                self._access.settle(held, spent)

        try:
            doc = self._documents.start(caller.owner, upload.filename, work())
        except BaseException:
            self._access.settle(held, None)  # (never started: the store is full)
            raise
        # A job cancelled before it ran (dropped, the server stopping) never reaches the
        # finally above; settling twice does nothing.
        assert doc.task is not None
        doc.task.add_done_callback(lambda _: self._access.settle(held, None))
        return doc

    # -- metrics ------------------------------------------------------------------------------

    def _record(self, request: Request, result: Translation, texts: int) -> None:
        """A translation served to `request`: its engine time and model (for the overhead
        metric, tolk.server.middleware) and its metrics."""
        request.state.engine_seconds = result.engine_seconds
        request.state.model = result.model
        self._count(result, texts)

    def _count(self, result: Translation, texts: int) -> None:
        metrics = self._metrics
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


# -- dependencies: what handlers get (accessors are `async def`: FastAPI runs plain `def`
# dependencies in a thread pool, a hand-off per request that costs tens of milliseconds
# under load) -------------------------------------------------------------------------------


def _state(name: str) -> Callable[[Request], Coroutine[Any, Any, Any]]:
    """A dependency giving `app.state.<name>` (what create_app put there)."""

    async def get(request: Request) -> Any:
        return getattr(request.app.state, name)

    return get


GatewayDep = Annotated[Gateway, Depends(_state("gateway"))]
PoolDep = Annotated[ModelPool, Depends(_state("pool"))]  # the languages served, for listings
StoreDep = Annotated[KeyStore, Depends(_state("store"))]  # glossaries, style rules made by API
ConfigDep = Annotated[TolkConfig, Depends(_state("config"))]
MemoriesDep = Annotated[TranslationMemories | None, Depends(_state("memories"))]
DocumentsDep = Annotated[DocumentStore, Depends(_state("documents"))]
LifecycleDep = Annotated[Lifecycle, Depends(_state("lifecycle"))]
MetricsDep = Annotated[ServiceMetrics, Depends(_state("metrics"))]


async def tolk_caller(request: Request, gateway: GatewayDep) -> Caller:
    """tolk's own API: the key from `Authorization: Bearer` or `X-API-Key`."""
    return gateway.caller(bearer_key(request))


async def deepl_caller(request: Request, params: ParamsDep, gateway: GatewayDep) -> Caller:
    """DeepL's API: the caller the `Authorization` header names (`DeepL-Auth-Key`, or tolk's
    `Bearer` and `X-API-Key`). DeepL takes the key there only, and so does tolk here:
    `auth_key` in the query string (which access logs, proxies and browser histories keep)
    or in the body is refused, with or without a header, as DeepL refuses it."""
    if params.has("auth_key"):
        raise InvalidKey(
            "send the key in the Authorization header (Authorization: DeepL-Auth-Key <key>), "
            "as DeepL's clients do; a key in the query string or body (auth_key) is not "
            "accepted, as DeepL no longer accepts it"
        )
    return gateway.caller(bearer_key(request))


TolkCallerDep = Annotated[Caller, Depends(tolk_caller)]
DeepLCallerDep = Annotated[Caller, Depends(deepl_caller)]

__all__ = [
    "ConfigDep",
    "DeepLCallerDep",
    "DocumentsDep",
    "Gateway",
    "GatewayDep",
    "LifecycleDep",
    "MemoriesDep",
    "MetricsDep",
    "PoolDep",
    "StoreDep",
    "TolkCallerDep",
    "Upload",
    "attachment",
    "client_closed",
]
