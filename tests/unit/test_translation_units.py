from __future__ import annotations

import asyncio

import pytest

from tests.support.texts import TextMaker
from tolk.translation.jobs import output_budget
from tolk.translation.service import run_all


def test_output_budget_follows_input_length() -> None:
    assert output_budget(10, 40, ratio=2.0, extra=16, max_model_len=4096) == 36
    assert output_budget(100, 140, ratio=2.0, extra=16, max_model_len=4096) == 216
    assert output_budget(7, 30, ratio=1.5, extra=1, max_model_len=4096) == 12  # ceil(10.5)+1


def test_output_budget_never_exceeds_the_context() -> None:
    assert output_budget(1000, 1050, ratio=2.0, extra=16, max_model_len=2048) == 998
    assert output_budget(1000, 2048, ratio=2.0, extra=16, max_model_len=2048) == 0
    assert output_budget(1000, 3000, ratio=2.0, extra=16, max_model_len=2048) == 0


async def test_run_all_keeps_order() -> None:
    async def after(delay: float, value: int) -> int:
        await asyncio.sleep(delay)
        return value

    assert await run_all([after(0.03, 1), after(0.0, 2), after(0.01, 3)]) == [1, 2, 3]


async def test_run_all_cancels_the_rest_on_first_failure() -> None:
    cancelled = asyncio.Event()

    async def slow() -> int:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 0

    async def fail() -> int:
        await asyncio.sleep(0)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await run_all([slow(), fail()])
    assert cancelled.is_set()


async def test_run_all_awaits_one_alone_in_the_callers_task() -> None:
    """No task of its own for one (two passes of the loop saved), and its failure raised as
    it is; several run as tasks."""
    caller = asyncio.current_task()

    async def where() -> asyncio.Task[object] | None:
        return asyncio.current_task()

    async def fail() -> int:
        raise KeyError("boom")

    assert await run_all([where()]) == [caller]
    tasks = await run_all([where(), where()])
    assert caller not in tasks
    assert len(set(tasks)) == 2
    with pytest.raises(KeyError, match="boom"):
        await run_all([fail()])


def test_each_segments_prompt_carries_exactly_its_glossary_terms(texts: TextMaker) -> None:
    from tolk.budget import Budgets, counting
    from tolk.config import ModelSettings
    from tolk.languages import lang
    from tolk.translation.glossary import Glossary
    from tolk.translation.jobs import plan_job

    glossary = Glossary({"batch": "Stapel", "queue": "Warteschlange", "GPU": "Grafikkarte"})
    settings = ModelSettings(name="m", path="x", languages=["en", "de"])
    for segment, expected in (
        ("The batch waits in the queue.", ['"batch" as "Stapel"', '"queue" as "Warteschlange"']),
        ("Nothing of the kind here.", []),
        ("A GPU.", ['"GPU" as "Grafikkarte"']),
    ):
        terms = glossary.terms(segment)
        budgets = Budgets(counting(texts.tokenizer))
        job = plan_job(
            settings, texts.tokenizer, 4096, 0, segment, (lang("en"), lang("de")), budgets, terms
        )
        prompt = texts.tokenizer.decode(job.prompt_ids)
        for term in ("batch", "queue", "GPU"):
            mentioned = f'"{term}" as' in prompt
            assert mentioned == any(e.startswith(f'"{term}"') for e in expected), (segment, term)
        assert all(e in prompt for e in expected)


def test_the_deadline_follows_the_rounds_of_segments() -> None:
    from tolk.translation.policy import work_deadline

    assert work_deadline(60, 45, segments=1, window=16) == 105
    assert work_deadline(60, 45, segments=16, window=16) == 105
    assert work_deadline(60, 45, segments=100, window=16) == 60 + 45 * 7
    assert work_deadline(30, 0, segments=500, window=16) == 30  # the default: one number
