"""`tolk translate FILE... --to de`: files translated through a tolk server, written beside
them (`report.de.docx`) or into `--out-dir`.

Against a running server (`--url`) or one started for the run from a config (`--config`,
stopped afterwards). Text formats go to /translate with `stream: true`, so each file's bar
moves segment by segment and shows how many of its segments are in the engine; a file a
library opens (office files, OpenDocument, EPUB, PDF, XLIFF, locale files, gettext catalogues;
and a text file over the server's body limit) goes to /translate/file in one piece. A file the
server refuses for now (503: its model at capacity, as when this run's own files fill it) is
sent again after the server's Retry-After, within the file's `--timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from tolk import sse
from tolk.translation.files import FILE_TYPES, UnsupportedFileType, file_type

# Off a terminal rich assumes 80 columns, too narrow for a file's row.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
# Text files up to this size go to /translate (streamed); larger ones, and any the server
# finds over its body limit, to /translate/file.
STREAM_LIMIT = 120 << 10
# The longest a 503's Retry-After is waited for at once (a proxy's may be long).
MAX_RETRY_AFTER = 30.0


@dataclass(frozen=True)
class Job:
    source: Path
    target: Path


class TranslateFailed(Exception):
    pass


class ServerBusy(TranslateFailed):
    """A 503: the server asks for the file again in `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def translate_command(
    files: Annotated[
        list[Path],
        typer.Argument(help=f"Files: {' '.join(FILE_TYPES)}"),
    ],
    to: Annotated[str, typer.Option("--to", help="Target language, e.g. de, pt-BR.")],
    source: Annotated[str, typer.Option("--from", help="Source language of the files.")] = "en",
    url: Annotated[
        str | None, typer.Option(help="A running tolk server (or proxy), e.g. http://host:8000.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="Or: start a server from this config for the run.")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option(help="Where to write (default: beside each file).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="A configured model name.")] = None,
    split: Annotated[str, typer.Option(help="sentences, paragraphs or none.")] = "sentences",
    jobs: Annotated[int, typer.Option(min=1, help="Files translated at once.")] = 4,
    timeout: Annotated[float, typer.Option(help="Seconds per file (the server caps it).")] = 600,
) -> None:
    """Translate files, keeping their format: text, markup, subtitles, office files,
    OpenDocument, EPUB, PDF (into .docx), XLIFF, gettext and locale files."""
    if (url is None) == (config is None):
        raise typer.BadParameter("give --url of a running server or --config to start one")
    planned = []
    for path in files:
        if not path.is_file():
            raise typer.BadParameter(f"{path} is not a file")
        try:
            kind = file_type(path.name)
        except UnsupportedFileType as exc:
            raise typer.BadParameter(exc.message) from exc
        folder = out_dir or path.parent
        suffix = Path(kind.translated_name(path.name)).suffix  # a .pdf comes back as a .docx
        planned.append(Job(path, folder / f"{path.stem}.{to}{suffix}"))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    with _server(url, config, timeout) as base:
        failures = asyncio.run(
            _translate_all(base, planned, source, to, model, split, jobs, timeout)
        )
    for job, message in failures:
        console.print(f"[red]{job.source}: {message}[/red]")
    if failures:
        raise typer.Exit(1)


@contextlib.contextmanager
def _server(url: str | None, config: Path | None, timeout: float) -> Iterator[str]:
    if url is not None:
        yield url.rstrip("/")
        return
    assert config is not None
    from tolk.config import load_config
    from tolk.local.processes import start_server

    settings = load_config(config)
    server_settings = settings.server.model_copy(
        update={"request_timeout": max(settings.server.request_timeout, timeout)}
    )
    settings = settings.model_copy(update={"server": server_settings})
    with tempfile.TemporaryDirectory(prefix="tolk-translate-") as workdir:
        with console.status("starting tolk (the engine takes a while to load)..."):
            server = start_server(settings, Path(workdir), "server", ready_timeout=900)
        try:
            yield server.url
        finally:
            server.stop()


async def _translate_all(
    base: str,
    planned: list[Job],
    source: str,
    target: str,
    model: str | None,
    split: str,
    jobs: int,
    seconds: float,
) -> list[tuple[Job, str]]:
    failures: list[tuple[Job, str]] = []
    slots = asyncio.Semaphore(jobs)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[in_flight]}"),
        TimeElapsedColumn(),
        console=console,
    )
    options = {"source_lang": source, "target_lang": target, "split": split}
    if model:
        options["model"] = model
    async with httpx.AsyncClient(base_url=base) as client:

        async def one(job: Job) -> None:
            task = progress.add_task(job.source.name, total=None, count="waiting", in_flight="")
            async with slots:
                try:
                    content = await _again_while_busy(
                        lambda left: _translate(client, job, options, progress, task, left),
                        time.monotonic() + seconds,
                        lambda wait: progress.update(
                            task, count=f"server busy: again in {wait:g} s"
                        ),
                    )
                except (TranslateFailed, httpx.HTTPError) as exc:
                    failures.append((job, str(exc) or type(exc).__name__))
                    progress.update(task, description=f"[red]{job.source.name}", in_flight="")
                    return
            job.target.write_bytes(content)
            progress.update(
                task, description=f"{job.source.name} -> {job.target.name}", in_flight=""
            )

        with progress:
            await asyncio.gather(*(one(job) for job in planned))
    return failures


async def _again_while_busy(
    send: Callable[[float], Awaitable[bytes]],
    deadline: float,
    waiting: Callable[[float], object],
) -> bytes:
    """`send(seconds left)`'s translation, sent again after each 503's Retry-After (its
    wait told to `waiting`) while the file's time allows."""
    while True:
        try:
            return await send(deadline - time.monotonic())
        except ServerBusy as busy:
            if time.monotonic() + busy.retry_after >= deadline:
                raise
            waiting(busy.retry_after)
            await asyncio.sleep(busy.retry_after)  # the server's own word on when


async def _translate(
    client: httpx.AsyncClient,
    job: Job,
    options: dict[str, str],
    progress: Progress,
    task: TaskID,
    seconds: float,
) -> bytes:
    """The file's translation, asked for within `seconds` (the file's time left)."""
    data = job.source.read_bytes()
    kind = file_type(job.source.name)
    if not kind.parsed or len(data) > STREAM_LIMIT:
        return await _as_file(client, job, data, options, progress, task, seconds)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranslateFailed(f"not UTF-8 text (byte {exc.start})") from exc
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body: dict[str, Any] = {**options, "text": text.removeprefix(bom), "format": kind.kind}
    body["stream"] = True
    within = _within(seconds)
    async with client.stream("POST", "/translate", json=body, **within) as response:
        if response.status_code == 413:  # over this server's body limit: as a file, then
            return await _as_file(client, job, data, options, progress, task, seconds)
        if response.status_code != 200:
            await response.aread()
            _raise_for_error(response)
        async for name, event in sse.events(response.aiter_lines()):
            if name == "segment":
                progress.update(
                    task,
                    total=event["planned"],
                    completed=event["done"],
                    count=f"{event['done']}/{event['planned']} segments",
                    in_flight=f"{event['in_flight']} in flight",
                )
            elif name == "error":
                raise TranslateFailed(_message(event))
            elif name == "done":
                return (bom + str(event["translation"])).encode("utf-8")
    raise TranslateFailed("the server closed the stream before the translation was done")


async def _as_file(
    client: httpx.AsyncClient,
    job: Job,
    data: bytes,
    options: dict[str, str],
    progress: Progress,
    task: TaskID,
    seconds: float,
) -> bytes:
    """The whole file in one /translate/file request (no per-segment progress)."""
    progress.update(task, count="one request", in_flight="")
    response = await client.post(
        "/translate/file",
        files={"file": (job.source.name, data)},
        data=options,
        **_within(seconds),
    )
    _raise_for_error(response)
    progress.update(task, total=1, completed=1)
    return response.content


def _within(seconds: float) -> dict[str, Any]:
    """One request's time: the server told it (X-Request-Timeout), this client waits 30 s
    more for the answer."""
    return {"headers": {"X-Request-Timeout": f"{seconds:.3f}"}, "timeout": seconds + 30}


def _raise_for_error(response: httpx.Response) -> None:
    if response.status_code == 200:
        return
    try:
        message = _message(response.json())
    except ValueError:
        message = response.text[:200]
    text = f"HTTP {response.status_code}: {message}"
    after = response.headers.get("Retry-After", "")
    if response.status_code == 503 and after.isdigit():
        # (At least a second: a foreign proxy's 0 would have it sent back to back.)
        raise ServerBusy(text, min(max(float(after), 1.0), MAX_RETRY_AFTER))
    raise TranslateFailed(text)


def _message(body: dict[str, Any]) -> str:
    error = body.get("error", {})
    return str(error.get("message", body)) if isinstance(error, dict) else str(body)
