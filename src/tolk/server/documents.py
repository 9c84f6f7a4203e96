"""Translated files waiting to be fetched: DeepL's `/v2/document` jobs (translated in the
background, polled, downloaded once) and LibreTranslate's `/translate_file` results
(`/download_file/<name>`). Kept in this process's memory, at most `capacity` of them, each
for `ttl` seconds; a job still running when the server stops is cancelled (its engine
requests aborted) and its document is gone, which the README says."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.requests import Request

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
    def __init__(self, capacity: int = 200, ttl: float = 3600.0) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._documents: dict[str, StoredDocument] = {}

    def _make_room(self) -> None:
        now = time.monotonic()
        for doc in list(self._documents.values()):
            if now - doc.created > self.ttl:
                self.drop(doc.id)
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
        self._make_room()
        doc = StoredDocument(
            uuid.uuid4().hex.upper(), secrets.token_hex(32).upper(), owner, filename
        )
        self._documents[doc.id] = doc
        return doc

    def put(self, owner: str, filename: str, result: TranslatedFile) -> StoredDocument:
        doc = self._new(owner, filename)
        doc.result = result
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
        doc.task = asyncio.create_task(work)

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
