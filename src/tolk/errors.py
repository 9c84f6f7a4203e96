"""tolk's errors: each has a stable `code` a client can branch on and the HTTP status it maps to.

Everything below the HTTP layer raises these; the server turns them into the one error shape
`{"error": {"code", "message", ...details}}`. Exceptions from vLLM are translated into these
at the engine boundary.
"""

from __future__ import annotations

from typing import Any


class TolkError(Exception):
    code = "internal_error"
    status = 500
    retry_after: float | None = None  # seconds a client should wait (Retry-After)

    def __init__(self, message: str, *, retry_after: float | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if retry_after is not None:
            self.retry_after = retry_after


class InvalidRequest(TolkError):
    code = "invalid_request"
    status = 422


class InvalidLanguage(TolkError):
    code = "invalid_language"
    status = 400


class UnsupportedLanguagePair(TolkError):
    code = "unsupported_language_pair"
    status = 400


class UnknownModel(TolkError):
    code = "unknown_model"
    status = 400


class UnknownGlossary(TolkError):
    code = "unknown_glossary"
    status = 400


class UnknownTranslationMemory(TolkError):
    code = "unknown_translation_memory"
    status = 400


class PayloadTooLarge(TolkError):
    """Too much text: a text over the character limit, too many texts, or a prompt that does
    not fit the model's context."""

    code = "payload_too_large"
    status = 413


class Overloaded(TolkError):
    code = "overloaded"
    status = 503
    retry_after = 1.0


class EngineUnavailable(TolkError):
    """The model's engine has stopped (a restart, if one follows, gives `retry_after`)."""

    code = "engine_unavailable"
    status = 503


class EngineRestarting(TolkError):
    """The model's engine died and is being started again; retry after `retry_after`."""

    code = "engine_restarting"
    status = 503
    retry_after = 1.0


class ShuttingDown(TolkError):
    code = "shutting_down"
    status = 503
    retry_after = 1.0


class DeadlineExceeded(TolkError):
    code = "deadline_exceeded"
    status = 504


class KeyRequired(TolkError):
    code = "key_required"
    status = 401


class InvalidKey(TolkError):
    code = "invalid_key"
    status = 403


class RateLimited(TolkError):
    code = "rate_limited"
    status = 429
    retry_after = 1.0


class QuotaExceeded(TolkError):
    """A key's characters for the period are spent (DeepL answers 456 for this)."""

    code = "quota_exceeded"
    status = 429


class NotFound(TolkError):
    code = "not_found"
    status = 404


class ClientDisconnected(Exception):
    """The client went away; nothing can be sent. Not a TolkError: no response is written."""
