"""Translation memories through DeepL's `/v3/translation_memories` and
`translation_memory_id`/`_threshold` with the real `deepl` client, on a server over stand-in
engines (in-process, named so; its prompts are read back from the stand-in): an exact match is
the translation, a close one the model's reference, a far one nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import deepl
import httpx
import pytest
from transformers import AutoTokenizer

from tests.support.samples.tmx import GERMAN, TMX
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port
from tolk.store.keys import KeyStore
from tolk.store.memories import TranslationMemories


@pytest.fixture(scope="module")
def served(
    test_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[InProcessServer, str, str]]:
    db = tmp_path_factory.mktemp("tm") / "store.db"
    store = KeyStore(db)
    _, secret = store.add("tm")
    memory = TranslationMemories(store.database).import_tmx(TMX, "docs")
    store.close()
    config = server_config(
        [model_config("demo", test_model, languages=["en", "de", "fr"])],
        free_port(),
        access={"db": str(db)},
    )
    server = InProcessServer(config)
    try:
        yield server, secret, memory.id
    finally:
        server.stop()


def test_deepl_client_lists_and_uses_a_translation_memory(
    served: tuple[InProcessServer, str, str], test_model: Path
) -> None:
    server, secret, memory_id = served
    client = deepl.DeepLClient(secret, server_url=server.url)
    (listed,) = client.list_translation_memories()
    assert (listed.translation_memory_id, listed.name) == (memory_id, "docs")
    assert (listed.source_language, listed.target_languages) == ("en", ["de", "fr"])
    assert listed.segment_count == 3
    llm = server.engines.started["demo"]
    tokenizer = AutoTokenizer.from_pretrained(str(test_model))

    # An exact match (whitespace aside) is the memory's translation, without the engine.
    before = llm.requests
    exact = client.translate_text(
        "The batch size is  tuned by the server.", source_lang="EN", target_lang="DE",
        translation_memory=memory_id,
    )  # fmt: skip
    assert isinstance(exact, deepl.TextResult)
    assert exact.text == GERMAN
    assert llm.requests == before

    # A close one is the model's reference, in its prompt; below the threshold, nothing.
    close = "The batch size is tuned by each server."
    for threshold, referenced in ((80, True), (99, False)):
        llm.prompts.clear()
        client.translate_text(
            close, source_lang="EN", target_lang="DE", translation_memory=memory_id,
            translation_memory_threshold=threshold,
        )  # fmt: skip
        (prompt,) = [tokenizer.decode(p) for p in llm.prompts]
        assert (GERMAN in prompt) is referenced, (threshold, prompt)

    headers = {"Authorization": f"DeepL-Auth-Key {secret}"}
    for body, field in (
        ({"translation_memory_id": "nope"}, "translation_memory_id"),
        ({"translation_memory_id": memory_id, "translation_memory_threshold": 101}, None),
        ({"translation_memory_threshold": 80}, None),
    ):
        answer = httpx.post(
            f"{server.url}/v2/translate",
            json={"text": [close], "source_lang": "EN", "target_lang": "DE", **body},
            headers=headers,
            timeout=30,
        )
        assert answer.status_code == 400, (body, answer.text)
        if field:
            assert "no translation memory 'nope'" in answer.json()["message"]
    # A memory for another source language is refused, saying so.
    wrong = httpx.post(
        f"{server.url}/v2/translate",
        json={"text": ["Hallo"], "source_lang": "DE", "target_lang": "FR",
              "translation_memory_id": memory_id},
        headers=headers, timeout=30,
    )  # fmt: skip
    assert wrong.status_code == 400
    assert "for source language en" in wrong.json()["message"]
