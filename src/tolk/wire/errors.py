"""One error shape per API: tolk's `{"error": {"code", "message", "request_id", ...details}}`,
DeepL's and LibreTranslate's as their clients parse them (SHAPES).

Every failure a client can see goes through `error_response`: tolk's own errors, request
validation, unknown routes and methods, and anything unexpected (logged, answered with 500).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tolk.errors import TolkError

log = logging.getLogger("tolk.server")

_HTTP_CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


Api = Literal["tolk", "deepl", "libretranslate", "openai", "deeplx"]
ERROR_CODE_HEADER = "X-Tolk-Error-Code"


class ErrorShape:
    """tolk's own error shape: `{"error": {"code", "message", "request_id", ...details}}`
    with tolk's status. Each drop-in API has its own (below), as its clients parse it."""

    def status(self, code: str, status: int) -> int:
        return status

    def body(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"code": code, "message": message, **details}
        if request_id:
            body["request_id"] = request_id
        return {"error": body}


class _Mapped(ErrorShape):
    """A drop-in API's statuses: its own for the codes its clients act on, 400 for invalid
    requests (tolk's 422), tolk's otherwise."""

    statuses: ClassVar[dict[str, int]] = {}

    def status(self, code: str, status: int) -> int:
        return self.statuses.get(code, 400 if status == 422 else status)


class DeepLShape(_Mapped):
    """DeepL's `{"message"}` (with tolk's code beside it); 456 for a spent quota, and 429,
    which its clients retry with backoff, for overload."""

    statuses: ClassVar[dict[str, int]] = {
        "invalid_request": 400,
        "unsupported_file_type": 400,
        "key_required": 403,
        "invalid_key": 403,
        "overloaded": 429,
        "rate_limited": 429,
        "quota_exceeded": 456,
    }

    def body(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        return {"message": message, "code": code}


class LibreTranslateShape(_Mapped):
    """LibreTranslate's `{"error": "..."}` with 400/403/429 (its clients read 403 as
    "quota", and a 429's message starts "Slowdown:" as LibreTranslate's own does)."""

    statuses: ClassVar[dict[str, int]] = {
        "invalid_request": 400,
        "payload_too_large": 400,
        "unsupported_file_type": 400,
        "key_required": 400,
        "invalid_key": 403,
        "quota_exceeded": 403,
        "overloaded": 429,
        "rate_limited": 429,
    }

    def body(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        return {"error": f"Slowdown: {message}" if status == 429 else message}


class OpenAIShape(_Mapped):
    """OpenAI's `{"error": {"message", "type", "param", "code"}}`, as its clients (the `openai`
    libraries, and every app built on them) parse it: 401 for a key, 404 for an unknown
    model, 429 for a rate or a spent quota, tolk's 503 with Retry-After for overload (the
    clients retry both). tolk's code stays in `code` and in the X-Tolk-Error-Code header."""

    statuses: ClassVar[dict[str, int]] = {
        "invalid_request": 400,
        "key_required": 401,
        "invalid_key": 401,
        "unknown_model": 404,
        "rate_limited": 429,
        "quota_exceeded": 429,
    }
    TYPES: ClassVar[dict[int, str]] = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }

    def body(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        kind = "server_error" if status >= 500 else self.TYPES.get(status, "invalid_request_error")
        if code == "quota_exceeded":
            kind = "insufficient_quota"
        problems = details.get("problems") or []
        param = problems[0]["field"] if problems else details.get("param")
        openai_code = "model_not_found" if code == "unknown_model" else code
        return {"error": {"message": message, "type": kind, "param": param, "code": openai_code}}


class DeepLXShape(_Mapped):
    """DeepLX's `{"code": <status>, "message"}` with that status; a missing or wrong key is
    its 401 (tolk.server.api.deeplx). Refusals made before a route (a body over the limit,
    a full server) take it too."""

    statuses: ClassVar[dict[str, int]] = {"key_required": 401, "invalid_key": 401}

    def body(
        self,
        status: int,
        code: str,
        message: str,
        request_id: str | None,
        details: dict[str, Any],
    ) -> dict[str, Any]:
        return {"code": status, "message": message}


SHAPES: dict[Api, ErrorShape] = {
    "tolk": ErrorShape(),
    "deepl": DeepLShape(),
    "libretranslate": LibreTranslateShape(),
    "openai": OpenAIShape(),
    "deeplx": DeepLXShape(),
}


def api_of(scope: Any) -> Api:
    """Which API a request spoke (set by tolk.wire.endpoints.ApiDispatch)."""
    state = scope.get("state", {}) if isinstance(scope, dict) else {}
    api: Api = state.get("api", "tolk")
    return api


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    request_id: str | None = None,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
    api: Api = "tolk",
    **details: Any,
) -> JSONResponse:
    """An error in `api`'s shape (SHAPES), its code also in a header: the proxy reads it
    whatever shape the body has."""
    all_headers = {ERROR_CODE_HEADER: code, **(headers or {})}
    if retry_after is not None:
        all_headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    shape = SHAPES[api]
    status = shape.status(code, status)
    return JSONResponse(
        shape.body(status, code, message, request_id, details),
        status_code=status,
        headers=all_headers,
    )


def error_body(exc: TolkError, request_id: str | None) -> dict[str, Any]:
    """The error shape as data (for a stream's `error` event), with the HTTP status it
    would have had."""
    body: dict[str, Any] = {"code": exc.code, "message": exc.message, **exc.details}
    if request_id:
        body["request_id"] = request_id
    return {"error": {**body, "status": exc.status}}


def request_id_of(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


_UNION_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _field(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """'text[1]' from ('body', 'text', 'list[str]', 1): no 'body', no union-member tags;
    'header x-request-timeout' from ('header', 'x-request-timeout')."""
    if len(loc) >= 2 and loc[0] in ("header", "query", "path", "cookie"):
        return f"{loc[0]} {loc[1]}"
    out = ""
    for part in (str(p) for p in loc if p != "body"):
        if "[" in part or part in _UNION_TAGS:
            continue
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "body"


def _problems(errors: Sequence[Any]) -> list[dict[str, str]]:
    """One entry per field; a union's alternatives become one message ('... or ...')."""
    by_field: dict[str, list[str]] = {}
    for error in errors:
        messages = by_field.setdefault(_field(error["loc"]), [])
        if error["msg"] not in messages:
            messages.append(error["msg"])
    return [{"field": f, "message": " or ".join(m)} for f, m in by_field.items()]


async def _tolk_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TolkError)
    if exc.status >= 500 and exc.code == "internal_error":
        log.error("request %s failed: %s", request_id_of(request), exc.message)
    return error_response(
        exc.status,
        exc.code,
        exc.message,
        request_id=request_id_of(request),
        retry_after=exc.retry_after,
        api=api_of(request.scope),
        **exc.details,
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = _problems(exc.errors())
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5])
    in_body = all(e["loc"] and e["loc"][0] == "body" for e in exc.errors())
    return error_response(
        422,
        "invalid_request",
        f"the request {'body ' if in_body else ''}is not valid: {summary}",
        request_id=request_id_of(request),
        api=api_of(request.scope),
        problems=problems,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = str(exc.detail)
    if exc.status_code == 404:
        message = f"no such endpoint: {request.method} {request.url.path}; see /docs"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; see /docs"
    return error_response(
        exc.status_code,
        code,
        message,
        request_id=request_id_of(request),
        headers=dict(exc.headers or {}),
        api=api_of(request.scope),
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("request %s failed unexpectedly", request_id_of(request), exc_info=exc)
    return error_response(
        500,
        "internal_error",
        "the server failed to handle this request; it has been logged with the request id",
        request_id=request_id_of(request),
        api=api_of(request.scope),
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TolkError, _tolk_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
