"""DeepL Write: rephrase (`POST /v2/write/rephrase`): texts improved, in their own language
or rewritten into `target_lang`, in a `writing_style` or a `tone`; and correct
(`POST /v2/write/correct`): spelling, grammar and punctuation only.

An LLM does this natively: it is the translation service's own request with the source's
language as the target (or the asked one) and a rewrite instruction in the chat prompt
(tolk.translation.prompts.chat), so admission, deadlines, keys, quotas, metrics and the
output checks are the translation's. Models served with a translation-only prompt format
refuse it (400). Texts whose language is not given are detected; each language's texts are
rephrased in one request, the requests side by side (the gateway's translate_groups: one
failing cancels the others).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from tolk.server.access import Caller
from tolk.server.api.deepl_bodies import DeepLWrite, Rephrase
from tolk.server.gateway import DeepLCallerDep, Gateway, GatewayDep
from tolk.server.params import ParamsDep, openapi_body
from tolk.translation.prompts import Instructions
from tolk.translation.request import TranslationRequest
from tolk.translation.results import merge
from tolk.wire import codes

router = APIRouter(prefix="/v2/write", tags=["DeepL API v2"])

CORRECT = (
    "correct its spelling, grammar and punctuation only, changing nothing else (keep its "
    "words, style and meaning)."
)


async def _rephrase(params: ParamsDep) -> Rephrase:
    """How to rephrase: read before the caller (a style and a tone together are refused
    first, whoever sends them)."""
    return Rephrase.of(params)


@router.post(
    "/rephrase",
    summary="DeepL Write: rephrase texts",
    openapi_extra=openapi_body(DeepLWrite, Rephrase),
)
async def rephrase(
    request: Request,
    how: Annotated[Rephrase, Depends(_rephrase)],
    caller: DeepLCallerDep,
    params: ParamsDep,
    gateway: GatewayDep,
) -> Response:
    return await _rewrite(request, caller, DeepLWrite.of(params), gateway, how.aim)


@router.post(
    "/correct", summary="DeepL Write: correct texts", openapi_extra=openapi_body(DeepLWrite)
)
async def correct(
    request: Request, caller: DeepLCallerDep, params: ParamsDep, gateway: GatewayDep
) -> Response:
    """Spelling, grammar and punctuation only (the client's `correct_text`)."""
    return await _rewrite(request, caller, DeepLWrite.of(params), gateway, CORRECT)


async def _rewrite(
    request: Request, caller: Caller, body: DeepLWrite, gateway: Gateway, aim: str
) -> Response:
    texts, target = body.text, body.target
    instructions = Instructions(rewrite=aim)
    deadline = gateway.deadline()
    # One request per target: the asked language, or each text's own (detected).
    groups: dict[str, list[int]] = {}
    languages = [target.tag] * len(texts) if target else [d.language for d in gateway.detect(texts)]
    for i, tag in enumerate(languages):
        groups.setdefault(tag, []).append(i)
    memory = gateway.memory_mode(request)
    asked = [
        (
            [texts[i] for i in indexes],
            # Texts grouped by their detected language are that language: not detected again.
            TranslationRequest(
                target_lang=tag,
                deadline=deadline,
                source_lang=None if target else tag,
                instructions=instructions,
                memory=memory,
            ),
        )
        for tag, indexes in groups.items()
    ]
    done = await gateway.translate_groups(request, caller, asked)
    improvements: list[dict[str, str]] = [{} for _ in texts]
    for result, indexes in zip(done, groups.values(), strict=True):
        for j, i in enumerate(indexes):
            improvements[i] = {
                "text": result.texts[j],
                "detected_source_language": codes.deepl_source(result.source_of(j)).lower(),
                "target_language": result.target.tag,
            }
    answer = JSONResponse({"improvements": improvements})
    # The headers of all groups together: their warnings at their texts' places in the
    # request, the engine time of the longer (they ran side by side).
    together = merge(done, list(groups.values()), ())
    answer.headers.update(gateway.headers(together))
    return answer
