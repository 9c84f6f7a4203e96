"""`tolk fleet`: N demo servers, the proxy and Prometheus on loopback, until Ctrl-C."""

from __future__ import annotations

import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tolk.config import ConfigError, load_config

DEMO_CONFIG = Path("configs/demo.yaml")


def fleet_command(
    servers: Annotated[int, typer.Option(min=1, help="How many `tolk serve` processes.")] = 2,
    config: Annotated[
        Path, typer.Option("--config", "-c", help="Each server's configuration (its port is set).")
    ] = DEMO_CONFIG,
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
    from tolk.fleet import start_fleet

    console = Console(stderr=True)
    try:
        settings = load_config(config)
    except ConfigError as exc:
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
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
            settings,
            servers,
            where.resolve(),
            proxy_port=port or None,
            prometheus_port=prometheus_port or None,
            prometheus=prometheus,
            scrape_interval=scrape_interval,
            say=lambda line: console.log(line),
        )
    except KeyboardInterrupt:
        console.log("stopped while starting; everything it had started is stopped")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        console.log(f"[red]the fleet did not start: {exc}")
        raise typer.Exit(1) from exc

    table = Table(title="tolk fleet", title_justify="left")
    table.add_column("what")
    table.add_column("URL")
    for name, url in fleet.urls():
        table.add_row(name, url)
    Console().print(table)
    for note in fleet.notes:
        console.log(f"[yellow]{note}")
    console.log(f"logs and configs: {where}; Ctrl-C stops everything")
    code = 0
    try:
        while not stop.wait(1.0):
            if ended := fleet.exited():
                console.log("[red]" + "; ".join(ended) + ": stopping the rest")
                code = 1
                break
    except KeyboardInterrupt:
        pass
    console.log("stopping the fleet (servers drain their requests first)")
    # A second Ctrl-C must not cut the stop short and leave processes behind.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fleet.stop()
    console.log("stopped: no process of the fleet is left")
    raise typer.Exit(code)
