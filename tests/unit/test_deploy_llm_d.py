"""deploy/llm-d: tolk's servers behind the llm-d router (Gateway -> HTTPRoute -> InferencePool,
whose endpoint picker keeps the pods that serve a request's pair). Offline: each overlay renders
with kustomize, its core kinds validate against the Kubernetes schemas and its InferencePool,
HTTPRoute and Gateway against the upstream CRDs (tests/data/llm-d, strict), the generated pair
labels and EndpointPickerConfig are what `tolk deploy llm-d` makes of the configs the servers
mount, the config uses only plugins and parameters llm-d-router v0.10.0 has, and each pair's
profile keeps exactly the pods whose config serves the pair. Nothing here runs the EPP."""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client import REGISTRY, CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.support.manifests import (
    Doc,
    Rendered,
    container,
    mounted_config,
    pod_labels,
    selects,
    validate_strictly,
)
from tests.support.manifests import render as render_overlay
from tests.support.paths import REPO
from tolk.cli import app
from tolk.config import TolkConfig, build_config, load_config
from tolk.engine.metrics import EngineMetrics
from tolk.languages import Pair, serves
from tolk.llm_d import (
    ANY,
    AUTO,
    HEADER,
    JOIN,
    LlmDError,
    ModelGroup,
    model_group,
    pair_key,
    relative,
    render,
)

LLM_D = REPO / "deploy" / "llm-d"
DATA = REPO / "tests" / "data" / "llm-d"
# Each overlay and the server config it generates from (the one its servers mount).
OVERLAYS = {
    "gpu": REPO / "deploy" / "kubernetes" / "overlays" / "gpu" / "server-config.yaml",
    "cpu-demo": REPO / "deploy" / "kubernetes" / "base" / "server-config.yaml",
}
CRDS = {
    "InferencePool": "inference.networking.k8s.io_inferencepools.yaml",
    "HTTPRoute": "gateway.networking.k8s.io_httproutes.yaml",
    "Gateway": "gateway.networking.k8s.io_gateways.yaml",
}
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def rendered(overlay: str) -> Rendered:
    return Rendered(render_overlay(overlay, LLM_D))


@functools.cache
def known() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DATA / "router-v0.10.0-plugins.yaml").read_text())
    return data


def epp_config(r: Rendered) -> tuple[Doc, Path, dict[str, Any]]:
    """The EPP Deployment, where its config is mounted, and the config."""
    (epp,) = r.deployments("epp")
    path, config = mounted_config(epp, r, container(epp, "epp"))
    return epp, path, config


def server_config(r: Rendered, server: Doc) -> TolkConfig:
    path, content = mounted_config(server, r, container(server, "tolk"))
    return build_config(content, source=str(path))


@pytest.fixture(params=sorted(OVERLAYS))
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- the generated files -------------------------------------------------------------------


def test_the_committed_files_are_what_tolk_deploy_llm_d_makes(overlay: str) -> None:
    out = LLM_D / "overlays" / overlay
    source = OVERLAYS[overlay]
    made = render([model_group(load_config(source), "tolk-server")], [relative(source, out)])
    for name, text in made.items():
        assert (out / name).read_text() == text, (
            f"{out / name} drifted from its config: run `tolk deploy llm-d --config "
            f"{source.relative_to(REPO)} --out-dir {out.relative_to(REPO)}`"
        )
    args = ["deploy", "llm-d", "--config", str(source), "--out-dir", str(out), "--check"]
    assert CliRunner().invoke(app, args).exit_code == 0


def test_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    config = tmp_path / "server-config.yaml"
    data = yaml.safe_load(OVERLAYS["gpu"].read_text())
    config.write_text(yaml.safe_dump(data))
    runner = CliRunner()
    base = ["deploy", "llm-d", "--config", str(config), "--out-dir", str(tmp_path)]
    assert runner.invoke(app, base).exit_code == 0
    assert runner.invoke(app, [*base, "--check"]).exit_code == 0
    data["models"][0]["languages"].append("ne")  # the config gains a language
    config.write_text(yaml.safe_dump(data))
    stale = runner.invoke(app, [*base, "--check"])
    assert stale.exit_code == 1
    assert "pair-labels.yaml, epp-config.yaml" in stale.output
    assert runner.invoke(app, base).exit_code == 0
    assert "pair.tolk.dev/ne_en" in (tmp_path / "pair-labels.yaml").read_text()


def test_a_server_with_two_models_is_refused_with_the_reason() -> None:
    data = yaml.safe_load(OVERLAYS["cpu-demo"].read_text())
    second = {**data["models"][0], "name": "other"}
    config = build_config({**data, "models": [data["models"][0], second]}, source="test")
    with pytest.raises(LlmDError, match="one queue depth and one KV-cache use per pod"):
        model_group(config, "tolk-server")


def test_a_label_name_kubernetes_refuses_is_refused() -> None:
    assert pair_key("zh-Hans", "pt-BR") == "zh-Hans_pt-BR"
    assert pair_key(None, "de") == "auto_de"
    long = ModelGroup("tolk-server", "m", (Pair("sl-Latn-SI-rozaj-biske-1994", "x" * 40),))
    with pytest.raises(LlmDError, match="Kubernetes label name"):
        long.labels()
    with pytest.raises(LlmDError, match="Kubernetes label name"):
        ModelGroup("-tolk", "m", (Pair("en", "de"),)).labels()


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_kinds_match_the_kubernetes_schemas(version: str) -> None:
    for overlay in OVERLAYS:
        docs = [d for d in rendered(overlay).docs if d["kind"] not in CRDS]
        assert {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"} <= {
            d["kind"] for d in docs
        }
        for doc in docs:
            validate_strictly(doc, version, f"{overlay}: ")


def _strict(schema: Any) -> Any:
    """The CRD's schema refusing fields it does not name: the API server would prune them
    silently, and a typo must fail here (x-kubernetes-validations, CEL, are not checked)."""
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    named = "properties" in schema and "additionalProperties" not in schema
    if named and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_schema(kind: str) -> tuple[str, dict[str, Any]]:
    """The apiVersion the CRD stores and serves, and its schema (strict)."""
    crd = yaml.safe_load((DATA / CRDS[kind]).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"] and v["served"]]
    api_version = f"{crd['spec']['group']}/{version['name']}"
    schema = _strict(version["schema"]["openAPIV3Schema"])
    assert schema["properties"]["metadata"] == {"type": "object"}  # ObjectMeta: the API's
    return api_version, schema


def validate_crd_kind(doc: Doc) -> None:
    api_version, schema = crd_schema(doc["kind"])
    assert doc["apiVersion"] == api_version
    jsonschema.validate(doc, schema)


def test_crd_kinds_match_the_upstream_crds(overlay: str) -> None:
    docs = [d for d in rendered(overlay).docs if d["kind"] in CRDS]
    assert sorted(d["kind"] for d in docs) == sorted(CRDS)
    for doc in docs:
        validate_crd_kind(doc)
    # gateway-api-inference-extension v1.5.0 (what llm-d-router v0.10.0 installs) requires it.
    assert rendered(overlay).one("InferencePool", "tolk")["spec"]["endpointPickerRef"]


def test_a_typo_is_caught_by_the_crd_check() -> None:
    pool = copy.deepcopy(rendered("gpu").one("InferencePool", "tolk"))
    pool["spec"]["endpointPickerRef"]["failureMod"] = "FailClose"
    with pytest.raises(jsonschema.ValidationError):
        validate_crd_kind(pool)
    route = copy.deepcopy(rendered("gpu").one("HTTPRoute", "tolk"))
    route["spec"]["rules"][0]["timeouts"]["request"] = "five minutes"
    with pytest.raises(jsonschema.ValidationError):
        validate_crd_kind(route)


# --- the EndpointPickerConfig --------------------------------------------------------------


def test_the_epp_config_uses_only_what_llm_d_router_v0_10_0_has(overlay: str) -> None:
    r = rendered(overlay)
    epp, path, config = epp_config(r)
    spec, plugins = known()["config"], known()["plugins"]
    assert (config["apiVersion"], config["kind"]) == (spec["apiVersion"], spec["kind"])
    assert set(config) <= set(spec["fields"])
    args = container(epp, "epp")["args"]
    assert args[args.index("--config-file") + 1] == str(path)

    defined: dict[str, str] = {}
    for plugin in config["plugins"]:
        assert set(plugin) <= set(spec["plugin"])
        kind = plugin["type"]
        assert kind in plugins, f"{kind} is not an llm-d-router v0.10.0 plugin"
        parameters = plugin.get("parameters", {})
        assert set(parameters) <= set(plugins[kind]["parameters"]), kind
        if kind == "core-metrics-extractor":
            for engine in parameters["engineConfigs"]:
                assert set(engine) <= set(plugins[kind]["engineConfigs"])
        name = plugin.get("name", kind)  # the EPP names an unnamed plugin by its type
        assert name not in defined, f"two plugins named {name}"
        defined[name] = kind
        if plugins[kind]["stability"] == "Alpha":
            assert "--allow-experimental-plugins=true" in args, kind

    def kind_of(ref: str) -> str:
        assert ref in defined, f"{ref} is referenced but not defined"
        return str(plugins[defined[ref]]["kind"])

    (handler,) = [
        p for p in config["plugins"] if kind_of(p.get("name", p["type"])).startswith("profile")
    ]
    profiles = {p["name"]: p for p in config["schedulingProfiles"]}
    assert len(profiles) == len(config["schedulingProfiles"])
    assert handler["parameters"] == {"headerName": HEADER, "defaultProfile": ANY}
    assert ANY in profiles
    for profile in profiles.values():
        assert set(profile) <= set(spec["profile"])
        kinds = [kind_of(p["pluginRef"]) for p in profile["plugins"]]
        assert all(set(p) <= set(spec["profilePlugin"]) for p in profile["plugins"])
        assert kinds.count("picker") == 1
        assert kinds.count("scorer") == 2  # queue and KV cache, everywhere
        assert set(kinds) <= {"filter", "scorer", "picker"}
    (source,) = config["dataLayer"]["sources"]
    assert kind_of(source["pluginRef"]) == "data-source"
    assert [kind_of(e["pluginRef"]) for e in source["extractors"]] == ["extractor"]
    assert [kind_of(p["pluginRef"]) for p in config["requestHandler"]["parsers"]] == ["parser"]


def _selected(profile: dict[str, Any], config: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether the profile's filters keep a pod with these labels."""
    filters = {p["name"]: p for p in config["plugins"] if p["type"] == "label-selector-filter"}
    refs = [p["pluginRef"] for p in profile["plugins"] if p["pluginRef"] in filters]
    return all(selects(filters[r]["parameters"]["matchLabels"], labels) for r in refs)


def test_each_pair_profile_keeps_exactly_the_pods_that_serve_it(overlay: str) -> None:
    r = rendered(overlay)
    _, _, config = epp_config(r)
    servers = r.deployments("server")
    assert servers
    pool = r.one("InferencePool", "tolk")
    for profile in config["schedulingProfiles"]:
        name = profile["name"]
        for server in servers:
            labels = pod_labels(server)
            assert selects(pool["spec"]["selector"]["matchLabels"], labels)
            (model,) = server_config(r, server).models
            coverage = model.coverage
            kept = _selected(profile, config, labels)
            if name == ANY:
                assert kept
                continue
            source, target = name.split(JOIN)
            if source == AUTO:  # any source into target (the server detects it)
                serving = any(serves(t, target) for t in coverage.languages) or any(
                    serves(p.target, target) for p in coverage.pairs
                )
            else:
                serving = coverage.covers(source, target)
            assert kept == serving, f"profile {name} on {server['metadata']['name']}"
    # Every pair a server serves among its languages has its profile.
    for server in servers:
        (model,) = server_config(r, server).models
        languages = model.coverage.languages
        names = {p["name"] for p in config["schedulingProfiles"]}
        assert {f"{s}{JOIN}{t}" for s in languages for t in languages if s != t} <= names


# What core-metrics-extractor accepts as a spec (extractor/metrics/spec.go: metricSpecRE and
# labelPairRE, with label values quoted).
_SPEC = re.compile(r"^\s*(\S+?)\s*(?:\{([^}]*)\})?\s*$")
_LABEL = re.compile(r'^\s*(\S+?)\s*=\s*"([^"]*)"\s*$')


def _parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    match = _SPEC.match(spec)
    assert match, spec
    labels = {}
    for pair in filter(None, (match.group(2) or "").split(",")):
        found = _LABEL.match(pair)
        assert found, spec
        labels[found.group(1)] = found.group(2)
    return match.group(1), labels


def test_each_pod_s_load_is_read_from_its_own_model_s_metrics(overlay: str) -> None:
    r = rendered(overlay)
    _, _, config = epp_config(r)
    (extractor,) = [p for p in config["plugins"] if p["type"] == "core-metrics-extractor"]
    engines = {e["name"]: e for e in extractor["parameters"]["engineConfigs"]}
    vllm = importlib.util.find_spec("vllm")  # found, not imported (that takes seconds)
    assert vllm is not None
    assert vllm.submodule_search_locations
    where = Path(next(iter(vllm.submodule_search_locations)))
    vllm_metrics = (where / "v1" / "metrics" / "loggers.py").read_text()
    for server in r.deployments("server"):
        engine = engines[pod_labels(server)["llm-d.ai/engine-type"]]
        (model,) = server_config(r, server).models
        for field in ("queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec"):
            metric, labels = _parse_spec(engine[field])
            assert f'name="{metric}"' in vllm_metrics, f"vLLM does not define {metric}"
            assert labels == {"model_name": model.name}
            # tolk exposes each engine's vllm:* samples labelled model_name=<its model>.
            assert _tolk_exposes(metric, model.name)


def _tolk_exposes(metric: str, model: str) -> bool:
    gauge = Gauge(metric, "as vLLM registers it", ["model_name", "engine"])
    gauge.labels("the engine's own name", "0").set(3)
    engines = EngineMetrics()
    engines.adopt(model)  # takes it out of the default REGISTRY, as for each engine
    assert gauge not in REGISTRY._collector_to_names
    registry = CollectorRegistry()
    registry.register(engines)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return any(
        s.name == metric and s.labels["model_name"] == model for f in families for s in f.samples
    )


# --- the rest of the wiring ----------------------------------------------------------------


def test_the_gateway_routes_to_the_pool_and_the_pool_to_the_epp(overlay: str) -> None:
    r = rendered(overlay)
    pool = r.one("InferencePool", "tolk")
    route = r.one("HTTPRoute", "tolk")
    gateway = r.one("Gateway", "tolk-gateway")
    (parent,) = route["spec"]["parentRefs"]
    assert (parent["kind"], parent["name"]) == ("Gateway", gateway["metadata"]["name"])
    (rule,) = route["spec"]["rules"]
    (backend,) = rule["backendRefs"]
    assert (backend["group"], backend["kind"], backend["name"]) == (
        "inference.networking.k8s.io",
        "InferencePool",
        pool["metadata"]["name"],
    )
    timeout = int(rule["timeouts"]["request"].removesuffix("s"))

    epp, _, _ = epp_config(r)
    args = container(epp, "epp")["args"]
    assert args[args.index("--pool-name") + 1] == pool["metadata"]["name"]
    assert args[args.index("--pool-group") + 1] == "inference.networking.k8s.io"
    ref = pool["spec"]["endpointPickerRef"]
    service = r.one("Service", ref["name"])
    assert selects(service["spec"]["selector"], pod_labels(epp))
    (grpc,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]["number"]]
    assert grpc["appProtocol"] == "kubernetes.io/h2c"
    ports = {p["name"]: p["containerPort"] for p in container(epp, "epp")["ports"]}
    assert ports[grpc["targetPort"]] == ref["port"]["number"]
    (account,) = r.of("ServiceAccount")
    assert epp["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]

    for server in r.deployments("server"):
        settings = server_config(r, server)
        assert [p["number"] for p in pool["spec"]["targetPorts"]] == [settings.server.port]
        assert timeout > settings.server.request_timeout
    assert not r.deployments("proxy")  # the gateway takes its place
    assert not [d for d in r.docs if "proxy" in d["metadata"]["name"]]


def test_the_epp_may_read_what_it_watches(overlay: str) -> None:
    r = rendered(overlay)
    (role,) = r.of("Role")
    (binding,) = r.of("RoleBinding")
    (account,) = r.of("ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
    granted = {
        (group, resource)
        for rule in role["rules"]
        if {"get", "watch", "list"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= granted
