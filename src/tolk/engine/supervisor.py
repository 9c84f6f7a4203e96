"""Engine supervision: a dead engine is started again in the same server, while the other
models keep serving; one that keeps dying makes the server give up, so that the supervisor
above it (Kubernetes, systemd, Docker's restart policy) replaces the whole process.

vLLM marks an AsyncLLM `errored` when its EngineCore or Worker process dies (vLLM's own
process monitor notices within a fraction of a second). The watch loop here notices that
state, waits a backoff (`restart_backoff`, doubling with each restart in the window, capped
at `restart_backoff_max`), cleans up what is left of the old engine and starts a new one.
Requests for the model meanwhile get 503 `engine_restarting` with a Retry-After from the
engine's measured start-up time. After `max_restarts` restarts within `restart_window`,
the next death is final: the model is marked failed and `on_give_up` is called (the server
then turns /health 503, drains and exits non-zero).

An engine is started on one long-lived thread (`Starter`): the start blocks for 15-25 s,
which must not stall the event loop, and the engine's processes are bound to the life of
the thread that started them (tolk.engine.lineage), so that thread must outlive them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from tolk.engine.engine import LLM, EngineStartError, ModelEngine
from tolk.engine.metrics import EngineMetrics
from tolk.engine.pool import ModelPool

log = logging.getLogger("tolk.engine")

CHECK_INTERVAL = 0.25


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window: float = 600.0
    backoff: float = 1.0
    backoff_max: float = 60.0

    def delay(self, restarts_in_window: int) -> float:
        """The wait before a restart when `restarts_in_window` happened already."""
        return float(min(self.backoff * 2**restarts_in_window, self.backoff_max))


def _shut_down_unused(future: Future[tuple[LLM, float]]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result()[0].shutdown()


class Starter:
    """The one thread engines are (re)started on, for the life of the server."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="tolk-engine-start")

    async def build(self, engine: ModelEngine, metrics: EngineMetrics) -> tuple[LLM, float]:
        """A new AsyncLLM for `engine`. If the caller is cancelled (the server stops during a
        restart), the engine still being started is shut down as soon as it is up."""
        future = self._executor.submit(
            engine.starter, engine.settings, metrics, models_sharing=engine.models_sharing
        )
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(_shut_down_unused)
            raise

    async def call(self, function: Callable[[], None]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, function)

    def close(self) -> None:
        self._executor.shutdown(wait=True)


class Supervisor:
    """Watches every engine of `pool`; restarts the dead ones as `policy` allows."""

    def __init__(
        self,
        pool: ModelPool,
        metrics: EngineMetrics,
        policy: RestartPolicy,
        on_give_up: Callable[[ModelEngine], None],
        starter: Starter | None = None,
    ) -> None:
        self.pool = pool
        self.metrics = metrics
        self.policy = policy
        self.on_give_up = on_give_up
        self.starter = starter or Starter()
        self.restarts: dict[str, collections.deque[float]] = {
            e.name: collections.deque() for e in pool.engines
        }

    async def run(self) -> None:
        """Watch until cancelled; each dead engine is handled by a task of its own."""
        recovering: set[asyncio.Task[None]] = set()
        try:
            while True:
                for engine in self.pool.engines:
                    # A recovery moves the engine out of "dead" in its first step.
                    if engine.state == "dead":
                        task = asyncio.create_task(self._recover(engine))
                        recovering.add(task)
                        task.add_done_callback(recovering.discard)
                await asyncio.sleep(CHECK_INTERVAL)
        finally:
            for task in recovering:
                task.cancel()
            await asyncio.gather(*recovering, return_exceptions=True)

    def _recent(self, name: str) -> collections.deque[float]:
        recent = self.restarts[name]
        now = time.monotonic()
        while recent and now - recent[0] > self.policy.window:
            recent.popleft()
        return recent

    async def _recover(self, engine: ModelEngine) -> None:
        """Restart `engine` until it serves again, or give up on it."""
        log.error(
            "the vLLM engine for model '%s' has died (its EngineCore or Worker process exited "
            "or failed)",
            engine.name,
        )
        while True:
            recent = self._recent(engine.name)
            if len(recent) >= self.policy.max_restarts:
                log.critical(
                    "giving up on model '%s': its engine died again after %d restart(s) within "
                    "%.0f s (server.max_restarts, server.restart_window); this server now "
                    "drains and exits for its supervisor to replace it",
                    engine.name,
                    len(recent),
                    self.policy.window,
                )
                engine.mark_failed()
                await self.starter.call(engine.shutdown)
                self.on_give_up(engine)
                return
            delay = self.policy.delay(len(recent))
            recent.append(time.monotonic())
            engine.mark_restarting(time.monotonic() + delay + max(engine.start_seconds, 1.0))
            log.warning(
                "restarting the engine for model '%s' in %.1f s (restart %d of at most %d "
                "within %.0f s); its requests get 503 'engine_restarting' meanwhile",
                engine.name,
                delay,
                len(recent),
                self.policy.max_restarts,
                self.policy.window,
            )
            await self.starter.call(engine.shutdown)
            await asyncio.sleep(delay)
            try:
                llm, seconds = await self.starter.build(engine, self.metrics)
            except EngineStartError as exc:
                log.error("restart of model '%s' failed: %s", engine.name, exc)
                continue
            engine.replace(llm, seconds)
            log.warning(
                "the engine for model '%s' serves again (started in %.1f s)", engine.name, seconds
            )
            return

    def close(self) -> None:
        self.starter.close()
