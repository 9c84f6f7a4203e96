"""DeepL's style rules at `/v3/style_rules`: a named set of predefined rules
(`configured_rules`: {category: {rule: option}}) and custom instructions for one target
language, made once and named by `style_id` in translate requests. An LLM takes both as
instructions in its prompt (tolk.translation.prompts.Instructions.custom): a rule becomes a
line such as "Dates and times, calendar era: use bc and ad", an instruction its own prompt.
So only models whose prompt format takes instructions apply them (the service refuses them
elsewhere, as it refuses custom instructions).

Kept in the key store (one per key, readable by every server sharing the file).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidRequest, NotFound, TolkError
from tolk.server.access import Caller
from tolk.server.api.deepl import PARAMS_BODY, deepl_time
from tolk.server.api.deepl_bodies import (
    MAX_STYLE_INSTRUCTIONS,
    InstructionBody,
    NewStyleRule,
    StyleRuleName,
    parse_configured_rules,
)
from tolk.server.gateway import DeepLCallerDep, PoolDep, StoreDep
from tolk.server.params import ParamsDep, openapi_body
from tolk.store.keys import CustomInstruction, KeyStore, StyleRule

router = APIRouter(prefix="/v3/style_rules", tags=["DeepL API v3: style rules"])


class UnsupportedMediaType(TolkError):
    code = "unsupported_media_type"
    status = 415


def _info(rule: StyleRule, detailed: bool = True) -> dict[str, Any]:
    info: dict[str, Any] = {
        "style_id": rule.id,
        "name": rule.name,
        "creation_time": deepl_time(rule.created),
        "updated_time": deepl_time(rule.updated),
        "language": rule.language,
        "version": rule.version,
    }
    if detailed:
        info["configured_rules"] = rule.configured_rules
        info["custom_instructions"] = [_instruction(c) for c in rule.custom_instructions]
    return info


def _instruction(instruction: CustomInstruction) -> dict[str, Any]:
    out = {"id": instruction.id, "label": instruction.label, "prompt": instruction.prompt}
    if instruction.source_language:
        out["source_language"] = instruction.source_language
    return out


def _new_instruction(body: InstructionBody, instruction_id: str | None = None) -> CustomInstruction:
    return CustomInstruction(
        instruction_id or str(uuid.uuid4()), body.label, body.prompt, body.source_language
    )


def _owned(store: KeyStore, caller: Caller, style_id: str) -> StyleRule:
    rule = store.style_rule(style_id)
    if rule is None or rule.owner != caller.owner:
        raise NotFound("Style rule not found")
    return rule


async def _changed(store: KeyStore, rule: StyleRule, **changes: Any) -> StyleRule:
    """The rule with `changes`, a new version, stored (in a thread: the file's disk)."""
    new = dataclasses.replace(rule, **changes, version=rule.version + 1, updated=time.time())
    await asyncio.to_thread(store.put_style_rule, new)
    return new


@router.get("", summary="DeepL v3: the key's style rules")
async def list_all(request: Request, caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    query = request.query_params
    try:
        page, size = int(query.get("page", 0)), int(query.get("page_size", 10))
    except ValueError:
        raise InvalidRequest("page and page_size are numbers") from None
    if page < 0 or not 1 <= size <= 25:
        raise InvalidRequest("page is 0 or more, page_size 1 to 25", field="page_size")
    detailed = query.get("detailed", "false").lower() == "true"
    rules = store.style_rules(caller.owner)[page * size : (page + 1) * size]
    return JSONResponse({"style_rules": [_info(r, detailed) for r in rules]})


@router.post(
    "",
    status_code=201,
    summary="DeepL v3: create a style rule",
    openapi_extra=openapi_body(NewStyleRule, required=("name", "language")),
)
async def create(
    params: ParamsDep, caller: DeepLCallerDep, pool: PoolDep, store: StoreDep
) -> JSONResponse:
    body = NewStyleRule.of(params, writes=pool.gives_target)
    instructions = tuple(_new_instruction(c) for c in body.instructions)
    assert body.name is not None  # (NewStyleRule requires it)
    now = time.time()
    rule = StyleRule(
        str(uuid.uuid4()),
        caller.owner,
        body.name,
        body.lang.code,
        now,
        now,
        configured_rules=body.configured_rules,
        custom_instructions=instructions,
    )
    await asyncio.to_thread(store.put_style_rule, rule)
    return JSONResponse(_info(rule), status_code=201)


@router.get("/{style_id}", summary="DeepL v3: one style rule")
async def get(style_id: str, caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    return JSONResponse(_info(_owned(store, caller, style_id)))


@router.patch(
    "/{style_id}",
    summary="DeepL v3: rename a style rule",
    openapi_extra=openapi_body(StyleRuleName, required=("name",)),
)
async def rename(
    style_id: str, params: ParamsDep, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    rule = _owned(store, caller, style_id)
    name = StyleRuleName.of(params).name
    return JSONResponse(_info(await _changed(store, rule, name=name)))


@router.delete("/{style_id}", status_code=204, summary="DeepL v3: delete a style rule")
async def delete(style_id: str, caller: DeepLCallerDep, store: StoreDep) -> Response:
    _owned(store, caller, style_id)
    await asyncio.to_thread(store.delete_style_rule, caller.owner, style_id)
    return Response(status_code=204)


@router.put(
    "/{style_id}/configured_rules",
    summary="DeepL v3: replace a style rule's predefined rules",
    openapi_extra=PARAMS_BODY,
)
async def configure(
    style_id: str, params: ParamsDep, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    rule = _owned(store, caller, style_id)
    # The bare {category: {rule: option}} object, which only JSON can carry.
    if params.form is not None:
        raise UnsupportedMediaType(
            "configured_rules: send the {category: {rule: option}} object as a JSON body "
            "(Content-Type: application/json), not a form"
        )
    if params.json is None:
        raise InvalidRequest(
            "configured_rules: the body must be a {category: {rule: option}} object"
        )
    body = dict(params.json)
    changed = await _changed(store, rule, configured_rules=parse_configured_rules(body))
    return JSONResponse(_info(changed))


@router.post(
    "/{style_id}/custom_instructions",
    status_code=201,
    summary="DeepL v3: add a custom instruction",
    openapi_extra=openapi_body(InstructionBody),
)
async def add_instruction(
    style_id: str, params: ParamsDep, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    rule = _owned(store, caller, style_id)
    if len(rule.custom_instructions) >= MAX_STYLE_INSTRUCTIONS:
        raise InvalidRequest(
            f"a style rule holds at most {MAX_STYLE_INSTRUCTIONS} custom instructions"
        )
    new = _new_instruction(InstructionBody.of(params))
    await _changed(store, rule, custom_instructions=(*rule.custom_instructions, new))
    return JSONResponse(_instruction(new), status_code=201)


def _find(rule: StyleRule, instruction_id: str) -> CustomInstruction:
    for instruction in rule.custom_instructions:
        if instruction.id == instruction_id:
            return instruction
    raise NotFound("Custom instruction not found")


@router.get("/{style_id}/custom_instructions/{instruction_id}", summary="DeepL v3: one instruction")
async def get_instruction(
    style_id: str, instruction_id: str, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    rule = _owned(store, caller, style_id)
    return JSONResponse(_instruction(_find(rule, instruction_id)))


@router.put(
    "/{style_id}/custom_instructions/{instruction_id}",
    summary="DeepL v3: replace a custom instruction",
    openapi_extra=openapi_body(InstructionBody),
)
async def replace_instruction(
    style_id: str, instruction_id: str, params: ParamsDep, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    rule = _owned(store, caller, style_id)
    _find(rule, instruction_id)
    new = _new_instruction(InstructionBody.of(params), instruction_id)
    kept = tuple(new if c.id == instruction_id else c for c in rule.custom_instructions)
    await _changed(store, rule, custom_instructions=kept)
    return JSONResponse(_instruction(new))


@router.delete(
    "/{style_id}/custom_instructions/{instruction_id}",
    status_code=204,
    summary="DeepL v3: delete a custom instruction",
)
async def delete_instruction(
    style_id: str, instruction_id: str, caller: DeepLCallerDep, store: StoreDep
) -> Response:
    rule = _owned(store, caller, style_id)
    _find(rule, instruction_id)
    kept = tuple(c for c in rule.custom_instructions if c.id != instruction_id)
    await _changed(store, rule, custom_instructions=kept)
    return Response(status_code=204)
