"""Output checks on the random model's token salad, in-process over a stand-in engine that
writes the same kind: output that is not a translation is retried and then flagged, in the
response, the drop-in APIs' header and the metrics, never passed off as good."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.clients import translate
from tests.support.servers import InProcessServer, model_config, server_config
from tolk.local.processes import free_port


@pytest.fixture(scope="module")
def checked_edge(test_model: Path) -> Iterator[str]:
    """The same model settings in-process over a stand-in engine, which writes the same kind
    of salad: flagging and retrying are tolk's, and need no engine's start."""
    server = InProcessServer(
        server_config(
            [model_config("salad", test_model, languages=["en", "de"], checks={"enabled": True})],
            free_port(),
        )
    )
    try:
        yield server.url
    finally:
        server.stop()


def test_output_that_is_no_translation_is_retried_and_flagged(checked_edge: str) -> None:
    checked_salad = checked_edge
    sentence = "The museum opens at nine in the morning and closes at six in the evening."
    answer = translate(checked_salad, text=[sentence, "OK"], source_lang="en", target_lang="de")
    # Token salad is not German (nor anything): flagged on text 0, the one with words enough.
    flagged = [w for w in answer["warnings"] if w["text"] == 0]
    assert flagged, answer
    assert {w["code"] for w in flagged} & {"off_target", "loop", "truncated", "echo"}, answer
    # Both tries' tokens are counted.
    metrics = httpx.get(f"{checked_salad}/metrics", timeout=30).text
    retried = re.findall(r'tolk_output_retries_total\{model="salad",result="\w+"\} (\S+)', metrics)
    assert sum(float(v) for v in retried) >= 1, metrics
    # prometheus_client writes a sample's labels sorted by name.
    assert re.search(r'tolk_flagged_texts_total\{code="\w+",model="salad"\} [1-9]', metrics), (
        metrics
    )
    # The drop-in APIs have no place in their bodies: a header says it.
    deepl = httpx.post(
        f"{checked_salad}/v2/translate",
        json={"text": [sentence], "source_lang": "EN", "target_lang": "DE"},
        timeout=120,
    )
    assert deepl.status_code == 200, deepl.text
    assert '"text":0' in deepl.headers.get("x-tolk-warnings", ""), deepl.headers
