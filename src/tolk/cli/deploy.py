"""`tolk deploy llm-d`: the pod labels and EndpointPickerConfig that let the llm-d router
route tolk requests by language pair, generated from tolk's server configs (tolk.llm_d)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tolk.config import ConfigError, load_config
from tolk.failing import fail
from tolk.llm_d import FILES, LlmDError, ModelGroup, model_group, relative, render

app = typer.Typer(
    help="What other routers need to route tolk's requests, generated from tolk's configs.",
    no_args_is_help=True,
)


@app.command("llm-d")
def llm_d_command(
    config: Annotated[
        list[Path],
        typer.Option(
            "--config",
            "-c",
            help="A model group's `tolk serve` config; repeat for each group of the fleet.",
        ),
    ],
    deployment: Annotated[
        list[str] | None,
        typer.Option(
            help="The Deployment running each --config, in the same order "
            "(default: tolk-server, with one --config).",
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(help=f"Write {' and '.join(FILES)} here; without it they are printed."),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(help="With --out-dir: write nothing, exit 1 if the files there differ."),
    ] = False,
) -> None:
    """Pod labels (the pairs each pod serves) and an llm-d EndpointPickerConfig (one
    scheduling profile per pair, picking by queue depth and KV-cache use)."""
    names = deployment or (["tolk-server"] if len(config) == 1 else [])
    if len(names) != len(config):
        fail("give one --deployment per --config (the Deployment that runs it)")
    if check and out_dir is None:
        fail("--check compares with the files in --out-dir: give it")
    groups: list[ModelGroup] = []
    try:
        for path, name in zip(config, names, strict=True):
            groups.append(model_group(load_config(path), name))
    except (ConfigError, LlmDError) as exc:
        fail(str(exc))
    where = out_dir if out_dir is not None else Path.cwd()
    files = render(groups, [relative(path, where) for path in config])
    if out_dir is None:
        for name, text in files.items():
            typer.echo(f"# {name}\n{text}", nl=False)
        return
    if check:
        stale = [
            name
            for name, text in files.items()
            if not (out_dir / name).is_file() or (out_dir / name).read_text() != text
        ]
        if stale:
            typer.secho(
                f"{', '.join(stale)} in {out_dir} differ from what the configs make; "
                "run this command without --check to regenerate",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(1)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text)
        typer.echo(f"wrote {out_dir / name}")
