"""The prompt-examples tests' sentence and its translation, a stand-in that copies an example,
and a translation through an in-process server (tests/unit and tests/edge test_prompt_examples*)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port
from tolk.testing.fake_engine import FakeCompletion, FakeLLM, FakeOutput

TRANSLATION = "Das Museum öffnet um neun Uhr morgens und schließt um sechs Uhr abends."


SOURCE = "The museum opens at nine in the morning and closes at six in the evening."


def scripted_server(
    test_model: Path,
    name: str,
    reply: Callable[[str, Any], str],
    **settings: Any,
) -> Generator[tuple[InProcessServer, FakeLLM]]:
    """An in-process server whose stand-in model (checks on) answers `reply(prompt,
    sampling_params)` to every request, each of its `n` outputs alike; the LLM keeps the
    prompts it was sent."""
    model = model_config(name, test_model, languages=["en", "de"], checks={"enabled": True})
    model.pop("max_tokens_ratio")
    server = InProcessServer(server_config([model | settings], free_port()))
    llm = server.engines.started[name]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(test_model))

    async def generate(
        prompt: Any, sampling_params: Any, request_id: str, *, priority: int = 0
    ) -> AsyncIterator[FakeOutput]:
        ids = list(prompt["prompt_token_ids"])
        llm.prompts.append(ids)
        text = reply(str(tokenizer.decode(ids)), sampling_params)
        out = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        llm.requests += 1
        yield FakeOutput([FakeCompletion(out, "stop") for _ in range(sampling_params.n)])

    llm.generate = generate  # type: ignore[method-assign]
    try:
        yield server, llm
    finally:
        server.stop()


def translated(server: InProcessServer, text: str, **fields: str) -> dict[str, Any]:
    """tolk's /translate of `text` from English into German (`fields` added), the segment
    memory bypassed: the server's JSON answer."""
    body = {"text": text, "source_lang": "en", "target_lang": "de", **fields}
    answer: dict[str, Any] = httpx.post(
        f"{server.url}/translate", json=body, headers={"Cache-Control": "no-store"}, timeout=60
    ).json()
    return answer
