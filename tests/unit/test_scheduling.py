"""`engine.scheduling: shortest_first` without a server: a translation request's size rank
(its segment count in powers of two) and the engine arguments that ask vLLM for priority
scheduling."""

from __future__ import annotations

from pathlib import Path

from tests.support.servers import model_config
from tolk.config import build_config
from tolk.engine.engine import engine_args, size_rank


def test_size_rank_is_the_segment_count_in_powers_of_two() -> None:
    assert [size_rank(n) for n in (0, 1, 2, 3, 4, 5, 8, 9, 200)] == [0, 0, 1, 2, 2, 3, 3, 4, 8]


def test_shortest_first_asks_vllm_for_priority_scheduling(test_model: Path) -> None:
    def args(scheduling: str) -> dict[str, object]:
        model = model_config("m", test_model, languages=["en", "de"])
        model["engine"]["scheduling"] = scheduling
        settings = build_config({"models": [model]}, environ={}).models[0]
        return engine_args(settings, cpu=True)

    assert args("shortest_first")["scheduling_policy"] == "priority"
    assert "scheduling_policy" not in args("fcfs")  # vLLM's own default, fcfs
