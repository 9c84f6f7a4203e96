"""Helpers for tests that run real `tolk serve` processes on loopback."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.polling import wait_until_sync
from tolk.local.processes import LocalServer, free_port

REPO = Path(__file__).resolve().parent.parent
RUNTIME = REPO / ".runtime"


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
    # are off unless a test turns them on (tests/test_real_model.py does, both ways).
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
    batching); tests/test_memory.py turns it on."""
    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port, **server},
        "models": models,
        "memory": {"enabled": False},
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


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out.append((dict(sample.labels), float(sample.value)))
    return out


async def metric_value(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    response = await client.get("/metrics")
    total = 0.0
    for sample_labels, value in metric_samples(response.text, name):
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            total += value
    return total


class TextMaker:
    """Source texts of exact token lengths for the test model's tokenizer."""

    def __init__(self, model_dir: Path, seed: int = 0) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        corpus = (REPO / "src/tolk/data/case_study/part1.en.txt").read_text()
        self.ids: list[int] = self.tokenizer.encode(" ".join(corpus.split()))
        self.rng = random.Random(seed)

    def text(self, tokens: int) -> str:
        while True:
            start = self.rng.randrange(0, len(self.ids) - tokens)
            text = str(self.tokenizer.decode(self.ids[start : start + tokens])).strip()
            if text and len(self.tokenizer.encode(text)) == tokens:
                return text

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text))


def run_tolk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m tolk ARGS` in `cwd`, with the servers' runtime environment."""
    return subprocess.run(
        [sys.executable, "-m", "tolk", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=runtime_env(),
        timeout=900,
    )


def tolk(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`run_tolk`, failing the test unless the command succeeds (with its output's end)."""
    result = run_tolk(*args, cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def still_running(processes: list[psutil.Process], within: float) -> list[psutil.Process]:
    """Those of `processes` still running after waiting up to `within` seconds for them to
    end. A zombie has ended (it holds no memory and runs nothing); it only waits for its
    new parent, which on some hosts (this machine's init) reaps it seconds later."""
    _, alive = psutil.wait_procs(processes, timeout=within)

    def running(process: psutil.Process) -> bool:
        try:
            return bool(process.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    return [p for p in alive if running(p)]
