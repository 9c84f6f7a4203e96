"""`tolk fetch-model [NAME] [--dest DIR] [--force]`: a real model, fetched, checked by sha256
and converted into the directory `tolk serve` loads (see tolk.models.fetch).

Long steps show rich progress bars on a terminal and one plain line per step elsewhere (CI
logs, `make serve` piped to a file). Exit status 1, with what to do, when the file is refused
or pip cannot get a part; 2 for an unknown model name.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from tolk.failing import fail
from tolk.models.sources import DEFAULT_MODEL, SOURCES

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


class RichProgress:
    """Each step a bar (bytes, or a count) or a spinner, on stderr."""

    def __init__(self) -> None:
        self._bar: Progress | None = None

    def start(self, description: str, total: int | None = None, *, unit: str = "") -> None:
        self.finish()
        columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            amount = DownloadColumn() if unit == "B" else MofNCompleteColumn()
            columns += [BarColumn(), amount]
        columns.append(TimeElapsedColumn())
        self._bar = Progress(*columns, console=console)
        self._bar.add_task(description, total=total)
        self._bar.start()

    def update(self, *, advance: int = 0, description: str | None = None) -> None:
        if self._bar is not None:
            task = self._bar.task_ids[0]
            if description is not None:
                self._bar.update(task, description=description)
            if advance:
                self._bar.advance(task, advance)

    def finish(self, *, failed: bool = False) -> None:
        if self._bar is not None:
            task = self._bar.tasks[0]
            if failed:
                self._bar.update(task.id, description=f"[red]{task.description}: failed")
            elif task.total is None:
                self._bar.update(task.id, total=1, completed=1)
            self._bar.stop()
            self._bar = None

    def note(self, message: str) -> None:
        console.print(message, highlight=False)


class PlainProgress:
    """One line when a step starts (or says what it does now) and one when it ends."""

    def __init__(self) -> None:
        self._step: str | None = None
        self._since = 0.0
        self._done = 0
        self._unit = ""

    def start(self, description: str, total: int | None = None, *, unit: str = "") -> None:
        self.finish()
        self._step, self._since, self._done, self._unit = description, time.monotonic(), 0, unit
        self._say(f"{description} ...")

    def update(self, *, advance: int = 0, description: str | None = None) -> None:
        self._done += advance
        if description is not None:
            self._say(f"  {description}")

    def finish(self, *, failed: bool = False) -> None:
        if self._step is None:
            return
        if failed:
            self._say(f"{self._step}: failed ({time.monotonic() - self._since:.1f} s)")
            self._step = None
            return
        amount = ""
        if self._done:
            amount = (
                f"{self._done:,} bytes, " if self._unit == "B" else f"{self._done} {self._unit}, "
            )
        self._say(f"{self._step}: done ({amount}{time.monotonic() - self._since:.1f} s)")
        self._step = None

    def note(self, message: str) -> None:
        self._say(message)

    @staticmethod
    def _say(line: str) -> None:
        typer.echo(line, err=True)


def fetch_model_command(
    name: Annotated[
        str, typer.Argument(help=f"Which model: {', '.join(SOURCES)}.", show_default=True)
    ] = DEFAULT_MODEL,
    dest: Annotated[
        Path | None,
        typer.Option(help="Model directory to write (default: models/<model>-instruct)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Convert again even if DEST holds the model; replace a directory not tolk's.",
        ),
    ] = False,
) -> None:
    """Fetch a real model (Qwen's official GGUF, checked by sha256) and convert it into a
    model directory for `tolk serve`."""
    from tolk.models.convert import ConversionError
    from tolk.models.fetch import FetchError, ensure_model, is_complete, known_source, read_marker

    try:
        source = known_source(name)
    except FetchError as exc:
        fail(str(exc))
    target = dest if dest is not None else Path(source.default_dest)
    progress = RichProgress() if sys.stderr.isatty() else PlainProgress()
    already = not force and is_complete(target, source)
    started = time.monotonic()
    try:
        ensure_model(name, target, progress=progress, force=force)
    except (FetchError, ConversionError) as exc:
        progress.finish(failed=True)
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    except BaseException:
        progress.finish(failed=True)
        raise
    progress.finish()
    if already:
        progress.note(f"{source.description}: already in {target}")
    else:
        marker = read_marker(target) or {}
        progress.note(
            f"{source.description}: from the {marker.get('transport', '?')}, converted in "
            f"{time.monotonic() - started:.0f} s (weights {marker.get('weights_dtype', '?')})"
        )
    typer.echo(str(target))
    typer.echo(f"sha256 {source.sha256}  {source.gguf_file}")
