"""Minimum-Bayes-risk selection (tolk.translation.consensus, `candidates` in a model's
config): the rule on given strings, and the engine requests a server makes for it (in-process,
over the stand-in engine, named so; the real engine's `n` is tested in test_real_model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import InProcessServer, model_config, server_config
from tolk.config import ConfigError, build_config
from tolk.engine import Generation
from tolk.local.processes import free_port
from tolk.translation.checks import Verdict
from tolk.translation.consensus import consensus
from tolk.translation.fidelity import Attempt, select

CANDIDATES = [
    "Le chat est assis sur le tapis.",
    "Le chat s'assoit sur le tapis.",
    "Un chien court dans le parc.",  # the sample that wandered off
    "Le chat est assis sur le tapis !",
]


def test_the_candidate_the_others_agree_with_is_chosen() -> None:
    assert consensus(CANDIDATES) in (0, 3)
    assert consensus(CANDIDATES) != 2
    # Equal candidates: the first (the greedy one) wins.
    assert consensus(["a b c", "a b c", "a b c"]) == 0


def test_the_choice_is_among_the_eligible_but_every_candidate_votes() -> None:
    assert consensus(CANDIDATES, among=[1, 2]) == 1
    assert consensus(CANDIDATES, among=[2]) == 2
    # Two outputs cannot outvote each other: the first.
    assert consensus(CANDIDATES[:2]) == 0


def attempt(output: str, *problems: str) -> Attempt:
    return Attempt(output, Verdict(problems), Generation(output, 10, 5, "stop"), 5)  # type: ignore[arg-type]


def test_select_prefers_fewer_problems_to_agreement() -> None:
    tries = [
        attempt(CANDIDATES[0], "echo"),
        attempt(CANDIDATES[1]),
        attempt(CANDIDATES[2]),
        attempt(CANDIDATES[3], "off_target"),
    ]
    # 0 and 3 agree most, but have problems; of the clean ones 1 is nearer the rest.
    assert select(tries).output == CANDIDATES[1]


def test_sampled_candidates_need_a_temperature() -> None:
    model = {"name": "m", "path": "x", "languages": ["en", "de"]}
    bad = {**model, "candidates": {"n": 4, "sampling": {"temperature": 0}}}
    with pytest.raises(ConfigError, match=r"candidates.n > 1 needs"):
        build_config({"models": [bad]}, environ={})
    assert build_config({"models": [model]}, environ={}).models[0].candidates.n == 1


@pytest.fixture(scope="module")
def mbr_edge(test_model: Path) -> Iterator[InProcessServer]:
    server = InProcessServer(
        server_config(
            [model_config("mbr", test_model, languages=["en", "de"], candidates={"n": 4})],
            free_port(),
        )
    )
    try:
        yield server
    finally:
        server.stop()


def test_each_segment_is_one_greedy_and_one_sampled_request(mbr_edge: InProcessServer) -> None:
    llm = mbr_edge.engines.started["mbr"]
    requests, outputs = llm.requests, llm.outputs
    sentences = ["The museum opens at nine.", "It closes at six.", "Entry is free."]
    answer = httpx.post(
        f"{mbr_edge.url}/translate",
        json={"text": sentences, "source_lang": "en", "target_lang": "de"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["translation"]) == 3
    # Per segment: the greedy request (n 1) and the sampled one (n 3), 4 outputs.
    assert llm.requests - requests == 2 * len(sentences)
    assert llm.outputs - outputs == 4 * len(sentences)
    # Every candidate's tokens are counted: the stand-in writes its whole budget each time.
    single = body["usage"]["completion_tokens"] / 4
    assert single == int(single) > 0, body["usage"]
