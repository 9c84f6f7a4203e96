"""Request parameters wherever a client puts them: a JSON body, a urlencoded or multipart
form (also on a GET, as the `deepl` and `libretranslatepy` clients send), and the query
string. The body comes first, then the query (DeepL's mock server and LibreTranslate's
`request.values` do the same). A drop-in API reads its requests into a ParamsModel of its
own (`Model.of(params)`), validated field by field with that API's own messages, whose
fields are also its OpenAPI body (`openapi_body`).

Whatever the API, a body nested too deep or a string with a lone surrogate is refused here
with a 400 (tolk.wire.bodies), before any parameter is read; tolk's own routes, whose
bodies FastAPI parses, are checked the same way by CheckedRoute."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Self

from fastapi import Depends
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import Response

from tolk.errors import InvalidRequest
from tolk.wire.bodies import InvalidInput, check_texts, loads


@dataclass
class Params:
    json: Mapping[str, Any] | None = None
    form: FormData | None = None
    query: Mapping[str, list[str]] = field(default_factory=dict)

    @property
    def is_json(self) -> bool:
        return self.json is not None

    def has(self, name: str) -> bool:
        return self.many(name) is not None

    def many(self, name: str) -> list[Any] | None:
        """Every value of `name`: a JSON list, or a form/query field repeated."""
        if self.json is not None and name in self.json:
            value = self.json[name]
            return value if isinstance(value, list) else [value]
        if self.form is not None and name in self.form:
            return [v for v in self.form.getlist(name) if not isinstance(v, UploadFile)]
        if name in self.query:
            return list(self.query[name])
        return None

    def one(self, name: str) -> Any:
        """The value of `name` (a JSON value as sent, a form's first value), or None."""
        if self.json is not None and name in self.json:
            return self.json[name]
        values = self.many(name)
        return values[0] if values else None

    def text(self, name: str) -> str | None:
        """A string parameter; a number or boolean in JSON is taken as written."""
        return text_of(self.one(name), name)

    def strings(self, name: str, commas: bool = True) -> list[str] | None:
        """A list parameter: a JSON list, repeated fields, or (with `commas`) one
        comma-separated string."""
        return strings_of(self.many(name), name, commas)

    def file(self, name: str) -> UploadFile | None:
        if self.form is None:
            return None
        value = self.form.get(name)
        return value if isinstance(value, UploadFile) else None


def text_of(value: Any, name: str) -> str | None:
    """A string parameter's value (Params.one's): a number or boolean in JSON is taken as
    written; a list or an object is refused."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise InvalidRequest(f"parameter '{name}' must be a string", field=name)
    return value


def strings_of(values: list[Any] | None, name: str, commas: bool = True) -> list[str] | None:
    """A list parameter's values (Params.many's), each a string; with `commas`, each may
    hold several, comma-separated."""
    if values is None:
        return None
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidRequest(f"parameter '{name}' must be strings", field=name)
        out += [v.strip() for v in value.split(",") if v.strip()] if commas else [value]
    return out


def text_field(value: Any, info: ValidationInfo) -> str | None:
    """A ParamsModel field read as Params.text reads it (BeforeValidator)."""
    assert info.field_name is not None
    return text_of(value, info.field_name)


class Many:
    """ParamsModel field metadata: every value of the parameter (Params.many: a JSON list,
    or a form's or query's repeated field); other fields are read with Params.one."""


MANY = Many()
JSON_MEDIA = "application/json"
FORM_MEDIA = "application/x-www-form-urlencoded"
MULTIPART_MEDIA = "multipart/form-data"


class ParamsModel(BaseModel):
    """A drop-in API's request, read from its parameters wherever its clients put them
    (`Params`: a JSON body, a form, the query string) and validated as that API validates
    it: each field by its own validator, in the order the fields are declared, which raises
    the API's own error (a TolkError: pydantic lets it through as it is, so the API's
    message and status reach the client). A required parameter is checked by the model's
    own `mode="before"` validator, in the order the API checks them.

    The fields document the body in the OpenAPI schema (`openapi_body`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def of(cls, params: Params, **context: Any) -> Self:
        """The request `params` hold; `context` is what validators look things up in."""
        raw: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            many = any(isinstance(m, Many) for m in info.metadata)
            value = params.many(name) if many else params.one(name)
            if value is not None or info.is_required():
                raw[name] = value
        try:
            return cls.model_validate(raw, context=context)
        except ValidationError as exc:  # what no validator of the API's own caught
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"]) or "body"
            raise InvalidRequest(f"Invalid request: {field}: {error['msg']}", field=field) from None


def openapi_body(
    *models: type[BaseModel],
    media: Sequence[str] = (JSON_MEDIA, FORM_MEDIA),
    extra: Mapping[str, Any] | None = None,
    required: Sequence[str] = (),
) -> dict[str, Any]:
    """An `openapi_extra` that documents a body read with read_params: the fields of
    `models` (and `extra` properties), the same for each media type it may come as."""
    properties: dict[str, Any] = {}
    needed: list[str] = []
    for model in models:
        schema = model.model_json_schema()
        properties |= schema.get("properties", {})
        needed += schema.get("required", [])
    properties |= extra or {}
    schema = {"type": "object", "properties": properties, "required": [*needed, *required]}
    return {"requestBody": {"content": {m: {"schema": schema} for m in media}}}


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


async def read_params(request: Request) -> Params:
    query: dict[str, list[str]] = {}
    check_texts(request.query_params.multi_items(), "query parameter")
    for key, value in request.query_params.multi_items():
        query.setdefault(key, []).append(value)
    media = _media_type(request)
    if media in _FORMS:
        try:
            form = await request.form(max_files=4)
        except StarletteHTTPException as exc:
            if exc.status_code != 400:  # the body's size or time limit (413, 408)
                raise
            raise unreadable_form(exc) from None
        check_texts(form.multi_items(), "form field")
        return Params(form=form, query=query)
    body = await request.body()
    if not body.strip():
        return Params(query=query)
    try:
        data = loads(body)
    except ValueError as exc:
        raise InvalidRequest(
            "the body is not valid JSON (send JSON, a urlencoded or a multipart form)",
            field="body",
        ) from exc
    if not isinstance(data, dict):
        raise InvalidRequest("the JSON body must be an object", field="body")
    return Params(json=data, query=query)


ParamsDep = Annotated[Params, Depends(read_params)]
"""A request's parameters, read once per request (FastAPI caches a dependency's value)."""


def unreadable_form(exc: StarletteHTTPException) -> InvalidInput:
    """Starlette's 400 for a form it cannot parse (no boundary, a broken part header, too
    many files), with what to send instead."""
    return InvalidInput(
        f"the form body cannot be read ({exc.detail}); send a urlencoded form, or a "
        "multipart one with the boundary its Content-Type names",
        field="body",
    )


class CheckedRequest(Request):
    """A request whose JSON body is decoded by tolk.wire.bodies.loads."""

    _checked: Any

    async def json(self) -> Any:
        if not hasattr(self, "_checked"):
            self._checked = loads(await self.body())
        return self._checked


class CheckedRoute(APIRoute):
    """A route whose body FastAPI parses (tolk's own API) decoded as read_params decodes
    one: JSON nested too deep or with a lone surrogate, or a form that cannot be read, is a
    400 in the API's shape. FastAPI turns an exception while parsing a JSON body into its own
    400 ("There was an error parsing the body"), raised from it; that one is answered with
    its own message."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def checked(request: Request) -> Response:
            try:
                return await handle(CheckedRequest(request.scope, request.receive))
            except StarletteHTTPException as exc:
                if isinstance(exc.__cause__, InvalidInput):
                    raise exc.__cause__ from None
                if isinstance(exc.__context__, MultiPartException):
                    raise unreadable_form(exc) from None
                raise

        return checked
