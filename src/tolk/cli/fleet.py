"""`tolk fleet`: N demo servers, the proxy and Prometheus on loopback, until Ctrl-C."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tolk.config import ConfigError, load_config, require_model_directories
from tolk.failing import fail
from tolk.local import DEMO_CONFIG

READY = "fleet ready: Ctrl-C stops everything"


def say(line: str, colour: str | None = None) -> None:
    """One line of progress on stderr, never wrapped (scripts and tests read them)."""
    typer.secho(f"[{time.strftime('%H:%M:%S')}] {line}", fg=colour, err=True)


def fleet_command(
    servers: Annotated[
        int | None,
        typer.Option(
            min=1, help="How many `tolk serve` processes (default 2, or one per --config)."
        ),
    ] = None,
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            help="The servers' configuration (its port is set); given once per server, each "
            "server its own (e.g. servers serving different language pairs). Default: the demo.",
        ),
    ] = None,
    gpus: Annotated[
        str,
        typer.Option(
            help="Where the servers run: auto (one NVIDIA GPU each, in turn, of those "
            "CUDA_VISIBLE_DEVICES lists or NVML finds; none found: no placement), none, or "
            "a list of CUDA device ids such as 0,1."
        ),
    ] = "auto",
    port: Annotated[int, typer.Option(help="The proxy's port (0: any free one).")] = 8080,
    prometheus_port: Annotated[
        int, typer.Option(help="Prometheus' port (0: any free one).")
    ] = 9090,
    prometheus: Annotated[
        str | None, typer.Option(help="The prometheus binary (default: the one on PATH).")
    ] = None,
    scrape_interval: Annotated[float, typer.Option(help="Prometheus' scrape interval, s.")] = 5.0,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Logs, configs and Prometheus' data (default: a new temp dir)."),
    ] = None,
) -> None:
    """Start a whole deployment on loopback: N servers, the proxy in front of them and (with a
    `prometheus` binary) Prometheus with tolk's alerting rules. Prints the URLs; Ctrl-C stops
    them all."""
    from tolk.local.fleet import start_fleet, visible_gpus

    paths = config or [DEMO_CONFIG]
    count = servers or (len(paths) if len(paths) > 1 else 2)
    if len(paths) > 1 and count != len(paths):
        raise typer.BadParameter(
            f"{len(paths)} configs for {count} servers: give --config once, or once per server"
        )
    try:
        settings = [load_config(path) for path in paths]
        for each in settings:
            require_model_directories(each)
        placement = visible_gpus(gpus)
    except ConfigError as exc:
        fail(str(exc))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    where = workdir or Path(tempfile.mkdtemp(prefix="tolk-fleet-"))
    stop = threading.Event()

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            return
        stop.set()
        raise KeyboardInterrupt  # also ends a start still under way, which then cleans up

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        fleet = start_fleet(
            settings if len(settings) > 1 else settings[0],
            count,
            where.resolve(),
            gpus=placement,
            proxy_port=port or None,
            prometheus_port=prometheus_port or None,
            prometheus=prometheus,
            scrape_interval=scrape_interval,
            say=say,
        )
    except KeyboardInterrupt:
        say("stopped while starting; everything it had started is stopped")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        say(f"the fleet did not start: {exc}", typer.colors.RED)
        raise typer.Exit(1) from exc

    table = Table(title="tolk fleet", title_justify="left")
    table.add_column("what")
    table.add_column("URL")
    for name, url in fleet.urls():
        table.add_row(name, url)
    Console().print(table)
    for note in fleet.notes:
        say(note, typer.colors.YELLOW)
    say(f"logs and configs: {where}")
    typer.echo(READY, err=True)
    code = 0
    try:
        while not stop.wait(1.0):
            if ended := fleet.exited():
                say("; ".join(ended) + ": stopping the rest", typer.colors.RED)
                code = 1
                break
    except KeyboardInterrupt:
        pass
    say("stopping the fleet (servers drain their requests first)")
    # A second Ctrl-C must not cut the stop short and leave processes behind.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fleet.stop()
    say("stopped: no process of the fleet is left")
    raise typer.Exit(code)
