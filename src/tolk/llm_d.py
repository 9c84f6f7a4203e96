"""What the llm-d router's endpoint picker (EPP) must know of a tolk fleet, generated from
tolk's server configs (`tolk deploy llm-d`): which language pairs each model group's pods
serve, as pod labels, and an EndpointPickerConfig with one scheduling profile per pair that
keeps only the pods labelled for it and picks among them by queue depth and KV-cache use.

The plugin types and parameters are those of llm-d-router v0.10.0 (github.com/llm-d/llm-d-router,
commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26; the EPP moved there from
gateway-api-inference-extension, whose v1.6.0 keeps only the InferencePool API):
  header-profile-handler        pkg/epp/framework/plugins/scheduling/profilehandler/headerprofile
  label-selector-filter         pkg/epp/framework/plugins/scheduling/filter/bylabel/selector.go
  queue-scorer                  pkg/epp/framework/plugins/scheduling/scorer/queuedepth/queue.go
  kv-cache-utilization-scorer   pkg/epp/framework/plugins/scheduling/scorer/kvcacheutilization
  max-score-picker              pkg/epp/framework/plugins/scheduling/picker/maxscore
  passthrough-parser            pkg/epp/framework/plugins/requesthandling/parsers/passthrough
  metrics-data-source           pkg/epp/framework/plugins/datalayer/source/metrics/datasource.go
  core-metrics-extractor        pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go
all registered in cmd/epp/runner/runner.go (registerInTreePlugins).

A request says its pair in the `X-Tolk-Pair` header, `en_de` (source and target as the
model group's config writes them, joined by `_`), or `auto_de` when the server is to detect the
source; a request without the header (GET /languages, /health, ...) may go to any pod.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tolk.config import ModelSettings, TolkConfig
from tolk.languages import Pair

ROUTER = "llm-d-router v0.10.0 (commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26)"
HEADER = "x-tolk-pair"  # the EPP lowercases header names; clients may send X-Tolk-Pair
PAIR_LABELS = "pair.tolk.dev"  # pair.tolk.dev/en_de: "true" on pods that serve en>de
TARGET_LABELS = "target.tolk.dev"  # target.tolk.dev/de: "true": some source into de
ENGINE_LABEL = "llm-d.ai/engine-type"  # core-metrics-extractor's default engineLabelKey
AUTO = "auto"  # the header's source when the server detects it
ANY = "any"  # the profile of requests without the header: every pod
JOIN = "_"  # never in a BCP-47 tag, allowed in a label name
SCRAPE_INTERVAL = "250ms"
WEIGHTS = {"queue-scorer": 2.0, "kv-cache-utilization-scorer": 2.0}  # upstream's defaults
FILES = ("pair-labels.yaml", "epp-config.yaml")

# Kubernetes: a label name (the part after the prefix's /) and a label value are at most 63
# characters, alphanumeric at both ends, with -, _ and . inside (apimachinery's
# validation.IsQualifiedName / IsValidLabelValue).
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


class LlmDError(ValueError):
    """A config tolk cannot describe to the llm-d router."""


def label_name(text: str) -> str:
    if not _LABEL_NAME.match(text):
        raise LlmDError(
            f"'{text}' cannot be a Kubernetes label name or value (at most 63 characters: "
            "letters, digits, '-', '_', '.', alphanumeric at both ends)"
        )
    return text


def pair_key(source: str | None, target: str) -> str:
    """The header value, profile name and label name of a pair: `en_de`, `auto_de`."""
    return label_name(f"{source or AUTO}{JOIN}{target}")


def served_pairs(model: ModelSettings) -> tuple[Pair, ...]:
    """Every pair a model serves: its explicit pairs and every ordered pair among its
    languages (as the proxy counts them, tolk.proxy.upstream.ModelInfo.pairs)."""
    coverage = model.coverage
    among = (Pair(s, t) for s, t in itertools.permutations(coverage.languages, 2))
    return tuple(sorted({*coverage.pairs, *among}, key=str))


@dataclass(frozen=True)
class ModelGroup:
    """One Deployment of `tolk serve` pods, all with the same config of one model."""

    deployment: str
    model: str  # its name in tolk's config: the model_name label of its vllm:* metrics
    pairs: tuple[Pair, ...]

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(sorted({p.target for p in self.pairs}))

    def labels(self) -> dict[str, str]:
        out = {ENGINE_LABEL: label_name(self.deployment)}
        out |= {f"{PAIR_LABELS}/{pair_key(p.source, p.target)}": "true" for p in self.pairs}
        out |= {f"{TARGET_LABELS}/{label_name(t)}": "true" for t in self.targets}
        return out


def model_group(config: TolkConfig, deployment: str) -> ModelGroup:
    if len(config.models) != 1:
        names = ", ".join(m.name for m in config.models)
        raise LlmDError(
            f"{deployment}: the config has {len(config.models)} models ({names}); the llm-d "
            "router reads one queue depth and one KV-cache use per pod (the metrics "
            "extractor takes one series of each), so give each model a Deployment of its own "
            "(or route multi-model servers with `tolk proxy`, which reads every model's)"
        )
    (model,) = config.models
    return ModelGroup(deployment, model.name, served_pairs(model))


def _engine_config(group: ModelGroup) -> dict[str, Any]:
    # The pod's llm-d.ai/engine-type label names this mapping. tolk labels each engine's
    # vllm:* samples model_name="<the model's name in tolk's config>" (tolk.engine.metrics).
    # No loraSpec or cacheInfoSpec: nothing here reads them (the prefix-cache scorer would).
    where = f'{{model_name="{group.model}"}}'
    return {
        "name": group.deployment,
        "queuedRequestsSpec": f"vllm:num_requests_waiting{where}",
        "runningRequestsSpec": f"vllm:num_requests_running{where}",
        "kvUsageSpec": f"vllm:kv_cache_usage_perc{where}",
    }


def _filter(name: str, label: str) -> dict[str, Any]:
    return {
        "type": "label-selector-filter",
        "name": name,
        "parameters": {"matchLabels": {label: "true"}},
    }


def _profile(name: str, first: Iterable[str] = ()) -> dict[str, Any]:
    plugins: list[dict[str, Any]] = [{"pluginRef": ref} for ref in first]
    plugins += [{"pluginRef": ref, "weight": weight} for ref, weight in WEIGHTS.items()]
    plugins.append({"pluginRef": "max-score-picker"})
    return {"name": name, "plugins": plugins}


def endpoint_picker_config(groups: Sequence[ModelGroup]) -> dict[str, Any]:
    pairs = sorted({p for g in groups for p in g.pairs}, key=str)
    targets = sorted({t for g in groups for t in g.targets})
    filters, profiles = [], [_profile(ANY)]
    for pair in pairs:
        key = pair_key(pair.source, pair.target)
        filters.append(_filter(f"pair-{key}", f"{PAIR_LABELS}/{key}"))
        profiles.append(_profile(key, [f"pair-{key}"]))
    for target in targets:
        filters.append(_filter(f"target-{target}", f"{TARGET_LABELS}/{target}"))
        profiles.append(_profile(pair_key(None, target), [f"target-{target}"]))
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            {
                "type": "header-profile-handler",
                "parameters": {"headerName": HEADER, "defaultProfile": ANY},
            },
            # tolk's bodies are not OpenAI's: the default parsers would refuse them.
            {"type": "passthrough-parser"},
            {
                "type": "metrics-data-source",
                "parameters": {"scheme": "http", "path": "/metrics", "interval": SCRAPE_INTERVAL},
            },
            {
                "type": "core-metrics-extractor",
                "parameters": {"engineConfigs": [_engine_config(g) for g in groups]},
            },
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "max-score-picker"},
            *filters,
        ],
        "schedulingProfiles": profiles,
        "dataLayer": {
            "sources": [
                {
                    "pluginRef": "metrics-data-source",
                    "extractors": [{"pluginRef": "core-metrics-extractor"}],
                }
            ]
        },
        "requestHandler": {"parsers": [{"pluginRef": "passthrough-parser"}]},
    }


def label_patches(groups: Sequence[ModelGroup]) -> list[dict[str, Any]]:
    """Kustomize patches (strategic merge) that label each group's pod template."""
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": g.deployment},
            "spec": {"template": {"metadata": {"labels": g.labels()}}},
        }
        for g in groups
    ]


def _dump(docs: Sequence[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(d, sort_keys=False, width=100) for d in docs)


def render(groups: Sequence[ModelGroup], sources: Sequence[str]) -> dict[str, str]:
    """The generated files' text by name; `sources` are the configs as the header names them."""
    made = (
        "# Generated by `tolk deploy llm-d` from " + ", ".join(sources) + ".\n"
        "# Do not edit: regenerate when the config changes (deploy/llm-d/README.md).\n"
    )
    labels = made + (
        "# The pairs each pod serves, for the EPP's label filters, and the metrics mapping\n"
        "# (core-metrics-extractor engine) that reads its load.\n"
    )
    config = made + (
        f"# An EndpointPickerConfig of {ROUTER}.\n"
        f"# The profile named by the {HEADER} header keeps the pods that serve that pair;\n"
        "# its scorers prefer the shortest queue and the emptiest KV cache.\n"
    )
    return {
        "pair-labels.yaml": labels + _dump(label_patches(groups)),
        "epp-config.yaml": config + _dump([endpoint_picker_config(groups)]),
    }


def relative(path: Path, to: Path) -> str:
    return Path(os.path.relpath(path.resolve(), to.resolve())).as_posix()
