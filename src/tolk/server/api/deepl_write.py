"""DeepL Write: rephrase (`POST /v2/write/rephrase`): texts improved, in their own language
or rewritten into `target_lang`, in a `writing_style` or a `tone`; and correct
(`POST /v2/write/correct`): spelling, grammar and punctuation only.

An LLM does this natively: it is the translation service's own request with the source's
language as the target (or the asked one) and a rewrite instruction in the chat prompt
(tolk.translation.prompts.chat), so admission, deadlines, keys, quotas, metrics and the
output checks are the translation's. Models served with a translation-only prompt format
refuse it (400). Texts whose language is not given are detected; each language's texts are
rephrased in one request.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidRequest
from tolk.server.api.deepl import PARAMS_BODY, caller_of, deepl_lang, texts_of
from tolk.server.calls import Calls, CallsDep
from tolk.server.params import Params, read_params
from tolk.translation.prompts import Instructions
from tolk.translation.request import TranslationRequest
from tolk.translation.results import Translation
from tolk.wire import codes

router = APIRouter(prefix="/v2/write", tags=["DeepL API v2"])

AIM = "correct its errors and make it clear and fluent, keeping its meaning."
CORRECT = (
    "correct its spelling, grammar and punctuation only, changing nothing else (keep its "
    "words, style and meaning)."
)
# DeepL's values, and what each asks of the model (`prefer_` ones the same: every value
# applies to every language tolk serves with a chat model).
WRITING_STYLES = {
    "default": "",
    "academic": "Write it in an academic style.",
    "business": "Write it in a business style.",
    "casual": "Write it in a casual style.",
    "simple": "Write it in simple, plain language.",
}
TONES = {
    "default": "",
    "confident": "Use a confident tone.",
    "diplomatic": "Use a diplomatic tone.",
    "enthusiastic": "Use an enthusiastic tone.",
    "friendly": "Use a friendly tone.",
}


def _aim(style: str | None, tone: str | None) -> str:
    if style and tone:
        raise InvalidRequest(
            "Bad request. Reason: Both writing_style and tone defined. Currently only style "
            "OR tone can be chosen for a single request.",
            field="tone",
        )
    table, field, value = (
        (TONES, "tone", tone) if tone else (WRITING_STYLES, "writing_style", style)
    )
    wording = table.get((value or "default").removeprefix("prefer_"))
    if wording is None:
        raise InvalidRequest(
            f"Value for '{field}' not supported: {value}; use one of {', '.join(table)} "
            "(or prefer_...)",
            field=field,
        )
    return f"{AIM} {wording}".strip()


@router.post("/rephrase", summary="DeepL Write: rephrase texts", openapi_extra=PARAMS_BODY)
async def rephrase(request: Request, calls: CallsDep) -> Response:
    params = await read_params(request)
    aim = _aim(params.text("writing_style"), params.text("tone"))
    return await _rewrite(request, calls, params, aim)


@router.post("/correct", summary="DeepL Write: correct texts", openapi_extra=PARAMS_BODY)
async def correct(request: Request, calls: CallsDep) -> Response:
    """Spelling, grammar and punctuation only (the client's `correct_text`)."""
    params = await read_params(request)
    return await _rewrite(request, calls, params, CORRECT)


async def _rewrite(request: Request, calls: Calls, params: Params, aim: str) -> Response:
    caller = caller_of(calls, request, params)
    texts = texts_of(params)
    target_code = params.text("target_lang")
    target = deepl_lang(target_code, "target_lang") if target_code else None
    instructions = Instructions(rewrite=aim)
    deadline = calls.deadline()
    # One request per target: the asked language, or each text's own.
    groups: dict[str, list[int]] = {}
    languages = [target.tag] * len(texts) if target else _languages(calls, texts)
    for i, tag in enumerate(languages):
        groups.setdefault(tag, []).append(i)

    memory = calls.memory_mode(request)

    async def work() -> list[tuple[Translation, list[int]]]:
        async def one(tag: str, indexes: list[int]) -> tuple[Translation, list[int]]:
            # Texts grouped by their detected language are that language: not detected again.
            source = None if target else tag
            asked = TranslationRequest(
                tag, deadline, source, instructions=instructions, memory=memory
            )
            return await calls.translator.translate([texts[i] for i in indexes], asked), indexes

        return list(await asyncio.gather(*(one(t, ix) for t, ix in groups.items())))

    done = await calls.run(request, caller, sum(len(t) for t in texts), work)
    improvements: list[dict[str, str]] = [{} for _ in texts]
    for result, indexes in done:
        for j, i in enumerate(indexes):
            improvements[i] = {
                "text": result.texts[j],
                "detected_source_language": codes.deepl_source(result.source_of(j)).lower(),
                "target_language": result.target.tag,
            }
    answer = JSONResponse({"improvements": improvements})
    for result, indexes in done:
        calls.record(request, answer.headers, result, len(indexes))
    return answer


def _languages(calls: Calls, texts: list[str]) -> list[str]:
    """Each text's language (detected), as a tag some model writes."""
    return [d.language for d in calls.translator.detect(texts)]
