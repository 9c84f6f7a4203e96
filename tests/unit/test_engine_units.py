from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tolk.config import build_config
from tolk.engine.engine import CPU_DEFAULT_KV_CACHE_BYTES, engine_args
from tolk.engine.metrics import EngineMetrics


def _model(engine: dict[str, object]) -> object:
    data = {
        "models": [{"name": "m", "path": "/models/m", "languages": ["en", "de"], "engine": engine}]
    }
    return build_config(data, environ={}).models[0]


def test_engine_args_are_explicit() -> None:
    args = engine_args(_model({"max_waiting": 10}), cpu=False)  # type: ignore[arg-type]
    assert args["max_num_seqs"] == 16
    assert args["max_num_batched_tokens"] == 8192
    assert args["served_model_name"] == "m"
    assert args["disable_log_stats"] is False
    assert args["enforce_eager"] is False  # CUDA graphs on by default on a GPU
    assert "kv_cache_memory_bytes" not in args
    # Admission is tolk's own: no vLLM 0.32-only queue bound is passed.
    assert "max_num_queued_reqs" not in args


def test_gpu_memory_share_defaults_to_vllms_split_among_models() -> None:
    one = engine_args(_model({}), cpu=False)  # type: ignore[arg-type]
    assert one["gpu_memory_utilization"] == 0.9
    three = engine_args(_model({}), cpu=False, models_sharing=3)  # type: ignore[arg-type]
    assert three["gpu_memory_utilization"] == 0.3
    configured = engine_args(
        _model({"gpu_memory_utilization": 0.25}),  # type: ignore[arg-type]
        cpu=False,
        models_sharing=3,
    )
    assert configured["gpu_memory_utilization"] == 0.25


def test_eager_by_default_only_on_the_cpu_engine() -> None:
    assert engine_args(_model({}), cpu=True)["enforce_eager"] is True  # type: ignore[arg-type]
    compiled = engine_args(_model({"enforce_eager": False}), cpu=True)  # type: ignore[arg-type]
    assert compiled["enforce_eager"] is False
    eager = engine_args(_model({"enforce_eager": True}), cpu=False)  # type: ignore[arg-type]
    assert eager["enforce_eager"] is True


def test_engine_args_cpu_always_sizes_the_kv_cache() -> None:
    args = engine_args(_model({}), cpu=True)  # type: ignore[arg-type]
    assert args["kv_cache_memory_bytes"] == CPU_DEFAULT_KV_CACHE_BYTES
    args = engine_args(_model({"kv_cache_memory_bytes": "256MiB"}), cpu=True)  # type: ignore[arg-type]
    assert args["kv_cache_memory_bytes"] == 256 << 20


def test_engine_args_extra_passes_through() -> None:
    args = engine_args(_model({"extra_args": {"block_size": 32}}), cpu=True)  # type: ignore[arg-type]
    assert args["block_size"] == 32


def _register_like_vllm(model: str, running: float) -> None:
    """What each vLLM engine's stat logger does: unregister earlier vllm:* collectors from
    the default registry, then register its own, labelled by model_name."""
    for collector in list(REGISTRY._collector_to_names):
        if str(getattr(collector, "_name", "")).startswith("vllm:"):
            REGISTRY.unregister(collector)
    gauge = Gauge("vllm:num_requests_running", "Running.", ["model_name", "engine"])
    gauge.labels(model, "0").set(running)
    counter = Counter("vllm:prompt_tokens", "Prompt tokens.", ["model_name", "engine"])
    counter.labels(model, "0").inc(running * 10)
    info = Gauge("vllm:cache_config_info", "Info.", ["block_size"])
    info.labels("16").set(1)
    _register_like_vllm.kept.append(gauge)  # type: ignore[attr-defined]


_register_like_vllm.kept = []  # type: ignore[attr-defined]


def test_engine_metrics_keep_every_engine() -> None:
    metrics = EngineMetrics()
    _register_like_vllm("alpha", 3)
    assert metrics.adopt("alpha") == 3
    _register_like_vllm("beta", 5)
    assert metrics.adopt("beta") == 3
    # The first engine's gauge keeps updating after the second engine registered.
    _register_like_vllm.kept[0].labels("alpha", "0").set(4)  # type: ignore[attr-defined]

    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}  # parses: no dupes
    running = {
        s.labels["model_name"]: s.value for s in families["vllm:num_requests_running"].samples
    }
    assert running == {"alpha": 4.0, "beta": 5.0}
    info_models = {s.labels["model_name"] for s in families["vllm:cache_config_info"].samples}
    assert info_models == {"alpha", "beta"}
    assert text.count("# TYPE vllm:prompt_tokens_total counter") == 1
    assert 'vllm:prompt_tokens_total{engine="0",model_name="alpha"} 30.0' in text
    assert not [
        c for c in REGISTRY._collector_to_names if str(getattr(c, "_name", "")).startswith("vllm:")
    ]


def test_dtype_auto_is_fp32_on_a_cpu_without_native_bf16() -> None:
    from tolk.engine.engine import cpu_has_bf16, engine_dtype

    assert engine_dtype("auto", cpu=True) == ("auto" if cpu_has_bf16() else "float32")
    assert engine_dtype("auto", cpu=False) == "auto"  # a GPU: the model's own (bf16)
    assert engine_dtype("bfloat16", cpu=True) == "bfloat16"  # a config still says
    assert engine_args(_model({}), cpu=True)["dtype"] == engine_dtype("auto", cpu=True)  # type: ignore[arg-type]


def test_sampling_params_are_made_per_request_and_not_deep_copied_by_vllm() -> None:
    """Each request gets SamplingParams of its own, so vLLM need not deep-copy them."""
    from tolk.config import SamplingSettings
    from tolk.engine.engine import sampling_params

    first = sampling_params(SamplingSettings(), 64)
    second = sampling_params(SamplingSettings(), 64)
    assert first is not second
    assert first.skip_clone
    assert second.skip_clone
    assert first.clone() is not first  # a shallow copy where vLLM clones
