"""Translated files waiting to be fetched: DeepL's `/v2/document` jobs (translated in the
background, polled, downloaded once) and LibreTranslate's `/translate_file` results
(`/download_file/<name>`). Kept in this process's memory, at most `capacity` of them, each
for `ttl` seconds; a job still running when the server stops is cancelled (its engine
requests aborted) and its document is gone, which the README says.

No caller can take the store for itself: at most `per_owner` documents per caller (API key,
or the anonymous caller), its oldest fetched-or-failed one making room first, and at most
`max_bytes` of translated files held in all, the oldest finished ones dropped first. A
caller whose `per_owner` documents are all still translating is refused (503/429)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.requests import Request

from tolk.engine.timing import CLOCK
from tolk.errors import Overloaded, TolkError
from tolk.translation.files import TranslatedFile

log = logging.getLogger("tolk.server")
Status = Literal["queued", "translating", "done", "error"]


@dataclass
class StoredDocument:
    id: str
    key: str
    owner: str
    filename: str
    created: float = field(default_factory=time.monotonic)
    task: asyncio.Task[TranslatedFile] | None = None
    result: TranslatedFile | None = None
    error: str | None = None

    @property
    def status(self) -> Status:
        if self.result is not None:
            return "done"
        if self.error is not None:
            return "error"
        return "translating"


class DocumentStore:
    def __init__(
        self,
        capacity: int = 200,
        ttl: float = 3600.0,
        per_owner: int = 20,
        max_bytes: int = 512 << 20,
    ) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self.per_owner = per_owner
        self.max_bytes = max_bytes
        self._documents: dict[str, StoredDocument] = {}

    def held_bytes(self) -> int:
        return sum(len(d.result.content) for d in self._documents.values() if d.result)

    def _finished(self, owner: str | None = None) -> list[StoredDocument]:
        """Documents no longer translating (oldest first), of `owner` if given."""
        return sorted(
            (
                d
                for d in self._documents.values()
                if d.status != "translating" and (owner is None or d.owner == owner)
            ),
            key=lambda d: d.created,
        )

    def _keep_within_bytes(self) -> None:
        held = self.held_bytes()
        for doc in self._finished():
            if held <= self.max_bytes:
                return
            held -= len(doc.result.content) if doc.result else 0
            self.drop(doc.id)

    def _make_room(self, owner: str) -> None:
        now = time.monotonic()
        for doc in list(self._documents.values()):
            if now - doc.created > self.ttl:
                self.drop(doc.id)
        mine = [d for d in self._documents.values() if d.owner == owner]
        if len(mine) >= self.per_owner:
            done = self._finished(owner)
            if not done:
                raise Overloaded(
                    f"this key has {self.per_owner} documents being translated, the most one "
                    "key may have at once; wait for them to finish",
                    retry_after=10.0,
                )
            self.drop(done[0].id)
        if len(self._documents) < self.capacity:
            return
        finished = [d for d in self._documents.values() if d.status != "translating"]
        if not finished:
            raise Overloaded(
                f"{self.capacity} documents are being translated or waiting to be fetched; "
                "fetch yours, or retry in a while",
                retry_after=10.0,
            )
        self.drop(min(finished, key=lambda d: d.created).id)

    def _new(self, owner: str, filename: str) -> StoredDocument:
        self._make_room(owner)
        doc = StoredDocument(
            uuid.uuid4().hex.upper(), secrets.token_hex(32).upper(), owner, filename
        )
        self._documents[doc.id] = doc
        return doc

    def put(self, owner: str, filename: str, result: TranslatedFile) -> StoredDocument:
        doc = self._new(owner, filename)
        doc.result = result
        self._keep_within_bytes()
        return doc

    def start(
        self, owner: str, filename: str, work: Coroutine[Any, Any, TranslatedFile]
    ) -> StoredDocument:
        """Translate in the background; the document is `done` or `error` when it ends."""
        try:
            doc = self._new(owner, filename)
        except BaseException:
            work.close()
            raise
        # Without the POST's clock (tolk.engine.timing): its answer is sent already, and
        # the job's engine requests are not that request's.
        doc.task = asyncio.create_task(work, context=_without_clock())

        def finished(task: asyncio.Task[TranslatedFile]) -> None:
            if task.cancelled():
                doc.error = "the translation was stopped (the server is shutting down)"
            elif isinstance(task.exception(), TolkError):
                doc.error = str(task.exception())
            elif task.exception() is not None:
                log.error("document %s failed", doc.id, exc_info=task.exception())
                doc.error = "the translation failed; it has been logged"
            else:
                doc.result = task.result()
                self._keep_within_bytes()

        doc.task.add_done_callback(finished)
        return doc

    def get(self, doc_id: str) -> StoredDocument | None:
        doc = self._documents.get(doc_id)
        if doc is not None and time.monotonic() - doc.created > self.ttl:
            self.drop(doc_id)
            return None
        return doc

    def drop(self, doc_id: str) -> None:
        doc = self._documents.pop(doc_id, None)
        if doc is not None and doc.task is not None and not doc.task.done():
            doc.task.cancel()

    async def wait(self, doc: StoredDocument, seconds: float) -> None:
        """Until the document's translation ends, or `seconds` pass."""
        if doc.task is not None and not doc.task.done():
            await asyncio.wait({doc.task}, timeout=seconds)  # neither raises nor cancels it

    async def close(self) -> None:
        tasks = [d.task for d in self._documents.values() if d.task and not d.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._documents.clear()


def documents_of(request: Request) -> DocumentStore:
    """The server's document store (app.state.documents)."""
    store: DocumentStore = request.app.state.documents
    return store


def _without_clock() -> contextvars.Context:
    """A copy of the current context with no request clock in it (tolk.engine.timing)."""
    context = contextvars.copy_context()
    context.run(CLOCK.set, None)
    return context
