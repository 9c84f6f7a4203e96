"""tolk processes started and stopped here (by `tolk fleet`, `tolk translate --config`, the
benchmarks and the tests): a subprocess on a loopback port, ready when its /ready answers
200, stopped by PID with SIGTERM (SIGKILL for anything left)."""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

from tolk.config import ModelSettings, TolkConfig
from tolk.engine.lineage import signal_on_parent_death


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @classmethod
    def start(
        cls,
        command: Sequence[str],
        port: int,
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        ready_timeout: float | None = 300,
        ready_path: str = "/ready",
        stop_with_parent: bool = False,
    ) -> LocalServer:
        """Start `command`; wait for `ready_path` to answer 200 unless `ready_timeout` is
        None (then call wait_ready: several can start side by side). `stop_with_parent`: the
        process gets SIGTERM if this one dies, even by SIGKILL (start it on a thread that
        lives as long as it should: the signal follows the starting thread)."""
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                list(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                # Linux's parent-death signal (tolk.engine.lineage), SIGTERM so it drains.
                preexec_fn=(
                    functools.partial(signal_on_parent_death, signal.SIGTERM)
                    if stop_with_parent
                    else None
                ),
            )
        server = cls(proc, f"http://127.0.0.1:{port}", log_path)
        if ready_timeout is None:
            return server
        try:
            server.wait_ready(ready_timeout, ready_path)
        except BaseException:
            server.stop()
            raise
        return server

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float, path: str = "/ready") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode} before it was ready; "
                    f"last log lines:\n{self.log()[-4000:]}"
                )
            try:
                if httpx.get(f"{self.url}{path}", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"server not ready after {timeout:.0f} s; log: {self.log_path}")

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM and wait; then SIGKILL the process and any descendant still alive."""
        family = self.descendants()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _, alive = psutil.wait_procs(family, timeout=10)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def start_tolk(config: TolkConfig, model: ModelSettings, workdir: Path, name: str) -> LocalServer:
    """`tolk serve` with `config`'s server settings and just `model`, on a free loopback port."""
    return start_server(config.model_copy(update={"models": (model,)}), workdir, name)


def start_server(
    config: TolkConfig,
    workdir: Path,
    name: str,
    ready_timeout: float | None = 300,
    stop_with_parent: bool = False,
    env: Mapping[str, str] | None = None,
) -> LocalServer:
    """`tolk serve` with `config` on a free loopback port (in `env`, default this process's
    environment)."""
    workdir = workdir.resolve()  # the server runs in workdir: every path it gets is absolute
    port = free_port()
    derived = config.model_dump(mode="json")
    derived["server"] |= {"host": "127.0.0.1", "port": port}
    config_path = workdir / f"{name}.yaml"
    config_path.write_text(yaml.safe_dump(derived))
    command = [sys.executable, "-m", "tolk", "serve", "--config", str(config_path)]
    return LocalServer.start(
        command,
        port,
        workdir / f"{name}.log",
        env=env,
        cwd=workdir,
        ready_timeout=ready_timeout,
        stop_with_parent=stop_with_parent,
    )


def start_standin(
    workdir: Path,
    name: str,
    capacity: int,
    hold: float,
    languages: str = "en,de,ne",
    port: int | None = None,
    max_waiting: int | None = None,
) -> LocalServer:
    """A stand-in upstream process (see tolk.proxy.standin), ready when its /ready is 200."""
    port = port or free_port()
    command = [
        sys.executable, "-m", "tolk.proxy.standin", "--port", str(port), "--name", name,
        "--languages", languages, "--capacity", str(capacity), "--hold", str(hold),
    ]  # fmt: skip
    if max_waiting is not None:
        command += ["--max-waiting", str(max_waiting)]
    return LocalServer.start(command, port, workdir / f"{name}.log", cwd=workdir)


def start_proxy(
    workdir: Path,
    name: str,
    upstreams: list[str],
    port: int | None = None,
    stop_with_parent: bool = False,
    **settings: Any,
) -> LocalServer:
    """`tolk proxy` in front of `upstreams` on loopback (`port`, or a free one), ready when
    its /ready is 200; `settings` are proxy.yaml's."""
    port = port or free_port()
    config = {"port": port, "upstreams": upstreams, "log_level": "warning", **settings}
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "tolk", "proxy", "--config", str(path)]
    return LocalServer.start(
        command, port, workdir / f"{name}.log", cwd=workdir, stop_with_parent=stop_with_parent
    )
