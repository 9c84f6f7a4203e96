"""The app factory: `create_app(config)` builds the FastAPI app; its lifespan starts the
engines and always shuts them down."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import SQLAlchemyError

import tolk
from tolk import languages
from tolk.config import TolkConfig
from tolk.engine import (
    EngineMetrics,
    LLMStarter,
    ModelEngine,
    ModelPool,
    build_llm,
    lineage,
    vllm_compat,
)
from tolk.engine.supervisor import RestartPolicy, Supervisor
from tolk.errors import ClientDisconnected
from tolk.server.access import Access
from tolk.server.api import (
    deepl,
    deepl_glossaries,
    deepl_memories,
    deepl_style_rules,
    deepl_write,
    deeplx,
    extensions,
    libretranslate,
    openai,
    web,
)
from tolk.server.api.tolk import router
from tolk.server.documents import DocumentStore
from tolk.server.gateway import Gateway, client_closed
from tolk.server.lifecycle import Lifecycle
from tolk.server.loopwatch import StallWatch
from tolk.server.metrics import CONCURRENCY_SAMPLE_INTERVAL, LOOP_SAMPLE_INTERVAL, ServiceMetrics
from tolk.server.middleware import BodySizeLimit, BodyTimeout, RequestAccounting, Shedding
from tolk.store.keys import SYNC_SECONDS, KeyStore
from tolk.store.memories import TranslationMemories
from tolk.store.segment_cache import FLUSH_SECONDS, SegmentMemory
from tolk.translation import Limits, Translator
from tolk.translation.service import NamedGlossary
from tolk.wire.endpoints import ApiDispatch
from tolk.wire.errors import install_error_handlers

log = logging.getLogger("tolk.server")


def supervise(
    pool: ModelPool, config: TolkConfig, engine_metrics: EngineMetrics, lifecycle: Lifecycle
) -> Supervisor:
    """Restart dead engines; give the whole server up (drain, exit 3) on one that keeps dying."""
    s = config.server

    def give_up(engine: ModelEngine) -> None:
        lifecycle.give_up(
            f"the engine for model '{engine.name}' died again after {s.max_restarts} "
            f"restart(s) within {s.restart_window:g} s"
        )

    return Supervisor(
        pool,
        engine_metrics,
        RestartPolicy(s.max_restarts, s.restart_window, s.restart_backoff, s.restart_backoff_max),
        on_give_up=give_up,
    )


async def sample_concurrency(pool: ModelPool, metrics: ServiceMetrics) -> None:
    """Record how many texts each engine holds, every CONCURRENCY_SAMPLE_INTERVAL seconds:
    the in-flight distribution `tolk tune` right-sizes max_num_seqs for."""
    histograms = {e.name: metrics.concurrency.labels(e.name) for e in pool.engines}
    while True:
        for engine in pool.engines:
            histograms[engine.name].observe(engine.in_flight)
        await asyncio.sleep(CONCURRENCY_SAMPLE_INTERVAL)


async def every(seconds: float, work: Callable[[], object], what: str) -> None:
    """`work` every `seconds`, in a thread: a disk that stalls (a WAL checkpoint's fsync) or
    a database far away must not stall the event loop. A failure is logged and retried."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await asyncio.to_thread(work)
        except SQLAlchemyError as exc:
            log.error("%s failed (retried): %s", what, exc)


def build_translator(
    config: TolkConfig, pool: ModelPool, store: KeyStore, memory: SegmentMemory | None = None
) -> Translator:
    """The translation service over `pool`, with the configured glossaries and those made
    through DeepL's API (kept in the key store, which other servers may share)."""
    glossaries = {
        name: NamedGlossary(g.source_lang, g.target_lang, g.entries)
        for name, g in config.glossaries.items()
    }

    def find_glossary(glossary_id: str) -> list[NamedGlossary] | None:
        found = store.glossary(glossary_id)
        if found is None:
            return None
        return [NamedGlossary(d.source_lang, d.target_lang, d.entries) for d in found.dictionaries]

    s = config.server
    limits = Limits(
        s.max_request_chars,
        s.max_texts,
        s.max_file_chars,
        s.segment_timeout,
        s.max_alternatives,
        prepare_threads=s.prepare_threads,
        inline_chars=s.inline_chars,
        max_unzipped_bytes=int(s.max_unzipped_bytes),
        turn_budget=s.turn_budget_ms / 1000,
        subtitles_in_context=s.subtitles_in_context,
    )
    return Translator(
        pool,
        limits,
        glossaries,
        find_glossary=find_glossary,
        memory=memory,
        memories=TranslationMemories(store.database),
    )


class ServerParts:
    """What one server holds for its life: made with the app, started and stopped by its
    lifespan (the engines, the service, the supervisor and the background samplers)."""

    def __init__(self, config: TolkConfig, starter: LLMStarter | None) -> None:
        self.config = config
        self.starter = starter
        self.engine_metrics = EngineMetrics()
        self.metrics = ServiceMetrics(self.engine_metrics)
        self.lifecycle = Lifecycle(config.server.shutdown_grace)
        self.store = KeyStore(
            config.store.url or config.access.db,
            max_glossaries=config.access.max_glossaries,
            max_glossary_bytes=int(config.access.max_glossary_bytes),
        )
        self.access = Access(self.store, config.access.require_key, config.access.anonymous_rate)
        self.documents = DocumentStore()
        cache = config.segment_cache
        cache_url = cache.url or config.store.url
        self.memory = SegmentMemory(cache_url, cache.max_entries) if cache.enabled else None
        self._background: list[asyncio.Task[None]] = []
        self._translator: Translator | None = None
        self._begun = time.monotonic()

    def start(self, app: FastAPI) -> None:
        """Start the engines (blocking: their start-up), then what runs beside them."""
        begun = time.monotonic()
        real = self.starter is None
        if real:
            # Engines started from here on die with this process, however it ends.
            lineage.bind_engines_to_this_process()
        pool = ModelPool.start(self.config.models, self.engine_metrics, self.starter or build_llm)
        if real:
            vllm_compat.cache_envs()
        app.state.pool = self.pool = pool
        self.metrics.start_models(pool.engines)
        translator = self._translator = build_translator(self.config, pool, self.store, self.memory)
        self.metrics.pairs.watches = {
            "examples": translator.copying,
            "markup_retry": translator.markup_retries,
            "markup_whole": translator.markup_whole,
            "retry": translator.retries,
            "first_try": translator.first_tries,
        }
        app.state.memories = translator.memories
        app.state.gateway = Gateway(
            self.config, translator, self.lifecycle, self.metrics, self.access, self.documents
        )
        self.supervisor = supervise(pool, self.config, self.engine_metrics, self.lifecycle)
        self._background = [
            asyncio.create_task(self.supervisor.run()),
            asyncio.create_task(sample_concurrency(pool, self.metrics)),
            asyncio.create_task(every(SYNC_SECONDS, self.store.sync, "syncing the key store")),
            # The loop's lag (tolk_event_loop_stall_seconds) and, beside it, the steps that
            # hold it past loop_stall_warning, named by their stack.
            asyncio.create_task(
                StallWatch(
                    self.config.server.loop_stall_warning,
                    self.metrics.loop_stalls,
                    LOOP_SAMPLE_INTERVAL,
                ).run(self.metrics.loop_stall.observe, self.metrics.loop_cpu.inc)
            ),
        ]
        if self.memory is not None:
            flush = every(FLUSH_SECONDS, self.memory.flush, "writing the segment cache")
            self._background.append(asyncio.create_task(flush))
        languages.warm(t for e in pool.engines for t in e.settings.coverage.tags())
        self._begun = begun

    async def ready(self) -> None:
        """What is left before the server takes traffic: each real engine's warm-up
        (ModelEngine.warm_up: a stand-in compiles nothing), then the heap set aside."""
        if self.starter is None:
            await asyncio.gather(*(e.warm_up() for e in self.pool.engines))
        # Everything allocated so far (vLLM, torch, transformers, the tokenizers) lives as long
        # as the server: move it out of the garbage collector's sight, as vLLM's own server
        # does, so that full collections under load do not scan it (tens of ms each).
        gc.collect()
        gc.freeze()
        log.info(
            "tolk ready: %d model(s) in %.1f s: %s",
            len(self.pool.engines),
            time.monotonic() - self._begun,
            ", ".join(e.name for e in self.pool.engines),
        )

    async def stop(self) -> None:
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.documents.close()
        self.pool.shutdown()
        self.supervisor.close()
        app_translator = self._translator
        if app_translator is not None:
            app_translator.close()
        self.store.sync()  # the last usage counts
        self.store.close()
        if self.memory is not None:
            try:
                self.memory.flush()  # the last translations are kept
            except SQLAlchemyError as exc:
                log.error("the segment cache's last writes were lost: %s", exc)
            self.memory.close()
        log.info("engines shut down")


def create_app(config: TolkConfig, *, starter: LLMStarter | None = None) -> FastAPI:
    """The app of `tolk serve`. `starter` starts each model's LLM: vLLM's (the default), or
    a stand-in's (tolk.testing.fake_engine) for tests of the HTTP edge, in-process."""
    parts = ServerParts(config, starter)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        parts.start(app)
        try:
            await parts.ready()
            yield
        finally:
            await parts.stop()

    app = FastAPI(
        title="tolk",
        version=tolk.__version__,
        summary="Self-hosted, high-throughput machine translation on vLLM",
        lifespan=lifespan,
    )
    app.state.metrics = parts.metrics
    app.state.lifecycle = parts.lifecycle
    app.state.documents = parts.documents
    app.state.store = parts.store
    app.state.config = config
    install_error_handlers(app)
    app.add_exception_handler(ClientDisconnected, client_closed)
    apis = (
        deepl.router,
        deepl_glossaries.router,
        deepl_memories.router,
        deepl_style_rules.router,
        deepl_write.router,
        libretranslate.router,
        deeplx.router,
        extensions.router,
        openai.router,
    )
    for api in (router, *apis, web.router):
        app.include_router(api)
    app.mount("/static", StaticFiles(packages=[("tolk.server", "static")]), name="static")
    # add_middleware wraps: the last added is outermost.
    server = config.server
    app.add_middleware(
        BodySizeLimit,
        max_bytes=int(server.max_body_bytes),
        large_bytes=int(server.max_file_bytes),
    )
    app.add_middleware(Shedding, metrics=parts.metrics)
    app.add_middleware(ApiDispatch, max_peek=int(server.max_body_bytes))
    app.add_middleware(BodyTimeout, seconds=server.body_timeout)
    app.add_middleware(RequestAccounting, metrics=parts.metrics)
    return app
