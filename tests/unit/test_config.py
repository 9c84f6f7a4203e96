from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tolk.config import ConfigError, build_config, load_config

MINIMAL = {"models": [{"name": "m", "path": "some/model", "languages": ["en", "DE"]}]}


def test_defaults_are_explicit_batching_settings() -> None:
    config = build_config(MINIMAL, environ={})
    engine = config.models[0].engine
    assert (engine.max_num_seqs, engine.max_num_batched_tokens) == (16, 8192)
    # Decided when the engine starts: 0.9 split among the models, eager only on the CPU.
    assert (engine.gpu_memory_utilization, engine.enforce_eager) == (None, None)
    assert config.models[0].languages == ("en", "de")
    assert config.server.request_timeout == 30
    assert config.models[0].sampling.temperature == 0.0


def test_env_overrides_then_flags() -> None:
    environ = {
        "TOLK_SERVER__PORT": "9001",
        "TOLK_MODELS__0__ENGINE__MAX_NUM_SEQS": "32",
        "TOLK_MODELS__0__ENGINE__ENFORCE_EAGER": "true",
        "UNRELATED": "x",
    }
    config = build_config(MINIMAL, environ=environ, overrides={"server.port": 9002})
    assert config.server.port == 9002
    assert config.models[0].engine.max_num_seqs == 32
    assert config.models[0].engine.enforce_eager is True


def test_kv_cache_size_accepts_units() -> None:
    data = {"models": [{**MINIMAL["models"][0], "engine": {"kv_cache_memory_bytes": "512MiB"}}]}
    assert build_config(data, environ={}).models[0].engine.kv_cache_memory_bytes == 512 << 20


@pytest.mark.parametrize(
    ("patch", "field", "reason"),
    [
        ({"engine": {"max_num_seqs": 0}}, "models.0.engine.max_num_seqs", "greater than"),
        ({"engine": {"max_num_seq": 4}}, "models.0.engine.max_num_seq", "Extra inputs"),
        ({"languages": ["en", "klingon"]}, "models.0.languages", "not a known language"),
        ({"pairs": ["en-de"]}, "models.0.pairs", "source>target"),
        ({"languages": []}, "models.0", "give 'languages'"),
        ({"prompt_format": "gpt"}, "models.0.prompt_format", "Input should be"),
        ({"name": "has space"}, "models.0.name", "pattern"),
        (
            {"checks": {"markup_sampling": {"temperature": 0}}},
            "models.0.checks",
            "markup_candidates > 1 needs markup_sampling.temperature > 0",
        ),
    ],
)
def test_invalid_config_names_the_field(patch: dict[str, object], field: str, reason: str) -> None:
    data = {"models": [{**MINIMAL["models"][0], **patch}]}
    with pytest.raises(ConfigError) as info:
        build_config(data, environ={})
    assert f"{field}:" in str(info.value)
    assert reason in str(info.value)


def test_duplicate_model_names() -> None:
    data = {"models": [MINIMAL["models"][0], MINIMAL["models"][0]]}
    with pytest.raises(ConfigError, match="repeated: m"):
        build_config(data, environ={})


def test_yaml_file_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "tolk.yaml"
    path.write_text("models:\n  - {name: m, path: ../models/m, languages: [en, de]}\n")
    config = load_config(path, environ={})
    assert config.models[0].path == str(tmp_path / "models" / "m")


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml", environ={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, environ={})


def test_serve_refuses_invalid_config_at_startup(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "models:\n  - {name: m, path: x, languages: [en, de], engine: {max_num_seqs: -1}}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "tolk", "serve", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "models.0.engine.max_num_seqs" in result.stderr


def test_a_port_in_use_is_named_before_any_engine_starts(tmp_path: Path, test_model: Path) -> None:
    """The port is bound first: another process holding it fails `tolk serve` at once, with
    what to do, rather than after a minute of engine start (or, worse, after the engine
    started while something else took the port)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        path = tmp_path / "tolk.yaml"
        path.write_text(
            f"server: {{host: 127.0.0.1, port: {port}}}\n"
            f"models:\n  - {{name: demo, path: {test_model}, languages: [en, de]}}\n"
        )
        result = subprocess.run(
            [sys.executable, "-m", "tolk", "serve", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 2, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "TOLK_SERVER__PORT" in result.stderr
    assert "engine" not in result.stderr.lower()


@pytest.mark.parametrize("command", ["serve", "fleet"])
def test_a_missing_model_directory_is_named_before_any_engine_starts(
    tmp_path: Path, command: str
) -> None:
    """A fresh clone has no models/demo until `make demo-model`; vLLM would take the missing
    directory for a hub id and fail with a repo-id message that names neither."""
    path = tmp_path / "tolk.yaml"
    path.write_text("models:\n  - {name: demo, path: ../models/demo, languages: [en, de]}\n")
    result = subprocess.run(
        [sys.executable, "-m", "tolk", command, "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"model 'demo': there is nothing at {tmp_path.parent / 'models' / 'demo'}" in (
        result.stderr
    )
    assert "make demo-model" in result.stderr
    assert "starting" not in result.stderr.lower()  # neither an engine nor a fleet server
