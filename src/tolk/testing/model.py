"""A small random-weight model in Hugging Face format, for the tests and the demo.

Nothing can be downloaded on the machines tolk is built on, so tolk makes its own model: a
Qwen2-architecture decoder (head size 64, which vLLM's CPU attention supports) with random
weights, and a byte-level BPE tokenizer trained here on the case-study articles, with a
ChatML chat template. It loads through exactly the same code path as any real model.

Its translations are meaningless. One property is deliberate: the rows of the output layer
for the special tokens are zero, so their logits are always 0 while some ordinary token's
logit is almost surely above 0. Greedy decoding therefore never ends a sequence early, and
every request generates exactly its `max_tokens`: output length is a known function of input
length, which is what load tests and batching tests need.
"""

from __future__ import annotations

import json
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
    out_dir: Path,
    *,
    vocab_size: int = 4096,
    hidden_size: int = 256,
    layers: int = 4,
    heads: int = 4,
    kv_heads: int = 2,
    max_positions: int = 4096,
    seed: int = 0,
) -> Path:
    """Write the model and tokenizer to `out_dir` and return it."""
    import torch
    import transformers

    # transformers' constructors take **kwargs that its type stubs do not describe.
    tf: Any = transformers

    out_dir.mkdir(parents=True, exist_ok=True)
    raw = _train_tokenizer(vocab_size)
    tokenizer = tf.PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=max_positions,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    config = tf.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden_size // heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = tf.Qwen2ForCausalLM(config)
    with torch.no_grad():
        for token in SPECIAL_TOKENS:
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(token)].zero_()
    model = model.to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": eos_id, "pad_token_id": pad_id, "do_sample": False}, indent=2)
    )
    (out_dir / "README.md").write_text(
        "# tolk test model\n\nRandom weights made by `tolk make-test-model`. Its outputs are "
        "meaningless; it exists to exercise tolk's serving path without a model download.\n"
    )
    return out_dir
