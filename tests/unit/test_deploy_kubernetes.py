"""deploy/kubernetes: each overlay renders with kustomize (`kubectl kustomize`, what
`kubectl apply -k` runs), validates against the Kubernetes OpenAPI schemas (kubernetes-validate,
strict: no unknown fields), and says what tolk needs: probes on the right paths, a grace
period that covers the drain, the proxy resolving the headless Services that exist, ports
that agree, and configs that tolk itself accepts."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.manifests import (
    OVERLAYS,
    Doc,
    Rendered,
    container,
    examples,
    mounted_config,
    pod_annotations,
    pod_labels,
    port_named,
    render,
    selects,
    validate_strictly,
)
from tolk.config import build_config
from tolk.proxy.config import ProxyConfig
from tolk.server.lifecycle import WRITE_MARGIN

# The oldest Kubernetes still commonly run, and the newest the schemas know.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


@pytest.fixture(params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> Rendered:
    return Rendered(render(request.param))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_resource_matches_the_kubernetes_schemas(version: str) -> None:
    docs = [d for overlay in OVERLAYS for d in render(overlay)] + examples()
    kinds = {d["kind"] for d in docs}
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "PersistentVolumeClaim",
        "Namespace",
    } <= kinds
    for doc in docs:
        validate_strictly(doc, version)


def test_a_typo_is_caught_by_the_schema_check() -> None:
    """The check above can fail: a misspelt probe field is refused."""
    server = Rendered(render("cpu-demo")).deployments("server")[0]
    broken = yaml.safe_load(yaml.safe_dump(server))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


def test_servers_probe_ready_and_health_and_outlast_their_drain(rendered: Rendered) -> None:
    servers = rendered.deployments("server")
    assert servers
    for server in servers:
        box = container(server, "tolk")
        config_path, content = mounted_config(server, rendered, box)
        assert box["args"] == ["serve", "--config", str(config_path)]
        settings = build_config(content, source=str(config_path))  # tolk accepts it
        assert settings.server.host == "0.0.0.0"  # reachable from other pods
        assert port_named(box, "http") == settings.server.port
        assert pod_annotations(server)["prometheus.io/port"] == str(settings.server.port)

        assert box["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
        assert box["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        startup = box["startupProbe"]
        assert startup["httpGet"] == {"path": "/health", "port": "http"}
        # Engine start: 20 s for the demo on a CPU, minutes for a real model's first download.
        patience = startup["periodSeconds"] * startup["failureThreshold"]
        gpus = int(box["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
        assert patience >= (600 if gpus else 120)

        pre_stop = box["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep"
        grace = server["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace >= int(pre_stop[1]) + settings.server.shutdown_grace + WRITE_MARGIN

        # Every model's weights live on the model volume (or come from the hub into it).
        mounts = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
        assert mounts["/models"] == "models"
        assert mounts["/dev/shm"] == "shm"
        for model in settings.models:
            # A local path on the volume, or a hub id (downloaded into HF_HOME on it).
            assert model.path.startswith("/models/") or not model.path.startswith("/")


def test_the_gpu_overlay_asks_one_gpu_per_pod_and_the_demo_none() -> None:
    for overlay, gpus in (("gpu", 1), ("cpu-demo", 0)):
        for server in Rendered(render(overlay)).deployments("server"):
            resources = container(server, "tolk")["resources"]
            assert int(resources.get("limits", {}).get("nvidia.com/gpu", 0)) == gpus
            assert int(resources["requests"].get("nvidia.com/gpu", 0)) == gpus


def test_the_demo_makes_the_model_its_config_serves() -> None:
    rendered = Rendered(render("cpu-demo"))
    (server,) = rendered.deployments("server")
    _, content = mounted_config(server, rendered, container(server, "tolk"))
    (init,) = server["spec"]["template"]["spec"]["initContainers"]
    assert init["args"][0] == "make-test-model"
    assert [m["path"] for m in content["models"]] == [init["args"][1]]


def test_the_proxy_resolves_each_groups_headless_service(rendered: Rendered) -> None:
    namespace = rendered.of("Namespace")[0]["metadata"]["name"]
    (proxy,) = rendered.deployments("proxy")
    box = container(proxy)
    config_path, content = mounted_config(proxy, rendered, box)
    assert box["args"] == ["proxy", "--config", str(config_path)]
    config = ProxyConfig.model_validate(content)  # tolk's proxy accepts it
    assert config.host == "0.0.0.0"
    assert port_named(box, "http") == config.port
    assert pod_annotations(proxy)["prometheus.io/port"] == str(config.port)

    headless = {
        s["metadata"]["name"]: s
        for s in rendered.of("Service")
        if s["spec"].get("clusterIP") == "None"
    }
    servers = rendered.deployments("server")
    resolved = set()
    for dns in config.dns:
        # A bare name resolves in the proxy's own namespace; a qualified one must name it.
        service_name, *rest = dns.name.split(".")
        assert not rest or rest[0] == namespace, dns.name
        service = headless[service_name]
        resolved.add(service_name)
        assert dns.port == service["spec"]["ports"][0]["port"]
        targets = [s for s in servers if selects(service["spec"]["selector"], pod_labels(s))]
        assert len(targets) == 1, f"{service_name} selects {len(targets)} model groups"
        target_port = service["spec"]["ports"][0]["targetPort"]
        assert port_named(container(targets[0], "tolk"), target_port) == dns.port
    assert resolved == set(headless), "a model group the proxy does not know of"
    assert len(servers) == len(headless)


def test_two_proxies_behind_a_service_and_a_disruption_budget(rendered: Rendered) -> None:
    (proxy,) = rendered.deployments("proxy")
    assert proxy["spec"]["replicas"] == 2
    labels = pod_labels(proxy)
    service = rendered.one("Service", "tolk-proxy")
    assert selects(service["spec"]["selector"], labels)
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    budget = rendered.one("PodDisruptionBudget", "tolk-proxy")
    assert selects(budget["spec"]["selector"]["matchLabels"], labels)
    assert 1 <= budget["spec"]["minAvailable"] < proxy["spec"]["replicas"]
    probe = container(proxy)["readinessProbe"]["httpGet"]
    assert probe == {"path": "/health", "port": "http"}  # see proxy.yaml: JSON 503s, not none


def test_every_config_map_and_claim_a_pod_mounts_exists(rendered: Rendered) -> None:
    names = {(d["kind"], d["metadata"]["name"]) for d in rendered.docs}
    for workload in rendered.of("Deployment"):
        for volume in workload["spec"]["template"]["spec"]["volumes"]:
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in names
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                assert ("PersistentVolumeClaim", claim) in names


def test_the_autoscaler_example_scales_a_server_group_on_the_adapters_metric() -> None:
    docs = examples()
    (hpa,) = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    (adapter,) = [d for d in docs if d["kind"] == "ConfigMap"]
    rules: list[dict[str, Any]] = yaml.safe_load(adapter["data"]["config.yaml"])["rules"]
    served = {r["name"]["as"] for r in rules}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] in served
    target = hpa["spec"]["scaleTargetRef"]
    groups: list[Doc] = Rendered(render("gpu")).deployments("server")
    assert target["kind"] == "Deployment"
    assert target["name"] in {g["metadata"]["name"] for g in groups}
    assert "vllm:num_requests_waiting" in rules[0]["seriesQuery"]
