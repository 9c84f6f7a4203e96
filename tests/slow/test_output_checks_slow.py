"""Output checks on a real engine of its own (the random model, checks on): a markdown unit
whose placeholders the token salad loses is retried with sampled candidates."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.clients import translate
from tests.support.servers import (
    ServerProcess,
    model_config,
)


@pytest.fixture(scope="module")
def checked_salad(test_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = ServerProcess.launch(
        tmp_path_factory.mktemp("checked"),
        "checked",
        [model_config("salad", test_model, languages=["en", "de"], checks={"enabled": True})],
    )
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.slow
def test_markup_whose_placeholders_are_lost_is_retried_with_sampled_candidates(
    checked_salad: str,
) -> None:
    """Token salad loses a markdown unit's placeholders: the retry asks the engine for
    `markup_candidates` (4) sampled outputs, each its own engine request of one output
    (`markup_first_clean`: none of salad is clean, so all are waited for), and what cannot
    keep the markup is still returned valid and flagged."""

    def n_requests() -> tuple[float, float]:
        metrics = httpx.get(f"{checked_salad}/metrics", timeout=30).text
        count = re.findall(r"^vllm:request_params_n_count\{[^}]*\} (\S+)", metrics, re.M)
        total = re.findall(r"^vllm:request_params_n_sum\{[^}]*\} (\S+)", metrics, re.M)
        assert count, metrics
        assert total, metrics
        return sum(map(float, count)), sum(map(float, total))

    before = n_requests()
    text = "Run **make serve** to start the [server](https://example.com/docs) on port 8000 now."
    out = translate(checked_salad, text=text, source_lang="en", target_lang="de", format="markdown")
    after = n_requests()
    requests, outputs = after[0] - before[0], after[1] - before[1]
    # The first try, the four candidates and the fallback (its plain text) at least, each
    # one output.
    assert requests >= 6, (before, after)
    assert outputs == requests, (before, after)
    codes = {w["code"] for w in out["warnings"]}
    assert codes & {"markup_dropped", "markup_split", "untranslated"}, out
