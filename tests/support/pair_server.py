"""The two-model server's models (alpha: en, de; beta: en>ne, ne>en) and the request its tests
send (tests/edge/test_server_routing.py, tests/slow/test_server_lifecycle.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import model_config


def pair_models(test_model: Path) -> list[dict[str, Any]]:
    return [
        model_config("alpha", test_model, languages=["en", "de"], max_tokens_ratio=3),
        model_config(
            "beta",
            test_model,
            pairs=["en>ne", "ne>en"],
            engine={"max_num_seqs": 4, "max_model_len": 256},
        ),
    ]


def translate(url: str, source: str, target: str, model: str | None = None) -> httpx.Response:
    body = {"text": "A short sentence.", "source_lang": source, "target_lang": target}
    if model:
        body["model"] = model
    return httpx.post(f"{url}/translate", json=body, timeout=60)
