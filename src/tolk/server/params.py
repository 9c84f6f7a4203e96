"""Request parameters wherever a client puts them: a JSON body, a urlencoded or multipart
form (also on a GET, as the `deepl` and `libretranslatepy` clients send), and the query
string. The body comes first, then the query (DeepL's mock server and LibreTranslate's
`request.values` do the same)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from tolk.errors import InvalidRequest


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


async def read_params(request: Request) -> Params:
    query: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        query.setdefault(key, []).append(value)
    media = _media_type(request)
    if media in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return Params(form=await request.form(max_files=4), query=query)
    body = await request.body()
    if not body.strip():
        return Params(query=query)
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise InvalidRequest(
            "the body is not valid JSON (send JSON, a urlencoded or a multipart form)",
            field="body",
        ) from exc
    if not isinstance(data, dict):
        raise InvalidRequest("the JSON body must be an object", field="body")
    return Params(json=data, query=query)
