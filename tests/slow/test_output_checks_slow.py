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


@pytest.fixture(scope="module", params=[False, True], ids=["one-request", "first-clean"])
def checked_salad(
    test_model: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, bool]]:
    """A server over the random model, checks on; its markup retry's candidates one request
    with `n` or (`checks.markup_first_clean`) each a request of its own."""
    checks = {"enabled": True, "markup_first_clean": request.param}
    server = ServerProcess.launch(
        tmp_path_factory.mktemp("checked"),
        "checked",
        [model_config("salad", test_model, languages=["en", "de"], checks=checks)],
    )
    try:
        yield server.url, request.param
    finally:
        server.stop()


@pytest.mark.slow
def test_markup_whose_placeholders_are_lost_is_retried_with_sampled_candidates(
    checked_salad: tuple[str, bool],
) -> None:
    """Token salad loses a markdown unit's placeholders: the retry asks the engine for
    `markup_candidates` (4) sampled outputs in one request (vLLM's n), or with
    `markup_first_clean` four requests of one output (none of salad is clean: all waited
    for), and what cannot keep the markup is still returned valid and flagged."""
    url, first_clean = checked_salad

    def n_requests() -> tuple[float, float]:
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
        count = re.findall(r"^vllm:request_params_n_count\{[^}]*\} (\S+)", metrics, re.M)
        total = re.findall(r"^vllm:request_params_n_sum\{[^}]*\} (\S+)", metrics, re.M)
        assert count, metrics
        assert total, metrics
        return sum(map(float, count)), sum(map(float, total))

    before = n_requests()
    text = "Run **make serve** to start the [server](https://example.com/docs) on port 8000 now."
    out = translate(url, text=text, source_lang="en", target_lang="de", format="markdown")
    after = n_requests()
    requests, outputs = after[0] - before[0], after[1] - before[1]
    if first_clean:  # the first try, the four candidates and the plain text, one output each
        assert requests >= 6, (before, after)
        assert outputs == requests, (before, after)
    else:  # one request with n=4 among them: four outputs more than requests
        assert outputs - requests >= 3, (before, after)
    codes = {w["code"] for w in out["warnings"]}
    assert codes & {"markup_dropped", "markup_split", "untranslated"}, out
