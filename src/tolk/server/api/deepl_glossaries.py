"""DeepL's v3 glossaries at `/v3/glossaries`: a glossary with several dictionaries, one per
language pair, created, read, renamed, merged into, replaced and deleted dictionary by
dictionary, as the official clients (deepl-python's `*_multilingual_glossary*` calls) send
them. A thin adapter over the key store's glossaries: a glossary made through v2 is a
glossary of one dictionary here, one made here is usable by id in any translate request
(the dictionary for the request's pair is used), and v2 reads those of one dictionary.

Bodies are JSON or forms (parameters as in tolk.server.params); errors are DeepL's
`{"message": ...}` (tolk.wire.errors): 400 for a malformed id or entries, 404 for a glossary
or dictionary that is not there. Glossary bodies may be as large as `max_file_bytes` (DeepL
takes dictionaries of up to 10 MB).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.engine import ModelPool
from tolk.errors import InvalidRequest, NotFound
from tolk.server.access import Caller
from tolk.server.api.deepl import deepl_time, parse_entries
from tolk.server.api.deepl_bodies import (
    GlossaryBody,
    GlossaryChange,
    GlossaryDictionaryBody,
    NewGlossary,
    deepl_lang,
)
from tolk.server.gateway import DeepLCallerDep, Gateway, GatewayDep, PoolDep, StoreDep
from tolk.server.params import ParamsDep, openapi_body
from tolk.store.keys import GlossaryDictionary, KeyStore, StoredGlossary

router = APIRouter(prefix="/v3/glossaries", tags=["DeepL API v3: glossaries"])


def _info(glossary: StoredGlossary) -> dict[str, Any]:
    return {
        "glossary_id": glossary.id,
        "name": glossary.name,
        "ready": True,
        "creation_time": deepl_time(glossary.created),
        "dictionaries": [_dictionary_info(d) for d in glossary.dictionaries],
    }


def _dictionary_info(dictionary: GlossaryDictionary) -> dict[str, Any]:
    return {
        "source_lang": dictionary.source_lang,
        "target_lang": dictionary.target_lang,
        "entry_count": len(dictionary.entries),
    }


def _owned(store: KeyStore, caller: Caller, glossary_id: str) -> StoredGlossary:
    """The caller's glossary `glossary_id`: 400 for an id that cannot be one, 404 for one
    that is not there (or not the caller's: an id is never confirmed to others)."""
    try:
        uuid.UUID(glossary_id)
    except ValueError:
        raise InvalidRequest(
            "Value for 'glossary_id' not supported.", field="glossary_id"
        ) from None
    glossary = store.glossary(glossary_id)
    if glossary is None or glossary.owner != caller.owner:
        raise NotFound("Glossary not found")
    return glossary


async def _dictionaries(
    gateway: Gateway, pool: ModelPool, body: GlossaryBody
) -> list[GlossaryDictionary]:
    """The dictionaries of a request body, checked and their entries (up to max_file_bytes
    of CSV/TSV) parsed off the event loop."""
    return await gateway.offload(lambda: [_dictionary(pool, d) for d in body.parsed])


def _dictionary(pool: ModelPool, body: GlossaryDictionaryBody) -> GlossaryDictionary:
    """One dictionary of a request body: its pair (served by some model) and entries."""
    source, target = body.source, body.target
    if not pool.covers(source.tag, target.tag):
        raise InvalidRequest(f"Unsupported glossary language pair: {source.tag} to {target.tag}")
    found = parse_entries(body.entries, body.entries_format)
    return GlossaryDictionary(source.code, target.code, found)


def _pair_of_query(request: Request) -> tuple[str, str]:
    source, target = (request.query_params.get(n) for n in ("source_lang", "target_lang"))
    if not source or not target:
        raise InvalidRequest("source_lang and target_lang are required")
    return deepl_lang(source, "source_lang").code, deepl_lang(target, "target_lang").code


async def _store(store: KeyStore, glossary: StoredGlossary) -> None:
    # In a thread, as every write to the key store's file (its disk may stall).
    await asyncio.to_thread(store.change_glossary, glossary)


@router.post(
    "",
    status_code=201,
    summary="DeepL v3: create a glossary",
    openapi_extra=openapi_body(NewGlossary, required=("name", "dictionaries")),
)
async def create(
    params: ParamsDep, caller: DeepLCallerDep, gateway: GatewayDep, pool: PoolDep, store: StoreDep
) -> JSONResponse:
    body = NewGlossary.of(params)
    dictionaries = await _dictionaries(gateway, pool, body)
    pairs = [d.pair for d in dictionaries]
    if len(set(pairs)) != len(pairs):
        raise InvalidRequest("Invalid glossary: two dictionaries for the same language pair")
    assert body.name is not None  # (NewGlossary requires it)
    glossary = await asyncio.to_thread(store.add_glossary, caller.owner, body.name, dictionaries)
    return JSONResponse(_info(glossary), status_code=201)


@router.get("", summary="DeepL v3: the key's glossaries")
async def list_all(caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    return JSONResponse({"glossaries": [_info(g) for g in store.glossaries(caller.owner)]})


@router.get("/{glossary_id}", summary="DeepL v3: one glossary")
async def get(glossary_id: str, caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    return JSONResponse(_info(_owned(store, caller, glossary_id)))


@router.patch(
    "/{glossary_id}",
    summary="DeepL v3: rename, or merge entries into a dictionary",
    openapi_extra=openapi_body(GlossaryChange),
)
async def update(
    glossary_id: str,
    params: ParamsDep,
    caller: DeepLCallerDep,
    gateway: GatewayDep,
    pool: PoolDep,
    store: StoreDep,
) -> JSONResponse:
    """`name` renames; each of `dictionaries` is merged into the glossary's dictionary for
    its pair (entries overwritten or added; the dictionary made if the pair has none)."""
    glossary = _owned(store, caller, glossary_id)
    body = GlossaryChange.of(params)
    dictionaries = list(glossary.dictionaries)
    for change in await _dictionaries(gateway, pool, body):
        pair = change.pair
        at = next((i for i, d in enumerate(dictionaries) if d.pair == pair), None)
        if at is None:
            dictionaries.append(change)
        else:
            merged = {**dictionaries[at].entries, **change.entries}
            dictionaries[at] = dataclasses.replace(change, entries=merged)
    changed = dataclasses.replace(
        glossary, name=body.name or glossary.name, dictionaries=tuple(dictionaries)
    )
    await _store(store, changed)
    return JSONResponse(_info(changed))


@router.put(
    "/{glossary_id}/dictionaries",
    summary="DeepL v3: replace (or add) one dictionary",
    openapi_extra=openapi_body(GlossaryDictionaryBody),
)
async def replace(
    glossary_id: str,
    params: ParamsDep,
    caller: DeepLCallerDep,
    gateway: GatewayDep,
    pool: PoolDep,
    store: StoreDep,
) -> JSONResponse:
    glossary = _owned(store, caller, glossary_id)
    new = await gateway.offload(_dictionary, pool, GlossaryDictionaryBody.of(params))
    pair = new.pair
    kept = [d for d in glossary.dictionaries if d.pair != pair]
    if len(kept) == len(glossary.dictionaries):
        dictionaries = (*glossary.dictionaries, new)
    else:  # in its place
        dictionaries = tuple(new if d.pair == pair else d for d in glossary.dictionaries)
    await _store(store, dataclasses.replace(glossary, dictionaries=dictionaries))
    return JSONResponse(_dictionary_info(new))


@router.get("/{glossary_id}/entries", summary="DeepL v3: one dictionary's entries (TSV)")
async def entries(
    glossary_id: str, request: Request, caller: DeepLCallerDep, store: StoreDep
) -> JSONResponse:
    glossary = _owned(store, caller, glossary_id)
    source, target = _pair_of_query(request)
    dictionary = glossary.dictionary(source, target)
    if dictionary is None:
        raise NotFound(f"Dictionary not found: the glossary has none for {source}>{target}")
    tsv = "\n".join(f"{s}\t{t}" for s, t in dictionary.entries.items())
    return JSONResponse(
        {
            "dictionaries": [
                {
                    "source_lang": source,
                    "target_lang": target,
                    "entries": tsv,
                    "entries_format": "tsv",
                }
            ]
        }
    )


@router.delete("/{glossary_id}", status_code=204, summary="DeepL v3: delete a glossary")
async def delete(glossary_id: str, caller: DeepLCallerDep, store: StoreDep) -> Response:
    _owned(store, caller, glossary_id)
    await asyncio.to_thread(store.delete_glossary, caller.owner, glossary_id)
    return Response(status_code=204)


@router.delete(
    "/{glossary_id}/dictionaries", status_code=204, summary="DeepL v3: delete one dictionary"
)
async def delete_dictionary(
    glossary_id: str, request: Request, caller: DeepLCallerDep, store: StoreDep
) -> Response:
    glossary = _owned(store, caller, glossary_id)
    source, target = _pair_of_query(request)
    if glossary.dictionary(source, target) is None:
        raise NotFound(f"Dictionary not found: the glossary has none for {source}>{target}")
    kept = tuple(d for d in glossary.dictionaries if d.pair != (source, target))
    await _store(store, dataclasses.replace(glossary, dictionaries=kept))
    return Response(status_code=204)
