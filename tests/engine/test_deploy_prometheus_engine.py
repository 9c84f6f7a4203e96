"""deploy/prometheus and deploy/grafana against a live Prometheus.

A real Prometheus (Debian's binary, on loopback, data in a temporary directory) scrapes the
shared real-engine main server and a real proxy through
deploy/prometheus/prometheus-kubernetes.yml, its pods described by the labels and annotations
of the rendered Kubernetes manifests, while they translate; every expression of the rules and
of the Grafana dashboard must return data there, and so must every metric selector inside
them (so an alert's threshold cannot hide a misspelt metric or label).

Two stand-ins, each named so, produce what this machine cannot: `StandInNvml` (GPU
utilisation and memory, through tolk's real GpuCollector: there is no GPU here), and a
stand-in upstream that resets its connections (the proxy's retries and an open circuit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server

from tests.support.gpu import StandInNvml
from tests.support.manifests import Rendered, container, meta_labels, port_named, render
from tests.support.metrics import metric_samples
from tests.support.polling import wait_until_sync
from tests.support.prometheus import (
    PROMETHEUS,
    PROMETHEUS_DIR,
    dashboard,
    needs_prometheus,
    rule_expressions,
    selectors,
)
from tests.support.servers import ServerProcess
from tolk.local.fleet import start_prometheus
from tolk.local.processes import LocalServer, free_port, start_proxy, start_standin
from tolk.server.gpu import GpuCollector

# Grafana's variables, as a dashboard with every model and server selected sends them.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$model": ".*", "$instance": ".*"}


def panel_expressions() -> list[tuple[str, str]]:
    """(panel title, expression with Grafana's variables filled in) of every query."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


@dataclass
class Live:
    url: str
    server: ServerProcess
    proxy: LocalServer
    gpu_exporter: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = answer.json()
        assert body["status"] == "success", f"{expr}: {body.get('error')}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


def kubernetes_config(pods_file: Path) -> dict[str, Any]:
    """prometheus-kubernetes.yml as it is, but with the pods listed in `pods_file` instead of
    found by Kubernetes discovery (Debian's Prometheus is built without it); the rules at
    their absolute path; scraping and evaluating every second."""
    config: dict[str, Any] = yaml.safe_load(
        (PROMETHEUS_DIR / "prometheus-kubernetes.yml").read_text()
    )
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(PROMETHEUS_DIR / "rules.yml")]
    for job in config["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs") == [{"role": "pod"}]
        job["file_sd_configs"] = [{"files": [str(pods_file)], "refresh_interval": "1s"}]
    return config


def pod(workload: dict[str, Any], name: str, port: int) -> dict[str, Any]:
    """One pod of a rendered workload as Kubernetes discovery gives it to the relabelling:
    its address and its labels and annotations, the port annotation set to where this test's
    process listens."""
    labels = meta_labels(workload, "tolk-demo", name)
    labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] = str(port)
    declared = port_named(container(workload), "http")
    return {"targets": [f"127.0.0.1:{declared}"], "labels": labels}


@pytest.fixture(scope="module")
def live(main_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if PROMETHEUS is None:
        if os.environ.get("TOLK_REQUIRE_PROMETHEUS"):
            pytest.fail("TOLK_REQUIRE_PROMETHEUS is set, but there is no `prometheus` on PATH")
        pytest.skip(str(needs_prometheus.kwargs["reason"]))
    workdir = tmp_path_factory.mktemp("prometheus")
    registry = CollectorRegistry()
    registry.register(GpuCollector(StandInNvml()))
    gpu_port = free_port()
    exporter, _ = start_http_server(gpu_port, addr="127.0.0.1", registry=registry)
    failing = start_standin(workdir, "failing", capacity=8, hold=0.01, languages="en,de")
    httpx.post(f"{failing.url}/_standin", json={"mode": "reset"}, timeout=5).raise_for_status()
    proxy = start_proxy(
        workdir, "proxy", [main_server.url, failing.url],
        health={"interval": 0.5, "timeout": 1.0, "rise": 1, "fall": 1, "load_interval": 0.5},
        breaker={"failures": 1, "open_seconds": 60},
        retries={"attempts": 3, "backoff": 0.01},
    )  # fmt: skip
    prometheus = None
    try:
        rendered = Rendered(render("cpu-demo"))
        (server_pods,) = rendered.deployments("server")
        (proxy_pods,) = rendered.deployments("proxy")
        pods = [
            pod(server_pods, "tolk-server-a", int(main_server.url.rsplit(":", 1)[1])),
            pod(server_pods, "tolk-server-gpu-stand-in", gpu_port),
            pod(proxy_pods, "tolk-proxy-a", int(proxy.url.rsplit(":", 1)[1])),
        ]
        pods_file = workdir / "pods.json"
        pods_file.write_text(json.dumps(pods))
        prometheus = start_prometheus(PROMETHEUS, kubernetes_config(pods_file), workdir)
        live = Live(prometheus.url, main_server, proxy, f"127.0.0.1:{gpu_port}")
        translate(proxy.url)
        yield live
    finally:
        for process in (prometheus, proxy, failing):
            if process is not None:
                process.stop()
        exporter.shutdown()


def translate(proxy: str) -> None:
    """A short load through the proxy: texts of several lengths, side by side, until the
    proxy has tried the failing upstream once (it picks between the two at random) and
    retried that request on the real server after the reset."""
    sentence = "The weather is fine today and the trains run on time."
    texts = [" ".join([sentence] * n) for n in range(1, 5)]
    body = {"text": texts, "source_lang": "en", "target_lang": "de"}
    with httpx.Client(base_url=proxy, timeout=60) as client:
        for _ in range(40):
            answer = client.post("/translate", json=body)
            assert answer.status_code == 200, answer.text
            retried = metric_samples(client.get("/metrics").text, "tolk_proxy_retries_total")
            if retried:
                return
    raise AssertionError("the proxy never picked the failing upstream in 40 requests")


@needs_prometheus
def test_the_kubernetes_scrape_config_finds_the_servers_and_proxies(live: Live) -> None:
    def targets() -> list[dict[str, Any]]:
        answer = httpx.get(f"{live.url}/api/v1/targets", timeout=10).json()
        return list(answer["data"]["activeTargets"])

    wait_until_sync(
        lambda: len(targets()) == 3 and all(t["health"] == "up" for t in targets()),
        within=30,
        interval=0.5,
        message=targets,
    )
    jobs = {t["labels"]["pod"]: t["labels"] for t in targets()}
    assert jobs["tolk-server-a"]["job"] == "tolk-server"
    assert jobs["tolk-server-a"]["instance"] == live.server.url.removeprefix("http://")
    assert jobs["tolk-server-a"]["model_group"] == "tolk-server"
    assert jobs["tolk-server-gpu-stand-in"]["job"] == "tolk-server"
    assert jobs["tolk-proxy-a"]["job"] == "tolk-proxy"
    assert {labels["namespace"] for labels in jobs.values()} == {"tolk-demo"}


@needs_prometheus
def test_every_rule_and_panel_expression_returns_data(live: Live) -> None:
    """Rules are evaluated every second on data scraped every second: give them a few."""
    checks: list[tuple[str, str]] = []  # (what, expression that must return data)
    for name, expr, alert in rule_expressions():
        if not alert:
            checks.append((f"rule {name}", expr))
            checks.append((f"recorded {name}", name))
        checks += [(f"rule {name}: selector", s) for s in selectors(expr)]
    for title, expr in panel_expressions():
        checks.append((f"panel {title}", expr))
        checks += [(f"panel {title}: selector", s) for s in selectors(expr)]
    for _, expr, _ in rule_expressions():  # alerts: valid, whether or not they fire
        live.query(expr)

    empty: list[tuple[str, str]] = []

    def all_return_data() -> bool:
        empty[:] = [(what, expr) for what, expr in checks if not live.query(expr)]
        return not empty

    wait_until_sync(
        all_return_data,
        within=60,
        interval=1,
        message=lambda: "no data:\n" + "\n".join(f"{what}: {expr}" for what, expr in empty),
    )
    assert len(checks) > 100


@needs_prometheus
def test_the_rules_run_without_errors_and_nothing_alerts_on_a_healthy_fleet(live: Live) -> None:
    groups = httpx.get(f"{live.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == len(rule_expressions())
    assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []
    firing = [r["name"] for r in rules if r["type"] == "alerting" and r["state"] == "firing"]
    assert firing == []


@needs_prometheus
def test_the_dashboards_variables_list_the_models_and_servers(live: Live) -> None:
    models = httpx.get(
        f"{live.url}/api/v1/label/model/values", params={"match[]": "tolk_engine_up"}, timeout=10
    ).json()["data"]
    assert models == ["demo"]
    servers = live.query('count by (instance) (tolk_engine_up{model=~".*"})')
    assert [s["metric"]["instance"] for s in servers] == [live.server.url.removeprefix("http://")]
