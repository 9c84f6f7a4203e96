"""`tolk memories import/list/delete`: translation memories (TMX files, tolk.store.memories) in the
server's store (`store.url` or `access.db` of `--config`, or `--db`). Servers using the store
see a new memory at once: requests name it by the id `import` prints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tolk.cli.keys import ConfigOption, DbOption, open_store, when
from tolk.failing import fail
from tolk.store.memories import TranslationMemories

app = typer.Typer(help="Translation memories: TMX files that translations can name.")


def _memories(db: str | None, config: Path | None) -> TranslationMemories:
    return TranslationMemories(open_store(db, config).database)


@app.command("import")
def import_tmx(
    tmx: Annotated[Path, typer.Argument(help="A TMX file.", exists=True, dir_okay=False)],
    name: Annotated[str, typer.Option(help="The memory's name.")],
    source_lang: Annotated[
        str | None, typer.Option(help="Its source language (default: the header's srclang).")
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Import a TMX file as a new translation memory; prints its id."""
    memories = _memories(db, config)
    try:
        made = memories.import_tmx(tmx, name, source_lang)
    except (ValueError, LookupError) as exc:
        fail(str(exc))
    typer.echo(made.id)
    typer.secho(
        f"translation memory '{made.name}': {made.segments} segments from {made.source_lang} "
        f"into {', '.join(made.target_langs)}",
        err=True,
    )


@app.command("list")
def list_memories(
    db: DbOption = None,
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False,
) -> None:
    """The translation memories with their languages and sizes."""
    found = _memories(db, config).all()
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(m) for m in found], indent=2))
        return
    table = Table("name", "id", "source", "targets", "segments", "imported")
    for m in found:
        table.add_row(
            m.name, m.id, m.source_lang, ",".join(m.target_langs), str(m.segments),
            when(m.created),
        )  # fmt: skip
    Console().print(table)


@app.command("delete")
def delete(
    memory_id: Annotated[str, typer.Argument(help="The memory's id.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Delete a translation memory."""
    if not _memories(db, config).delete(memory_id):
        fail(f"no translation memory '{memory_id}'")
    typer.secho(f"deleted translation memory {memory_id}", err=True)
