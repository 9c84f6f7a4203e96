"""How every `tolk` command fails: the reason in red on standard error, exit status 2 (a
usage or configuration error the user can act on; 1 stays Python's for a crash)."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str) -> NoReturn:
    """Stop the command with `message`: red on standard error, exit status 2."""
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(2)
