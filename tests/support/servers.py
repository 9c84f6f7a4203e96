"""Real `tolk serve` processes on loopback (ServerProcess, a real engine), tolk's server
in-process over stand-in engines (InProcessServer), and the configs and environment both use."""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import FLORES, RUNTIME
from tests.support.polling import wait_until_sync
from tolk.local.processes import LocalServer, free_port


def runtime_env() -> dict[str, str]:
    """Environment for servers: vLLM's caches and IPC files inside the project."""
    env = dict(os.environ)
    defaults = {
        "TMPDIR": RUNTIME / "tmp",
        "VLLM_CACHE_ROOT": RUNTIME / "vllm",
        "XDG_CACHE_HOME": RUNTIME / "cache",
        "HF_HOME": RUNTIME / "huggingface",
        "TORCHINDUCTOR_CACHE_DIR": RUNTIME / "inductor",
    }
    for key, path in defaults.items():
        env.setdefault(key, str(path))
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("TOLK_QUALITY_DATA", str(FLORES))
    return env


def model_config(name: str, path: Path, **overrides: Any) -> dict[str, Any]:
    engine = {
        "max_num_seqs": 16,
        "max_num_batched_tokens": 4096,
        "max_model_len": 4096,
        "kv_cache_memory_bytes": "256MiB",
        "enforce_eager": True,
        "max_waiting": 24,
    }
    engine.update(overrides.pop("engine", {}))
    # The random model writes token salad to its budget: the fixed ratio keeps its output
    # lengths known, and output checks (which would flag and retry every segment of salad)
    # are off unless a test turns them on (tests/engine/test_real_model.py does, both ways).
    defaults: dict[str, Any] = {"max_tokens_ratio": 2.0, "checks": {"enabled": False}}
    return {"name": name, "path": str(path), "engine": engine, **defaults, **overrides}


def server_config(
    models: list[dict[str, Any]],
    port: int,
    glossaries: dict[str, Any] | None = None,
    access: dict[str, Any] | None = None,
    **server: Any,
) -> dict[str, Any]:
    """A tolk config on loopback: `models`, and `server` fields. The segment memory is off
    (tests send the same texts again and mean the engine's work: aborts, deadlines,
    batching); tests/edge/test_segment_memory.py turns it on."""
    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port, **server},
        "models": models,
        "segment_cache": {"enabled": False},
    }
    if glossaries:
        config["glossaries"] = glossaries
    if access:
        config["access"] = access
    return config


class ServerProcess(LocalServer):
    """A `tolk serve` process with a config written from `models` and `server` fields."""

    @classmethod
    def launch(
        cls,
        workdir: Path,
        name: str,
        models: list[dict[str, Any]],
        port: int | None = None,
        glossaries: dict[str, Any] | None = None,
        access: dict[str, Any] | None = None,
        **server: Any,
    ) -> ServerProcess:
        port = port or free_port()
        config = server_config(models, port, glossaries, access, **server)
        config_path = workdir / f"{name}.yaml"
        config_path.write_text(yaml.safe_dump(config))
        command = [sys.executable, "-m", "tolk", "serve", "--config", str(config_path)]
        started = LocalServer.start(
            command,
            port,
            workdir / f"{name}.log",
            env=runtime_env(),
            cwd=workdir,
            ready_timeout=240,
        )
        return cls(started.proc, started.url, started.log_path)


class InProcessServer:
    """tolk's server (tolk.cli.tolk_server: the app and uvicorn settings of `tolk serve`) on a
    thread of the test process, on loopback, over stand-in engines (tolk.testing.fake_engine):
    for tests of the HTTP edge (shapes, validation, errors, limits, the compatible APIs),
    which need no engine's start-up or steps. `engines.started` holds the stand-ins."""

    def __init__(self, config: dict[str, Any], seconds_per_token: float = 0.0) -> None:
        from tolk.cli import tolk_server
        from tolk.config import build_config
        from tolk.testing.fake_engine import FakeEngines

        settings = build_config(config, environ={})
        self.engines = FakeEngines(seconds_per_token)
        self.server, self.lifecycle = tolk_server(settings, self.engines)
        listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listening.bind((settings.server.host, settings.server.port))
        self.url = f"http://{settings.server.host}:{settings.server.port}"
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listening]}, name="tolk-in-process"
        )
        self._thread.start()
        not_started = "the in-process tolk server did not start; see the log above"

        def started() -> bool:
            if self.server.started:
                return True
            if not self._thread.is_alive():
                raise RuntimeError(not_started)
            return False

        wait_until_sync(started, within=120, interval=0.05, message=not_started)

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the in-process server did not stop"
