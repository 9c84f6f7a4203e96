"""DeepL Write over texts in several languages (each rewritten in its own, detected: one
translation request per language, side by side): the response's headers speak for all of
them, not for the last group alone. In-process server over a scripted stand-in engine
(tests/support/prompt_examples.py), checks on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.prompt_examples import scripted_server
from tests.support.servers import InProcessServer
from tolk.testing.fake_engine import FakeLLM

ENGLISH = "The museum opens at nine in the morning and closes at six in the evening."
GERMAN = "Das Museum öffnet um neun Uhr morgens und schließt um sechs Uhr abends."


@pytest.fixture
def english_only(test_model: Path) -> Iterator[tuple[InProcessServer, FakeLLM]]:
    """A stand-in that answers every request in English: a German text's rewrite comes back
    in the wrong language (flagged `off_target`), an English one's is fine."""
    yield from scripted_server(test_model, "english", lambda prompt, _: ENGLISH)


def test_warnings_of_every_language_group_with_their_texts_indexes(
    english_only: tuple[InProcessServer, FakeLLM],
) -> None:
    """Texts in English, German, English, German: two groups (English first), the German
    rewrites off target. The warnings header names the German texts by their place in the
    request (1 and 3), not in their group (0 and 1)."""
    server, _ = english_only
    texts = [ENGLISH, GERMAN, "The shop closes at six in the evening.", GERMAN + " Heute."]
    answer = httpx.post(
        f"{server.url}/v2/write/rephrase",
        json={"text": texts},
        headers={"Authorization": "DeepL-Auth-Key any"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    improvements = answer.json()["improvements"]
    assert [i["detected_source_language"] for i in improvements] == ["en", "de", "en", "de"]
    warnings = json.loads(answer.headers["X-Tolk-Warnings"])
    assert sorted({w["text"] for w in warnings if w["code"] == "off_target"}) == [1, 3], warnings
    assert {w["text"] for w in warnings} <= {1, 3}, warnings  # the English ones are fine
    assert answer.headers["Server-Timing"].startswith("engine;dur="), answer.headers
