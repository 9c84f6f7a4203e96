"""A small random-weight model in Hugging Face format, for the tests and the demo.

Nothing can be downloaded on the machines tolk is built on, so tolk makes its own model: a
Qwen2-architecture decoder (head size 64, which vLLM's CPU attention supports) with random
weights, and a byte-level BPE tokenizer trained here on the case-study articles, with a
ChatML chat template. It loads through exactly the same code path as any real model.

Its translations are meaningless. One property is deliberate: the rows of the output layer
for the special tokens (and for any row past the tokenizer's vocabulary) are zero, so their
logits are always 0 while some ordinary token's logit is almost surely above 0. Greedy
decoding therefore never ends a sequence early, and every request generates exactly its
`max_tokens`: output length is a known function of input length, which is what load tests
and batching tests need.

Shapes: `tiny` (the default: 4 layers, hidden 256, ~5 M parameters; the tests and the CPU
demo) and the published shapes of Qwen2.5-1.5B (`1b`) and Qwen2.5-7B (`7b`): hidden size,
layers, attention and KV heads, intermediate size and vocabulary size as in their configs, so
that a GPU measures a realistic amount of compute per token. The embedding has the published
vocabulary's rows; tolk's tokenizer uses the first few thousand of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    intermediate_size: int
    # Rows of the embedding and output layer: None for the tokenizer's own vocabulary, or a
    # published size (larger than the tokenizer's; the rows past it are never generated).
    vocab_size: int | None
    max_positions: int
    tie_word_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.heads

    def parameters(self, tokenizer_vocab: int = 0) -> int:
        """Parameter count, as the model will have it."""
        h, kv = self.hidden_size, self.kv_heads * self.head_dim
        attention = h * h * 2 + h * kv * 2 + h + kv * 2  # q, o; k, v; q/k/v biases
        mlp = 3 * h * self.intermediate_size
        per_layer = attention + mlp + 2 * h  # two RMSNorms
        vocab = self.vocab_size or tokenizer_vocab
        embeddings = vocab * h * (1 if self.tie_word_embeddings else 2)
        return self.layers * per_layer + embeddings + h


TOKENIZER_VOCAB = 4096
SHAPES: dict[str, ModelShape] = {
    "tiny": ModelShape(256, 4, 4, 2, 1024, None, 4096),
    # Qwen2.5-1.5B's config.json: 1.54 B parameters.
    "1b": ModelShape(1536, 28, 12, 2, 8960, 151936, 32768, tie_word_embeddings=True),
    # Qwen2.5-7B's config.json: 7.62 B parameters.
    "7b": ModelShape(3584, 28, 28, 4, 18944, 152064, 32768),
}


def corpus_texts() -> list[str]:
    """The case-study articles (English and Nepali) shipped with tolk."""
    folder = resources.files("tolk") / "data" / "case_study"
    return [
        f.read_text(encoding="utf-8")
        for f in sorted(folder.iterdir(), key=lambda p: p.name)
        if f.name.endswith(".txt")
    ]


def _train_tokenizer(vocab_size: int) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_texts(), trainer=trainer)
    return tokenizer


def make_test_model(
    out_dir: Path, *, shape: ModelShape = SHAPES["tiny"], seed: int = 0, device: str | None = None
) -> Path:
    """Write the model and tokenizer to `out_dir` and return it. The weights are made on
    `device` (default: the first CUDA GPU where there is one, which makes a 7B shape in
    seconds, else the CPU)."""
    import torch
    import transformers

    # transformers' constructors take **kwargs that its type stubs do not describe.
    tf: Any = transformers

    out_dir.mkdir(parents=True, exist_ok=True)
    raw = _train_tokenizer(TOKENIZER_VOCAB)
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=shape.max_positions,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    vocab_size = max(shape.vocab_size or 0, len(tokenizer))
    config = tf.Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=shape.tie_word_embeddings,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="bfloat16",
    )
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # never a float32 copy of a 7B model
    try:
        with torch.device(device):
            model = tf.Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    never_chosen = [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head[never_chosen] = 0
        head[len(tokenizer) :].zero_()  # rows no token of the tokenizer decodes to
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": eos_id, "pad_token_id": pad_id, "do_sample": False}, indent=2)
    )
    (out_dir / "README.md").write_text(
        "# tolk test model\n\nRandom weights made by `tolk make-test-model`"
        f" ({model.num_parameters() / 1e6:,.0f} M parameters). Its outputs are meaningless; it "
        "exists to exercise tolk's serving path without a model download.\n"
    )
    return out_dir
