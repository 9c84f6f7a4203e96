"""REFERENCE BASELINE FOR COMPARISON ONLY; never used by `tolk serve`.

The case study's Part 1 architecture, rebuilt on the same model and engine so that
`tolk bench journey` can measure what it costs: a FastAPI main process; spawn-context worker
processes, each with its own synchronous vLLM `LLM`; a JoinableQueue of task keys; a Manager
dict holding the tasks; an event queue back; and a thread consuming that queue into
asyncio.Events the handlers await. With `batch_size` 1 each worker translates one request at
a time (Part 1's baseline); with `batch_size` 16 and a 50 ms collection timeout it is Part 2's
static batching, with its head-of-line blocking.

Run: python -m tolk.bench.baselines.mp_server --config FILE --model NAME --port P
         [--workers N] [--batch-size B] [--batch-timeout S] [--timeout S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import queue
import secrets
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import psutil
from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel

from tolk.budget import Budgets, counting
from tolk.config import ModelSettings, load_config
from tolk.engine.engine import GPU_MEMORY_SHARE
from tolk.server.gpu import GpuCollector

log = logging.getLogger("tolk.bench.baseline")


class EventType(StrEnum):
    completed = "completed"
    failed = "failed"


@dataclass
class TranslationTask:
    text: str
    source_lang: str
    target_lang: str


@dataclass
class Outcome:
    translation: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""


class EventTask:
    """Bridges a worker's result back to the awaiting coroutine."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.event = asyncio.Event()
        self.event_type: EventType | None = None
        self.result: Outcome | None = None

    def update(self, event_type: EventType, result: Outcome) -> None:
        self.event_type = event_type
        self.result = result
        self.event.set()


def process_queue(
    worker_id: int,
    settings: ModelSettings,
    translation_queue: Any,
    translation_tasks: Any,
    event_queue: Any,
    ready: Any,
    batch_size: int,
    batch_timeout: float,
) -> None:
    """A worker process: its own vLLM LLM, fed task keys from the shared queue."""
    from vllm import LLM

    from tolk.engine.engine import engine_args, on_cpu, sampling_params
    from tolk.engine.vllm_compat import VllmRelease
    from tolk.languages import lang
    from tolk.translation.jobs import plan_job
    from tolk.translation.prompts import clean

    args = engine_args(settings, cpu=on_cpu())
    llm: Any = LLM(**VllmRelease.installed().check_engine_args(args, settings.name))
    tokenizer = llm.get_tokenizer()
    budgets = Budgets(counting(tokenizer), settings.max_tokens_ratio)  # as tolk's engine
    max_model_len = llm.llm_engine.model_config.max_model_len
    ready.set()
    while True:
        keys = [translation_queue.get()]
        if keys[0] is None:
            llm.llm_engine.engine_core.shutdown()  # stop its EngineCore before exiting
            return
        started = time.monotonic()
        while len(keys) < batch_size:  # static batching: collect up to a batch, briefly
            remaining = batch_timeout - (time.monotonic() - started)
            if remaining <= 0:
                break
            try:
                key = translation_queue.get(timeout=remaining)
            except queue.Empty:
                break
            if key is None:
                translation_queue.put(None)
                break
            keys.append(key)
        tasks = [translation_tasks[k] for k in keys]
        prompts, params = [], []
        for task in tasks:
            source, target = lang(task.source_lang), lang(task.target_lang)
            job = plan_job(
                settings, tokenizer, max_model_len, 0, task.text, (source, target), budgets
            )
            prompts.append({"prompt_token_ids": job.prompt_ids})
            params.append(sampling_params(settings.sampling, max(1, job.max_tokens)))
        try:
            outputs = llm.generate(prompts, params, use_tqdm=False)
            for key, task, output in zip(keys, tasks, outputs, strict=True):
                completion = output.outputs[0]
                result = Outcome(
                    clean(completion.text, task.text, lang(task.target_lang)),
                    len(output.prompt_token_ids or []),
                    len(completion.token_ids),
                )
                event_queue.put((key, EventType.completed, result))
        except Exception as exc:  # report, keep the worker alive
            for key in keys:
                event_queue.put((key, EventType.failed, Outcome(error=repr(exc))))
        for _ in keys:
            translation_queue.task_done()


class TranslationWorker:
    def __init__(
        self, settings: ModelSettings, num_workers: int, batch_size: int, batch_timeout: float
    ) -> None:
        # The workers share one GPU: each gets its part of the model's memory share, as the
        # case study's `gpu_memory_per_worker` did.
        share = (settings.engine.gpu_memory_utilization or GPU_MEMORY_SHARE) / num_workers
        engine = settings.engine.model_copy(update={"gpu_memory_utilization": round(share, 3)})
        self.settings = settings.model_copy(update={"engine": engine})
        self.num_workers = num_workers
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self.ctx = multiprocessing.get_context("spawn")
        self.event_tasks: dict[str, EventTask] = {}
        self.processes: list[Any] = []

    def run(self, loop: asyncio.AbstractEventLoop) -> None:
        self.translation_queue = self.ctx.JoinableQueue(maxsize=300)
        self.manager = self.ctx.Manager()
        self.translation_tasks = self.manager.dict()
        self.event_queue = self.ctx.Queue()
        readies = []
        for worker_id in range(self.num_workers):
            ready = self.ctx.Event()
            process = self.ctx.Process(
                target=process_queue,
                args=(
                    worker_id,
                    self.settings,
                    self.translation_queue,
                    self.translation_tasks,
                    self.event_queue,
                    ready,
                    self.batch_size,
                    self.batch_timeout,
                ),
            )
            process.start()
            self.processes.append(process)
            readies.append(ready)
        for ready in readies:
            while not ready.wait(1.0):
                if any(not p.is_alive() for p in self.processes):
                    raise RuntimeError("a baseline worker died while loading its model")
        self.consumer = threading.Thread(target=self._consume, args=(loop,), daemon=True)
        self.consumer.start()

    def _consume(self, loop: asyncio.AbstractEventLoop) -> None:
        """The thread that turns the event queue into asyncio.Event wake-ups."""
        while True:
            message = self.event_queue.get()
            if message is None:
                return
            key, event_type, result = message
            task = self.event_tasks.pop(key, None)
            self.translation_tasks.pop(key, None)
            if task is not None:
                loop.call_soon_threadsafe(task.update, event_type, result)

    def add_translation_task(self, text: str, source_lang: str, target_lang: str) -> EventTask:
        key = "t_" + secrets.token_hex(5)
        self.translation_tasks[key] = TranslationTask(text, source_lang, target_lang)
        event_task = EventTask(key)
        self.event_tasks[key] = event_task
        self.translation_queue.put(key)
        return event_task

    def stop(self) -> None:
        for _ in self.processes:
            self.translation_queue.put(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():  # kill its engine processes too, not just the worker
                family = psutil.Process(process.pid).children(recursive=True)
                process.kill()
                for child in family:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        child.kill()
        self.event_queue.put(None)
        self.manager.shutdown()


class Body(BaseModel):
    text: str
    source_lang: str
    target_lang: str


def create_baseline_app(
    settings: ModelSettings,
    workers: int,
    batch_size: int,
    batch_timeout: float,
    timeout: float = 30.0,
) -> FastAPI:
    worker = TranslationWorker(settings, workers, batch_size, batch_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.run(asyncio.get_running_loop())
        try:
            yield
        finally:
            worker.stop()

    app = FastAPI(title="case-study baseline (comparison only)", lifespan=lifespan)

    @app.post("/translate")
    async def translate(body: Body) -> JSONResponse:
        event_task = worker.add_translation_task(body.text, body.source_lang, body.target_lang)
        try:
            await asyncio.wait_for(event_task.event.wait(), timeout)
        except TimeoutError:
            return JSONResponse(
                {"error": {"code": "deadline_exceeded", "message": "timed out"}}, 504
            )
        result = event_task.result or Outcome(error="no result")
        if event_task.event_type is not EventType.completed:
            return JSONResponse({"error": {"code": "internal_error", "message": result.error}}, 500)
        return JSONResponse(
            {
                "translation": result.translation,
                "model": settings.name,
                "usage": {
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                },
            }
        )

    @app.get("/ready")
    async def ready() -> dict[str, str]:
        return {"status": "ready"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    registry = CollectorRegistry(auto_describe=True)
    registry.register(GpuCollector())

    @app.get("/metrics")
    async def metrics() -> Response:
        # No engine metrics (the workers' engines are in other processes); the GPU's
        # utilisation where there is one, for `tolk bench run`'s timeline.
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--batch-timeout", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    args = parser.parse_args()
    import uvicorn

    config = load_config(args.config)
    settings = next(m for m in config.models if m.name == args.model)
    logging.basicConfig(level="INFO")
    app = create_baseline_app(
        settings, args.workers, args.batch_size, args.batch_timeout, args.timeout
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
