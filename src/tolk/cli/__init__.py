"""Command-line entry points: `tolk serve`, `tolk translate`, `tolk make-test-model`,
`tolk bench`, `tolk tune`, `tolk proxy`, `tolk fleet`, `tolk keys`, `tolk deploy`."""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tolk.config import (
    ConfigError,
    TolkConfig,
    build_config,
    load_config,
    require_model_directories,
)
from tolk.failing import fail

if TYPE_CHECKING:
    import uvicorn

    from tolk.engine import LLMStarter
    from tolk.server.lifecycle import Lifecycle

app = typer.Typer(
    help="tolk: a self-hosted, high-throughput machine-translation server on vLLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _add_subcommands() -> None:
    from tolk.bench.cli import app as bench_app
    from tolk.cli.deploy import app as deploy_app
    from tolk.cli.fleet import fleet_command
    from tolk.cli.keys import app as keys_app
    from tolk.cli.memories import app as memories_app
    from tolk.cli.translate import translate_command
    from tolk.models.cli import fetch_model_command
    from tolk.proxy.cli import proxy_command
    from tolk.tune.cli import tune_command

    app.add_typer(bench_app, name="bench")
    app.add_typer(keys_app, name="keys")
    app.add_typer(memories_app, name="memories")
    app.add_typer(deploy_app, name="deploy")
    app.command("translate")(translate_command)
    app.command("tune")(tune_command)
    app.command("proxy")(proxy_command)
    app.command("fleet")(fleet_command)
    app.command("fetch-model")(fetch_model_command)


_add_subcommands()


def _quick_model(model: str, name: str, prompt_format: str, languages: str) -> dict[str, Any]:
    return {
        "models": [
            {
                "name": name,
                "path": model,
                "prompt_format": prompt_format,
                "languages": [c for c in languages.split(",") if c.strip()],
            }
        ]
    }


@app.command()
def serve(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML configuration file.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Serve one model without a config file: a local path or hub id."),
    ] = None,
    name: Annotated[str, typer.Option(help="With --model: its name in the API.")] = "default",
    prompt_format: Annotated[str, typer.Option(help="With --model: its prompt format.")] = "chat",
    languages: Annotated[
        str, typer.Option(help="With --model: comma-separated languages, any pair among them.")
    ] = "en,de,fr,es,it,pt,nl,ru,zh,ja,ko,ne",
    host: Annotated[str | None, typer.Option(help="Overrides server.host.")] = None,
    port: Annotated[int | None, typer.Option(help="Overrides server.port.")] = None,
    log_level: Annotated[str | None, typer.Option(help="Overrides server.log_level.")] = None,
) -> None:
    """Serve the configured models over HTTP until SIGTERM or Ctrl-C."""
    overrides = {"server.host": host, "server.port": port, "server.log_level": log_level}
    try:
        if config is not None:
            settings = load_config(config, overrides=overrides)
        elif model is not None:
            data = _quick_model(model, name, prompt_format, languages)
            settings = build_config(data, source="--model", overrides=overrides)
        else:
            fail("give --config FILE, or --model PATH_OR_HUB_ID to serve one model")
        require_model_directories(settings)
    except ConfigError as exc:
        fail(str(exc))
    run_server(settings)


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything else starts. uvicorn binds only after the
    app's start-up (the engines: up to a minute), and in that window another process (another
    server's vLLM engine taking ports of its own) could take the port; bound first, a port in
    use fails at once, not after the engine start. Not uvicorn's `Config.bind_socket`: it
    exits with its own log line (no word on what to do) and makes the socket inheritable."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        fail(
            f"cannot listen on {host}:{port}: {exc.strerror}; stop what holds the port or "
            "choose another (server.port, or TOLK_SERVER__PORT)"
        )
    return sock


def run_server(settings: TolkConfig) -> None:
    listening = _listen(settings.server.host, settings.server.port)
    from tolk.server.lifecycle import EXIT_ENGINE_FAILED

    level = settings.server.log_level
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    server, lifecycle = tolk_server(settings)
    server.run(sockets=[listening])
    if not server.started:
        sys.exit(1)
    if lifecycle.failed is not None:
        logging.getLogger("tolk.server").critical(
            "exiting with status %d: %s", EXIT_ENGINE_FAILED, lifecycle.failed
        )
        sys.exit(EXIT_ENGINE_FAILED)


def tolk_server(
    settings: TolkConfig, starter: LLMStarter | None = None
) -> tuple[uvicorn.Server, Lifecycle]:
    """The uvicorn server of `tolk serve` around create_app(settings, starter=starter), and
    the app's lifecycle; run it with `.run(sockets=...)`. Tests of the HTTP edge run it
    in-process on a thread, with a stand-in engine (tolk.testing.fake_engine)."""
    import uvicorn

    from tolk.server.app import create_app
    from tolk.server.lifecycle import WRITE_MARGIN
    from tolk.server.middleware import RedactQuery, refuse_connections_in_json
    from tolk.wire.protocol import timed_head

    application = create_app(settings, starter=starter)
    # uvicorn's access log (on with --log-level debug) would show query strings, and
    # LibreTranslate clients put keys and text there (`/detect?q=...&api_key=...`).
    # Once per process: tests run several servers in one.
    access_log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in access_log.filters):
        access_log.addFilter(RedactQuery())

    lifecycle: Lifecycle = application.state.lifecycle
    server_settings = settings.server
    if server_settings.max_connections is not None:
        refuse_connections_in_json(server_settings.max_connections)

    class TolkServer(uvicorn.Server):
        async def on_tick(self, counter: int) -> bool:
            # A server that gave up on an engine (lifecycle.give_up) stops like on SIGTERM,
            # once it has drained.
            inside = application.state.pool.requests_inside
            return lifecycle.exit_due(inside) or await super().on_tick(counter)

        async def shutdown(self, sockets: Any = None) -> None:
            # uvicorn stops accepting and waits for open requests; tolk also refuses new
            # translations and bounds how long running ones may take (see lifecycle.py).
            lifecycle.begin_drain()
            await super().shutdown(sockets)

    level = server_settings.log_level
    server = TolkServer(
        uvicorn.Config(
            application,
            host=server_settings.host,
            port=server_settings.port,
            log_level=level,
            timeout_graceful_shutdown=int(server_settings.shutdown_grace) + WRITE_MARGIN,
            access_log=level == "debug",
            limit_concurrency=server_settings.max_connections,
            timeout_keep_alive=math.ceil(server_settings.keep_alive),
            backlog=server_settings.backlog,
            http=timed_head(server_settings.header_timeout),
        )
    )
    return server, lifecycle


@app.command("make-test-model")
def make_test_model_command(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write the model into.")],
    shape: Annotated[
        str,
        typer.Option(
            help="tiny (tests, CPU demo), 1b (Qwen2.5-1.5B's shape) or 7b (Qwen2.5-7B's)."
        ),
    ] = "tiny",
    hidden_size: Annotated[int | None, typer.Option(help="Override the shape's.")] = None,
    layers: Annotated[int | None, typer.Option(help="Override the shape's.")] = None,
    heads: Annotated[int | None, typer.Option(help="Override the shape's.")] = None,
    kv_heads: Annotated[int | None, typer.Option(help="Override the shape's.")] = None,
    intermediate_size: Annotated[int | None, typer.Option(help="Override the shape's.")] = None,
    vocab_size: Annotated[
        int | None, typer.Option(help="Override the shape's embedding rows.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed for the weights.")] = 0,
) -> None:
    """Write a random-weight model with tolk's tokenizer (its outputs are meaningless)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import dataclasses

    from tolk.testing.model import SHAPES, make_test_model

    if shape not in SHAPES:
        fail(f"--shape must be one of {', '.join(SHAPES)}")
    overrides: dict[str, Any] = {
        "hidden_size": hidden_size,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "intermediate_size": intermediate_size,
        "vocab_size": vocab_size,
    }
    chosen = dataclasses.replace(
        SHAPES[shape], **{k: v for k, v in overrides.items() if v is not None}
    )
    if chosen.hidden_size % chosen.heads or chosen.heads % chosen.kv_heads:
        fail("hidden_size must be a multiple of heads, and heads a multiple of kv_heads")
    path = make_test_model(out_dir, shape=chosen, seed=seed)
    typer.echo(f"test model ({shape} shape) written to {path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
