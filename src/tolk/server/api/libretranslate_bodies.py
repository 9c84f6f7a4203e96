"""LibreTranslate's request bodies (`/translate`, `/detect`, `/translate_file`): JSON, a
urlencoded or multipart form, or the query string (tolk.server.params), read into models
validated as LibreTranslate validates them, with its messages (400, `{"error"}`).

Required parameters are checked first, in LibreTranslate's order (each model's
`mode="before"` validator), then each field in the order it is declared. Languages are
checked against the languages served: validate with `pool` (a ModelPool) in the context."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from tolk.errors import InvalidLanguage, InvalidRequest
from tolk.languages import Lang
from tolk.server.params import ParamsModel, text_field, text_of
from tolk.wire import codes


def _required(data: Any, *names: str) -> Any:
    """LibreTranslate's missing parameter (None, "" and [] are missing)."""
    for name in names:
        value = data.get(name)
        if value is None or value == "" or value == []:
            raise InvalidRequest(f"Invalid request: missing {name} parameter", field=name)
    return data


def language_of(code: str, field: str) -> Lang | None:
    """A LibreTranslate code (checked) as a language; None for a source of `auto`."""
    if field == "source" and code.strip().lower() == "auto":
        return None
    return codes.from_libretranslate(code, field)


def _language(value: Any, info: ValidationInfo) -> str:
    """A LibreTranslate code of a served language (`auto` for the source: detected)."""
    field = info.field_name
    assert field is not None
    if not isinstance(value, str):
        raise InvalidRequest(f"Invalid request: {field} must be a string", field=field)
    try:
        parsed = language_of(value, field)
    except InvalidLanguage as exc:
        raise InvalidLanguage(f"{value} is not supported", field=field) from exc
    pool = (info.context or {}).get("pool")
    if parsed is not None and pool is not None:
        served = pool.takes_source if field == "source" else pool.gives_target
        if not served(parsed.tag):
            raise InvalidLanguage(f"{value} is not supported", field=field)
    return value


def _count(value: Any, info: ValidationInfo) -> int:
    """A count as LibreTranslate reads it (Python's int() of the value; below 0 is 0)."""
    try:
        return max(0, int(value if value is not None else 0))
    except (TypeError, ValueError):
        raise InvalidRequest(
            f"Invalid request: {info.field_name} parameter is not a number",
            field=info.field_name,
        ) from None


Source = Annotated[
    str,
    BeforeValidator(_language),
    Field(description="A LibreTranslate code (en, zh-Hans, pt-BR, ...), or auto: detected."),
]
Target = Annotated[str, BeforeValidator(_language), Field(description="A LibreTranslate code.")]
ApiKey = Annotated[
    str | None,
    BeforeValidator(text_field),
    Field(description="The key (tolk keys add); empty: none, as Weblate sends it."),
]


class _Pair(ParamsModel):
    source: Source
    target: Target

    @property
    def source_lang(self) -> Lang | None:
        return language_of(self.source, "source")

    @property
    def target_lang(self) -> Lang:
        target = language_of(self.target, "target")
        assert target is not None
        return target


class LibreTranslateTranslate(_Pair):
    """LibreTranslate's /translate."""

    q: str | list[str] = Field(description="A text, or a list of texts (answered as a list).")
    format: Literal["text", "html"] = Field("text", description="html: every tag kept.")
    alternatives: Annotated[int, BeforeValidator(_count)] = Field(
        0, ge=0, description="Other translations of each text (sampled outputs), at most."
    )
    api_key: ApiKey = None

    @model_validator(mode="before")
    @classmethod
    def _present(cls, data: Any) -> Any:
        return _required(data, "q", "source", "target")

    @field_validator("q", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> str | list[str]:
        texts = value if isinstance(value, list) else [value]
        if not all(isinstance(t, str) for t in texts):
            raise InvalidRequest("Invalid request: q must be a string or a list of strings")
        return cast("str | list[str]", value)

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> str:
        fmt = text_of(value, "format") or "text"
        if fmt not in ("text", "html"):
            raise InvalidRequest(f"{fmt} format is not supported", field="format")
        return fmt

    @property
    def texts(self) -> list[str]:
        return self.q if isinstance(self.q, list) else [self.q]


class LibreTranslateDetect(ParamsModel):
    """LibreTranslate's /detect."""

    q: str | list[str] = Field(description="A text, or a list of texts.")
    api_key: ApiKey = None

    @model_validator(mode="before")
    @classmethod
    def _present(cls, data: Any) -> Any:
        return _required(data, "q")

    @field_validator("q", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> list[str]:
        """Every string of `q` (what is not one has no language)."""
        return [t for t in (value if isinstance(value, list) else [value]) if isinstance(t, str)]

    @property
    def texts(self) -> list[str]:
        return self.q if isinstance(self.q, list) else [self.q]


class LibreTranslateFile(_Pair):
    """LibreTranslate's /translate_file, but its `file` (checked first)."""

    api_key: ApiKey = None

    @model_validator(mode="before")
    @classmethod
    def _present(cls, data: Any) -> Any:
        return _required(data, "source", "target")


FILE_FIELD: dict[str, Any] = {
    "file": {"type": "string", "format": "binary", "description": "Its extension: its type."}
}
