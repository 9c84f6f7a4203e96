"""A Qwen2 GGUF file turned into a Hugging Face model directory that vLLM loads.

vLLM's own GGUF loading is experimental and slow on CPU, and tolk's engine settings assume a
directory in the standard layout (config.json, tokenizer files, *.safetensors). Libraries do
the parts that have one: `gguf` reads the file and dequantizes its tensors (Q4_K, Q5_0, Q6_K
and Q8_0 occur in Qwen's Q4_K_M files), transformers builds the config and the tokenizer
(chat template included) from the file's metadata, `safetensors` writes the weights. What is
left here is the tensor names (llama.cpp's → transformers'; qwen2 needs no Q/K
un-permuting) and a few config fields the metadata lacks.

The weights are stored as bfloat16: it is the dtype Qwen2.5 was released in and the one vLLM
computes in on a GPU (config's torch_dtype, which vLLM's dtype "auto" follows), it halves the
directory (1.3 GB rather than 2.5 GB for the 0.5B), and its rounding (relative 2^-9) is far below
the 4-to-8-bit quantization the GGUF already carries, so float32 would only keep that
quantization's values more exactly, not bring back what it lost.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tolk.models import Progress, Quiet

# Bumped whenever the directory written here changes, so that `ensure_model` redoes older ones.
CONVERTER_VERSION = 1
WEIGHTS_DTYPE = "bfloat16"
WEIGHTS_FILE = "model.safetensors"

_TOP_LEVEL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output.weight": "lm_head.weight",
    "output_norm.weight": "model.norm.weight",
}
_IN_BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_BLOCK = re.compile(r"blk\.(\d+)\.(.+)")


class ConversionError(Exception):
    """The GGUF file is not one this converter handles."""


def hf_tensor_name(gguf_name: str) -> str:
    """The transformers (Qwen2ForCausalLM) name of a tensor that llama.cpp names `gguf_name`."""
    if gguf_name in _TOP_LEVEL:
        return _TOP_LEVEL[gguf_name]
    match = _BLOCK.fullmatch(gguf_name)
    if match is not None and match.group(2) in _IN_BLOCK:
        return f"model.layers.{int(match.group(1))}.{_IN_BLOCK[match.group(2)]}"
    raise ConversionError(f"unexpected tensor {gguf_name!r} for a qwen2 model")


def convert_gguf(gguf_path: Path, out_dir: Path, *, progress: Progress | None = None) -> int:
    """Write the model in `gguf_path` into `out_dir` (which must exist); returns its tensor
    count. Only the qwen2 architecture is handled."""
    import gguf
    import torch
    from safetensors.torch import save_file

    report = progress or Quiet()
    report.start(f"read {gguf_path.name}")
    reader = gguf.GGUFReader(gguf_path)
    architecture = reader.fields["general.architecture"].contents()
    if architecture != "qwen2":
        raise ConversionError(
            f"{gguf_path.name} is a {architecture!r} model; only qwen2 is handled"
        )
    report.finish()

    tensors: dict[str, torch.Tensor] = {}
    report.start("convert tensors", total=len(reader.tensors), unit="tensors")
    for tensor in reader.tensors:
        name = hf_tensor_name(tensor.name)
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        if not values.flags.writeable:  # float32 tensors come back as views of the file
            values = values.copy()
        # GGUF lists dimensions fastest-varying first; torch wants them the other way round.
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        tensors[name] = torch.from_numpy(values.reshape(shape)).to(torch.bfloat16)
        report.update(advance=1)
    report.finish()
    report.start(f"write {WEIGHTS_FILE}")
    save_file(tensors, str(out_dir / WEIGHTS_FILE), metadata={"format": "pt"})
    report.finish()

    tied = "lm_head.weight" not in tensors
    report.start("config and tokenizer (transformers, from the GGUF metadata)")
    config = _write_config(gguf_path, out_dir, tied=tied)
    vocab_rows = tensors["model.embed_tokens.weight"].shape[0]
    if config["vocab_size"] != vocab_rows:
        raise ConversionError(
            f"config says {config['vocab_size']} tokens, the embedding has {vocab_rows}"
        )
    _write_tokenizer(gguf_path, out_dir, config)
    report.finish()
    return len(tensors)


def _write_config(gguf_path: Path, out_dir: Path, *, tied: bool) -> dict[str, Any]:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    config.architectures = ["Qwen2ForCausalLM"]
    # transformers infers this from output.weight too; the file decides, not a default.
    config.tie_word_embeddings = tied
    config.save_pretrained(out_dir)
    path = out_dir / "config.json"
    data: dict[str, Any] = json.loads(path.read_text())
    data.pop("_name_or_path", None)
    data.pop("_model_name_or_path", None)
    # transformers 5 writes `dtype` and `rope_parameters`; older readers (vLLM releases on
    # transformers 4) look for `torch_dtype` and `rope_theta`, so both spellings are written.
    data["dtype"] = data["torch_dtype"] = WEIGHTS_DTYPE
    rope = data.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope:
        data.setdefault("rope_theta", rope["rope_theta"])
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def _write_tokenizer(gguf_path: Path, out_dir: Path, config: dict[str, Any]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    template = tokenizer.chat_template
    if not isinstance(template, str) or not template:
        raise ConversionError(f"{gguf_path.name} carries no chat template")
    tokenizer.save_pretrained(out_dir)
    # The template goes into tokenizer_config.json, which every transformers release reads
    # (transformers 5 would put it in a separate chat_template.jinja).
    (out_dir / "chat_template.jinja").unlink(missing_ok=True)
    path = out_dir / "tokenizer_config.json"
    data: dict[str, Any] = json.loads(path.read_text())
    for key in ("is_local", "local_files_only", "_name_or_path", "name_or_path"):
        data.pop(key, None)
    data["chat_template"] = template
    data["model_max_length"] = config["max_position_embeddings"]
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    # Qwen's chat models end a turn with <|im_end|> (the file's eos) and a document with
    # <|endoftext|>; either ends generation, as in Qwen's own generation_config.json.
    eos = [tokenizer.eos_token_id]
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    if (
        isinstance(end_of_text, int)
        and end_of_text not in eos
        and end_of_text != tokenizer.unk_token_id
    ):
        eos.append(end_of_text)
    generation = {
        "bos_token_id": config.get("bos_token_id"),
        "eos_token_id": eos,
        "pad_token_id": tokenizer.pad_token_id,
    }
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
