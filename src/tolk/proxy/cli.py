"""`tolk proxy`: serve the language-pair-aware proxy until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from tolk.config import ConfigError
from tolk.failing import fail
from tolk.proxy.config import ProxyConfig, load_proxy_config


def proxy_command(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="proxy.yaml (see configs/proxy.yaml).")
    ] = None,
    upstream: Annotated[
        list[str] | None,
        typer.Option(help="An upstream tolk server URL (repeatable); adds to the config's."),
    ] = None,
    host: Annotated[str | None, typer.Option(help="Overrides host (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Overrides port (default 8080).")] = None,
    log_level: Annotated[str | None, typer.Option(help="Overrides log_level.")] = None,
) -> None:
    """Route /translate to tolk servers by language pair, load and health."""
    overrides = {"host": host, "port": port, "log_level": log_level}
    try:
        settings = load_proxy_config(config, overrides, upstream)
    except ConfigError as exc:
        fail(str(exc))
    run_proxy(settings)


def run_proxy(settings: ProxyConfig) -> None:
    import uvicorn

    from tolk.proxy.app import proxy_asgi
    from tolk.wire.protocol import timed_head

    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvicorn.run(
        proxy_asgi(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        proxy_headers=False,  # it is the proxy; nobody in front of it is trusted
        # In-flight requests may finish (each within its deadline) before the proxy exits.
        timeout_graceful_shutdown=int(settings.request_timeout) + 5,
        limit_concurrency=settings.max_client_connections,
        http=timed_head(settings.header_timeout),
    )
