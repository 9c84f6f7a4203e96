"""DeepL's API v2 at `/v2/...` on the server's root (the Python client drops a path prefix).

Bodies are JSON (the `deepl` Python client) or urlencoded forms (deepl-node, Mastodon,
older clients); parameters from the body, then the query. The key comes from the
`Authorization` header only (`DeepL-Auth-Key <key>`, as every DeepL client sends it): a key
in the query string or body (`auth_key`) is refused with a 403, as DeepL refuses it since
2026-01-15. Errors are
`{"message": ...}` with DeepL's statuses: 400, 403, 404, 413, 429 (overload too: DeepL's
clients retry it with backoff), 456 (quota), 503 (tolk.wire.errors shapes them).

Mappings (README, "DeepL API"): `split_sentences` 0 -> tolk's split `none`, 1 / nonewlines /
on / default -> `sentences` (tolk never joins lines); `preserve_formatting` is always so
(tolk does not re-case or re-punctuate); `tag_handling` xml|html -> the html format, with
`ignore_tags`, `splitting_tags` and `non_splitting_tags`; `tag_handling_version` v2 parses
XML strictly (as DeepL's v2); `outline_detection` is accepted and ignored; `model_type` -> a
model by `deepl.model_types` in the configuration, else ignored.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import datetime as dt
import functools
import io
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidRequest, NotFound, TolkError
from tolk.languages import Lang, lang
from tolk.server.access import Caller
from tolk.server.api.deepl_bodies import UPLOAD_FIELDS, DeepLDocument, DeepLTranslate, deepl_lang
from tolk.server.documents import documents_of
from tolk.server.gateway import (
    ConfigDep,
    DeepLCallerDep,
    GatewayDep,
    PoolDep,
    StoreDep,
    Upload,
    attachment,
)
from tolk.server.params import MULTIPART_MEDIA, Params, ParamsDep, openapi_body
from tolk.store.keys import GlossaryDictionary, KeyStore, StoredGlossary, StyleRule
from tolk.translation.files import FILE_TYPES
from tolk.translation.prompts import FORMAL_REGISTERS, INSTRUCTED, Instructions
from tolk.translation.request import TranslationRequest
from tolk.translation.results import Translation
from tolk.wire import codes

router = APIRouter(prefix="/v2", tags=["DeepL API v2"])


class DocumentNotReady(TolkError):
    code = "document_not_ready"
    status = 503  # the client retries it, then raises DocumentNotReadyException


# How long a document status request waits for the translation to end before answering
# "translating": a short document is "done" at the first poll (the client then never sleeps).
STATUS_WAIT = 4.0
# Bodies read with read_params whose fields no model describes (yet): an object.
PARAMS_BODY: dict[str, Any] = {
    "requestBody": {
        "content": {
            media: {"schema": {"type": "object"}}
            for media in ("application/json", "application/x-www-form-urlencoded")
        }
    }
}


def deepl_time(created: float) -> str:
    """A time as DeepL writes it: fractional seconds and a zone (the Python client parses
    "%Y-%m-%dT%H:%M:%S.%f%z" and fails on anything less)."""
    moment = dt.datetime.fromtimestamp(created, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rule_instructions(rule: StyleRule) -> tuple[str, ...]:
    """The rule as prompt instructions: each configured rule a line, then each custom
    instruction's prompt."""
    lines = [
        f"{category.replace('_', ' ').capitalize()}, {name.replace('_', ' ')}: "
        f"{option.replace('_', ' ')}"
        for category, rules in rule.configured_rules.items()
        for name, option in rules.items()
    ]
    return (*lines, *(c.prompt for c in rule.custom_instructions))


def style_rule_for(store: KeyStore, style_id: str, target: Lang) -> StyleRule:
    """The rule a translate request names, for its target language (DeepL's 400s)."""
    rule = store.style_rule(style_id)
    if rule is None:
        raise InvalidRequest("Value for 'style_id' not supported: no such style rule")
    if rule.language != target.code:
        raise InvalidRequest(
            f"Style rule language ({rule.language}) does not match the translate request "
            f"target language ({target.code})",
            field="style_id",
        )
    return rule


def _told(store: KeyStore, body: DeepLTranslate | DeepLDocument) -> Instructions:
    """Formality, context and custom instructions, and the style rule `style_id` names."""
    instructions = body.instructions()
    if body.style_id:
        rule = style_rule_for(store, body.style_id, body.target)
        custom = (*instructions.custom, *rule_instructions(rule))
        instructions = dataclasses.replace(instructions, custom=custom)
    return instructions


@router.post(
    "/translate",
    summary="DeepL: translate texts",
    openapi_extra=openapi_body(DeepLTranslate),
)
async def translate(
    request: Request,
    params: ParamsDep,
    caller: DeepLCallerDep,
    gateway: GatewayDep,
    store: StoreDep,
    config: ConfigDep,
) -> Response:
    body = DeepLTranslate.of(params)
    # model_type: the model deepl.model_types configures for it (else the default), and
    # the model_type_used to report.
    used = body.model_type.removeprefix("prefer_") if body.model_type else None
    source = body.source
    asked = TranslationRequest(
        target_lang=body.target.tag,
        deadline=gateway.deadline(),
        source_lang=source.tag if source else None,
        model={str(k): v for k, v in config.deepl.model_types.items()}.get(used) if used else None,
        split=body.split,
        format="html" if body.tag_handling else "text",
        glossary=body.glossary(),
        instructions=_told(store, body),
        rules=body.rules,
        memory=gateway.memory_mode(request),
        translation_memory=body.translation_memory(),
    )
    result = await gateway.translate(request, caller, body.text, asked)
    translations = _translations(result, body.text, used)
    if body.tag_handling_version:
        for item in translations:
            item["tag_handling_version"] = body.tag_handling_version
    answer = JSONResponse({"translations": translations})
    answer.headers.update(gateway.headers(result))
    return answer


def _translations(
    result: Translation, texts: list[str], model_type_used: str | None
) -> list[dict[str, Any]]:
    out = []
    for i, (text, translated) in enumerate(zip(texts, result.texts, strict=True)):
        item: dict[str, Any] = {
            "detected_source_language": codes.deepl_source(result.source_of(i)),
            "text": translated,
            "billed_characters": len(text),  # the deepl client requires it, always
        }
        if model_type_used:
            item["model_type_used"] = model_type_used
        out.append(item)
    return out


@router.api_route(
    "/languages", methods=["GET", "POST"], summary="DeepL: source or target languages"
)
async def languages(params: ParamsDep, pool: PoolDep) -> JSONResponse:
    # `type` from the body too: the Python client sends it in the body of a GET.
    kind = (params.text("type") or "source").lower()
    if kind not in ("source", "target"):
        raise InvalidRequest("Parameter 'type' is invalid. 'source' and 'target' are supported.")
    if kind == "source":
        listed = {codes.deepl_source(t): lang(t).base_name for t in pool.sources}
        return JSONResponse([{"language": c, "name": n} for c, n in listed.items()])
    instructed = any(e.settings.prompt_format in INSTRUCTED for e in pool.engines)
    targets: dict[str, dict[str, Any]] = {}
    for tag in pool.targets:
        for code in codes.deepl_targets(tag):
            target = lang(code)
            targets.setdefault(
                code,
                {
                    "language": code,
                    "name": target.name,
                    "supports_formality": instructed and target.code in FORMAL_REGISTERS,
                },
            )
    return JSONResponse(list(targets.values()))


@router.get("/usage", summary="DeepL: characters used and allowed this period, for the key")
async def usage(caller: DeepLCallerDep, gateway: GatewayDep) -> JSONResponse:
    used, limit, _ = gateway.usage(caller)
    return JSONResponse({"character_count": used, "character_limit": limit})


@router.get("/glossary-language-pairs", summary="DeepL: pairs glossaries can be made for")
async def glossary_language_pairs(pool: PoolDep) -> JSONResponse:
    pairs = {
        (codes.deepl_source(s).lower(), codes.deepl_source(t).lower())
        for s in pool.sources
        for t in pool.targets
        if pool.covers(s, t) and codes.deepl_source(s) != codes.deepl_source(t)
    }
    return JSONResponse(
        {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in sorted(pairs)]}
    )


def _glossary_info(glossary: StoredGlossary) -> dict[str, Any]:
    return {
        "glossary_id": glossary.id,
        "name": glossary.name,
        "ready": True,
        "source_lang": glossary.source_lang,
        "target_lang": glossary.target_lang,
        "creation_time": deepl_time(glossary.created),
        "entry_count": len(glossary.entries),
    }


def parse_entries(text: str, entries_format: str) -> dict[str, str]:
    if entries_format not in ("tsv", "csv"):
        raise InvalidRequest("Value for 'entries_format' not supported: use tsv or csv")
    delimiter = "\t" if entries_format == "tsv" else ","
    entries: dict[str, str] = {}
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        for row in reader:
            number = reader.line_num
            if not row or not "".join(row).strip():
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise InvalidRequest(
                    f"Invalid glossary entries: line {number} is not source, target"
                )
            entries[row[0].strip()] = row[1].strip()
    except csv.Error as exc:
        raise InvalidRequest(
            f"Invalid glossary entries: line {reader.line_num} {_csv_problem(exc)}",
            field="entries",
        ) from None
    if not entries:
        raise InvalidRequest("Invalid glossary entries: none given")
    return entries


def _csv_problem(exc: csv.Error) -> str:
    """What the csv module found wrong with a line, in words a client can act on."""
    reason = str(exc)
    if reason.startswith("new-line character"):
        return (
            "has a carriage return (\\r) inside an unquoted term; separate entries with "
            "\\n (or \\r\\n), and quote a term that holds a line break"
        )
    if reason.startswith("field larger than field limit"):
        return f"has a term longer than {csv.field_size_limit()} characters"
    return f"cannot be read: {reason}"


def _owned(store: KeyStore, caller: Caller, glossary_id: str) -> StoredGlossary:
    for glossary in _one_pair(store, caller):
        if glossary.id == glossary_id:
            return glossary
    raise NotFound("Glossary not found")


def _one_pair(store: KeyStore, caller: Caller) -> list[StoredGlossary]:
    """The caller's glossaries v2 can show: those of one dictionary (v3 shows them all)."""
    return [g for g in store.glossaries(caller.owner) if len(g.dictionaries) == 1]


@router.post("/glossaries", status_code=201, summary="DeepL: create a glossary")
async def create_glossary(
    params: ParamsDep, caller: DeepLCallerDep, gateway: GatewayDep, pool: PoolDep, store: StoreDep
) -> JSONResponse:
    name, source_code, target_code = (
        params.text(n) for n in ("name", "source_lang", "target_lang")
    )
    text = params.text("entries")
    if not (name and source_code and target_code and text):
        raise InvalidRequest("name, source_lang, target_lang and entries are required")
    source, target = deepl_lang(source_code, "source_lang"), deepl_lang(target_code, "target_lang")
    if not pool.covers(source.tag, target.tag):
        raise InvalidRequest(f"Unsupported glossary language pair: {source.tag} to {target.tag}")
    # Up to max_file_bytes of CSV/TSV: parsed off the event loop.
    entries = await gateway.offload(parse_entries, text, params.text("entries_format") or "tsv")
    # In a thread, as every write to the key store's file (its disk may stall).
    glossary = await asyncio.to_thread(
        store.add_glossary,
        caller.owner,
        name,
        [GlossaryDictionary(source.code, target.code, entries)],
    )
    return JSONResponse(_glossary_info(glossary), status_code=201)


@router.get("/glossaries", summary="DeepL: the key's glossaries")
async def list_glossaries(caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    return JSONResponse({"glossaries": [_glossary_info(g) for g in _one_pair(store, caller)]})


@router.get("/glossaries/{glossary_id}", summary="DeepL: one glossary")
async def get_glossary(glossary_id: str, caller: DeepLCallerDep, store: StoreDep) -> JSONResponse:
    return JSONResponse(_glossary_info(_owned(store, caller, glossary_id)))


@router.get("/glossaries/{glossary_id}/entries", summary="DeepL: a glossary's entries (TSV)")
async def glossary_entries(glossary_id: str, caller: DeepLCallerDep, store: StoreDep) -> Response:
    glossary = _owned(store, caller, glossary_id)
    tsv = "".join(f"{s}\t{t}\n" for s, t in glossary.entries.items())
    return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")


@router.delete("/glossaries/{glossary_id}", status_code=204, summary="DeepL: delete a glossary")
async def delete_glossary(glossary_id: str, caller: DeepLCallerDep, store: StoreDep) -> Response:
    if not await asyncio.to_thread(store.delete_glossary, caller.owner, glossary_id):
        raise NotFound("Glossary not found")
    return Response(status_code=204)


def _upload(params: Params) -> Upload:
    """The document, its name (`filename`, else the file's own) and type checked first."""
    file = params.file("file")
    if file is None:
        raise InvalidRequest("Parameter 'file' not specified.", field="file")
    return Upload.of(
        file,
        params.text("filename"),
        output_format=params.text("output_format") or "",
        unsupported=lambda filename: InvalidRequest(
            f"Invalid file data: '{filename}' is not a type tolk translates "
            f"({' '.join(FILE_TYPES)}; name the file with its extension)"
        ),
    )


@router.post(
    "/document",
    summary="DeepL: upload a document to translate (multipart)",
    openapi_extra=openapi_body(
        DeepLDocument, media=(MULTIPART_MEDIA,), extra=UPLOAD_FIELDS, required=["file"]
    ),
)
async def upload_document(
    request: Request,
    params: ParamsDep,
    caller: DeepLCallerDep,
    gateway: GatewayDep,
    store: StoreDep,
) -> JSONResponse:
    """Translated in the background, polled, downloaded once. Its characters are reserved
    of the quota at upload: one it cannot pay for is refused then (456), as DeepL does, not
    left to fail. One that cannot be opened (not UTF-8, a zip bomb, too long) is taken,
    costs nothing and ends in `error` naming why (DeepL takes the upload first); so does
    one already in the target language."""
    upload = _upload(params)
    body = DeepLDocument.of(params)
    source, target = body.source, body.target
    asked = TranslationRequest(
        target_lang=target.tag,
        deadline=gateway.deadline(document=True),
        source_lang=source.tag if source else None,
        glossary=body.glossary(),
        instructions=_told(store, body),
        memory=gateway.memory_mode(request),
    )
    doc = await gateway.translate_file(
        request,
        caller,
        upload,
        asked,
        background=True,
        check=functools.partial(_not_the_target, target),
    )
    return JSONResponse({"document_id": doc.id, "document_key": doc.key})


def _not_the_target(target: Lang, source: Lang) -> None:
    """DeepL's document error for a document already in the target language (its clients
    match "Source and target language"): the document ends in `error`, unbilled."""
    if source.code == target.code:
        raise InvalidRequest(
            f"Source and target language are the same ({source.name}): nothing to translate; "
            "ask for another target_lang"
        )


def _document(request: Request, params: Params, caller: Caller, document_id: str) -> Any:
    doc = documents_of(request).get(document_id)
    if doc is None or doc.key != params.text("document_key") or doc.owner != caller.owner:
        raise NotFound("Document not found")
    return doc


@router.post("/document/{document_id}", summary="DeepL: a document's status")
async def document_status(
    document_id: str, request: Request, params: ParamsDep, caller: DeepLCallerDep
) -> JSONResponse:
    doc = _document(request, params, caller, document_id)
    await documents_of(request).wait(doc, STATUS_WAIT)
    body: dict[str, Any] = {"document_id": doc.id, "status": doc.status}
    if doc.result is not None:
        body["billed_characters"] = doc.result.translation.usage.characters
    if doc.error is not None:
        body["error_message"] = doc.error
    return JSONResponse(body)


@router.post("/document/{document_id}/result", summary="DeepL: download a translated document")
async def document_result(
    document_id: str, request: Request, params: ParamsDep, caller: DeepLCallerDep
) -> Response:
    doc = _document(request, params, caller, document_id)
    if doc.error is not None:
        raise InvalidRequest(f"Document translation failed: {doc.error}")
    if doc.result is None:
        raise DocumentNotReady("Document not ready: still translating; poll its status")
    documents_of(request).drop(doc.id)  # DeepL removes a document once it is downloaded
    return attachment(doc.result, doc.filename)
