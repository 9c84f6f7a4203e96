"""Minimum-Bayes-risk selection (tolk.translation.consensus, `candidates` in a model's
config) on given strings: the candidate the others agree with is chosen, fewer problems come
before agreement, sampled candidates need a temperature."""

from __future__ import annotations

import pytest

from tolk.config import ConfigError, build_config
from tolk.engine import Generation
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
    markup = {**model, "candidates": {"markup_n": 2, "sampling": {"temperature": 0}}}
    with pytest.raises(ConfigError, match=r"candidates.markup_n > 1 needs"):
        build_config({"models": [markup]}, environ={})
