"""`tolk fleet`: a whole deployment on this machine, on loopback: N `tolk serve` processes,
the proxy in front of them and, where a `prometheus` binary is installed, Prometheus scraping
them all with tolk's rules (deploy/prometheus/rules.yml). Stopped as one, by PID; and should
`tolk fleet` itself be killed outright, each of them gets SIGTERM (parent-death signal)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tolk.config import TolkConfig
from tolk.local.processes import LocalServer, free_port, start_proxy, start_server

# deploy/ sits beside src/ in a checkout; an installed tolk has no rules of its own.
RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "rules.yml"
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


@dataclass(frozen=True)
class Fleet:
    servers: list[LocalServer]
    proxy: LocalServer
    prometheus: LocalServer | None
    notes: list[str]

    def members(self) -> list[tuple[str, LocalServer]]:
        """Its processes by name, the one to send requests to first."""
        servers = [(f"server {i + 1}", s) for i, s in enumerate(self.servers)]
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
    config: TolkConfig,
    count: int,
    workdir: Path,
    *,
    proxy_port: int | None = None,
    prometheus_port: int | None = None,
    prometheus: str | None = None,
    scrape_interval: float = 5.0,
    say: Callable[[str], None] = lambda line: None,
) -> Fleet:
    """Start the fleet; on any failure (or Ctrl-C) stop what had started, and raise."""
    workdir.mkdir(parents=True, exist_ok=True)
    started: list[LocalServer] = []
    notes: list[str] = []
    try:
        say(f"starting {count} server(s) (each loads its engines: tens of seconds)")
        for i in range(count):  # all at once: their engines load side by side
            name = f"server-{i + 1}"
            started.append(
                start_server(config, workdir, name, ready_timeout=None, stop_with_parent=True)
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
        binary = prometheus or shutil.which("prometheus")
        if binary is None:
            notes.append(
                "no `prometheus` on PATH, so no Prometheus: install Debian's `prometheus` "
                "package (apt-get install prometheus) or put the binary on PATH"
            )
        else:
            rules = [RULES] if RULES.is_file() else []
            if not rules:
                notes.append(f"no rules at {RULES}: Prometheus runs without alerts")
            say("starting Prometheus")
            scrape = prometheus_config(upstreams, [proxy.url], rules, scrape_interval)
            scraper = start_prometheus(binary, scrape, workdir, prometheus_port)
    except BaseException:
        _stop(started)
        raise
    return Fleet(servers, proxy, scraper, notes)


def _stop(processes: list[LocalServer]) -> None:
    """The last started first."""
    for process in reversed(processes):
        process.stop()
