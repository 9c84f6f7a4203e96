"""`tolk keys add/list/revoke`: API keys in the server's key store (tolk.store.keys).

The store is the configuration's `store.url` or `access.db` (`--config`), or a SQLite file or
database URL given with `--db`.
Servers using it see a change within a few seconds, without a restart."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tolk.config import ConfigError, load_config, valid_rate
from tolk.failing import fail
from tolk.store.keys import Key, KeyStore, Period

app = typer.Typer(help="API keys: each with a character quota per period and a request rate.")
DbOption = Annotated[
    str | None,
    typer.Option("--db", help="The key store: a SQLite file or a database URL; else --config's."),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="A server configuration with store.url or access.db."),
]


def open_store(db: str | None, config: Path | None) -> KeyStore:
    location: Path | str | None = db if db is None or "://" in db else Path(db)
    if location is None and config is not None:
        try:
            loaded = load_config(config)
            location = loaded.store.url or loaded.access.db
        except ConfigError as exc:
            fail(str(exc))
    if location is None:
        fail(
            "name the key store: --db FILE|URL, or --config FILE whose store.url or access.db "
            "is set"
        )
    return KeyStore(location)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="A name for the key (who or what uses it).")],
    quota: Annotated[
        int | None, typer.Option(help="Characters of source text per period; none: unlimited.")
    ] = None,
    period: Annotated[str, typer.Option(help="month or day (UTC calendar).")] = "month",
    rate: Annotated[
        str | None, typer.Option(help="Requests allowed, e.g. '10/second', '600/minute'.")
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Make a key; it is printed once and stored only as a hash."""
    if period not in ("month", "day"):
        raise typer.BadParameter("period is month or day", param_hint="--period")
    try:
        valid_rate(rate)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--rate") from exc
    store = open_store(db, config)
    chosen: Period = "month" if period == "month" else "day"
    try:
        key, secret = store.add(name, quota, chosen, rate)
    except ValueError as exc:
        fail(str(exc))
    typer.echo(secret)
    typer.secho(
        f"key '{key.name}' ({key.id}) made; the line above is the key, shown only now",
        err=True,
    )


@app.command("list")
def list_keys(
    db: DbOption = None,
    config: ConfigOption = None,
    revoked: Annotated[bool, typer.Option(help="Show revoked keys too.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of a table.")] = False,
) -> None:
    """Keys with their quota, rate and this period's usage (never the keys themselves)."""
    store = open_store(db, config)
    keys: list[Key] = store.all_keys(include_revoked=revoked)
    if as_json:
        rows = [{**dataclasses.asdict(k), "used": store.used(k)} for k in keys]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "id", "quota", "used", "rate", "created", "revoked")
    for key in keys:
        quota = f"{key.character_limit}/{key.period}" if key.character_limit else "unlimited"
        table.add_row(
            key.name,
            key.id,
            quota,
            str(store.used(key)),
            key.rate or "unlimited",
            when(key.created),
            when(key.revoked),
        )
    Console().print(table)


@app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The key's name or id.")],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Revoke a key: servers refuse it (403) within a few seconds."""
    store = open_store(db, config)
    try:
        key = store.revoke(name)
    except KeyError as exc:
        fail(str(exc.args[0]))
    typer.echo(f"revoked '{key.name}' ({key.id})")
