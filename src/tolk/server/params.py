"""Request parameters wherever a client puts them: a JSON body, a urlencoded or multipart
form (also on a GET, as the `deepl` and `libretranslatepy` clients send), and the query
string. The body comes first, then the query (DeepL's mock server and LibreTranslate's
`request.values` do the same).

Whatever the API, a body nested too deep or a string with a lone surrogate is refused here
with a 400 (tolk.wire.bodies), before any parameter is read; tolk's own routes, whose
bodies FastAPI parses, are checked the same way by CheckedRoute."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi.routing import APIRoute
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
        value = self.one(name)
        if value is None:
            return None
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, int | float):
            return str(value)
        if not isinstance(value, str):
            raise InvalidRequest(f"parameter '{name}' must be a string", field=name)
        return value

    def strings(self, name: str, commas: bool = True) -> list[str] | None:
        """A list parameter: a JSON list, repeated fields, or (with `commas`) one
        comma-separated string."""
        values = self.many(name)
        if values is None:
            return None
        out: list[str] = []
        for value in values:
            if not isinstance(value, str):
                raise InvalidRequest(f"parameter '{name}' must be strings", field=name)
            out += [v.strip() for v in value.split(",") if v.strip()] if commas else [value]
        return out

    def file(self, name: str) -> UploadFile | None:
        if self.form is None:
            return None
        value = self.form.get(name)
        return value if isinstance(value, UploadFile) else None


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
