"""OpenAI's chat completions, for the translation apps whose only endpoint setting is an
OpenAI-compatible URL (Pot, KISS Translator, Zotero, Weblate, Easydict, OpenAI Translator...:
docs/research/chat-apps.md): `POST /v1/chat/completions` and `GET /v1/models`, in OpenAI's
shapes (a JSON answer, or server-sent events ending with `data: [DONE]`; errors as
`{"error": {"message", "type", "param", "code"}}`), keys as `Authorization: Bearer`.

A request tolk can read as a translation (tolk.wire.chat_prompts: Qwen-MT's
`translation_options`, a `tolk-<source>-<target>` model, or an app's own prompt) is translated
by the one translation service, through the gateway like every other API (segments, glossary,
memory, checks, admission, deadline, metrics), and answered in the form the app parses (its
separator, its JSON, or the text). Any other conversation is a plain chat completion by the
model, as `vllm serve` would answer it, under the same keys and limits. `X-Tolk-Chat` says which
path a request took.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from tolk.engine import ModelPool
from tolk.errors import InvalidLanguage, InvalidRequest, UnknownModel
from tolk.server.access import Caller
from tolk.server.gateway import Gateway, GatewayDep, PoolDep, bearer_key
from tolk.server.params import CheckedRoute
from tolk.translation.request import ChatMessage, ChatRequest, GlossaryRequest, TranslationRequest
from tolk.wire.chat_prompts import (
    ChatTranslation,
    ChatTranslationError,
    UnknownLanguage,
    recognise,
)

router = APIRouter(route_class=CheckedRoute, tags=["OpenAI-compatible"])

MAX_MESSAGES = 256  # a conversation's turns (Easydict sends 28); its size is the body limit's
# The model names that are not a served model: tolk's, with the pair in the name (the source
# detected when only the target is named), and plain `tolk` (the first model, the pair from
# the prompt).
ALIAS = "tolk"


class ContentPart(BaseModel):
    """One part of a message's content in OpenAI's list form; only text parts are read."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """OpenAI's request body; fields tolk does not use (penalties, `reasoning_effort`,
    `user`, ...) are accepted and ignored, as the apps send them."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="A served model, `tolk`, or `tolk-<source>-<target>`.")
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int = Field(1, ge=1, le=1, description="One choice; tolk's alternatives are its API's.")
    translation_options: dict[str, Any] | None = Field(
        None,
        description="Qwen-MT's convention: source_lang ('auto' or a name or code), "
        "target_lang, terms [{source, target}]; the last user message is the text.",
    )


async def openai_caller(request: Request, gateway: GatewayDep) -> Caller:
    """The caller `Authorization: Bearer <key>` names (what OpenAI's clients send)."""
    return gateway.caller(bearer_key(request))


OpenAICallerDep = Annotated[Caller, Depends(openai_caller)]
RequestTimeout = Annotated[float | None, Header(gt=0, description="Seconds this may take.")]


def model_of(name: str, pool: ModelPool) -> str | None:
    """The served model a request names (None: tolk's choice, for `tolk` and the names that
    carry a pair, `tolk-<target>` and `tolk-<source>-<target>`, which recognise() reads).
    Anything else is a 404, as OpenAI answers an unknown model."""
    if name in {e.name for e in pool.engines}:
        return name
    if name == ALIAS or name.startswith(ALIAS + "-"):
        return None
    raise UnknownModel(
        f"the model '{name}' does not exist on this server: GET /v1/models lists its models "
        "and the names that carry a language pair (tolk-en-de)",
        param="model",
    )


def model_names(pool: ModelPool) -> list[str]:
    """What /v1/models lists: the served models, `tolk`, `tolk-<target>` and
    `tolk-<source>-<target>` for every pair served."""
    names = [e.name for e in pool.engines] + [ALIAS]
    names += [f"{ALIAS}-{t}" for t in pool.targets]
    names += [f"{ALIAS}-{s}-{t}" for s in pool.sources for t in pool.targets if pool.covers(s, t)]
    return list(dict.fromkeys(names))


@router.get(
    "/v1/models",
    summary="OpenAI's model list: the served models and the names that carry a pair",
)
async def models(pool: PoolDep) -> dict[str, Any]:
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "tolk"}
            for name in model_names(pool)
        ],
    }


def recognised(body: ChatCompletionRequest) -> ChatTranslation | None:
    """What the request asks to translate, if tolk can read it as a translation
    (tolk.wire.chat_prompts); a request that says it is one and cannot be served as one is a
    400 (an unknown language), or a 404 for a `tolk-` model name that names no language."""
    try:
        found = recognise(body.model_dump(exclude_none=True))
    except UnknownLanguage as exc:
        if exc.field == "model":
            raise UnknownModel(
                f"the model '{body.model}' names a language this server does not know "
                f"({exc.name!r}); GET /v1/models lists the names it serves",
                param="model",
            ) from exc
        raise InvalidLanguage(f"{exc.field}: {exc}", param=exc.field) from exc
    except ChatTranslationError as exc:
        raise InvalidRequest(f"{exc.field}: {exc}", param=exc.field) from exc
    if found is None and body.model.startswith(ALIAS + "-"):
        raise InvalidRequest(
            f"the model '{body.model}' translates the last message, which must be the user's "
            "and hold text",
            param="messages",
        )
    return found


async def _translate(
    request: Request,
    gateway: Gateway,
    caller: Caller,
    found: ChatTranslation,
    model: str | None,
    deadline: float,
) -> tuple[str, dict[str, int], dict[str, str]]:
    asked = TranslationRequest(
        target_lang=found.target,
        source_lang=found.source,
        model=model,
        deadline=deadline,
        glossary=GlossaryRequest(entries=dict(found.terms)),
        memory=gateway.memory_mode(request),
    )
    result = await gateway.translate(request, caller, list(found.texts), asked)
    sources = [result.source_of(i) for i in range(len(result.texts))]
    usage = gateway.reported(result.usage)
    headers = gateway.headers(result) | {"X-Tolk-Chat": f"translation; shape={found.shape}"}
    counts = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
    # The answer is as long as the texts (a JSON array, KISS's objects): built off the loop.
    content = await gateway.offload(found.answer, result.texts, sources)
    return content, counts, headers


async def _chat(
    request: Request,
    gateway: Gateway,
    caller: Caller,
    body: ChatCompletionRequest,
    model: str | None,
    deadline: float,
) -> tuple[str, dict[str, int], dict[str, str], str]:
    asked = ChatRequest(
        messages=[ChatMessage(m.role, m.text()) for m in body.messages],
        deadline=deadline,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
    )
    done = await gateway.chat(request, caller, model, asked)
    counts = {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens}
    return done.text, counts, {"X-Tolk-Chat": "chat"}, done.finish_reason


@router.post(
    "/v1/chat/completions",
    summary="OpenAI's chat completions: a translation where tolk can read one, else a chat",
    description="A request with `translation_options` (Qwen-MT), a model named "
    "`tolk-<source>-<target>`, or a translation app's own prompt is translated by tolk's "
    "service and answered as the app expects; any other conversation is answered by the "
    "model. `stream: true` answers with server-sent events. `X-Tolk-Chat` names the path "
    "taken.",
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    gateway: GatewayDep,
    caller: OpenAICallerDep,
    pool: PoolDep,
    x_request_timeout: RequestTimeout = None,
) -> Any:
    model = model_of(body.model, pool)
    deadline = gateway.deadline(x_request_timeout)
    # Reading the conversation (its JSON, an app's prompt) grows with the body: off the loop,
    # in the preparation pool, as every API's parsing is.
    found = await gateway.offload(recognised, body)
    finish = "stop"
    if found is not None:
        content, counts, headers = await _translate(
            request, gateway, caller, found, model, deadline
        )
    else:
        content, counts, headers, finish = await _chat(
            request, gateway, caller, body, model, deadline
        )
    usage = counts | {"total_tokens": counts["prompt_tokens"] + counts["completion_tokens"]}
    ident, created = f"chatcmpl-{secrets.token_hex(12)}", int(time.time())
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = chunks(
            ident, created, body.model, content, finish, usage if include_usage else None
        )
        return StreamingResponse(
            _sent(events),
            media_type="text/event-stream",
            headers=headers | {"Cache-Control": "no-cache"},
        )
    answer = {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": body.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage,
        "system_fingerprint": None,
    }
    return JSONResponse(answer, headers=headers)


def chunks(
    ident: str,
    created: int,
    model: str,
    content: str,
    finish: str,
    usage: Mapping[str, int] | None,
) -> list[dict[str, Any]]:
    """A finished answer as OpenAI's stream chunks: the role, the content, then an empty
    delta with the finish reason (OpenAI Translator reads no content from the chunk that
    carries `finish_reason`), then the usage only if asked (Pot's parser stops at a chunk
    without choices). Every chunk has the fields strict decoders require (Easydict)."""
    base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None}  # fmt: skip

    def choice(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return base | {
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]
        }

    out = [
        choice({"role": "assistant", "content": ""}),
        choice({"content": content}),
        choice({}, finish),
    ]
    if usage is not None:
        out.append(base | {"choices": [], "usage": dict(usage)})
    return out


async def _sent(events: Sequence[dict[str, Any]]) -> AsyncIterator[str]:
    for event in events:
        yield f"data: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"
    yield "data: [DONE]\n\n"
