"""`tolk fleet`: a whole deployment on this machine, on loopback: N `tolk serve` processes,
the proxy in front of them and, where a `prometheus` binary is installed, Prometheus scraping
them all with tolk's rules (deploy/prometheus/rules.yml). Stopped as one, by PID; and should
`tolk fleet` itself be killed outright, each of them gets SIGTERM (parent-death signal).

On a machine with several NVIDIA GPUs each server gets its own (`CUDA_VISIBLE_DEVICES`), the
case study's scale-out: one engine per GPU, the proxy routing among them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from tolk.config import TolkConfig
from tolk.local.processes import LocalServer, free_port, start_proxy, start_server

# tolk's Prometheus rules ship in the package (deploy/prometheus/rules.yml in a checkout is a
# link to the same file), so an installed tolk's fleet has them too.
RULES = resources.files("tolk") / "data" / "prometheus" / "rules.yml"
SERVER_JOB = "tolk-server"
PROXY_JOB = "tolk-proxy"


def host_port(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def prometheus_config(
    servers: Sequence[str], proxies: Sequence[str], rules: Sequence[Path], interval: float
) -> dict[str, Any]:
    """A static scrape configuration with the job names rules.yml and the dashboard expect
    (the single-machine deploy/prometheus/prometheus.yml, for these targets)."""
    every = f"{interval:g}s"
    jobs = {SERVER_JOB: servers, PROXY_JOB: proxies}
    return {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [host_port(u) for u in urls]}]}
            for job, urls in jobs.items()
        ],
    }


def start_prometheus(
    binary: str, config: dict[str, Any], workdir: Path, port: int | None = None
) -> LocalServer:
    """Prometheus on loopback with `config`, its data in `workdir`; ready when /-/ready is."""
    port = port or free_port()
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1d",
    ]
    return LocalServer.start(
        command, port, workdir / "prometheus.log", cwd=workdir, ready_timeout=60,
        ready_path="/-/ready", stop_with_parent=True,
    )  # fmt: skip


def visible_gpus(
    spec: str,
    environ: Mapping[str, str] = os.environ,
    count: Callable[[], int] | None = None,
) -> list[str]:
    """The GPUs servers may be placed on. `auto`: those CUDA_VISIBLE_DEVICES lists, else
    every device NVML counts (`count`, default nvml_device_count; none without an NVIDIA
    driver); `none`: none (the
    servers see what this process sees); else a comma-separated list of CUDA device ids or
    UUIDs, as CUDA_VISIBLE_DEVICES takes them."""
    if spec == "none":
        return []
    if spec != "auto":
        ids = [g.strip() for g in spec.split(",") if g.strip()]
        if not ids:
            raise ValueError(f"--gpus '{spec}': give auto, none or a list such as 0,1")
        return ids
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    return [str(i) for i in range((count or nvml_device_count)())]


def place(servers: int, gpus: Sequence[str]) -> tuple[list[str | None], list[str]]:
    """Each server's GPU, in turn (none where there are no GPUs), and what to say about it:
    servers sharing a GPU each take their model's `gpu_memory_utilization` of it."""
    if not gpus:
        return [None] * servers, []
    placed: list[str | None] = [gpus[i % len(gpus)] for i in range(servers)]
    notes = []
    if servers > len(gpus):
        notes.append(
            f"{servers} servers on {len(gpus)} GPU(s): some share one, and each server's models "
            "take their gpu_memory_utilization of it; keep their sum per GPU under 1"
        )
    return placed, notes


def nvml_device_count() -> int:
    """NVIDIA GPUs on this machine (0 without the driver): the count NVML gives."""
    from tolk.server.gpu import GpuCollector

    return len(GpuCollector().handles)


@dataclass(frozen=True)
class Fleet:
    servers: list[LocalServer]
    proxy: LocalServer
    prometheus: LocalServer | None
    notes: list[str]
    gpus: list[str | None]  # each server's CUDA_VISIBLE_DEVICES (None: not placed)

    def members(self) -> list[tuple[str, LocalServer]]:
        """Its processes by name, the one to send requests to first."""
        servers = [
            (f"server {i + 1}" + (f" (GPU {gpu})" if gpu is not None else ""), s)
            for i, (s, gpu) in enumerate(zip(self.servers, self.gpus, strict=True))
        ]
        tail = [("prometheus", self.prometheus)] if self.prometheus is not None else []
        return [("proxy (send requests here)", self.proxy), *servers, *tail]

    def urls(self) -> list[tuple[str, str]]:
        return [(name, p.url) for name, p in self.members()]

    def exited(self) -> list[str]:
        """Which of its processes have ended by themselves."""
        return [
            f"{name} ({p.url}) exited with {p.proc.returncode}; its log: {p.log_path}"
            for name, p in self.members()
            if p.proc.poll() is not None
        ]

    def stop(self) -> None:
        """Prometheus, the proxy, then the servers (each drains); anything left is killed."""
        _stop([*self.servers, self.proxy, *([self.prometheus] if self.prometheus else [])])


def start_fleet(
    config: TolkConfig | Sequence[TolkConfig],
    count: int,
    workdir: Path,
    *,
    gpus: Sequence[str] = (),
    proxy_port: int | None = None,
    prometheus_port: int | None = None,
    prometheus: str | Literal[False] | None = None,
    scrape_interval: float = 5.0,
    say: Callable[[str], None] = lambda line: None,
) -> Fleet:
    """Start the fleet; on any failure (or Ctrl-C) stop what had started, and raise.
    `config`: every server's, or one per server (servers serving different pairs); `gpus`:
    the GPUs to place the servers on, one each in turn (`place`)."""
    configs = [config] * count if isinstance(config, TolkConfig) else list(config)
    if len(configs) != count:
        raise ValueError(f"{len(configs)} configs for {count} servers: give one, or one each")
    workdir.mkdir(parents=True, exist_ok=True)
    started: list[LocalServer] = []
    placed, notes = place(count, gpus)
    try:
        say(f"starting {count} server(s) (each loads its engines: tens of seconds)")
        for i, (server_config, gpu) in enumerate(zip(configs, placed, strict=True)):
            name = f"server-{i + 1}"
            # all at once: their engines load side by side, each on its GPU if placed
            env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
            if gpu is not None:
                say(f"{name} on GPU {gpu}")
            started.append(
                start_server(
                    server_config, workdir, name, ready_timeout=None, stop_with_parent=True, env=env
                )
            )
        servers = list(started)
        for server in servers:
            server.wait_ready(600)
        say("starting the proxy")
        upstreams = [s.url for s in servers]
        proxy = start_proxy(
            workdir, "proxy", upstreams, port=proxy_port, stop_with_parent=True, log_level="info"
        )
        started.append(proxy)
        scraper = None
        # `prometheus`: its binary; None: the one on PATH; False: none (and nothing to say)
        binary = shutil.which("prometheus") if prometheus is None else prometheus
        if binary is None:
            notes.append(
                "no `prometheus` on PATH, so no Prometheus: install Debian's `prometheus` "
                "package (apt-get install prometheus) or put the binary on PATH"
            )
        elif binary is not False:
            # Prometheus reads its rules from a file: a copy beside its configuration (the
            # package may be installed zipped).
            rules = workdir / "rules.yml"
            rules.write_text(RULES.read_text("utf-8"), encoding="utf-8")
            say("starting Prometheus")
            scrape = prometheus_config(upstreams, [proxy.url], [rules], scrape_interval)
            scraper = start_prometheus(binary, scrape, workdir, prometheus_port)
    except BaseException:
        _stop(started)
        raise
    return Fleet(servers, proxy, scraper, notes, placed)


def _stop(processes: list[LocalServer]) -> None:
    """The last started first."""
    for process in reversed(processes):
        process.stop()
