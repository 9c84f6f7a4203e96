"""The Kubernetes manifests under deploy/kubernetes, rendered by kustomize as `kubectl apply -k`
renders them, and the parts of them the deployment tests read."""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import REPO

KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAYS = ("cpu-demo", "gpu")
Doc = dict[str, Any]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError(
            "kubectl is needed to render the kustomize overlays (`kubectl kustomize`): "
            "`apt-get install kubectl` (.ci/run does)"
        )
    return found


@functools.cache
def render(overlay: str, root: Path = KUBERNETES) -> tuple[Doc, ...]:
    """The overlay's resources (under `root`: deploy/kubernetes, or deploy/llm-d), as
    `kubectl kustomize` renders them."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(root / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def validate_strictly(doc: Doc, version: str, where: str = "") -> None:
    """`doc` against Kubernetes `version`'s schemas, no unknown fields; a failure names it."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        name = f"{where}{doc['kind']}/{doc['metadata']['name']}"
        raise AssertionError(f"{name} on Kubernetes {version}: {exc.message}") from exc


def examples() -> list[Doc]:
    return [
        d
        for path in sorted((KUBERNETES / "examples").glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]


@dataclass(frozen=True)
class Rendered:
    docs: tuple[Doc, ...]

    def of(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str) -> Doc:
        found = [d for d in self.of(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
        return found[0]

    def config_map_file(self, name: str) -> tuple[str, dict[str, Any]]:
        """The one file a generated ConfigMap holds, parsed; `name` is its generated name."""
        data = self.one("ConfigMap", name)["data"]
        assert len(data) == 1, data.keys()
        (key, text), *_ = data.items()
        return key, yaml.safe_load(text)

    def deployments(self, component: str) -> list[Doc]:
        return [
            d
            for d in self.of("Deployment")
            if pod_labels(d).get("app.kubernetes.io/component") == component
        ]


def pod_labels(workload: Doc) -> dict[str, str]:
    return dict(workload["spec"]["template"]["metadata"]["labels"])


def pod_annotations(workload: Doc) -> dict[str, str]:
    return dict(workload["spec"]["template"]["metadata"].get("annotations", {}))


def container(workload: Doc, name: str | None = None) -> Doc:
    containers = workload["spec"]["template"]["spec"]["containers"]
    if name is None:
        assert len(containers) == 1
        return dict(containers[0])
    return next(dict(c) for c in containers if c["name"] == name)


def port_named(box: Doc, name: str) -> int:
    return int(next(p["containerPort"] for p in box["ports"] if p["name"] == name))


def mounted_config(workload: Doc, rendered: Rendered, box: Doc) -> tuple[Path, dict[str, Any]]:
    """Where the container's ConfigMap volume is mounted, and the file it holds there."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    for mount in box["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            key, content = rendered.config_map_file(volume["configMap"]["name"])
            return Path(mount["mountPath"]) / key, content
    raise AssertionError(f"{box['name']} mounts no ConfigMap")


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def meta_labels(workload: Doc, namespace: str, pod: str) -> dict[str, str]:
    """What Prometheus' Kubernetes service discovery (role: pod) attaches to one of the
    workload's pods: its labels and annotations as __meta_kubernetes_pod_* labels."""

    def sanitise(name: str) -> str:
        return "".join(c if c.isalnum() else "_" for c in name)

    out = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": pod,
    }
    for key, value in pod_labels(workload).items():
        out[f"__meta_kubernetes_pod_label_{sanitise(key)}"] = value
    for key, value in pod_annotations(workload).items():
        out[f"__meta_kubernetes_pod_annotation_{sanitise(key)}"] = value
    return out
