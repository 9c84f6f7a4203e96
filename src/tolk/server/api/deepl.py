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
import io
from pathlib import PurePath
from typing import Any
from xml.etree import ElementTree

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tolk.errors import InvalidKey, InvalidLanguage, InvalidRequest, NotFound, TolkError
from tolk.keys import GlossaryDictionary, StoredGlossary, StyleRule
from tolk.languages import Lang, lang, request_lang
from tolk.server.access import Caller
from tolk.server.calls import Calls, CallsDep, attachment, bearer_key
from tolk.server.documents import documents_of
from tolk.server.params import Params, read_params
from tolk.tm import DEFAULT_THRESHOLD
from tolk.translation.files import file_type
from tolk.translation.html_format import TagRules
from tolk.translation.prompts import FORMAL_REGISTERS, INSTRUCTED, Instructions
from tolk.translation.request import GlossaryRequest, MemoryRequest, TranslationRequest
from tolk.translation.results import Translation
from tolk.translation.segment import SplitMode
from tolk.wire import codes

router = APIRouter(prefix="/v2", tags=["DeepL API v2"])


class DocumentNotReady(TolkError):
    code = "document_not_ready"
    status = 503  # the client retries it, then raises DocumentNotReadyException


MAX_INSTRUCTIONS, MAX_INSTRUCTION_CHARS = 10, 300
MAX_GLOSSARY_IDS = 5
MODEL_TYPES = ("quality_optimized", "latency_optimized", "prefer_quality_optimized")
# How long a document status request waits for the translation to end before answering
# "translating": a short document is "done" at the first poll (the client then never sleeps).
STATUS_WAIT = 4.0
PARAMS_BODY: dict[str, Any] = {
    "requestBody": {
        "content": {
            media: {"schema": {"type": "object"}}
            for media in ("application/json", "application/x-www-form-urlencoded")
        }
    }
}


def caller_of(calls: Calls, request: Request, params: Params) -> Caller:
    """The caller the `Authorization` header names (`DeepL-Auth-Key`, or tolk's `Bearer` and
    `X-API-Key`). DeepL takes the key there only, and so does tolk here: `auth_key` in the
    query string (which access logs, proxies and browser histories keep) or in the body is
    refused, with or without a header, as DeepL refuses it."""
    if params.has("auth_key"):
        raise InvalidKey(
            "send the key in the Authorization header (Authorization: DeepL-Auth-Key <key>), "
            "as DeepL's clients do; a key in the query string or body (auth_key) is not "
            "accepted, as DeepL no longer accepts it"
        )
    return calls.access.caller(bearer_key(request))


def texts_of(params: Params) -> list[str]:
    """DeepL's `text`: one string or several, required."""
    texts = params.many("text")
    if not texts:
        raise InvalidRequest("Parameter 'text' not specified.", field="text")
    if not all(isinstance(t, str) for t in texts):
        raise InvalidRequest("Parameter 'text' must be strings.", field="text")
    return texts


def deepl_lang(code: str, field: str) -> Lang:
    """A language code of a DeepL request; an unknown one answered as DeepL does ("Value for
    'target_lang' not supported", which the clients' tests match), with tolk's reason."""
    try:
        return request_lang(code, field)
    except InvalidLanguage as exc:
        raise InvalidLanguage(f"Value for '{field}' not supported: {exc}", field=field) from exc


def deepl_time(created: float) -> str:
    """A time as DeepL writes it: fractional seconds and a zone (the Python client parses
    "%Y-%m-%dT%H:%M:%S.%f%z" and fails on anything less)."""
    moment = dt.datetime.fromtimestamp(created, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _languages(params: Params) -> tuple[Lang | None, Lang]:
    """(source_lang, or None to detect it; target_lang), DeepL's codes in any case."""
    target_code = params.text("target_lang")
    if not target_code:
        raise InvalidRequest("Parameter 'target_lang' not specified.", field="target_lang")
    source_code = params.text("source_lang")
    source = deepl_lang(source_code, "source_lang") if source_code else None
    return source, deepl_lang(target_code, "target_lang")


def _split(value: str | None) -> SplitMode:
    value = (value or "1").strip().lower()
    if value in ("0", "off"):
        return "none"
    if value in ("1", "on", "default", "nonewlines"):
        return "sentences"
    raise InvalidRequest(
        f"Value for 'split_sentences' not supported: {value}; use 0, 1 or nonewlines",
        field="split_sentences",
    )


def _instructions(params: Params) -> Instructions:
    formality = (params.text("formality") or "default").strip().lower()
    allowed = ("default", "more", "less", "prefer_more", "prefer_less", "formal", "informal")
    if formality not in allowed:
        raise InvalidRequest(f"Value for 'formality' not supported: {formality}")
    custom = params.strings("custom_instructions", commas=False) or []
    if len(custom) > MAX_INSTRUCTIONS or any(len(c) > MAX_INSTRUCTION_CHARS for c in custom):
        raise InvalidRequest(
            f"custom_instructions: at most {MAX_INSTRUCTIONS}, of {MAX_INSTRUCTION_CHARS} "
            "characters each",
            field="custom_instructions",
        )
    return Instructions.of(formality, params.text("context"), custom)


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


def style_rule_for(calls: Calls, style_id: str, target: Lang) -> StyleRule:
    """The rule a translate request names, for its target language (DeepL's 400s)."""
    rule = calls.store.style_rule(style_id)
    if rule is None:
        raise InvalidRequest("Value for 'style_id' not supported: no such style rule")
    if rule.language != target.code:
        raise InvalidRequest(
            f"Style rule language ({rule.language}) does not match the translate request "
            f"target language ({target.code})",
            field="style_id",
        )
    return rule


def _glossary(params: Params, source: Lang | None) -> GlossaryRequest:
    """`glossary_id` and `glossary_ids` (up to 5, their entries together)."""
    glossary_ids = params.strings("glossary_ids") or []
    if len(glossary_ids) > MAX_GLOSSARY_IDS:
        raise InvalidRequest(
            f"glossary_ids must not contain more than {MAX_GLOSSARY_IDS} glossary IDs",
            field="glossary_ids",
        )
    one = params.text("glossary_id")
    glossary = GlossaryRequest(ids=[one, *glossary_ids] if one else glossary_ids)
    if glossary.ids and source is None:
        raise InvalidRequest("source_lang is required when a glossary is used")
    return glossary


def _translation_memory(params: Params) -> MemoryRequest | None:
    """`translation_memory_id`, and `translation_memory_threshold` (0-100; DeepL's default)."""
    memory_id = params.text("translation_memory_id")
    threshold = params.text("translation_memory_threshold")
    if memory_id is None:
        if threshold is not None:
            raise InvalidRequest(
                "translation_memory_threshold requires translation_memory_id",
                field="translation_memory_threshold",
            )
        return None
    try:
        value = float(threshold) if threshold is not None else DEFAULT_THRESHOLD
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise InvalidRequest(
            f"Value for 'translation_memory_threshold' not supported: {threshold} (0 to 100)",
            field="translation_memory_threshold",
        )
    return MemoryRequest(memory_id, value)


def _told(calls: Calls, params: Params, target: Lang) -> Instructions:
    """Formality, context and custom instructions, and the style rule `style_id` names."""
    instructions = _instructions(params)
    if style_id := params.text("style_id"):
        rule = style_rule_for(calls, style_id, target)
        custom = (*instructions.custom, *rule_instructions(rule))
        instructions = dataclasses.replace(instructions, custom=custom)
    return instructions


def _model(calls: Calls, params: Params) -> tuple[str | None, str | None]:
    """(the configured model for `model_type`, the model_type_used to report)."""
    model_type = params.text("model_type")
    if model_type is None:
        return None, None
    if model_type not in MODEL_TYPES:
        raise InvalidRequest(f"Value for 'model_type' not supported: {model_type}")
    used = model_type.removeprefix("prefer_")
    mapped = {str(k): v for k, v in calls.config.deepl.model_types.items()}.get(used)
    return mapped, used


@router.post("/translate", summary="DeepL: translate texts", openapi_extra=PARAMS_BODY)
async def translate(request: Request, calls: CallsDep) -> Response:
    params = await read_params(request)
    caller = caller_of(calls, request, params)
    texts = texts_of(params)
    source, target = _languages(params)
    tag_handling = params.text("tag_handling")
    if tag_handling not in (None, "xml", "html"):
        raise InvalidRequest(f"Value for 'tag_handling' not supported: {tag_handling}")
    version = _tag_handling_version(params, tag_handling, texts)
    rules = TagRules(
        ignore=frozenset(params.strings("ignore_tags") or ()),
        splitting=frozenset(params.strings("splitting_tags") or ()),
        non_splitting=frozenset(params.strings("non_splitting_tags") or ()),
    )
    glossary = _glossary(params, source)
    memory_asked = _translation_memory(params)
    model, model_type_used = _model(calls, params)
    split = _split(params.text("split_sentences"))
    instructions = _told(calls, params, target)
    deadline = calls.deadline()
    result = await calls.run(
        request,
        caller,
        sum(len(t) for t in texts),
        lambda: calls.translator.translate(
            texts,
            TranslationRequest(
                target.tag,
                deadline,
                source.tag if source else None,
                model,
                split,
                "html" if tag_handling else "text",
                glossary,
                instructions,
                rules,
                memory=calls.memory_mode(request),
                translation_memory=memory_asked,
            ),
        ),
    )
    translations = _translations(result, texts, model_type_used)
    if version:
        for item in translations:
            item["tag_handling_version"] = version
    answer = JSONResponse({"translations": translations})
    calls.record(request, answer.headers, result, len(texts))
    return answer


def _tag_handling_version(params: Params, tag_handling: str | None, texts: list[str]) -> str | None:
    """DeepL's tag_handling_version: v1 or v2, echoed in each translation. With v2, XML is
    parsed strictly, as DeepL's v2 does: text that is not well-formed XML (an unclosed tag,
    an entity XML does not define) is refused with DeepL's message. tolk's tag handling is
    the same for both."""
    version = params.text("tag_handling_version")
    if version not in (None, "v1", "v2"):
        raise InvalidRequest(f"Value for 'tag_handling_version' not supported: {version}")
    if version == "v2" and tag_handling == "xml":
        for text in texts:
            try:
                # No DOCTYPE can appear inside an element, so no entity can be declared.
                ElementTree.fromstring(f"<tolk-root>{text}</tolk-root>")
            except ElementTree.ParseError as exc:
                raise InvalidRequest(
                    f"Tag handling parsing failed, please check input. ({exc})",
                    field="text",
                ) from exc
    return version


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
async def languages(request: Request, calls: CallsDep) -> JSONResponse:
    # `type` from the body too: the Python client sends it in the body of a GET.
    params = await read_params(request)
    kind = (params.text("type") or "source").lower()
    if kind not in ("source", "target"):
        raise InvalidRequest("Parameter 'type' is invalid. 'source' and 'target' are supported.")
    pool = calls.translator.pool
    if kind == "source":
        listed = {codes.deepl_source(t): lang(t).base_name for t in pool.sources}
        return JSONResponse([{"language": c, "name": n} for c, n in listed.items()])
    instructed = any(e.settings.prompt_format in INSTRUCTED for e in calls.translator.pool.engines)
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
async def usage(request: Request, calls: CallsDep) -> JSONResponse:
    params = await read_params(request)
    used, limit, _ = calls.access.usage(caller_of(calls, request, params))
    return JSONResponse({"character_count": used, "character_limit": limit})


@router.get("/glossary-language-pairs", summary="DeepL: pairs glossaries can be made for")
async def glossary_language_pairs(calls: CallsDep) -> JSONResponse:
    pool = calls.translator.pool
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


def _owned(calls: Calls, caller: Caller, glossary_id: str) -> StoredGlossary:
    for glossary in _one_pair(calls, caller):
        if glossary.id == glossary_id:
            return glossary
    raise NotFound("Glossary not found")


def _one_pair(calls: Calls, caller: Caller) -> list[StoredGlossary]:
    """The caller's glossaries v2 can show: those of one dictionary (v3 shows them all)."""
    return [g for g in calls.store.glossaries(caller.owner) if len(g.dictionaries) == 1]


@router.post("/glossaries", status_code=201, summary="DeepL: create a glossary")
async def create_glossary(request: Request, calls: CallsDep) -> JSONResponse:
    params = await read_params(request)
    caller = caller_of(calls, request, params)
    name, source_code, target_code = (
        params.text(n) for n in ("name", "source_lang", "target_lang")
    )
    text = params.text("entries")
    if not (name and source_code and target_code and text):
        raise InvalidRequest("name, source_lang, target_lang and entries are required")
    source, target = deepl_lang(source_code, "source_lang"), deepl_lang(target_code, "target_lang")
    pool = calls.translator.pool
    if not pool.covers(source.tag, target.tag):
        raise InvalidRequest(f"Unsupported glossary language pair: {source.tag} to {target.tag}")
    # Up to max_file_bytes of CSV/TSV: parsed off the event loop.
    entries = await calls.translator.offload(
        parse_entries, text, params.text("entries_format") or "tsv"
    )
    # In a thread, as every write to the key store's file (its disk may stall).
    glossary = await asyncio.to_thread(
        calls.store.add_glossary,
        caller.owner,
        name,
        [GlossaryDictionary(source.code, target.code, entries)],
    )
    return JSONResponse(_glossary_info(glossary), status_code=201)


@router.get("/glossaries", summary="DeepL: the key's glossaries")
async def list_glossaries(request: Request, calls: CallsDep) -> JSONResponse:
    caller = caller_of(calls, request, await read_params(request))
    return JSONResponse({"glossaries": [_glossary_info(g) for g in _one_pair(calls, caller)]})


@router.get("/glossaries/{glossary_id}", summary="DeepL: one glossary")
async def get_glossary(glossary_id: str, request: Request, calls: CallsDep) -> JSONResponse:
    caller = caller_of(calls, request, await read_params(request))
    return JSONResponse(_glossary_info(_owned(calls, caller, glossary_id)))


@router.get("/glossaries/{glossary_id}/entries", summary="DeepL: a glossary's entries (TSV)")
async def glossary_entries(glossary_id: str, request: Request, calls: CallsDep) -> Response:
    caller = caller_of(calls, request, await read_params(request))
    glossary = _owned(calls, caller, glossary_id)
    tsv = "".join(f"{s}\t{t}\n" for s, t in glossary.entries.items())
    return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")


@router.delete("/glossaries/{glossary_id}", status_code=204, summary="DeepL: delete a glossary")
async def delete_glossary(glossary_id: str, request: Request, calls: CallsDep) -> Response:
    caller = caller_of(calls, request, await read_params(request))
    if not await asyncio.to_thread(calls.store.delete_glossary, caller.owner, glossary_id):
        raise NotFound("Glossary not found")
    return Response(status_code=204)


@router.post("/document", summary="DeepL: upload a document to translate (multipart)")
async def upload_document(request: Request, calls: CallsDep) -> JSONResponse:
    params = await read_params(request)
    caller = caller_of(calls, request, params)
    upload = params.file("file")
    if upload is None:
        raise InvalidRequest("Parameter 'file' not specified.", field="file")
    filename = PurePath(params.text("filename") or upload.filename or "").name
    try:
        kind = file_type(filename)
    except Exception as exc:
        raise InvalidRequest(
            f"Invalid file data: '{filename}' is not a type tolk translates "
            "(.txt .md .html .htm .srt .vtt .docx; name the file with its extension)"
        ) from exc
    output_format = params.text("output_format")
    if output_format and file_type(f"x.{output_format}") != kind:
        raise InvalidRequest("output_format must be the document's own format on this server")
    source, target = _languages(params)
    # As on /v2/translate: glossaries, formality (the client always sends one; `default`
    # asks nothing), and a style rule (sent through the client's extra_body_parameters).
    glossary = _glossary(params, source)
    instructions = _told(calls, params, target)
    memory = calls.memory_mode(request)
    calls.admit(caller)  # draining and the rate, before the upload is read
    data = await upload.read()
    # The document's characters, reserved of the quota now: one it cannot pay for is refused
    # at upload (456), as DeepL does, not left to fail in the background. One that cannot be
    # opened (not UTF-8, a zip bomb, too long) is taken, costs nothing and ends in `error`
    # naming why, as before (DeepL takes the upload first).
    unreadable: TolkError | None = None
    try:
        characters = await calls.file_characters(filename, data)
    except TolkError as exc:
        unreadable, characters = exc, 0
    held = calls.access.reserve(caller, characters)

    async def work() -> Any:
        spent: int | None = None
        try:
            if unreadable is not None:
                raise unreadable
            if source is not None and source.code == target.code:
                raise _same_language(source)
            done = await calls.document(
                caller, filename, data, source, target, glossary, instructions, memory
            )
            detected = done.translation.source
            if detected.code == target.code:  # as DeepL: the document ends in `error`, unbilled
                raise _same_language(detected)
            spent = done.translation.usage.characters
            return done
        finally:
            calls.settle(held, spent)

    try:
        doc = documents_of(request).start(caller.owner, filename, work())
    except BaseException:
        calls.settle(held, None)  # (never started: the store is full)
        raise
    # A job cancelled before it ran (dropped, the server stopping) never reaches the finally
    # above; settling twice does nothing.
    assert doc.task is not None
    doc.task.add_done_callback(lambda _: calls.settle(held, None))
    return JSONResponse({"document_id": doc.id, "document_key": doc.key})


def _same_language(language: Lang) -> InvalidRequest:
    """DeepL's document error for a document already in the target language (its clients
    match "Source and target language")."""
    return InvalidRequest(
        f"Source and target language are the same ({language.name}): nothing to translate; "
        "ask for another target_lang"
    )


async def _document(request: Request, calls: Calls, document_id: str) -> Any:
    params = await read_params(request)
    caller = caller_of(calls, request, params)
    doc = documents_of(request).get(document_id)
    if doc is None or doc.key != params.text("document_key") or doc.owner != caller.owner:
        raise NotFound("Document not found")
    return doc


@router.post("/document/{document_id}", summary="DeepL: a document's status")
async def document_status(document_id: str, request: Request, calls: CallsDep) -> JSONResponse:
    doc = await _document(request, calls, document_id)
    await documents_of(request).wait(doc, STATUS_WAIT)
    body: dict[str, Any] = {"document_id": doc.id, "status": doc.status}
    if doc.result is not None:
        body["billed_characters"] = doc.result.translation.usage.characters
    if doc.error is not None:
        body["error_message"] = doc.error
    return JSONResponse(body)


@router.post("/document/{document_id}/result", summary="DeepL: download a translated document")
async def document_result(document_id: str, request: Request, calls: CallsDep) -> Response:
    doc = await _document(request, calls, document_id)
    if doc.error is not None:
        raise InvalidRequest(f"Document translation failed: {doc.error}")
    if doc.result is None:
        raise DocumentNotReady("Document not ready: still translating; poll its status")
    documents_of(request).drop(doc.id)  # DeepL removes a document once it is downloaded
    return attachment(doc.result, doc.filename)
