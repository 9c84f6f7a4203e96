"""`tolk make-test-model --shape`: random-weight models shaped like published ones."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from safetensors import safe_open
from transformers import AutoTokenizer
from typer.testing import CliRunner

from tolk.cli import app
from tolk.testing.model import SHAPES, ModelShape


@pytest.mark.parametrize(
    ("shape", "published"),
    [("1b", 1.54e9), ("7b", 7.62e9)],  # Qwen2.5-1.5B and -7B, as their model cards count
)
def test_preset_shapes_have_the_published_parameter_counts(shape: str, published: float) -> None:
    assert SHAPES[shape].parameters() == pytest.approx(published, rel=0.01)


def test_explicit_sizes_write_that_model(tmp_path: Path) -> None:
    out = tmp_path / "small-1b"
    # The 1b preset (tied embeddings, a published vocabulary larger than the tokenizer's)
    # with its sizes overridden down to something the CPU writes in a second.
    result = CliRunner().invoke(
        app,
        [
            "make-test-model",
            str(out),
            "--shape",
            "1b",
            "--hidden-size",
            "128",
            "--layers",
            "2",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--intermediate-size",
            "256",
            "--vocab-size",
            "8192",
        ],
    )
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (
        config["hidden_size"],
        config["num_hidden_layers"],
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["intermediate_size"],
        config["vocab_size"],
        config["tie_word_embeddings"],
    ) == (128, 2, 4, 2, 256, 8192, True)
    expected = ModelShape(128, 2, 4, 2, 256, 8192, 32768, tie_word_embeddings=True)
    tokenizer_vocab = len(AutoTokenizer.from_pretrained(out))
    with safe_open(str(out / "model.safetensors"), framework="pt") as weights:
        names = list(weights.keys())
        assert sum(math.prod(weights.get_slice(n).get_shape()) for n in names) == (
            expected.parameters()
        )
        assert "lm_head.weight" not in names  # tied to the input embeddings
        embeddings = weights.get_tensor("model.embed_tokens.weight")
    assert embeddings.shape == (8192, 128)
    # Rows past the tokenizer's vocabulary are never generated: nothing could decode them.
    assert tokenizer_vocab < 8192
    assert not embeddings[tokenizer_vocab:].any()
    assert embeddings[:tokenizer_vocab].abs().sum() > 0


def test_inconsistent_sizes_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["make-test-model", str(tmp_path / "m"), "--hidden-size", "100", "--heads", "3"]
    )
    assert result.exit_code == 2
    assert "multiple of heads" in result.output
    assert not (tmp_path / "m").exists()


def test_unknown_shape_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["make-test-model", str(tmp_path / "m"), "--shape", "70b"])
    assert result.exit_code == 2
    assert "tiny, 1b, 7b" in result.output
